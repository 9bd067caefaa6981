//! The schemas of the request bodies and path parameters: the handlers' rules, written out as
//! JSON Schema, so that a client generated from the document, or a fuzzer, sends what the
//! handlers accept.
//!
//! The bodies are read by hand (and by the configuration crate, for server and group
//! definitions), so their schemas are built here rather than derived from structs. The bounds
//! come from the constants the validators use; the patterns say in regular-expression form what
//! the parsers check. What JSON Schema cannot say is in the descriptions: lengths the parsers
//! count in bytes (a schema counts characters), a body id that must equal the path's, a
//! `min_healthy` above the number of members listed, names that must be unique within a list.
//!
//! Where the API accepts two spellings of one field (`principal` and `principal_id`), a body
//! must give exactly one of them. Where a value may be `null`, `null` means the field is absent.

use std::borrow::Cow;

use mcpgw_config::{
    DiscoveryMode, DiscoverySourceConfig, GroupStrategy, HEALTH_CHECK_INTERVAL_S, IDLE_TTL_S,
    MAX_CONSECUTIVE_FAILURES,
};
use mcpgw_core::ServerId;
use mcpgw_discovery::REMOVAL_GRACE_KEY;
use mcpgw_gateway::authz::{
    API_KEY_MAX_EXPIRY_DAYS, API_KEY_NAME_MAX_CHARS, POLICY_LIST_MAX_LEN, PRINCIPAL_NAME_MAX_BYTES,
    Permission, PrincipalKind, ROLE_DESCRIPTION_MAX_BYTES, ROLE_MAX_GRANTS, ROLE_NAME_MAX_LEN,
    Resource, Scope, TENANT_ID_MAX_BYTES,
};
use serde_json::{Value, json};
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{
    AdditionalProperties, AllOfBuilder, AnyOfBuilder, ArrayBuilder, ObjectBuilder, OneOfBuilder,
    Schema, SchemaType, Type,
};
use utoipa::{PartialSchema, ToSchema};

/// The longest tool name a `tool` policy may name, in bytes, as the policy rules count it.
const TOOL_NAME_MAX_BYTES: usize = 256;

// ----- patterns -------------------------------------------------------------------------------

/// A server or group id without its length: letters, digits, `_` and `-`, never two `_` in a
/// row (`__` separates ids from tool names). Each `_` is followed by another character or ends
/// the id.
const ID_CHARACTERS: &str = "(?:_?[A-Za-z0-9-])*_?";

/// Control characters: what Rust's `char::is_control` refuses.
const CONTROL: &str = r"\x00-\x1f\x7f-\x9f";

/// Whitespace and control characters: what Rust's `char::is_whitespace` and
/// `char::is_control` refuse, the ones trimming removes included.
const BLANK_OR_CONTROL: &str =
    r"\x00-\x20\x7f-\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000";

/// Whitespace as Rust's `str::trim` sees it.
const BLANK: &str = r"\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000";

/// A text that is not only whitespace (it holds something after trimming).
fn not_blank_pattern() -> String {
    format!("[^{BLANK}]")
}

/// `user:`, `group:` or `service:` and a name: not empty, no control characters, no `*`, no
/// whitespace around it.
fn principal_pattern() -> String {
    format!("^(?:{}):{}$", principal_kinds(), principal_name())
}

/// A principal, `*` (everyone), or `kind:*` (every principal of a kind).
fn principal_pattern_pattern() -> String {
    format!(
        r"^(?:\*|(?:{}):(?:\*|{}))$",
        principal_kinds(),
        principal_name()
    )
}

fn principal_kinds() -> String {
    PrincipalKind::ALL
        .iter()
        .map(|kind| kind.as_str())
        .collect::<Vec<_>>()
        .join("|")
}

/// A principal's name: neither whitespace nor a control character nor `*` at either end, no
/// control character or `*` inside, and (counting characters where the parser counts bytes)
/// not longer than a name may be.
fn principal_name() -> String {
    let edge = format!("[^{BLANK_OR_CONTROL}*]");
    let inner = format!("[^{CONTROL}*]");
    let inner_max = PRINCIPAL_NAME_MAX_BYTES - 2;
    format!("{edge}(?:{inner}{{0,{inner_max}}}{edge})?")
}

// ----- building blocks ------------------------------------------------------------------------

fn string() -> ObjectBuilder {
    ObjectBuilder::new().schema_type(Type::String)
}

fn integer(minimum: u64, maximum: u64) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Integer)
        .minimum(Some(minimum))
        .maximum(Some(maximum))
}

fn integer_range((minimum, maximum): (u64, u64)) -> ObjectBuilder {
    integer(minimum, maximum)
}

fn boolean() -> ObjectBuilder {
    ObjectBuilder::new().schema_type(Type::Boolean)
}

fn one_of_strings<'a>(values: impl IntoIterator<Item = &'a str>) -> ObjectBuilder {
    string().enum_values(Some(values))
}

fn list(items: impl Into<Schema>) -> ArrayBuilder {
    ArrayBuilder::new().items(RefOr::T(items.into()))
}

/// `schema`, or `null` for "absent".
fn or_null(schema: impl Into<Schema>) -> Schema {
    OneOfBuilder::new()
        .item(RefOr::T(schema.into()))
        .item(RefOr::T(
            ObjectBuilder::new().schema_type(Type::Null).build().into(),
        ))
        .build()
        .into()
}

/// An object that refuses keys it does not list.
fn closed_object() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .additional_properties(Some(AdditionalProperties::FreeForm(false)))
}

/// A schema that only requires `keys` (one alternative of a `oneOf`).
fn requiring(keys: &[&str]) -> Schema {
    keys.iter()
        .fold(
            ObjectBuilder::new().schema_type(SchemaType::AnyValue),
            |object, key| object.required(*key),
        )
        .build()
        .into()
}

/// Exactly one of the alternatives, each given by the keys it requires.
fn exactly_one_of(alternatives: &[&[&str]]) -> Schema {
    alternatives
        .iter()
        .fold(OneOfBuilder::new(), |one_of, keys| {
            one_of.item(RefOr::T(requiring(keys)))
        })
        .build()
        .into()
}

/// A string schema from a pattern and a description.
fn text(pattern: impl Into<String>, description: &str) -> ObjectBuilder {
    string()
        .pattern(Some(pattern.into()))
        .description(Some(description))
}

// ----- shared field schemas -------------------------------------------------------------------

/// A server or group id.
pub(crate) fn id_schema() -> ObjectBuilder {
    string()
        .pattern(Some(format!("^{ID_CHARACTERS}$")))
        .min_length(Some(1))
        .max_length(Some(ServerId::MAX_LEN))
        .description(Some(
            "1 to 64 letters, digits, `_` and `-`, without `__` (which separates ids from tool \
             names). Servers and groups share one namespace.",
        ))
        .examples([json!("math")])
}

/// A new group's id: an id as servers have, from their namespace.
fn group_id_schema() -> ObjectBuilder {
    id_schema().examples([json!("math-pool")])
}

/// The id of a discovery source: 1 to 64 letters, digits, `_` and `-`.
fn source_id_schema() -> ObjectBuilder {
    string()
        .pattern(Some("^[A-Za-z0-9_-]{1,64}$"))
        .description(Some("1 to 64 letters, digits, `_` and `-`."))
        .examples([json!("docker-local")])
}

fn principal_schema() -> ObjectBuilder {
    string()
        .pattern(Some(principal_pattern()))
        .description(Some(
            "`user:<name>`, `group:<name>` or `service:<name>`: a name of at most 256 bytes \
             without control characters, `*` or whitespace around it.",
        ))
        .examples([json!("user:alice")])
}

fn role_name_schema() -> ObjectBuilder {
    string()
        .pattern(Some("^[a-z][a-z0-9_-]*$"))
        .max_length(Some(ROLE_NAME_MAX_LEN))
        .description(Some(
            "A lowercase letter, then lowercase letters, digits, `_` and `-`; at most 64 \
             characters. `all`, `assign` and `revoke` are reserved.",
        ))
        .examples([json!("deployer")])
}

fn scope_schema() -> ObjectBuilder {
    string()
        .pattern(Some(format!(
            "^(?:{}|tenant:[^{BLANK_OR_CONTROL}]{{1,{TENANT_ID_MAX_BYTES}}})$",
            Scope::GLOBAL
        )))
        .description(Some(
            "`global`, or `tenant:<tenant_id>` with a tenant id of 1 to 128 bytes without \
             whitespace or control characters. Default `global`.",
        ))
        .examples([json!("global")])
}

/// One permission of the catalogue (`resource:action`).
fn permission_schema() -> ObjectBuilder {
    one_of_strings(Permission::ALL.iter().map(|permission| permission.as_str()))
        .description(Some("A permission of `GET /api/auth/permissions`."))
        .examples([json!("tool:invoke")])
}

/// What a role may grant: `*`, `resource:*` or one permission.
fn grant_schema() -> ObjectBuilder {
    let wildcards: Vec<String> = std::iter::once("*".to_owned())
        .chain(
            Resource::ALL
                .iter()
                .map(|resource| format!("{}:*", resource.as_str())),
        )
        .collect();
    let grants: Vec<&str> = wildcards
        .iter()
        .map(String::as_str)
        .chain(Permission::ALL.iter().map(|permission| permission.as_str()))
        .collect();
    one_of_strings(grants)
        .description(Some("`*`, `resource:*` or `resource:action`."))
        .examples([json!("mcp_server:read")])
}

fn grants_schema() -> ArrayBuilder {
    list(grant_schema()).max_items(Some(ROLE_MAX_GRANTS))
}

fn role_description_schema() -> ObjectBuilder {
    text(
        r"^[^\x00-\x09\x0b-\x1f\x7f-\x9f]*$",
        "At most 1024 bytes; no control characters but line breaks.",
    )
    .max_length(Some(ROLE_DESCRIPTION_MAX_BYTES))
}

fn principal_patterns_schema() -> ArrayBuilder {
    list(
        string()
            .pattern(Some(principal_pattern_pattern()))
            .examples([json!("group:ops")]),
    )
    .max_items(Some(POLICY_LIST_MAX_LEN))
    .description(Some(
        "Principal patterns: a principal (`user:alice`), `kind:*` (`service:*`) or `*`.",
    ))
}

// ----- servers --------------------------------------------------------------------------------

/// The modes of a server created over the API, each with the fields it takes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Launch {
    Subprocess,
    /// Docker takes `args` or its synonym `command`, and an Engine API (`docker_host`) or a
    /// command-line client (`runtime`), one of each at most: one variant per combination.
    Docker {
        arguments: &'static str,
        engine: &'static str,
    },
    Remote,
}

impl Launch {
    const ALL: [Launch; 6] = [
        Launch::Subprocess,
        Launch::Docker {
            arguments: "args",
            engine: "docker_host",
        },
        Launch::Docker {
            arguments: "args",
            engine: "runtime",
        },
        Launch::Docker {
            arguments: "command",
            engine: "docker_host",
        },
        Launch::Docker {
            arguments: "command",
            engine: "runtime",
        },
        Launch::Remote,
    ];

    fn mode(self) -> &'static str {
        match self {
            Launch::Subprocess => "subprocess",
            Launch::Docker { .. } => "docker",
            Launch::Remote => "remote",
        }
    }

    /// The field a server of this mode cannot do without.
    fn required(self) -> &'static str {
        match self {
            Launch::Subprocess => "command",
            Launch::Docker { .. } => "image",
            Launch::Remote => "endpoint",
        }
    }
}

/// The fields every mode takes.
fn common_server_fields(object: ObjectBuilder, mode: &str) -> ObjectBuilder {
    object
        .property(
            "mode",
            one_of_strings([mode]).description(Some(
                "How the server runs. Groups are created with POST /api/groups.",
            )),
        )
        .required("mode")
        .property("description", or_null(string()))
        .property(
            "idle_ttl_s",
            or_null(integer_range(IDLE_TTL_S).description(Some(
                "Seconds a ready server may stay unused before it is stopped; default 300.",
            ))),
        )
        .property(
            "health_check_interval_s",
            or_null(integer_range(HEALTH_CHECK_INTERVAL_S).description(Some(
                "Seconds between health checks of a ready server; default 60.",
            ))),
        )
        .property(
            "max_consecutive_failures",
            or_null(integer_range(MAX_CONSECUTIVE_FAILURES).description(Some(
                "Consecutive failures that make the server degraded; default 3.",
            ))),
        )
        .property("tools", or_null(predefined_tools_schema()))
        .property(
            "caller_meta",
            or_null(text(
                "^[^\\s\"]+$",
                "The `_meta` key under which each tool call carries the calling principal, such \
                 as `com.example/caller`; keys under `io.modelcontextprotocol/` and `io.mcpgw/` \
                 are refused.",
            )),
        )
        .property("tool_pinning", or_null(tool_pinning_schema()))
}

/// How a server's tools are pinned: the mode alone, or the mode with `approve_first`.
fn tool_pinning_schema() -> Schema {
    let modes = || one_of_strings(["off", "warn", "enforce"]);
    OneOfBuilder::new()
        .item(RefOr::T(modes().into()))
        .item(RefOr::T(
            closed_object()
                .property("mode", modes())
                .property("approve_first", boolean())
                .into(),
        ))
        .description(Some(
            "How this server's tools are pinned: `off`, `warn` (changes are served and \
             announced) or `enforce` (changes are withheld until approved), or `{mode, \
             approve_first}`; the gateway's `tool_pinning` when absent.",
        ))
        .build()
        .into()
}

/// Tools listed before the server's first start: MCP `Tool` objects.
fn predefined_tools_schema() -> ArrayBuilder {
    let object = |description: &str| {
        or_null(
            ObjectBuilder::new()
                .schema_type(Type::Object)
                .description(Some(description)),
        )
    };
    list(
        closed_object()
            .property(
                "name",
                text(
                    not_blank_pattern(),
                    "Not empty; each name once in the list.",
                ),
            )
            .required("name")
            .property("title", or_null(string()))
            .property("description", or_null(string()))
            .property(
                "inputSchema",
                object("A JSON Schema object; default `{\"type\": \"object\"}`."),
            )
            .property("outputSchema", object("A JSON Schema object."))
            .property(
                "annotations",
                object("Tool annotations, such as `{\"readOnlyHint\": true}`."),
            ),
    )
    .description(Some(
        "Tools to list before the server's first start, each with a name of its own.",
    ))
}

/// A string list whose items may not contain NUL; the first item names the program.
fn command_schema() -> ArrayBuilder {
    ArrayBuilder::new()
        .min_items(Some(1))
        .prefix_items([text(
            format!(r"^[^\x00]*[^{BLANK}\x00][^\x00]*$"),
            "The program: not blank.",
        )
        .build()])
        .items(RefOr::T(
            text(r"^[^\x00]*$", "No NUL characters.").build().into(),
        ))
        .description(Some(
            "The program and its arguments, such as [\"python3\", \"-m\", \"math_server\"].",
        ))
        .examples([json!(["python3", "-m", "math_server"])])
}

fn env_schema() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .property_names(Some(
            string().pattern(Some(r"^[^=\x00]+$")).min_length(Some(1)),
        ))
        .additional_properties(Some(text(r"^[^\x00]*$", "No NUL characters.")))
        .description(Some(
            "Extra environment variables: names without `=`, values as strings (`${VAR}` is \
             expanded).",
        ))
}

fn subprocess_fields(object: ObjectBuilder) -> ObjectBuilder {
    object
        .property("command", command_schema())
        .property("env", or_null(env_schema()))
        .property(
            "cwd",
            or_null(text(
                not_blank_pattern(),
                "The working directory; not blank.",
            )),
        )
}

fn docker_fields(object: ObjectBuilder, arguments: &str, engine: &str) -> ObjectBuilder {
    let object = object
        .property(
            "image",
            text(
                format!("^[^{BLANK}]+$"),
                "The image to run, such as `repo/img:tag`: not empty, no whitespace.",
            ),
        )
        .property(
            arguments,
            or_null(list(string()).description(Some(
                "What follows the image on `docker run` (`command` is a synonym of `args`; \
                 give one of them).",
            ))),
        )
        .property("env", or_null(env_schema()))
        .property(
            "network",
            or_null(text(not_blank_pattern(), "The container network; default `none`.")),
        )
        .property(
            "memory",
            or_null(text(
                r"^\s*(?:[0-9]+\.?[0-9]*|\.[0-9]+)\s*[kKmMgGtTpP]?[iI]?[bB]?\s*$",
                "A memory limit: a number with an optional unit, such as `512m` or `2g`.",
            )),
        )
        .property(
            "cpus",
            or_null(
                text(
                    r"^\s*\+?(?:[0-9]*[1-9][0-9]*\.?[0-9]*|[0-9]*\.[0-9]*[1-9][0-9]*)(?:[eE][+-]?[0-9]{1,2})?\s*$",
                    "A CPU limit above 0, as a string such as `\"1.5\"`.",
                )
                .max_length(Some(32)),
            ),
        )
        .property(
            "read_only",
            or_null(boolean().description(Some("A read-only root filesystem; default true."))),
        )
        .property(
            "volumes",
            or_null(list(text(
                not_blank_pattern(),
                "A mount in `docker run -v` syntax, such as `/host/data:/data:ro`.",
            ))),
        );
    if engine == "runtime" {
        object.property(
            "runtime",
            or_null(one_of_strings(["docker", "podman"]).description(Some(
                "Run through this command-line client instead of the Engine API (`docker_host` \
                 and `runtime` exclude each other).",
            ))),
        )
    } else {
        object.property(
            "docker_host",
            or_null(text(
                "^(?:unix://)?/",
                "The Engine API to run on: `unix:///path/to/docker.sock` or an absolute socket \
                 path; the gateway's default engine when absent.",
            )),
        )
    }
}

fn remote_fields(object: ObjectBuilder) -> ObjectBuilder {
    // The host is what follows the scheme up to the first `/`, `?` or `#`, after the last `@`:
    // not empty, and not starting with `:` (a port without a host).
    let url_text = format!("[^{BLANK_OR_CONTROL}]");
    let user_text = format!("[^{BLANK_OR_CONTROL}/?#]");
    let host_first = format!("[^{BLANK_OR_CONTROL}/?#@:]");
    let host_text = format!("[^{BLANK_OR_CONTROL}/?#@]");
    object
        .property(
            "endpoint",
            text(
                format!(
                    "^[Hh][Tt][Tt][Pp][Ss]?://(?:{user_text}*@)?{host_first}{host_text}*(?:[/?#]{url_text}*)?$"
                ),
                "The MCP Streamable HTTP URL: http:// or https://, a host, no blanks.",
            )
            .examples([json!("https://host.example/mcp")]),
        )
        .property(
            "headers",
            or_null(
                ObjectBuilder::new()
                    .schema_type(Type::Object)
                    .property_names(Some(
                        string().pattern(Some(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")),
                    ))
                    .additional_properties(Some(text(
                        r"^[^\r\n\x00]*$",
                        "No line breaks or NUL characters.",
                    )))
                    .description(Some(
                        "Headers sent with every request (`${VAR}` is expanded), such as \
                         `Authorization`.",
                    )),
            ),
        )
        .property(
            "token_exchange",
            or_null(
                closed_object()
                    .property(
                        "token_endpoint",
                        string().description(Some("The authorization server's token endpoint.")),
                    )
                    .required("token_endpoint")
                    .property("client_id", string().min_length(Some(1)))
                    .required("client_id")
                    .property(
                        "client_secret",
                        string()
                            .min_length(Some(1))
                            .description(Some("Shown as `\"***\"` when read back.")),
                    )
                    .required("client_secret")
                    .property(
                        "client_auth",
                        or_null(one_of_strings(["client_secret_basic", "client_secret_post"])),
                    )
                    .property(
                        "resource",
                        or_null(string().description(Some(
                            "The resource tokens are asked for; default the endpoint.",
                        ))),
                    )
                    .property("audience", or_null(string()))
                    .property("scope", or_null(string()))
                    .description(Some(
                        "Tool calls carry a token of the server's own, exchanged for the \
                         caller's access token (RFC 8693); the gateway's client credentials \
                         token for everything else.",
                    )),
            ),
        )
}

/// One mode's fields, as a closed object; `id` says whether the body names the server.
fn server_variant(launch: Launch, id: ServerIdField) -> Schema {
    let mut object = closed_object();
    if id == ServerIdField::Required {
        object = object
            .property("mcp_server_id", id_schema())
            .required("mcp_server_id");
    }
    object = common_server_fields(object, launch.mode());
    object = match launch {
        Launch::Subprocess => subprocess_fields(object),
        Launch::Docker { arguments, engine } => docker_fields(object, arguments, engine),
        Launch::Remote => remote_fields(object),
    };
    object
        .required(launch.required())
        .title(Some(launch.mode()))
        .build()
        .into()
}

/// A server body in `mode`, a mode the gateway's embedder registered: the common fields and
/// `settings`, which the mode checks. `creating` says whether the body names the server.
pub(crate) fn registered_mode_variant(mode: &str, creating: bool) -> Schema {
    let mut object = closed_object();
    if creating {
        object = object
            .property("mcp_server_id", id_schema())
            .required("mcp_server_id");
    }
    common_server_fields(object, mode)
        .property(
            "settings",
            or_null(
                ObjectBuilder::new()
                    .schema_type(Type::Object)
                    .description(Some(
                        "What the mode needs to run the server; the mode checks it, and a value \
                         it refuses answers 422 naming the key.",
                    )),
            ),
        )
        .title(Some(mode))
        .build()
        .into()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ServerIdField {
    Required,
    /// The path names the server. (The body may repeat the id, but only as it is in the path,
    /// which a schema cannot say; the schema leaves it out.)
    InPath,
}

fn server_definition(id: ServerIdField, description: &str, example: Value) -> RefOr<Schema> {
    let any_of = Launch::ALL
        .into_iter()
        .fold(AnyOfBuilder::new(), |any_of, launch| {
            any_of.item(RefOr::T(server_variant(launch, id)))
        })
        .description(Some(description))
        .examples([example]);
    RefOr::T(any_of.build().into())
}

/// The body of `POST /api/mcp_servers`.
pub struct CreateServerRequest;

impl PartialSchema for CreateServerRequest {
    fn schema() -> RefOr<Schema> {
        server_definition(
            ServerIdField::Required,
            "`mcp_server_id` plus the fields of a server in the configuration file. Which fields \
             a server takes depends on its `mode` (`subprocess`, `docker`, `remote`); a field \
             of another mode, an unknown field, a value of the wrong JSON type or out of range \
             answers 422 naming the field.",
            json!({"mcp_server_id": "math", "mode": "subprocess",
                   "command": ["python3", "-m", "math_server"]}),
        )
    }
}

impl ToSchema for CreateServerRequest {}

/// The body of `PUT /api/mcp_servers/{id}`.
pub struct UpdateServerRequest;

impl PartialSchema for UpdateServerRequest {
    fn schema() -> RefOr<Schema> {
        server_definition(
            ServerIdField::InPath,
            "The whole new definition, as for create, without `mcp_server_id` (accepted when it \
             equals the id in the path, and 422 otherwise).",
            json!({"mode": "subprocess", "command": ["python3", "-m", "math_server"],
                   "idle_ttl_s": 600}),
        )
    }
}

impl ToSchema for UpdateServerRequest {}

// ----- groups ---------------------------------------------------------------------------------

fn member_fields(object: ObjectBuilder) -> ObjectBuilder {
    object
        .property(
            "weight",
            or_null(integer(1, u64::from(u32::MAX)).description(Some(
                "Share of the calls under `weighted_round_robin` and `random`; default 1.",
            ))),
        )
        .property(
            "priority",
            or_null(
                integer(0, u64::from(u32::MAX))
                    .description(Some("Order under `priority`, lowest first; default 0.")),
            ),
        )
}

/// A member, named by `id` or by `member_id` (one of them).
fn member_schema() -> OneOfBuilder {
    ["id", "member_id"]
        .into_iter()
        .fold(OneOfBuilder::new(), |one_of, key| {
            one_of.item(RefOr::T(
                member_fields(closed_object().property(key, id_schema()).required(key))
                    .build()
                    .into(),
            ))
        })
        .description(Some(
            "A registered mcp server (not a group), named by `id` or `member_id`.",
        ))
}

fn group_fields(object: ObjectBuilder) -> ObjectBuilder {
    object
        .property(
            "mode",
            one_of_strings(["group"]).description(Some("Optional; a group's mode is `group`.")),
        )
        .property(
            "strategy",
            or_null(
                one_of_strings(GroupStrategy::ALL.iter().map(|strategy| strategy.as_str()))
                    .description(Some("How a member is picked; default `round_robin`.")),
            ),
        )
        .property(
            "min_healthy",
            or_null(integer(1, u64::from(u32::MAX)).description(Some(
                "Members in rotation needed for the group to be `healthy`; default 1. When \
                 `members` are given it may not exceed their number.",
            ))),
        )
        .property("description", or_null(string()))
        .property(
            "members",
            or_null(
                ArrayBuilder::new()
                    .items(RefOr::T(member_schema().build().into()))
                    .unique_items(true)
                    .description(Some("Each a registered mcp server, listed once.")),
            ),
        )
}

/// The body of `POST /api/groups`.
pub struct CreateGroupRequest;

impl PartialSchema for CreateGroupRequest {
    fn schema() -> RefOr<Schema> {
        RefOr::T(
            group_fields(closed_object().property("group_id", group_id_schema()))
                .required("group_id")
                .description(Some(
                    "`group_id` plus the fields of a `mode: group` entry of the configuration \
                     file.",
                ))
                .examples([json!({"group_id": "math-pool", "strategy": "round_robin",
                                  "members": [{"id": "math", "weight": 1}]})])
                .build()
                .into(),
        )
    }
}

impl ToSchema for CreateGroupRequest {}

/// The body of `PUT /api/groups/{id}`.
pub struct UpdateGroupRequest;

impl PartialSchema for UpdateGroupRequest {
    fn schema() -> RefOr<Schema> {
        RefOr::T(
            group_fields(closed_object())
                .description(Some(
                    "Only the fields given change (`members` replaces the member list; \
                     `description: null` clears the description). `group_id` is accepted when \
                     it equals the id in the path, and 422 otherwise.",
                ))
                .examples([json!({"strategy": "priority", "min_healthy": 1})])
                .build()
                .into(),
        )
    }
}

impl ToSchema for UpdateGroupRequest {}

/// The body of `POST /api/groups/{id}/members`.
pub struct AddGroupMemberRequest;

impl PartialSchema for AddGroupMemberRequest {
    fn schema() -> RefOr<Schema> {
        RefOr::T(
            member_schema()
                .examples([json!({"member_id": "math", "weight": 2})])
                .build()
                .into(),
        )
    }
}

impl ToSchema for AddGroupMemberRequest {}

// ----- auth -----------------------------------------------------------------------------------

/// An object of `fields` with `alternatives` (each: exactly one of its spellings).
fn with_alternatives(
    fields: ObjectBuilder,
    alternatives: &[&[&[&str]]],
    description: &str,
    example: Value,
) -> RefOr<Schema> {
    let all_of = alternatives.iter().fold(
        AllOfBuilder::new().item(RefOr::T(fields.build().into())),
        |all_of, choices| all_of.item(RefOr::T(exactly_one_of(choices))),
    );
    RefOr::T(
        all_of
            .description(Some(description))
            .examples([example])
            .build()
            .into(),
    )
}

const PRINCIPAL_SPELLINGS: &[&[&str]] = &[&["principal"], &["principal_id"]];

/// The body of `POST /api/auth/keys`.
pub struct CreateApiKeyRequest;

impl PartialSchema for CreateApiKeyRequest {
    fn schema() -> RefOr<Schema> {
        let fields = closed_object()
            .property("principal", principal_schema())
            .property("principal_id", principal_schema())
            .property(
                "name",
                text(
                    format!("^[^{CONTROL}]*[^{BLANK_OR_CONTROL}][^{CONTROL}]*$"),
                    "What the key is for: 1 to 128 characters without control characters \
                     (whitespace around it is dropped).",
                )
                .max_length(Some(API_KEY_NAME_MAX_CHARS)),
            )
            .required("name")
            .property(
                "role",
                or_null(role_name_schema().description(Some(
                    "A role the key itself carries, on top of the principal's; it must exist.",
                ))),
            )
            .property(
                "expires_in_days",
                or_null(
                    integer(
                        1,
                        u64::try_from(API_KEY_MAX_EXPIRY_DAYS).unwrap_or(u64::MAX),
                    )
                    .description(Some("Omitted or null: the key never expires.")),
                ),
            );
        with_alternatives(
            fields,
            &[PRINCIPAL_SPELLINGS],
            "Either of two shapes: `{principal, name, role?, expires_in_days?}` or \
             `{principal_id, name}`; give `principal` or `principal_id`.",
            json!({"principal": "user:alice", "name": "laptop", "expires_in_days": 90}),
        )
    }
}

impl ToSchema for CreateApiKeyRequest {}

/// The body of `POST /api/auth/roles`.
pub struct CreateRoleRequest;

impl PartialSchema for CreateRoleRequest {
    fn schema() -> RefOr<Schema> {
        let fields = closed_object()
            .property("name", role_name_schema())
            .property("role_name", role_name_schema())
            .property("description", or_null(role_description_schema()))
            .property("permissions", grants_schema())
            .required("permissions");
        with_alternatives(
            fields,
            &[&[&["name"], &["role_name"]]],
            "A custom role: `name` (or `role_name`), an optional description, and what it \
             grants.",
            json!({"name": "deployer", "description": "deploys servers",
                   "permissions": ["mcp_server:*", "tool:list"]}),
        )
    }
}

impl ToSchema for CreateRoleRequest {}

/// The body of `PATCH /api/auth/roles/{role_name}`.
pub struct UpdateRoleRequest;

impl PartialSchema for UpdateRoleRequest {
    fn schema() -> RefOr<Schema> {
        RefOr::T(
            closed_object()
                .property("description", or_null(role_description_schema()))
                .property("permissions", or_null(grants_schema()))
                .description(Some(
                    "Only the fields given change; `description: null` clears the description. \
                     A role cannot be renamed.",
                ))
                .examples([json!({"permissions": ["mcp_server:read", "tool:invoke"]})])
                .build()
                .into(),
        )
    }
}

impl ToSchema for UpdateRoleRequest {}

/// The body of `POST /api/auth/roles/assign` and `DELETE /api/auth/roles/revoke`.
pub struct RoleAssignmentRequest;

impl PartialSchema for RoleAssignmentRequest {
    fn schema() -> RefOr<Schema> {
        let fields = closed_object()
            .property("principal", principal_schema())
            .property("principal_id", principal_schema())
            .property("role", role_name_schema())
            .property("role_name", role_name_schema())
            .property("scope", or_null(scope_schema()));
        with_alternatives(
            fields,
            &[PRINCIPAL_SPELLINGS, &[&["role"], &["role_name"]]],
            "Either of two shapes: `{principal, role, scope?}` or `{principal_id, \
             role_name}`.",
            json!({"principal": "user:alice", "role": "developer", "scope": "global"}),
        )
    }
}

impl ToSchema for RoleAssignmentRequest {}

/// The body of `POST /api/auth/check-permission`.
pub struct CheckPermissionRequest;

impl PartialSchema for CheckPermissionRequest {
    fn schema() -> RefOr<Schema> {
        let fields = closed_object()
            .property("principal", principal_schema())
            .property("principal_id", principal_schema())
            .property("permission", permission_schema())
            .required("permission");
        with_alternatives(
            fields,
            &[PRINCIPAL_SPELLINGS],
            "A principal (`principal` or `principal_id`) and one permission.",
            json!({"principal": "user:alice", "permission": "tool:invoke"}),
        )
    }
}

impl ToSchema for CheckPermissionRequest {}

/// The body of `POST /api/auth/policies/{scope}/{target_id}`.
pub struct SetPolicyRequest;

impl PartialSchema for SetPolicyRequest {
    fn schema() -> RefOr<Schema> {
        let fields = closed_object()
            .property("allow_list", principal_patterns_schema())
            .property("deny_list", principal_patterns_schema());
        let at_least_one = AnyOfBuilder::new()
            .item(RefOr::T(requiring(&["allow_list"])))
            .item(RefOr::T(requiring(&["deny_list"])));
        RefOr::T(
            AllOfBuilder::new()
                .item(RefOr::T(fields.build().into()))
                .item(RefOr::T(at_least_one.build().into()))
                .description(Some(
                    "`allow_list`, `deny_list` or both; a list left out is empty. Deny wins; a \
                     non-empty allow list admits only its principals.",
                ))
                .examples([json!({"allow_list": ["group:ops"], "deny_list": ["user:mallory"]})])
                .build()
                .into(),
        )
    }
}

impl ToSchema for SetPolicyRequest {}

// ----- discovery ------------------------------------------------------------------------------

fn removal_grace_schema() -> ObjectBuilder {
    integer(0, 86_400).description(Some(
        "`authoritative` sources: seconds before a server that disappeared is withdrawn; \
         default 60.",
    ))
}

/// The settings of each source type the gateway builds.
fn source_settings(source_type: &str) -> ObjectBuilder {
    let settings = closed_object().property(REMOVAL_GRACE_KEY, removal_grace_schema());
    match source_type {
        "docker" => settings.property(
            "socket_path",
            or_null(text(
                "^(?:unix://)?/",
                "The engine's socket: `unix:///var/run/docker.sock` or an absolute path; \
                 default `DOCKER_HOST`, else `/var/run/docker.sock`.",
            )),
        ),
        "filesystem" => settings
            .property(
                "path",
                text(
                    "^/",
                    "The absolute path of a directory of YAML server definitions.",
                ),
            )
            .required("path")
            .property(
                "watch_interval_ms",
                or_null(integer(100, 3_600_000).description(Some(
                    "How often the directory is checked for changes; default 1000.",
                ))),
            ),
        _ => settings,
    }
}

/// A source's fields, one variant per source type; `with_id`: the body may name the source.
fn discovery_source(with_id: bool, description: &str, example: Value) -> RefOr<Schema> {
    let modes = [DiscoveryMode::Additive, DiscoveryMode::Authoritative];
    let any_of = DiscoverySourceConfig::KNOWN_TYPES.into_iter().fold(
        AnyOfBuilder::new(),
        |any_of, source_type| {
            let settings = source_settings(source_type);
            // A filesystem source cannot do without its settings; a docker source's are
            // optional.
            let settings: Schema = if source_type == "filesystem" {
                settings.build().into()
            } else {
                or_null(settings)
            };
            let mut fields = closed_object();
            if with_id {
                fields = fields.property("source_id", source_id_schema());
            }
            fields = fields
                .property("source_type", one_of_strings([source_type]))
                .property("type", one_of_strings([source_type]))
                .property(
                    "mode",
                    or_null(
                        one_of_strings(modes.iter().map(|mode| mode.as_str())).description(Some(
                            "`additive` only adds servers; `authoritative` also withdraws the \
                             ones that disappeared. Default `additive`.",
                        )),
                    ),
                )
                .property(
                    "enabled",
                    or_null(boolean().description(Some("Default true."))),
                )
                .property("config", settings)
                .title(Some(source_type));
            if source_type == "filesystem" {
                fields = fields.required("config");
            }
            let variant = AllOfBuilder::new()
                .item(RefOr::T(fields.build().into()))
                .item(RefOr::T(exactly_one_of(&[&["source_type"], &["type"]])));
            any_of.item(RefOr::T(variant.build().into()))
        },
    );
    RefOr::T(
        any_of
            .description(Some(description))
            .examples([example])
            .build()
            .into(),
    )
}

/// The body of `POST /api/discovery/sources`.
pub(crate) struct DiscoverySourceRequest;

impl PartialSchema for DiscoverySourceRequest {
    fn schema() -> RefOr<Schema> {
        discovery_source(
            true,
            "The source's type (`source_type`, or `type` as in the configuration file), mode, \
             whether it is enabled, and the type's settings. `source_id` is optional (default \
             `{type}-{n}`); `id` is accepted for it.",
            json!({"source_id": "docker-local", "source_type": "docker",
                   "config": {"socket_path": "/var/run/docker.sock"}}),
        )
    }
}

impl ToSchema for DiscoverySourceRequest {}

/// The body of `PUT /api/discovery/sources/{id}`.
pub(crate) struct DiscoverySourceUpdate;

impl PartialSchema for DiscoverySourceUpdate {
    fn schema() -> RefOr<Schema> {
        discovery_source(
            false,
            "The source's whole new definition, as for create, without `source_id` (accepted \
             when it equals the id in the path, and 422 otherwise).",
            json!({"source_type": "filesystem", "mode": "authoritative",
                   "config": {"path": "/etc/mcpgw/servers.d"}}),
        )
    }
}

impl ToSchema for DiscoverySourceUpdate {}

/// The body of `PUT /api/discovery/sources/{id}/enable`.
pub(crate) struct DiscoveryEnableRequest;

impl PartialSchema for DiscoveryEnableRequest {
    fn schema() -> RefOr<Schema> {
        RefOr::T(
            closed_object()
                .property("enabled", boolean())
                .required("enabled")
                .examples([json!({"enabled": false})])
                .build()
                .into(),
        )
    }
}

impl ToSchema for DiscoveryEnableRequest {}

// ----- path and query parameters --------------------------------------------------------------

/// A server or group id in a path. A value that cannot be an id names nothing: 404.
pub struct McpServerId;

impl PartialSchema for McpServerId {
    fn schema() -> RefOr<Schema> {
        RefOr::T(id_schema().build().into())
    }
}

impl ToSchema for McpServerId {}

/// A discovery source's id in a path.
pub(crate) struct DiscoverySourceId;

impl PartialSchema for DiscoverySourceId {
    fn schema() -> RefOr<Schema> {
        RefOr::T(source_id_schema().build().into())
    }
}

impl ToSchema for DiscoverySourceId {}

/// An API key's id in a path.
pub struct ApiKeyId;

impl PartialSchema for ApiKeyId {
    fn schema() -> RefOr<Schema> {
        RefOr::T(
            string()
                .pattern(Some("^[A-Za-z0-9_-]{1,64}$"))
                .description(Some("A key's `key_id`, such as `key_0123456789abcdef`."))
                .examples([json!("key_0123456789abcdef")])
                .build()
                .into(),
        )
    }
}

impl ToSchema for ApiKeyId {}

/// A role's name in a path.
pub struct RoleNameParam;

impl PartialSchema for RoleNameParam {
    fn schema() -> RefOr<Schema> {
        RefOr::T(role_name_schema().build().into())
    }
}

impl ToSchema for RoleNameParam {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("RoleName")
    }
}

/// The target of a `tool` policy in a path: `{server_or_group_id}__{tool}`. (The ids of the
/// other scopes are [`McpServerId`]s.)
pub struct PolicyToolTarget;

impl PartialSchema for PolicyToolTarget {
    fn schema() -> RefOr<Schema> {
        // Ids never contain `__`, so the first `__` ends the id; the tool name may hold more.
        let tool = format!("[^{BLANK_OR_CONTROL}/]");
        RefOr::T(
            string()
                .pattern(Some(format!(
                    "^(?:_?[A-Za-z0-9-]){{1,{}}}_?__{tool}{{1,{TOOL_NAME_MAX_BYTES}}}$",
                    ServerId::MAX_LEN
                )))
                .description(Some(
                    "`{server_or_group_id}__{tool}`: an id of at most 64 characters, and a tool \
                     name of at most 256 bytes without whitespace, control characters or `/`.",
                ))
                .examples([json!("math__add")])
                .build()
                .into(),
        )
    }
}

impl ToSchema for PolicyToolTarget {}

/// A principal in a query.
pub struct PrincipalParam;

impl PartialSchema for PrincipalParam {
    fn schema() -> RefOr<Schema> {
        RefOr::T(principal_schema().build().into())
    }
}

impl ToSchema for PrincipalParam {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Principal")
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use mcpgw_core::ServerId;
    use serde_json::{Value, json};

    /// The served document, as JSON.
    fn document() -> Value {
        serde_json::to_value(crate::openapi::openapi_document("test")).unwrap()
    }

    fn component<'a>(document: &'a Value, name: &str) -> &'a Value {
        let schema = &document["components"]["schemas"][name];
        assert!(schema.is_object(), "{name} is a component");
        schema
    }

    /// The non-null branch of a `oneOf: [schema, {type: null}]`, or the schema itself.
    fn not_null(schema: &Value) -> &Value {
        schema["oneOf"]
            .as_array()
            .and_then(|branches| branches.iter().find(|branch| branch["type"] != "null"))
            .unwrap_or(schema)
    }

    fn range(schema: &Value) -> (u64, u64) {
        let schema = not_null(schema);
        (
            schema["minimum"].as_u64().unwrap(),
            schema["maximum"].as_u64().unwrap(),
        )
    }

    fn strings(value: &Value) -> BTreeSet<&str> {
        value
            .as_array()
            .unwrap()
            .iter()
            .map(|item| item.as_str().unwrap())
            .collect()
    }

    #[test]
    fn a_server_body_is_one_closed_object_per_mode_with_the_validators_ranges() {
        let document = document();
        let create = &component(&document, "CreateServerRequest")["anyOf"];
        let variants = create.as_array().unwrap();
        let modes: BTreeSet<&str> = variants
            .iter()
            .map(|variant| variant["properties"]["mode"]["enum"][0].as_str().unwrap())
            .collect();
        assert_eq!(modes, BTreeSet::from(["subprocess", "docker", "remote"]));
        for variant in variants {
            let mode = variant["properties"]["mode"]["enum"][0].as_str().unwrap();
            assert_eq!(variant["additionalProperties"], false, "{mode}");
            let required = strings(&variant["required"]);
            let needed = match mode {
                "subprocess" => "command",
                "docker" => "image",
                _ => "endpoint",
            };
            assert_eq!(
                required,
                BTreeSet::from(["mcp_server_id", "mode", needed]),
                "{mode}"
            );
            let properties = &variant["properties"];
            assert_eq!(range(&properties["idle_ttl_s"]), mcpgw_config::IDLE_TTL_S);
            assert_eq!(
                range(&properties["health_check_interval_s"]),
                mcpgw_config::HEALTH_CHECK_INTERVAL_S
            );
            assert_eq!(
                range(&properties["max_consecutive_failures"]),
                mcpgw_config::MAX_CONSECUTIVE_FAILURES
            );
            // A field of another mode is not in the variant, so the variant refuses it.
            let foreign = match mode {
                "subprocess" => "image",
                "docker" => "endpoint",
                _ => "command",
            };
            assert!(properties.get(foreign).is_none(), "{mode} takes {foreign}");
            assert_eq!(
                properties["mcp_server_id"]["maxLength"],
                json!(ServerId::MAX_LEN)
            );
            // Predefined tools are MCP Tool objects: their schemas and annotations are objects.
            let tool = &not_null(&properties["tools"])["items"];
            assert_eq!(tool["additionalProperties"], false, "{mode}");
            for key in ["inputSchema", "outputSchema", "annotations"] {
                assert_eq!(
                    not_null(&tool["properties"][key])["type"],
                    "object",
                    "{key}"
                );
            }
        }
        // Docker takes `args` or its synonym `command`, and `runtime` or `docker_host`: one
        // variant per pair, none with both of a pair.
        let docker: Vec<&Value> = variants
            .iter()
            .filter(|variant| variant["properties"]["mode"]["enum"][0] == "docker")
            .collect();
        assert_eq!(docker.len(), 4);
        for variant in docker {
            let properties = variant["properties"].as_object().unwrap();
            assert_ne!(
                properties.contains_key("args"),
                properties.contains_key("command")
            );
            assert_ne!(
                properties.contains_key("runtime"),
                properties.contains_key("docker_host")
            );
        }
        // An update names the server in its path only.
        for variant in component(&document, "UpdateServerRequest")["anyOf"]
            .as_array()
            .unwrap()
        {
            assert!(variant["properties"].get("mcp_server_id").is_none());
            assert!(!strings(&variant["required"]).contains("mcp_server_id"));
        }
    }

    #[test]
    fn the_examples_of_the_bodies_are_accepted_by_their_handlers() {
        let document = document();
        let example = |name: &str| -> Vec<u8> {
            let schema = component(&document, name);
            let example = &schema["examples"][0];
            assert!(example.is_object(), "{name} has an example");
            example.to_string().into_bytes()
        };
        let id = ServerId::parse("math").unwrap();
        crate::definition::spec_for_create(&example("CreateServerRequest"), &Default::default())
            .unwrap();
        crate::definition::spec_for_update(
            &id,
            &example("UpdateServerRequest"),
            &Default::default(),
        )
        .unwrap();
        let pool = ServerId::parse("math-pool").unwrap();
        crate::groups::spec_for_create(&example("CreateGroupRequest")).unwrap();
        crate::groups::update_from_body(&pool, &example("UpdateGroupRequest")).unwrap();
        crate::groups::member_from_body(&pool, &example("AddGroupMemberRequest")).unwrap();
        crate::discovery::source_request(None, &example("DiscoverySourceRequest")).unwrap();
        crate::discovery::source_request(Some("catalog"), &example("DiscoverySourceUpdate"))
            .unwrap();
        crate::discovery::enabled_from_body(&example("DiscoveryEnableRequest")).unwrap();
    }

    #[test]
    fn ids_in_paths_carry_the_id_rules() {
        let document = document();
        let id = component(&document, "McpServerId");
        assert_eq!(id["minLength"], 1);
        assert_eq!(id["maxLength"], json!(ServerId::MAX_LEN));
        assert_eq!(id["pattern"], "^(?:_?[A-Za-z0-9-])*_?$");
        let mut checked = 0;
        for (path, item) in document["paths"].as_object().unwrap() {
            let ids_here = path.starts_with("/api/mcp_servers/")
                || path.starts_with("/api/groups/")
                || path.starts_with("/api/discovery/approve/")
                || path.starts_with("/api/discovery/reject/");
            if !ids_here {
                continue;
            }
            for (method, operation) in item.as_object().unwrap() {
                for parameter in operation["parameters"].as_array().unwrap() {
                    if parameter["in"] == "path" {
                        assert_eq!(
                            parameter["schema"]["$ref"], "#/components/schemas/McpServerId",
                            "{method} {path} {}",
                            parameter["name"]
                        );
                        checked += 1;
                    }
                }
            }
        }
        // Nine server routes, seven group route parameters, approve and reject.
        assert!(checked >= 18, "only {checked} id parameters");
    }

    #[test]
    fn the_policy_route_is_documented_once_per_scope_with_that_scopes_targets() {
        let document = document();
        let paths = document["paths"].as_object().unwrap();
        assert!(!paths.keys().any(|path| path.contains("{scope}")));
        for (scope, target) in [
            ("provider", "McpServerId"),
            ("mcp_server", "McpServerId"),
            ("group", "McpServerId"),
            ("tool", "PolicyToolTarget"),
        ] {
            let item = &paths[&format!("/api/auth/policies/{scope}/{{target_id}}")];
            for method in ["get", "post", "delete"] {
                let parameters = item[method]["parameters"].as_array().unwrap();
                assert_eq!(parameters.len(), 1, "{method} {scope}");
                assert_eq!(parameters[0]["name"], "target_id");
                assert_eq!(
                    parameters[0]["schema"]["$ref"],
                    format!("#/components/schemas/{target}")
                );
            }
        }
        // Operation ids stay unique.
        let mut ids = BTreeSet::new();
        for item in paths.values() {
            for operation in item.as_object().unwrap().values() {
                if let Some(id) = operation["operationId"].as_str() {
                    assert!(ids.insert(id.to_owned()), "{id} twice");
                }
            }
        }
    }

    #[test]
    fn auth_bodies_take_one_spelling_of_each_field_and_the_catalogues_names() {
        let document = document();
        let key = &component(&document, "CreateApiKeyRequest")["allOf"];
        assert_eq!(key[0]["additionalProperties"], false);
        assert_eq!(
            key[1]["oneOf"],
            json!([{"required": ["principal"]}, {"required": ["principal_id"]}])
        );
        assert_eq!(
            range(&key[0]["properties"]["expires_in_days"]),
            (
                1,
                u64::try_from(mcpgw_gateway::authz::API_KEY_MAX_EXPIRY_DAYS).unwrap()
            )
        );
        let check = &component(&document, "CheckPermissionRequest")["allOf"][0];
        let permissions = strings(&check["properties"]["permission"]["enum"]);
        let catalogue: BTreeSet<&str> = mcpgw_gateway::authz::Permission::ALL
            .iter()
            .map(|permission| permission.as_str())
            .collect();
        assert_eq!(permissions, catalogue);
        let role = &component(&document, "CreateRoleRequest")["allOf"][0];
        let grants = strings(&role["properties"]["permissions"]["items"]["enum"]);
        assert!(grants.contains("*") && grants.contains("mcp_server:*"));
        assert!(grants.is_superset(&catalogue));
        assert_eq!(
            role["properties"]["permissions"]["maxItems"],
            json!(mcpgw_gateway::authz::ROLE_MAX_GRANTS)
        );
    }
}
