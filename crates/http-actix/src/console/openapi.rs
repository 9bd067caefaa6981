//! The OpenAPI document of the web console, served at `GET /ui/openapi.json`: every route under
//! `/ui/` with its parameters, its form and every answer it can give, for tools that check the
//! console as they check the API (the schema suite runs against both documents).
//!
//! It is a document of its own, separate from the REST API's: the console answers HTML pages
//! and redirects, takes `application/x-www-form-urlencoded` forms and a session cookie, and is
//! not an API to program against. It lists routes and shapes only, nothing of the running
//! gateway but its version and the launch modes the server form takes. Public, like the
//! console's assets.
//!
//! What every route shares is added here once, by [`with_shared_answers`]: the answers of the
//! checks in front of every route (421 and 431 in the API's JSON envelope, 403
//! `ForbiddenOriginError` on posts), the form that cannot be read (400, 408, 413, 415, 422), the page that could not
//! be rendered (500), and, with authentication on, the way a request without a session is sent
//! to sign in (303 for a page, 401 for everything else).

use super::FORM_LIMIT_BYTES;
use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpResponse, web};
use utoipa::PartialSchema as _;
use utoipa::openapi::extensions::Extensions;
use utoipa::openapi::header::{Header, HeaderBuilder};
use utoipa::openapi::path::{
    HttpMethod, Operation, OperationBuilder, Parameter, ParameterBuilder, ParameterIn,
};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::schema::{AdditionalProperties, AllOfBuilder, AnyOfBuilder};
use utoipa::openapi::security::{ApiKey, ApiKeyValue, SecurityRequirement, SecurityScheme};
use utoipa::openapi::tag::TagBuilder;
use utoipa::openapi::{
    ComponentsBuilder, ContentBuilder, InfoBuilder, LicenseBuilder, ObjectBuilder, OpenApi,
    OpenApiBuilder, Paths, Ref, RefOr, Required, Response, ResponseBuilder, Schema, Type,
};

use super::{CSRF_FIELD, LOGIN_COOKIE, SESSION_COOKIE, secure};
use crate::error::{ErrorEnvelope, names};
use crate::state::ApiState;

/// Where the document is served.
pub(crate) const CONSOLE_OPENAPI_PATH: &str = "/ui/openapi.json";

/// The name of the session's security scheme.
const SESSION_SCHEME: &str = "console_session";

/// The cookie that binds a single sign-on to the browser that started it.
const SSO_COOKIE: &str = "mcpgw_sso";

/// The header htmx adds to the requests it makes for a part of a page.
const HTMX_HEADER: &str = "HX-Request";

/// Control characters: what Rust's `char::is_control` refuses.
const CONTROL: &str = r"\x00-\x1f\x7f-\x9f";

/// Whitespace but the line feed, as Rust's `str::trim` sees it (Python's `\s`, which the schema
/// suite's generator reads patterns with, also takes `\x1c`-`\x1f`, which trimming keeps).
const BLANK: &str = r"\t\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000";

/// Whitespace and control characters (what trimming removes, and what may not begin or end a
/// name).
const BLANK_OR_CONTROL: &str =
    r"\x00-\x20\x7f-\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000";

/// `GET /ui/openapi.json`: the document, for anyone (it holds nothing secret).
pub(crate) async fn document(state: web::Data<ApiState>) -> HttpResponse {
    let modes: Vec<String> = crate::definition::definition_rules(state.gateway())
        .launch_modes
        .iter()
        .map(|mode| mode.name().to_owned())
        .collect();
    let document = console_document(&state.gateway().info().version, &modes);
    // A document of plain maps and strings always serializes; an empty object keeps the route
    // answering JSON if it ever did not.
    let body = serde_json::to_vec(&document).unwrap_or_else(|error| {
        tracing::error!(%error, "the console's OpenAPI document could not be serialized");
        b"{}".to_vec()
    });
    let mut response = HttpResponse::Ok()
        .content_type("application/json")
        .body(body);
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    secure(response)
}

/// Who may use a route.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    /// Anyone: the sign-in pages, the assets, this document.
    Public,
    /// With authentication on, a session; without one a page redirects to sign in and anything
    /// else answers 401.
    Session,
    /// Reads the session when there is one, and does without (signing out).
    SessionIfAny,
}

/// One operation of the console, before the shared answers are added.
struct Route {
    method: HttpMethod,
    path: &'static str,
    id: &'static str,
    summary: &'static str,
    description: &'static str,
    access: Access,
    parameters: Vec<Parameter>,
    /// The component schema of its form, if it takes one.
    form: Option<&'static str>,
    answers: Vec<(&'static str, Response)>,
}

impl Route {
    fn new(method: HttpMethod, path: &'static str, id: &'static str, access: Access) -> Self {
        Self {
            method,
            path,
            id,
            summary: "",
            description: "",
            access,
            parameters: Vec::new(),
            form: None,
            answers: Vec::new(),
        }
    }

    fn get(path: &'static str, id: &'static str, access: Access) -> Self {
        Self::new(HttpMethod::Get, path, id, access)
    }

    fn post(path: &'static str, id: &'static str, access: Access, form: &'static str) -> Self {
        let mut route = Self::new(HttpMethod::Post, path, id, access);
        route.form = Some(form);
        route
    }

    fn summary(mut self, summary: &'static str, description: &'static str) -> Self {
        self.summary = summary;
        self.description = description;
        self
    }

    fn parameter(mut self, parameter: Parameter) -> Self {
        self.parameters.push(parameter);
        self
    }

    fn answer(mut self, status: &'static str, response: Response) -> Self {
        self.answers.push((status, response));
        self
    }
}

// ----- answers ----------------------------------------------------------------------------------

fn string() -> ObjectBuilder {
    ObjectBuilder::new().schema_type(Type::String)
}

fn text_schema(description: &str) -> Schema {
    string().description(Some(description)).build().into()
}

/// An HTML page (or a part of one, for htmx).
fn html(description: &str) -> Response {
    ResponseBuilder::new()
        .description(description)
        .content(
            "text/html",
            ContentBuilder::new()
                .schema(Some(text_schema("An HTML document or fragment")))
                .build(),
        )
        .build()
}

/// The console's error page: the status, the error's name (`data-error` on the alert paragraph)
/// and a message saying what to do.
fn problem(description: &str) -> Response {
    html(&format!("The error page: {description}"))
}

/// An answer in the API's error envelope, from the checks in front of every route.
fn envelope(description: &str) -> Response {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorEnvelope")))
                .build(),
        )
        .build()
}

/// A header the answer always carries. utoipa's header object has no `required` field; the
/// flattened extension map writes the Header Object's own.
fn required_header(schema: impl Into<RefOr<Schema>>, description: &str) -> Header {
    HeaderBuilder::new()
        .schema(Some(schema))
        .description(Some(description))
        .extensions(Some(Extensions::from_iter([("required", true)])))
        .build()
}

/// `^/ui/`: a page of the console.
const CONSOLE_LOCATION: &str = "^/ui/";

/// A `303 See Other` to a `Location` matching `pattern` (`None`: any address).
fn see_other(description: &str, pattern: Option<&str>) -> Response {
    let location = match pattern {
        Some(pattern) => string().pattern(Some(pattern)),
        None => string(),
    };
    ResponseBuilder::new()
        .description(description)
        .header(
            "Location",
            required_header(location.build(), "Where the browser goes next"),
        )
        .build()
}

/// Adds `Set-Cookie` to `response`: on every answer (`always`), or on some.
fn setting_cookies(mut response: Response, description: &str, always: bool) -> Response {
    let header = if always {
        required_header(string().build(), description)
    } else {
        HeaderBuilder::new()
            .schema(Some(string().build()))
            .description(Some(description))
            .build()
    };
    response
        .headers
        .insert("Set-Cookie".to_owned(), header.into());
    response
}

// ----- parameters -------------------------------------------------------------------------------

fn parameter(
    name: &str,
    location: ParameterIn,
    schema: impl Into<RefOr<Schema>>,
    description: &str,
) -> Parameter {
    ParameterBuilder::new()
        .name(name)
        .parameter_in(location.clone())
        .required(if location == ParameterIn::Path {
            Required::True
        } else {
            Required::False
        })
        .schema(Some(schema))
        .description(Some(description))
        .build()
}

fn query(name: &str, schema: impl Into<RefOr<Schema>>, description: &str) -> Parameter {
    parameter(name, ParameterIn::Query, schema, description)
}

fn path(name: &str, schema: impl Into<RefOr<Schema>>, description: &str) -> Parameter {
    parameter(name, ParameterIn::Path, schema, description)
}

fn cookie(name: &str, description: &str) -> Parameter {
    parameter(name, ParameterIn::Cookie, string().build(), description)
}

/// `?done=`: the notice an action leaves for the page it redirects to.
fn done() -> Parameter {
    query(
        "done",
        string().build(),
        "What the action that led here did (`created`, `deleted`, `approved`, ...), shown as a \
         fixed notice, never as the text given; a value no action leaves shows none.",
    )
}

/// `?page=`: a page of a list, from 1 (past the last, the last).
fn page() -> Parameter {
    query(
        "page",
        ObjectBuilder::new()
            .schema_type(Type::Integer)
            .minimum(Some(1))
            .maximum(Some(u64::try_from(usize::MAX).unwrap_or(u64::MAX)))
            .build(),
        "The page of the list, from 1; a page past the last shows the last. Empty: the first. \
         Anything else answers 422.",
    )
}

fn search() -> Parameter {
    query(
        "q",
        string().build(),
        "Shows only what contains this text in its name or description, ignoring case.",
    )
}

fn server_id(description: &str) -> Parameter {
    path("id", crate::dto::McpServerId::schema(), description)
}

fn action(values: &[&str], description: &str) -> Parameter {
    path(
        "action",
        string().enum_values(Some(values.iter().copied())).build(),
        description,
    )
}

// ----- forms ------------------------------------------------------------------------------------

fn field(description: &str) -> RefOr<Schema> {
    RefOr::T(text_schema(description))
}

fn patterned(pattern: String, description: &str) -> RefOr<Schema> {
    RefOr::T(
        string()
            .pattern(Some(pattern))
            .description(Some(description))
            .build()
            .into(),
    )
}

fn csrf_field() -> RefOr<Schema> {
    field(
        "The session's CSRF token, as every form of the console carries it (`data-csrf` on the \
         page's `<body>`). A form without it, or with another session's, answers 403. With \
         authentication off any value passes (the `Origin` check protects the forms then).",
    )
}

fn form(description: &str) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(description))
}

/// A form that carries only the CSRF token.
fn csrf_form() -> Schema {
    form("A button's form: the CSRF token alone.")
        .property(CSRF_FIELD, csrf_field())
        .required(CSRF_FIELD)
        .build()
        .into()
}

fn sign_in_form(description: &str, credentials: &[(&str, &str)]) -> Schema {
    let object = form(description)
        .property(
            "login_token",
            field(
                "The sign-in page's token: the value of the `mcpgw_login` cookie that the page \
                 set. A form whose token does not match the cookie answers 403.",
            ),
        )
        .required("login_token")
        .property(
            "next",
            field(
                "The console page to go to after signing in (a path under `/ui/`, not the \
                 sign-in pages); anything else goes to `/ui/`.",
            ),
        );
    credentials
        .iter()
        .fold(object, |object, (name, description)| {
            object.property(*name, field(description))
        })
        .build()
        .into()
}

/// A list of lines, each a value of its own (blank lines are dropped).
fn lines(description: &str) -> RefOr<Schema> {
    field(&format!(
        "{description}: one entry per line; blank lines and whitespace around entries are \
         dropped."
    ))
}

/// The form that creates or edits a server. Its fields make the same JSON body that the API's
/// `POST /api/mcp_servers` takes, so the API's rules decide.
fn server_form(modes: &[String], creating: bool) -> Schema {
    let mut mode_names: Vec<String> = ["subprocess", "docker", "remote"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    mode_names.extend(modes.iter().cloned());
    let mut fields = form(if creating {
        "The fields of a new server's definition, as the API takes them in JSON. Fields left \
         empty are left out of the definition."
    } else {
        "The fields of the server's new definition, as the API takes them in JSON (its id is \
         the path's). Fields left empty are left out of the definition; a secret left as the \
         mask it was shown as keeps its value."
    })
    .property(CSRF_FIELD, csrf_field())
    .required(CSRF_FIELD);
    if creating {
        fields = fields
            .property(
                "mcp_server_id",
                RefOr::T(
                    string()
                        .pattern(Some("^(?:_?[A-Za-z0-9-])*_?$"))
                        .min_length(Some(1))
                        .max_length(Some(64))
                        .description(Some(
                            "The new server's id: 1 to 64 letters, digits, `_` and `-`, without \
                             `__` (whitespace around it is dropped).",
                        ))
                        .build()
                        .into(),
                ),
            )
            .required("mcp_server_id");
    }
    let fields = fields
        .property(
            "mode",
            RefOr::T(
                string()
                    .enum_values(Some(mode_names))
                    .description(Some(
                        "How the server runs: `subprocess` (needs `command`), `docker` (needs \
                         `image`), `remote` (needs `url`), or a launch mode this gateway \
                         registered.",
                    ))
                    .build()
                    .into(),
            ),
        )
        .required("mode")
        .property("description", field("What the server is for."))
        .property(
            "command",
            lines("The program and its arguments (`subprocess`)"),
        )
        .property("args", lines("More arguments"))
        .property(
            "url",
            field("The server's address, its definition's `endpoint` (`remote`)."),
        )
        .property("image", field("The container image (`docker`)."))
        .property(
            "env",
            patterned(
                format!("^(?:[{BLANK}]*|[^=\\n]*=[^\\n]*)(?:\\n(?:[{BLANK}]*|[^=\\n]*=[^\\n]*))*$"),
                "Environment variables, one `NAME=value` per line (blank lines are dropped; a \
                 line without `=` answers 422). A value shown masked keeps the current secret.",
            ),
        )
        .property("more", more_settings())
        .build();
    // What each mode needs, and the fields of the other modes it refuses unless they are left
    // empty (the API refuses a field that does not belong to the mode).
    let variant = |modes: Vec<String>, needs: Option<(&str, &str)>, refuses: &[&str]| {
        let mut object = ObjectBuilder::new()
            .property(
                "mode",
                RefOr::T(string().enum_values(Some(modes)).build().into()),
            )
            .required("mode");
        if let Some((field, pattern)) = needs {
            object = object
                .property(
                    field,
                    RefOr::T(string().pattern(Some(pattern)).build().into()),
                )
                .required(field);
        }
        for field in refuses {
            object = object.property(
                *field,
                RefOr::T(
                    string()
                        .pattern(Some(format!("^[\\n{BLANK}]*$")))
                        .build()
                        .into(),
                ),
            );
        }
        RefOr::T(Schema::from(object.build()))
    };
    let one = |mode: &str| vec![mode.to_owned()];
    let image = format!(r"^[{BLANK}]*\S+[{BLANK}]*$");
    let label = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
    let url = format!(
        r"^[{BLANK}]*https?://{label}(?:\.{label})*(?::[1-9][0-9]{{0,3}})?(?:/[^\s#?]*)?[{BLANK}]*$"
    );
    let mut alternatives = AnyOfBuilder::new()
        .item(variant(
            one("subprocess"),
            Some(("command", r"\S")),
            &["url", "image", "args"],
        ))
        .item(variant(one("docker"), Some(("image", &image)), &["url"]))
        .item(variant(
            one("remote"),
            Some(("url", &url)),
            &["command", "image", "args", "env"],
        ));
    if !modes.is_empty() {
        alternatives = alternatives.item(variant(
            modes.to_vec(),
            None,
            &["command", "url", "image", "args", "env"],
        ));
    }
    AllOfBuilder::new()
        .item(RefOr::T(fields.into()))
        .item(RefOr::T(alternatives.build().into()))
        .build()
        .into()
}

/// The form's `more`: a YAML mapping of any other field of the definition. Which fields a mode
/// takes, and their values, are the API's rules, which a pattern cannot hold; the pattern
/// admits what every mode takes: the lifecycle settings within their ranges, one per line.
fn more_settings() -> RefOr<Schema> {
    let setting = "(?:idle_ttl_s: [1-9][0-9]{0,3}|health_check_interval_s: [1-9][0-9]{1,2}|\
                   max_consecutive_failures: [1-9][0-9]?)";
    patterned(
        format!(r"^(?:[\n{BLANK}]*|{setting}(?:\r?\n{setting})*\r?\n?)$"),
        "Every other setting of the definition, as a YAML mapping, such as `idle_ttl_s: 300`; \
         empty for none. The form takes any field of the definition that the mode takes (this \
         document lists the settings every mode takes); YAML that is not a mapping, or a field \
         or value the API refuses, answers 422.",
    )
}

fn key_form() -> Schema {
    let name = format!("[^{BLANK_OR_CONTROL}*]");
    let inner = format!("[^{CONTROL}*]");
    form("A new API key, as `POST /api/auth/keys` makes it. Whitespace around values is dropped.")
        .property(CSRF_FIELD, csrf_field())
        .required(CSRF_FIELD)
        .property(
            "principal",
            patterned(
                format!(
                    "^[{BLANK}]*(?:user|group|service):{name}(?:{inner}{{0,254}}{name})?[{BLANK}]*$"
                ),
                "Who the key authenticates: `user:<name>`, `group:<name>` or `service:<name>`.",
            ),
        )
        .required("principal")
        .property(
            "name",
            patterned(
                format!("^[^{CONTROL}]*[^{BLANK_OR_CONTROL}][^{CONTROL}]*$"),
                "What the key is for: 1 to 128 characters without control characters.",
            ),
        )
        .required("name")
        .property(
            "role",
            field("A role the key itself carries; it must exist. Empty: none."),
        )
        .property(
            "expires_in_days",
            patterned(
                format!(
                    "^[{BLANK}]*(?:[1-9][0-9]{{0,2}}|[1-2][0-9]{{3}}|3[0-5][0-9]{{2}}|36[0-4][0-9]|\
                     3650)?[{BLANK}]*$"
                ),
                "Days until the key expires, 1 to 3650; empty: never. Not a whole number: 422.",
            ),
        )
        .build()
        .into()
}

/// `user:`, `group:` or `service:` and a name (no control character or `*`, no whitespace at
/// either end), with whitespace around it, which the forms drop. A name may hold 256 bytes;
/// the pattern stops at 64 characters, which any characters keep within that.
fn principal_text() -> String {
    let name = format!("[^{BLANK_OR_CONTROL}*]");
    let inner = format!("[^{CONTROL}*]");
    format!("[{BLANK}]*(?:user|group|service):{name}(?:{inner}{{0,62}}{name})?[{BLANK}]*")
}

/// A role's name, with whitespace around it.
fn role_name_text() -> String {
    format!(
        "[{BLANK}]*[a-z][a-z0-9_-]{{0,{}}}[{BLANK}]*",
        mcpgw_gateway::authz::ROLE_NAME_MAX_LEN - 1
    )
}

/// A role's name in a path.
fn role_name() -> Parameter {
    path(
        "name",
        string()
            .pattern(Some("^[a-z][a-z0-9_-]*$"))
            .max_length(Some(mcpgw_gateway::authz::ROLE_NAME_MAX_LEN))
            .build(),
        "The role's name; a name no role has answers 404.",
    )
}

/// What a role may grant: `*`, `resource:*`, or one permission of the catalogue.
fn grants() -> utoipa::openapi::schema::ArrayBuilder {
    use mcpgw_gateway::authz::{Permission, Resource};
    let grants: Vec<String> = std::iter::once("*".to_owned())
        .chain(
            Resource::ALL
                .iter()
                .map(|resource| format!("{}:*", resource.as_str())),
        )
        .chain(
            Permission::ALL
                .iter()
                .map(|permission| permission.as_str().to_owned()),
        )
        .collect();
    utoipa::openapi::schema::ArrayBuilder::new()
        .items(RefOr::T(string().enum_values(Some(grants)).build().into()))
        .max_items(Some(mcpgw_gateway::authz::ROLE_MAX_GRANTS))
        .description(Some(
            "What the role grants: the field once per ticked checkbox, each a permission of \
             `GET /api/auth/permissions`, `resource:*` or `*`. The page's forms also send one \
             blank `permissions`, which is dropped, so that ticking no box grants nothing.",
        ))
}

fn role_description() -> RefOr<Schema> {
    RefOr::T(
        string()
            .pattern(Some(r"^[^\x00-\x09\x0b-\x1f\x7f-\x9f]*$"))
            .max_length(Some(256))
            .description(Some(
                "What the role is for: at most 1024 bytes, no control characters but line \
                 breaks; whitespace around it is dropped.",
            ))
            .build()
            .into(),
    )
}

/// A role assignment, as `POST /api/auth/roles/assign` and `DELETE /api/auth/roles/revoke`
/// take it.
fn assignment_form() -> Schema {
    form(
        "A role assignment: who, which role, in which scope. Whitespace around values is \
         dropped; a field left empty is not given, and the API's message names it.",
    )
    .property(CSRF_FIELD, csrf_field())
    .required(CSRF_FIELD)
    .property(
        "principal",
        patterned(
            format!("^{}$", principal_text()),
            "Who holds the role: `user:<name>`, `group:<name>` or `service:<name>`.",
        ),
    )
    .required("principal")
    .property(
        "role",
        patterned(
            format!("^{}$", role_name_text()),
            "The role's name; one no role has answers 404.",
        ),
    )
    .required("role")
    .property(
        "scope",
        patterned(
            format!(
                "^[{BLANK}]*(?:(?:global|tenant:[^{BLANK_OR_CONTROL}]{{1,{}}})[{BLANK}]*)?$",
                mcpgw_gateway::authz::TENANT_ID_MAX_BYTES / 4
            ),
            "`global`, or `tenant:<tenant_id>` (a tenant id of at most 128 bytes without \
             whitespace or control characters); empty: `global`.",
        ),
    )
    .build()
    .into()
}

/// A new custom role, as `POST /api/auth/roles` takes it.
fn role_form() -> Schema {
    form("A new custom role, as `POST /api/auth/roles` makes it.")
        .property(CSRF_FIELD, csrf_field())
        .required(CSRF_FIELD)
        .property(
            "name",
            patterned(
                format!("^{}$", role_name_text()),
                "A lowercase letter, then lowercase letters, digits, `_` and `-`: at most 64 \
                 characters; not a built-in role's name (409), nor `all`, `assign` or `revoke`.",
            ),
        )
        .required("name")
        .property("description", role_description())
        .property(
            "permissions",
            RefOr::T(grants().min_items(Some(1)).build().into()),
        )
        .required("permissions")
        .build()
        .into()
}

/// A change to a custom role, as `PATCH /api/auth/roles/{role_name}` takes it.
fn role_change_form() -> Schema {
    form(
        "A change to a custom role: only what the form gives changes. `description` when the \
         field is there (empty clears it); the permissions when any `permissions` field is \
         there (the page's form always sends them, so its ticked boxes become the role's \
         grants).",
    )
    .property(CSRF_FIELD, csrf_field())
    .required(CSRF_FIELD)
    .property("description", role_description())
    .property("permissions", RefOr::T(grants().build().into()))
    .build()
    .into()
}

/// The scope and target of a tool access policy, each scope with the targets it takes.
fn policy_targets() -> RefOr<Schema> {
    let alternative = |scopes: &[&str], target: String| {
        RefOr::T(Schema::from(
            ObjectBuilder::new()
                .property(
                    "scope",
                    RefOr::T(string().enum_values(Some(scopes.to_vec())).build().into()),
                )
                .required("scope")
                .property(
                    "target_id",
                    RefOr::T(string().pattern(Some(target)).build().into()),
                )
                .required("target_id")
                .build(),
        ))
    };
    let id = "(?:_?[A-Za-z0-9-]){1,64}_?";
    RefOr::T(
        AnyOfBuilder::new()
            .item(alternative(
                &["provider", "mcp_server", "group"],
                format!("^[{BLANK}]*{id}[{BLANK}]*$"),
            ))
            .item(alternative(
                &["tool"],
                format!("^[{BLANK}]*{id}__[^{BLANK_OR_CONTROL}/]{{1,64}}[{BLANK}]*$"),
            ))
            .build()
            .into(),
    )
}

fn policy_fields(description: &str) -> ObjectBuilder {
    form(description)
        .property(CSRF_FIELD, csrf_field())
        .required(CSRF_FIELD)
        .property(
            "scope",
            RefOr::T(
                string()
                    .enum_values(Some(["provider", "mcp_server", "group", "tool"]))
                    .description(Some(
                        "What the policy is on: a server (`provider`, or its alias \
                         `mcp_server`), a group, or one tool.",
                    ))
                    .build()
                    .into(),
            ),
        )
        .required("scope")
        .property(
            "target_id",
            field(
                "A server or group id, or `{id}__{tool}` for one tool (whitespace around it is \
                 dropped). A target its scope does not take answers 422.",
            ),
        )
        .required("target_id")
}

/// A tool access policy, as `POST /api/auth/policies/{scope}/{target_id}` takes it.
fn policy_form() -> Schema {
    let pattern = format!(
        r"(?:\*|(?:user|group|service):(?:\*|[^{BLANK_OR_CONTROL}*](?:[^{CONTROL}*]{{0,62}}[^{BLANK_OR_CONTROL}*])?))"
    );
    // One pattern or more, one per line, blank lines and whitespace around them allowed.
    let some = format!("{pattern}(?:[{BLANK}]*\\n[{BLANK}\\n]*{pattern})*");
    let lines = |required: bool| {
        let body = if required {
            some.clone()
        } else {
            format!("(?:{some})?")
        };
        RefOr::T(
            string()
                .pattern(Some(format!("^[{BLANK}\\n]*{body}[{BLANK}\\n]*$")))
                .build()
                .into(),
        )
    };
    let fields = policy_fields(
        "A tool access policy: where it applies, whom it admits and whom it refuses. It \
         replaces the policy already there. At least one list holds a pattern; both blank \
         answers 422 with the API's message.",
    )
    .property(
        "allow_list",
        field(
            "Principal patterns admitted, one per line (`user:alice`, `group:ops`, `service:*`, \
             `*`); blank lines and whitespace around patterns are dropped. Blank: everyone the \
             deny list does not refuse.",
        ),
    )
    .property(
        "deny_list",
        field("Principal patterns refused, one per line; deny wins over allow."),
    )
    .build();
    // Each list one pattern per line; one of them not blank.
    let holding = |full: &str, other: &str| {
        RefOr::T(Schema::from(
            ObjectBuilder::new()
                .property(full, lines(true))
                .required(full)
                .property(other, lines(false))
                .build(),
        ))
    };
    AllOfBuilder::new()
        .item(RefOr::T(fields.into()))
        .item(policy_targets())
        .item(RefOr::T(
            AnyOfBuilder::new()
                .item(holding("allow_list", "deny_list"))
                .item(holding("deny_list", "allow_list"))
                .build()
                .into(),
        ))
        .build()
        .into()
}

/// Which tool access policy to clear.
fn policy_target_form() -> Schema {
    AllOfBuilder::new()
        .item(RefOr::T(
            policy_fields("The tool access policy to clear: its scope and target.")
                .build()
                .into(),
        ))
        .item(policy_targets())
        .build()
        .into()
}

fn tool_form() -> Schema {
    form(
        "The tool's arguments. A tool whose input schema lists properties has one field per \
         property, `arg.<property>`, typed as the schema says (a number, `true` or `false`, JSON \
         for objects and arrays, text otherwise; empty fields are left out); a tool without \
         them takes `arguments`, a JSON object.",
    )
    .property(CSRF_FIELD, csrf_field())
    .required(CSRF_FIELD)
    .property(
        "arguments",
        field("The arguments as a JSON object, for a tool whose schema lists no properties."),
    )
    .additional_properties(Some(AdditionalProperties::RefOr(RefOr::T(text_schema(
        "`arg.<property>`: one argument",
    )))))
    .build()
    .into()
}

// ----- the routes -------------------------------------------------------------------------------

fn routes() -> Vec<Route> {
    use Access::{Public, Session, SessionIfAny};
    let server = || server_id("The server's id; one that cannot be an id names no server (404).");
    let no_server = || problem("no such server (McpServerNotFoundError)");
    let not_an_id = "a value that cannot be an id names nothing";
    vec![
        Route::get("/ui", "console_root", Public)
            .summary(
                "The console's address without the slash",
                "Redirects to `/ui/`.",
            )
            .answer("303", see_other("To `/ui/`", Some("^/ui/$"))),
        Route::get("/ui/", "overview_page", Session)
            .summary(
                "The overview",
                "Servers by state, calls per second, failed calls and latency over the last hour, \
                 and the servers failing now. It needs the permission of `GET /api/system`.",
            )
            .parameter(done())
            .answer("200", html("The overview page"))
            .answer(
                "303",
                see_other(
                    "A visitor whose roles do not open the overview is sent to the first section they open",
                    Some(CONSOLE_LOCATION),
                ),
            )
            .answer(
                "403",
                problem(
                    "the roles open no section of the console, or the policy engine refused \
                     (AccessDeniedError)",
                ),
            )
            .answer(
                "422",
                problem("the query string is invalid (ValidationError)"),
            ),
        Route::get("/ui/overview/live", "overview_live", Session)
            .summary(
                "The overview's figures alone",
                "The part of the overview that refreshes itself.",
            )
            .answer("200", html("The figures, an HTML fragment"))
            .answer(
                "403",
                problem("the roles do not open the overview (AccessDeniedError)"),
            ),
        Route::get("/ui/assets/{name}", "console_asset", Public)
            .summary(
                "The console's style sheet and scripts",
                "Compiled into the gateway; revalidated with an entity tag.",
            )
            .parameter(path(
                "name",
                string()
                    .enum_values(Some(["console.css", "console.js", "htmx.min.js"]))
                    .build(),
                "The file; any other name answers 404.",
            ))
            .parameter(parameter(
                "If-None-Match",
                ParameterIn::Header,
                string().build(),
                "An entity tag of an earlier answer: 304 when it is still the file's.",
            ))
            .answer(
                "200",
                ResponseBuilder::new()
                    .description("The file")
                    .content(
                        "text/css",
                        ContentBuilder::new()
                            .schema(Some(text_schema("console.css")))
                            .build(),
                    )
                    .content(
                        "text/javascript",
                        ContentBuilder::new()
                            .schema(Some(text_schema("console.js, htmx.min.js")))
                            .build(),
                    )
                    .header(
                        "ETag",
                        required_header(string().build(), "The file's entity tag"),
                    )
                    .build(),
            )
            .answer(
                "304",
                ResponseBuilder::new()
                    .description("`If-None-Match` names the file as it is")
                    .header(
                        "ETag",
                        required_header(string().build(), "The file's entity tag"),
                    )
                    .build(),
            )
            .answer("404", problem("no such file (NotFoundError)")),
        Route::get("/ui/login", "sign_in_page", Public)
            .summary(
                "The sign-in page",
                "The forms to sign in with an API key or a local user's password, and the link \
                 to single sign-on when it is configured. It sets the `mcpgw_login` cookie that \
                 the forms' token must match.",
            )
            .parameter(query(
                "next",
                string().build(),
                "The console page to go to after signing in (a path under `/ui/`, not the \
                 sign-in pages); anything else goes to `/ui/`.",
            ))
            .parameter(query(
                "done",
                string().build(),
                "`signed-out` shows that the session ended; other values show nothing.",
            ))
            .answer(
                "200",
                setting_cookies(
                    html("The sign-in page"),
                    "`mcpgw_login`: the forms' token, for 10 minutes",
                    true,
                ),
            )
            .answer(
                "303",
                see_other(
                    "Authentication is off, or a session is open: on to `next`",
                    Some(CONSOLE_LOCATION),
                ),
            )
            .answer(
                "422",
                problem("the query string is invalid (ValidationError)"),
            )
            .answer(
                "503",
                problem(
                    "the operating system gave no randomness for the token \
                     (ServiceUnavailableError)",
                ),
            ),
        sign_in_route(
            "/ui/login/key",
            "sign_in_with_key",
            "LoginKeyForm",
            "Sign in with an API key",
            "Opens a session for the key's principal; the session ends when the key is revoked \
             or expires.",
        ),
        sign_in_route(
            "/ui/login/password",
            "sign_in_with_password",
            "LoginPasswordForm",
            "Sign in with a local user's password",
            "Opens a session for `user:<name>`.",
        ),
        Route::get("/ui/login/sso", "sign_in_with_sso", Public)
            .summary(
                "Start single sign-on",
                "Sends the browser to the identity provider (`console.sso` in the \
                 configuration) and binds the sign-in to it with the `mcpgw_sso` cookie.",
            )
            .answer(
                "303",
                see_other(
                    "To the identity provider's authorization endpoint; with authentication \
                     off, to `/ui/`",
                    None,
                ),
            )
            .answer(
                "404",
                problem("single sign-on is not configured (NotFoundError)"),
            )
            .answer(
                "503",
                problem(
                    "the identity provider cannot be reached, or the operating system gave no \
                     randomness (ServiceUnavailableError)",
                ),
            ),
        Route::get("/ui/login/sso/callback", "finish_sso", Public)
            .summary(
                "Where the identity provider sends the browser back",
                "Finishes the sign-in begun in this browser and opens a session; the answer is \
                 a page that moves on to the console by itself.",
            )
            .parameter(query(
                "state",
                string().build(),
                "The sign-in's state, as the provider passes it back",
            ))
            .parameter(query("code", string().build(), "The authorization code"))
            .parameter(query("error", string().build(), "The provider's refusal"))
            .parameter(query(
                "error_description",
                string().build(),
                "What the provider said about its refusal",
            ))
            .parameter(cookie(
                SSO_COOKIE,
                "The browser binding that starting the sign-in set",
            ))
            .answer(
                "200",
                setting_cookies(
                    html("Signed in: a page that goes on to `/ui/`"),
                    "`mcpgw_session`: the new session",
                    true,
                ),
            )
            .answer(
                "303",
                see_other("Authentication is off: to `/ui/`", Some("^/ui/$")),
            )
            .answer(
                "401",
                html(
                    "The sign-in page, saying why: the provider refused, the sign-in is \
                     unknown, used, expired or began in another browser, or its token was \
                     refused",
                ),
            )
            .answer(
                "404",
                problem("single sign-on is not configured (NotFoundError)"),
            )
            .answer(
                "422",
                problem("`state` or `code` is missing (ValidationError)"),
            )
            .answer(
                "503",
                problem("no session could be opened (ServiceUnavailableError)"),
            ),
        Route::post("/ui/logout", "sign_out", SessionIfAny, "CsrfForm")
            .summary(
                "Sign out",
                "Ends the session on the gateway and clears its cookie. Without a session there \
                 is nothing to end, and the answer is the same redirect.",
            )
            .answer(
                "303",
                setting_cookies(
                    see_other(
                        "To `/ui/login?done=signed-out`",
                        Some(r"^/ui/login\?done=signed-out$"),
                    ),
                    "`mcpgw_session` cleared (when a session ended)",
                    false,
                ),
            ),
        Route::get("/ui/servers", "servers_page", Session)
            .summary(
                "The MCP servers",
                "The servers, filtered and a page of 50 at a time, with the actions the roles \
                 allow. It needs the permission of `GET /api/mcp_servers`.",
            )
            .parameter(search())
            .parameter(server_state())
            .parameter(page())
            .parameter(done())
            .answer("200", html("The list"))
            .answer(
                "403",
                problem("the roles do not open the list (AccessDeniedError)"),
            )
            .answer(
                "422",
                problem(
                    "`state` or `page` is not one the list takes, or the query string is \
                     invalid (ValidationError)",
                ),
            ),
        Route::post("/ui/servers", "create_server", Session, "NewServerForm")
            .summary(
                "Create a server",
                "Runs `POST /api/mcp_servers` with the definition the form describes. A \
                 refusal shows the form again, filled in, with the API's message and status.",
            )
            .answer(
                "303",
                see_other(
                    "Created: to the new server's page",
                    Some(r"^/ui/servers/[^/?]+\?done=created$"),
                ),
            )
            .answer(
                "409",
                html("The form again: a server or group with this id exists"),
            )
            .answer(
                "413",
                html("The form again: the definition is larger than the API's body limit"),
            )
            .answer(
                "422",
                html(
                    "The form again: the API refused the definition, `env` has a line without \
                     `=`, or `more` is not a YAML mapping",
                ),
            )
            .answer(
                "403",
                problem("the roles do not allow creating servers (AccessDeniedError)"),
            ),
        Route::get("/ui/servers-rows", "servers_rows", Session)
            .summary(
                "The list's rows alone",
                "The table body of `/ui/servers`, for its refresh; the same query.",
            )
            .parameter(search())
            .parameter(server_state())
            .parameter(page())
            .answer("200", html("The rows, an HTML fragment"))
            .answer(
                "403",
                problem("the roles do not open the list (AccessDeniedError)"),
            )
            .answer(
                "422",
                problem("`state` or `page` is not one the list takes (ValidationError)"),
            ),
        Route::get("/ui/new-server", "new_server_form", Session)
            .summary(
                "The form for a new server",
                "It needs the permission of `POST /api/mcp_servers`.",
            )
            .answer("200", html("The empty form"))
            .answer(
                "403",
                problem("the roles do not allow creating servers (AccessDeniedError)"),
            ),
        Route::get("/ui/servers/{id}", "server_page", Session)
            .summary(
                "A server's page",
                "Its definition (secrets masked), tools, health, a live tail of its stderr and \
                 its tool history. It needs the permission of `GET /api/mcp_servers/{id}`.",
            )
            .parameter(server())
            .parameter(done())
            .answer("200", html("The server's page"))
            .answer(
                "403",
                problem("the roles do not open this server (AccessDeniedError)"),
            )
            .answer("404", no_server())
            .answer(
                "422",
                problem("the query string is invalid (ValidationError)"),
            ),
        Route::post("/ui/servers/{id}", "update_server", Session, "ServerForm")
            .summary(
                "Replace a server's definition",
                "Runs `PUT /api/mcp_servers/{id}` with the definition the form describes; masked \
                 secrets keep their values. A refusal shows the form again with the API's \
                 message and status.",
            )
            .parameter(server())
            .answer(
                "303",
                see_other(
                    "Updated: to the server's page",
                    Some(r"^/ui/servers/[^/?]+\?done=updated$"),
                ),
            )
            .answer(
                "403",
                problem("the roles do not allow editing this server (AccessDeniedError)"),
            )
            .answer(
                "404",
                problem(
                    "no such server (McpServerNotFoundError); or the form again, when the \
                         server went away meanwhile",
                ),
            )
            .answer(
                "409",
                html("The form again: the server is declared in the configuration file"),
            )
            .answer(
                "413",
                html("The form again: the definition is larger than the API's body limit"),
            )
            .answer(
                "422",
                html(
                    "The form again: the API refused the definition, `env` has a line without \
                     `=`, or `more` is not a YAML mapping",
                ),
            ),
        Route::get("/ui/servers/{id}/live", "server_live", Session)
            .summary(
                "A server's state, health and stderr tail alone",
                "The part of the server's page that refreshes itself.",
            )
            .parameter(server())
            .answer("200", html("The live part, an HTML fragment"))
            .answer(
                "403",
                problem("the roles do not open this server (AccessDeniedError)"),
            )
            .answer("404", no_server()),
        Route::get("/ui/servers/{id}/edit", "edit_server_form", Session)
            .summary(
                "The form to edit a server",
                "Filled with its definition, secrets masked. It needs the permission of \
                 `PUT /api/mcp_servers/{id}`.",
            )
            .parameter(server())
            .answer("200", html("The filled form"))
            .answer(
                "403",
                problem("the roles do not allow editing this server (AccessDeniedError)"),
            )
            .answer("404", no_server())
            .answer(
                "409",
                problem("this server's definition cannot be edited here (ConflictError)"),
            ),
        Route::post(
            "/ui/servers/{id}/{action}",
            "act_on_server",
            Session,
            "CsrfForm",
        )
        .summary(
            "Start, stop, restart or delete a server",
            "Runs `POST /api/mcp_servers/{id}/start`, `.../stop`, both, or \
                 `DELETE /api/mcp_servers/{id}`, with their permissions.",
        )
        .parameter(server())
        .parameter(action(
            &["start", "stop", "restart", "delete"],
            "What to do; any other value answers 404.",
        ))
        .answer(
            "303",
            see_other(
                "Done: to the server's page (`?done=started`, `stopped`, `restarted`), or to \
                     the list after a delete",
                Some(CONSOLE_LOCATION),
            ),
        )
        .answer(
            "403",
            problem("the roles do not allow this action (AccessDeniedError)"),
        )
        .answer(
            "404",
            problem(&format!(
                "no such server (McpServerNotFoundError; {not_an_id}), or no such action \
                     (NotFoundError)"
            )),
        )
        .answer(
            "409",
            problem(
                "the server is declared in the configuration file or is a member of a \
                     group, and cannot be deleted (ConflictError)",
            ),
        )
        .answer(
            "503",
            problem(
                "the server could not start; the message says why \
                         (McpServerUnavailableError)",
            ),
        ),
        Route::get("/ui/tools", "tools_page", Session)
            .summary(
                "The tools",
                "The aggregated catalogue as the signed-in caller sees it at `/mcp`, searchable, \
                 50 at a time.",
            )
            .parameter(search())
            .parameter(page())
            .answer("200", html("The catalogue"))
            .answer(
                "404",
                problem(
                    "the MCP endpoint is not enabled, so there is no catalogue (NotFoundError)",
                ),
            )
            .answer(
                "422",
                problem(
                    "`page` is not a whole number from 1, or the query string is invalid \
                         (ValidationError)",
                ),
            ),
        Route::get("/ui/tools/{name}", "tool_page", Session)
            .summary(
                "A tool's page",
                "Its description, input schema and a form built from the schema.",
            )
            .parameter(tool_name())
            .answer("200", html("The tool's page"))
            .answer(
                "404",
                problem(
                    "no tool of this name that the caller may use, or no MCP endpoint \
                         (NotFoundError)",
                ),
            ),
        Route::post("/ui/tools/{name}", "call_tool", Session, "ToolCallForm")
            .summary(
                "Call a tool",
                "Through the MCP endpoint's front end, as the signed-in caller (its roles, tool \
                 policies and rate limits apply). The answer is the tool's page with the \
                 result, or with the refusal and its status.",
            )
            .parameter(tool_name())
            .answer(
                "200",
                html(
                    "The tool's page with the result (a result the tool marked as an error \
                      included)",
                ),
            )
            .answer(
                "404",
                problem(
                    "no tool of this name that the caller may use (NotFoundError); or the \
                         page with the front end's refusal",
                ),
            )
            .answer(
                "422",
                html(
                    "The tool's page: an argument does not fit its type, `arguments` is not a \
                      JSON object, or the front end refused the arguments",
                ),
            )
            .answer(
                "429",
                html("The tool's page: the caller's tool-call rate limit is exceeded"),
            )
            .answer(
                "502",
                html(
                    "The tool's page: the server owning the tool could not be started or \
                      reached, or answered with an error",
                ),
            )
            .answer(
                "504",
                html("The tool's page: the server did not answer in time"),
            ),
        Route::get("/ui/discovery", "discovery_page", Session)
            .summary(
                "Discovery",
                "Definitions that sources found and that wait for approval (secrets masked), and \
                 the quarantined ones with the reason. It needs the permission of \
                 `GET /api/discovery/pending`.",
            )
            .parameter(done())
            .answer(
                "200",
                html("The discovery page (saying so when discovery is not configured)"),
            )
            .answer(
                "403",
                problem("the roles do not open discovery (AccessDeniedError)"),
            )
            .answer(
                "422",
                problem("the query string is invalid (ValidationError)"),
            ),
        Route::post(
            "/ui/discovery/{id}/{action}",
            "decide_discovery",
            Session,
            "CsrfForm",
        )
        .summary(
            "Approve or reject a pending definition",
            "Runs `POST /api/discovery/approve/{name}` or `.../reject/{name}`, with their \
                 permissions.",
        )
        .parameter(path(
            "id",
            crate::dto::McpServerId::schema(),
            "The pending definition's name",
        ))
        .parameter(action(
            &["approve", "reject"],
            "What to do; any other value answers 404.",
        ))
        .answer(
            "303",
            see_other(
                "Done: to `/ui/discovery?done=approved` or `?done=rejected`",
                Some(r"^/ui/discovery\?done=(?:approved|rejected)$"),
            ),
        )
        .answer(
            "403",
            problem("the roles do not allow this decision (AccessDeniedError)"),
        )
        .answer(
            "404",
            problem(
                "no pending definition of this name (DiscoveredServerNotFoundError), \
                     discovery is not configured, or no such action (NotFoundError)",
            ),
        )
        .answer(
            "409",
            problem(
                "a server with this id exists that this source did not discover \
                     (ConflictError)",
            ),
        ),
        Route::get("/ui/groups", "groups_page", Session)
            .summary(
                "The groups",
                "Each load-balanced group with its strategy, state and members. It needs the \
                 permission of `GET /api/groups`.",
            )
            .parameter(done())
            .answer(
                "200",
                html("The groups page (saying so when groups are not enabled)"),
            )
            .answer(
                "403",
                problem("the roles do not open the groups (AccessDeniedError)"),
            )
            .answer(
                "422",
                problem("the query string is invalid (ValidationError)"),
            ),
        Route::post(
            "/ui/groups/{id}/rebalance",
            "rebalance_group",
            Session,
            "CsrfForm",
        )
        .summary(
            "Rebalance a group",
            "Runs `POST /api/groups/{id}/rebalance`, with its permission.",
        )
        .parameter(path(
            "id",
            crate::dto::McpServerId::schema(),
            "The group's id; one that cannot be an id names no group (404).",
        ))
        .answer(
            "303",
            see_other(
                "Done: to `/ui/groups?done=rebalanced`",
                Some(r"^/ui/groups\?done=rebalanced$"),
            ),
        )
        .answer(
            "403",
            problem("the roles do not allow rebalancing it (AccessDeniedError)"),
        )
        .answer(
            "404",
            problem(
                "no such group (GroupNotFoundError), or groups are not enabled \
                         (NotFoundError)",
            ),
        ),
        Route::get("/ui/events", "events_page", Session)
            .summary(
                "The event stream",
                "The page that shows the gateway's events as they happen (its script opens \
                 `/api/ws/events` with the session), filtered as the stream filters. It needs \
                 the permission of `GET /api/ws/events`.",
            )
            .parameter(query(
                "event_types",
                string().build(),
                "Comma-separated event types to show; empty: every type. An unknown type \
                 answers 422.",
            ))
            .parameter(query(
                "mcp_server_ids",
                string().build(),
                "Comma-separated server or group ids whose events to show; empty: every one. \
                 A value that is not an id answers 422.",
            ))
            .answer("200", html("The events page"))
            .answer(
                "403",
                problem("the roles do not open the event stream (AccessDeniedError)"),
            )
            .answer(
                "422",
                problem(
                    "a filter names an unknown event type or an invalid id, or the query \
                         string is invalid (ValidationError)",
                ),
            ),
        Route::get("/ui/config", "configuration_page", Session)
            .summary(
                "The configuration",
                "How the configuration file differs from what runs, secrets masked on both \
                 sides. It needs the permission of `GET /api/config/diff`.",
            )
            .answer(
                "200",
                html("The configuration page (saying so when there is no configuration service)"),
            )
            .answer(
                "403",
                problem("the roles do not open it (AccessDeniedError)"),
            )
            .answer(
                "409",
                problem("the gateway was started without a configuration file (ConflictError)"),
            )
            .answer(
                "422",
                problem(
                    "the file on disk is invalid; the message lists every error \
                         (ValidationError)",
                ),
            )
            .answer(
                "503",
                problem("the file could not be read (ServiceUnavailableError)"),
            ),
        Route::post(
            "/ui/config/{action}",
            "act_on_configuration",
            Session,
            "CsrfForm",
        )
        .summary(
            "Reload or back up the configuration file",
            "Runs `POST /api/config/reload` or `POST /api/config/backup`, with their \
                 permissions. The answer is the configuration page with what the action did, \
                 or with why it was refused and the API's status (an invalid file changes \
                 nothing).",
        )
        .parameter(action(
            &["reload", "backup"],
            "What to do; any other value answers 404.",
        ))
        .answer(
            "200",
            html("The configuration page with what the reload changed, or the backup's path"),
        )
        .answer(
            "403",
            problem("the roles do not allow this action (AccessDeniedError)"),
        )
        .answer(
            "404",
            problem("no such action, or no configuration service (NotFoundError)"),
        )
        .answer(
            "409",
            html(
                "The page, or the error page: the gateway was started without a \
                      configuration file (ConflictError)",
            ),
        )
        .answer(
            "422",
            html(
                "The page, or the error page: the file is invalid and nothing changed \
                      (ValidationError)",
            ),
        )
        .answer(
            "503",
            html(
                "The page, or the error page: the file could not be read or its \
                      directory cannot be written (ServiceUnavailableError)",
            ),
        ),
        Route::get("/ui/access", "access_page", Session)
            .summary(
                "Access",
                "API keys, who holds which role, the tool access policies and the roles with \
                 what they grant, with the forms that change them (each shown only when the \
                 roles allow its REST route), and \"why is this denied\": what the gateway \
                 decides when a principal calls a tool, by any name a client sees at `/mcp`. \
                 It needs the permission of `GET /api/auth/keys`.",
            )
            .parameter(done())
            .parameter(query(
                "principal",
                string()
                    .pattern(Some(format!("^{}$", principal_text())))
                    .build(),
                "Why is this denied: the principal that calls; needed when `tool` is given.",
            ))
            .parameter(query(
                "groups",
                string()
                    .pattern(Some(format!("^[^{CONTROL}*]*$")))
                    .max_length(Some(64))
                    .build(),
                "Why is this denied: the principal's groups, comma-separated, as its identity \
                 provider reports them.",
            ))
            .parameter(query(
                "tool",
                string().build(),
                "Why is this denied: the tool as clients see it at `/mcp` (a server's or a \
                 group's prefixed name, or a bare name when the gateway lists it bare). Given \
                 and not blank, it asks the question; blank or absent, none is asked.",
            ))
            .answer(
                "200",
                html("The access page, with the answer when a question was asked"),
            )
            .answer(
                "403",
                problem("the roles do not open it (AccessDeniedError)"),
            )
            .answer(
                "404",
                html(
                    "The access page with the message: no client sees a tool of that name, or \
                     authentication is not enabled (NotFoundError)",
                ),
            )
            .answer(
                "422",
                problem("the query string is invalid (ValidationError)"),
            )
            .answer(
                "422",
                html(
                    "The access page with the message: a tool is given but the principal is \
                     missing, or the principal or a group is invalid (ValidationError)",
                ),
            ),
        Route::post("/ui/access/keys", "create_key", Session, "KeyForm")
            .summary(
                "Make an API key",
                "As `POST /api/auth/keys` does; the raw key is shown on the answer and never \
                 again.",
            )
            .answer("201", html("The access page showing the new key once"))
            .answer(
                "403",
                problem("the roles do not allow making keys (AccessDeniedError)"),
            )
            .answer(
                "404",
                problem(
                    "authentication is not enabled in this gateway (NotFoundError); or the \
                         access page: `role` names no role",
                ),
            )
            .answer(
                "422",
                html(
                    "The access page with the API's message: a field is missing or invalid, or \
                      `expires_in_days` is not a whole number",
                ),
            ),
        Route::post(
            "/ui/access/keys/{id}/revoke",
            "revoke_key",
            Session,
            "CsrfForm",
        )
        .summary(
            "Revoke an API key",
            "As `DELETE /api/auth/keys/{key_id}` does; every console session opened with \
                 the key ends.",
        )
        .parameter(path(
            "id",
            crate::dto::ApiKeyId::schema(),
            "The key's `key_id`",
        ))
        .answer(
            "303",
            see_other(
                "Revoked: to `/ui/access?done=revoked`",
                Some(r"^/ui/access\?done=revoked$"),
            ),
        )
        .answer(
            "403",
            problem("the roles do not allow revoking keys (AccessDeniedError)"),
        )
        .answer(
            "404",
            problem(
                "no such key, or a value that cannot be a key id (ApiKeyNotFoundError), \
                         or authentication is not enabled (NotFoundError)",
            ),
        ),
        Route::post(
            "/ui/access/assignments",
            "assign_role",
            Session,
            "AssignmentForm",
        )
        .summary(
            "Assign a role",
            "As `POST /api/auth/roles/assign` does; assigning a role the principal already \
             holds in that scope changes nothing.",
        )
        .answer(
            "303",
            see_other(
                "Assigned: to `/ui/access?done=assigned`",
                Some(r"^/ui/access\?done=assigned$"),
            ),
        )
        .answer(
            "403",
            problem("the roles do not allow assigning roles (AccessDeniedError)"),
        )
        .answer(
            "404",
            html(
                "The access page with the API's message: `role` names no role \
                 (RoleNotFoundError), or authentication is not enabled (NotFoundError)",
            ),
        )
        .answer(
            "422",
            html(
                "The access page, filled in, with the API's message: the principal, role or \
                 scope is missing or invalid (ValidationError)",
            ),
        ),
        Route::post(
            "/ui/access/assignments/revoke",
            "revoke_role",
            Session,
            "AssignmentForm",
        )
        .summary(
            "Revoke a role from a principal",
            "As `DELETE /api/auth/roles/revoke` does. An assignment of the configuration file \
             is not revoked here, as the API does not revoke it.",
        )
        .answer(
            "303",
            see_other(
                "Revoked: to `/ui/access?done=unassigned`",
                Some(r"^/ui/access\?done=unassigned$"),
            ),
        )
        .answer(
            "403",
            problem("the roles do not allow revoking roles (AccessDeniedError)"),
        )
        .answer(
            "404",
            html(
                "The access page with the API's message: the principal does not hold the role \
                 in this scope (RoleAssignmentNotFoundError), or authentication is not enabled \
                 (NotFoundError)",
            ),
        )
        .answer(
            "409",
            html(
                "The access page with the API's message: the assignment comes from the \
                 configuration file (ConflictError)",
            ),
        )
        .answer(
            "422",
            html(
                "The access page with the API's message: the principal, role or scope is \
                 missing or invalid (ValidationError)",
            ),
        ),
        Route::post("/ui/access/roles", "create_role", Session, "RoleForm")
            .summary("Make a custom role", "As `POST /api/auth/roles` does.")
            .answer(
                "303",
                see_other(
                    "Created: to `/ui/access?done=role-created`",
                    Some(r"^/ui/access\?done=role-created$"),
                ),
            )
            .answer(
                "403",
                problem("the roles do not allow making roles (AccessDeniedError)"),
            )
            .answer(
                "404",
                html(
                    "The access page with the API's message: authentication is not enabled \
                     (NotFoundError)",
                ),
            )
            .answer(
                "409",
                html(
                    "The access page, filled in, with the API's message: a built-in role has \
                     the name (ConflictError), or a custom one does (RoleAlreadyExistsError)",
                ),
            )
            .answer(
                "422",
                html(
                    "The access page, filled in, with the API's message: the name, the \
                     description or a permission is missing or invalid, or a field is given \
                     twice (ValidationError)",
                ),
            ),
        Route::post(
            "/ui/access/roles/{name}",
            "update_role",
            Session,
            "RoleChangeForm",
        )
        .summary(
            "Change a custom role",
            "As `PATCH /api/auth/roles/{role_name}` does: only what the form gives changes.",
        )
        .parameter(role_name())
        .answer(
            "303",
            see_other(
                "Changed: to `/ui/access?done=role-updated`",
                Some(r"^/ui/access\?done=role-updated$"),
            ),
        )
        .answer(
            "403",
            problem("the roles do not allow changing roles (AccessDeniedError)"),
        )
        .answer(
            "404",
            html(
                "The access page with the API's message: no such role (RoleNotFoundError), or \
                 authentication is not enabled (NotFoundError)",
            ),
        )
        .answer(
            "409",
            html(
                "The access page with the API's message: the role is built in \
                 (ConflictError)",
            ),
        )
        .answer(
            "422",
            html(
                "The access page with the API's message: the description or a permission is \
                 invalid, or a field is given twice (ValidationError)",
            ),
        ),
        Route::post(
            "/ui/access/roles/{name}/delete",
            "delete_role",
            Session,
            "CsrfForm",
        )
        .summary(
            "Delete a custom role",
            "As `DELETE /api/auth/roles/{role_name}` does: only a custom role that nobody \
             holds.",
        )
        .parameter(role_name())
        .answer(
            "303",
            see_other(
                "Deleted: to `/ui/access?done=role-deleted`",
                Some(r"^/ui/access\?done=role-deleted$"),
            ),
        )
        .answer(
            "403",
            problem("the roles do not allow deleting roles (AccessDeniedError)"),
        )
        .answer(
            "404",
            html(
                "The access page with the API's message: no such role (RoleNotFoundError), or \
                 authentication is not enabled (NotFoundError)",
            ),
        )
        .answer(
            "409",
            html(
                "The access page with the API's message: the role is built in, or still \
                 assigned (ConflictError)",
            ),
        ),
        Route::post(
            "/ui/access/policies",
            "set_tool_policy",
            Session,
            "PolicyForm",
        )
        .summary(
            "Set a tool access policy",
            "As `POST /api/auth/policies/{scope}/{target_id}` does: sets the policy, replacing \
             any already on the target.",
        )
        .answer(
            "303",
            see_other(
                "Set: to `/ui/access?done=policy-set`",
                Some(r"^/ui/access\?done=policy-set$"),
            ),
        )
        .answer(
            "403",
            problem("the roles do not allow setting policies (AccessDeniedError)"),
        )
        .answer(
            "404",
            html(
                "The access page with the API's message: authentication is not enabled \
                 (NotFoundError)",
            ),
        )
        .answer(
            "422",
            html(
                "The access page, filled in, with the API's message: an unknown scope, a target \
                 the scope does not take, a bad principal pattern, or both lists blank \
                 (ValidationError)",
            ),
        ),
        Route::post(
            "/ui/access/policies/delete",
            "delete_tool_policy",
            Session,
            "PolicyTargetForm",
        )
        .summary(
            "Clear a tool access policy",
            "As `DELETE /api/auth/policies/{scope}/{target_id}` does.",
        )
        .answer(
            "303",
            see_other(
                "Cleared: to `/ui/access?done=policy-deleted`",
                Some(r"^/ui/access\?done=policy-deleted$"),
            ),
        )
        .answer(
            "403",
            problem("the roles do not allow clearing policies (AccessDeniedError)"),
        )
        .answer(
            "404",
            html(
                "The access page with the API's message: no policy is set there \
                 (ToolAccessPolicyNotFoundError), or authentication is not enabled \
                 (NotFoundError)",
            ),
        )
        .answer(
            "422",
            html(
                "The access page with the API's message: an unknown scope or a target the \
                 scope does not take (ValidationError)",
            ),
        ),
        Route::get(CONSOLE_OPENAPI_PATH, "console_openapi_document", Public)
            .summary("This document", "Public: it lists routes and shapes only.")
            .answer(
                "200",
                ResponseBuilder::new()
                    .description("The OpenAPI 3.1 document of the console")
                    .content(
                        "application/json",
                        ContentBuilder::new()
                            .schema(Some(ObjectBuilder::new().schema_type(Type::Object).build()))
                            .build(),
                    )
                    .build(),
            ),
    ]
}

fn sign_in_route(
    path: &'static str,
    id: &'static str,
    form: &'static str,
    summary: &'static str,
    description: &'static str,
) -> Route {
    Route::post(path, id, Access::Public, form)
        .summary(summary, description)
        .parameter(cookie(
            LOGIN_COOKIE,
            "The sign-in page's token, which the form's `login_token` must match",
        ))
        .answer(
            "303",
            setting_cookies(
                see_other(
                    "Signed in: on to `next` with the session's cookie. With authentication off: \
                     to `/ui/`",
                    Some(CONSOLE_LOCATION),
                ),
                "`mcpgw_session`: the new session (`HttpOnly`, `SameSite=Strict`); \
                 `mcpgw_login` cleared",
                false,
            ),
        )
        .answer(
            "401",
            html("The sign-in page again: the credentials are missing or wrong (AuthenticationError)"),
        )
        .answer(
            "403",
            problem(
                "the form did not come from this gateway's sign-in page: its `login_token` does \
                 not match the `mcpgw_login` cookie, or the page is older than 10 minutes \
                 (AccessDeniedError)",
            ),
        )
        .answer(
            "429",
            ResponseBuilder::from(html(
                "The sign-in page again: this address is locked out after repeated failed \
                 sign-ins",
            ))
            .header(
                "Retry-After",
                required_header(
                    ObjectBuilder::new().schema_type(Type::Integer).build(),
                    "Seconds until the lockout ends",
                ),
            )
            .build(),
        )
        .answer(
            "503",
            problem(
                "no session could be opened, or a dependency of sign-in is unavailable \
                 (ServiceUnavailableError)",
            ),
        )
}

fn server_state() -> Parameter {
    query(
        "state",
        string()
            .enum_values(Some([
                "",
                "cold",
                "initializing",
                "ready",
                "degraded",
                "dead",
            ]))
            .build(),
        "Shows only the servers in this state; empty: every state. Anything else answers 422.",
    )
}

fn tool_name() -> Parameter {
    path(
        "name",
        string().min_length(Some(1)).build(),
        "The tool's aggregated name, `{server_id}__{tool}`",
    )
}

// ----- what every route shares ------------------------------------------------------------------

/// Adds `response` under `status`, or joins it to the answer already there: the descriptions
/// run on, and the content types and headers of both are kept.
fn add_answer(responses: &mut Vec<(String, Response)>, status: &str, response: Response) {
    match responses.iter_mut().find(|(have, _)| have == status) {
        Some((_, existing)) => {
            existing.description = format!("{}; or {}", existing.description, response.description);
            for (media, content) in response.content {
                existing.content.entry(media).or_insert(content);
            }
            for (name, header) in response.headers {
                existing.headers.entry(name).or_insert(header);
            }
        }
        None => responses.push((status.to_owned(), response)),
    }
}

/// The route as an operation, with the answers every route shares.
fn with_shared_answers(route: Route) -> Operation {
    let is_get = matches!(route.method, HttpMethod::Get);
    let mut answers: Vec<(String, Response)> = Vec::new();
    for (status, response) in route.answers {
        add_answer(&mut answers, status, response);
    }
    let mut parameters = route.parameters;
    if route.access == Access::Session {
        if is_get {
            add_answer(
                &mut answers,
                "303",
                see_other(
                    "Authentication is on and there is no session (or it ended): to the sign-in \
                     page, which comes back here afterwards",
                    Some(CONSOLE_LOCATION),
                ),
            );
            add_answer(
                &mut answers,
                "401",
                problem(
                    "authentication is on, there is no session, and the request is htmx's \
                     (`HX-Request`), which cannot follow a redirect to a page \
                     (AuthenticationError)",
                ),
            );
            parameters.push(parameter(
                HTMX_HEADER,
                ParameterIn::Header,
                string().enum_values(Some(["true"])).build(),
                "Sent by htmx when it fetches a part of a page: without a session the answer is \
                 then 401 instead of the redirect.",
            ));
        } else {
            add_answer(
                &mut answers,
                "401",
                problem(
                    "authentication is on and there is no session, or it ended \
                     (AuthenticationError)",
                ),
            );
        }
    }
    if !is_get {
        add_answer(
            &mut answers,
            "403",
            problem("the form does not carry this session's CSRF token (AccessDeniedError)"),
        );
        add_answer(
            &mut answers,
            "403",
            envelope(
                "A web page on another site sent it: the request carries an `Origin` that is \
                 neither the gateway's own nor one of `MCP_CORS_ORIGINS` (ForbiddenOriginError)",
            ),
        );
        add_answer(
            &mut answers,
            "422",
            problem(&format!(
                "the form cannot be read: it repeats a field or a field's value is not what \
                 the page takes ({})",
                names::VALIDATION
            )),
        );
        add_answer(
            &mut answers,
            "413",
            problem(&format!(
                "the form is larger than {} KiB ({})",
                FORM_LIMIT_BYTES / 1024,
                names::PAYLOAD_TOO_LARGE
            )),
        );
        add_answer(
            &mut answers,
            "415",
            problem(&format!(
                "the body is not declared `application/x-www-form-urlencoded` ({})",
                names::UNSUPPORTED_MEDIA_TYPE
            )),
        );
        add_answer(
            &mut answers,
            "408",
            problem(&format!(
                "the form did not arrive within the body timeout ({})",
                names::REQUEST_TIMEOUT
            )),
        );
        add_answer(
            &mut answers,
            "400",
            problem(&format!(
                "the form's bytes could not be read ({})",
                names::BAD_REQUEST
            )),
        );
    }
    add_answer(
        &mut answers,
        "421",
        envelope(
            "The Host header does not name the gateway: not a loopback name or address, not an \
             address of a non-loopback listener, not a name in `allowed_hosts` \
             (MisdirectedRequestError)",
        ),
    );
    add_answer(
        &mut answers,
        "431",
        envelope(
            "The request's header names and values together exceed the header limit \
             (RequestHeaderFieldsTooLargeError)",
        ),
    );
    if route.path != CONSOLE_OPENAPI_PATH && route.path != "/ui" {
        add_answer(
            &mut answers,
            "500",
            problem(
                "an unexpected failure inside the gateway; the detail is only in its log \
                 (InternalServerError)",
            ),
        );
    }
    answers.sort_by(|(a, _), (b, _)| a.cmp(b));
    let mut operation = OperationBuilder::new()
        .tag("console")
        .operation_id(Some(route.id))
        .summary(Some(route.summary))
        .description(Some(route.description))
        .parameters(Some(parameters));
    if let Some(form) = route.form {
        operation = operation.request_body(Some(
            RequestBodyBuilder::new()
                .required(Some(Required::True))
                .content(
                    "application/x-www-form-urlencoded",
                    ContentBuilder::new()
                        .schema(Some(Ref::from_schema_name(form)))
                        .build(),
                )
                .build(),
        ));
    }
    match route.access {
        Access::Public => {}
        Access::Session => {
            operation = operation.security(SecurityRequirement::new(
                SESSION_SCHEME,
                Vec::<String>::new(),
            ));
        }
        Access::SessionIfAny => {
            operation = operation
                .security(SecurityRequirement::new(
                    SESSION_SCHEME,
                    Vec::<String>::new(),
                ))
                .security(SecurityRequirement::default());
        }
    }
    for (status, response) in answers {
        operation = operation.response(status, response);
    }
    operation.build()
}

const DESCRIPTION: &str = "The web console of the mcpgw MCP server gateway: server-rendered HTML \
pages for operators, and the forms behind their buttons. Not an API to program against (that is \
`/api/`, described at `/api/openapi.json`); this document lists the console's routes and what \
each answers, so that the console can be checked like the API.\n\n\
**Sessions.** With authentication on, every route but the sign-in pages, the assets and this \
document needs a session: the `mcpgw_session` cookie that signing in sets. Without one, a page \
(a `GET` that is not htmx's) redirects with 303 to `/ui/login?next=<page>`, and anything else \
answers 401. With authentication off, the console opens without signing in.\n\n\
**Forms** are `application/x-www-form-urlencoded`, at most 256 KiB, and carry the session's CSRF \
token in `csrf_token` (403 without it). The sign-in forms, before there is a session, carry \
instead a `login_token` that must match the `mcpgw_login` cookie the sign-in page set.\n\n\
**Errors** are HTML pages with the status and the error's name (`data-error` on the alert \
paragraph, the same names as the API's error envelope); a form that the API behind it refuses is \
shown again, filled in, with the API's message and status. The checks in front of every route \
answer in the API's JSON envelope: 421 `MisdirectedRequestError` for a `Host` that does not name \
the gateway, 431 for headers over the limit, and 403 `ForbiddenOriginError` for a post from a \
page on another site. A method a route does not take answers 405 `MethodNotAllowedError` (a \
page, with `Allow`); a path under `/ui/` that is not listed here answers 404 `NotFoundError`. A \
gateway with the console turned off answers 404 for every path under `/ui/`, this one \
included.\n\n\
**Single sign-on** needs an identity provider (`console.sso`); without one, its two routes \
answer 404.";

/// The console's document, for a gateway of `version` that registered `launch_modes` besides
/// the built-in ones.
pub(crate) fn console_document(version: &str, launch_modes: &[String]) -> OpenApi {
    let mut paths = Paths::new();
    for route in routes() {
        let route_path = route.path;
        let method = route.method.clone();
        paths.add_path_operation(route_path, vec![method], with_shared_answers(route));
    }
    let login_fields = [(
        "api_key",
        "The API key; whitespace around it is dropped. Empty: the page again, 401.",
    )];
    let password_fields = [
        (
            "user_name",
            "The local user's name (whitespace around it is dropped).",
        ),
        ("password", "The user's password."),
    ];
    let components = ComponentsBuilder::new()
        .schema("ErrorEnvelope", ErrorEnvelope::schema())
        .schema("CsrfForm", csrf_form())
        .schema(
            "LoginKeyForm",
            sign_in_form("Signing in with an API key.", &login_fields),
        )
        .schema(
            "LoginPasswordForm",
            sign_in_form("Signing in with a local user's password.", &password_fields),
        )
        .schema("NewServerForm", server_form(launch_modes, true))
        .schema("ServerForm", server_form(launch_modes, false))
        .schema("KeyForm", key_form())
        .schema("AssignmentForm", assignment_form())
        .schema("RoleForm", role_form())
        .schema("RoleChangeForm", role_change_form())
        .schema("PolicyForm", policy_form())
        .schema("PolicyTargetForm", policy_target_form())
        .schema("ToolCallForm", tool_form())
        .security_scheme(
            SESSION_SCHEME,
            SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::with_description(
                SESSION_COOKIE,
                "The console session that signing in opens (`HttpOnly`, `SameSite=Strict`). \
                 Needed only while authentication is on.",
            ))),
        )
        .build();
    OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("mcpgw web console")
                .version(version)
                .description(Some(DESCRIPTION))
                .license(Some(
                    LicenseBuilder::new()
                        .name("Apache-2.0")
                        .identifier(Some("Apache-2.0"))
                        .build(),
                )),
        )
        .paths(paths)
        .components(Some(components))
        .tags(Some([TagBuilder::new()
            .name("console")
            .description(Some("The web console under `/ui/`"))
            .build()]))
        .build()
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn console_json() -> Value {
        serde_json::to_value(console_document("test", &["in_process".to_owned()])).unwrap()
    }

    fn operations(document: &Value) -> Vec<(String, String, Value)> {
        document["paths"]
            .as_object()
            .unwrap()
            .iter()
            .flat_map(|(path, item)| {
                item.as_object()
                    .unwrap()
                    .iter()
                    .map(|(method, operation)| (path.clone(), method.clone(), operation.clone()))
            })
            .collect()
    }

    #[test]
    fn the_document_is_openapi_3_1_and_describes_the_console_alone() {
        let document = console_json();
        assert_eq!(document["openapi"], "3.1.0");
        assert_eq!(document["info"]["version"], "test");
        let described = operations(&document);
        assert!(
            described.iter().all(|(path, _, _)| path.starts_with("/ui")),
            "an API route in the console's document"
        );
        // Each operation has its own id.
        let mut ids: Vec<&str> = described
            .iter()
            .map(|(_, _, operation)| operation["operationId"].as_str().unwrap())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), described.len());
    }

    /// Every route that `mount` serves, read from its source as `METHOD path`: each
    /// `.service(resource(<path>, <allow>)...)` with its `web::get()` and `web::post()` routes (the
    /// catch-all 404 of unknown pages left out).
    fn mounted_routes() -> Vec<String> {
        let source = include_str!("mod.rs");
        let mount = &source[source
            .find("pub(crate) fn mount(")
            .expect("mount() is in mod.rs")..];
        let mut routes = Vec::new();
        for service in mount.split(".service(").skip(1) {
            if !service.contains(".route(") {
                continue;
            }
            let target = service
                .split("resource(")
                .nth(1)
                .and_then(|rest| rest.split(')').next())
                .and_then(|arguments| arguments.split(',').next())
                .expect("a resource")
                .trim();
            let path = match target {
                "CONSOLE_PATH" => super::super::CONSOLE_PATH.to_owned(),
                "openapi::CONSOLE_OPENAPI_PATH" => CONSOLE_OPENAPI_PATH.to_owned(),
                literal => literal.trim_matches('"').to_owned(),
            };
            assert!(
                path.starts_with("/ui"),
                "a route whose path is not read: {target}"
            );
            if path.contains("{tail") {
                continue;
            }
            for (method, marker) in [("GET", "web::get()"), ("POST", "web::post()")] {
                if service.contains(marker) {
                    routes.push(format!("{method} {path}"));
                }
            }
        }
        routes
    }

    #[test]
    fn every_mounted_route_is_in_the_document_and_nothing_else() {
        let document = console_json();
        let mut described: Vec<String> = operations(&document)
            .iter()
            .map(|(path, method, _)| format!("{} {path}", method.to_uppercase()))
            .collect();
        let mut mounted = mounted_routes();
        described.sort();
        mounted.sort();
        assert!(mounted.len() > 25, "{mounted:?}");
        // A route added to the console must be described here (and so reach the schema suite).
        assert_eq!(described, mounted);
    }

    #[test]
    fn pages_answer_html_and_the_shared_checks_answer_the_envelope() {
        let document = console_json();
        let envelope = "#/components/schemas/ErrorEnvelope";
        for (path, method, operation) in operations(&document) {
            let responses = operation["responses"].as_object().unwrap();
            for (status, response) in responses {
                let content = response["content"].as_object();
                let media: Vec<&String> = content.map(|c| c.keys().collect()).unwrap_or_default();
                match status.as_str() {
                    "421" | "431" => {
                        assert_eq!(
                            response["content"]["application/json"]["schema"]["$ref"], envelope,
                            "{status} of {method} {path}"
                        );
                    }
                    "303" => {
                        assert!(media.is_empty(), "{method} {path}");
                        assert_eq!(
                            response["headers"]["Location"]["required"], true,
                            "{method} {path}"
                        );
                    }
                    "304" => assert!(media.is_empty()),
                    _ if path == CONSOLE_OPENAPI_PATH => {
                        assert_eq!(media, ["application/json"]);
                    }
                    _ if path == "/ui/assets/{name}" && status == "200" => {
                        assert_eq!(media, ["text/css", "text/javascript"]);
                    }
                    "403" if method == "post" => {
                        assert_eq!(media, ["application/json", "text/html"], "{method} {path}");
                    }
                    _ => assert_eq!(media, ["text/html"], "{status} of {method} {path}"),
                }
            }
            for status in ["421", "431"] {
                assert!(
                    responses.contains_key(status),
                    "{status} of {method} {path}"
                );
            }
        }
    }

    #[test]
    fn routes_that_need_a_session_say_how_they_refuse_a_request_without_one() {
        let document = console_json();
        let scheme = &document["components"]["securitySchemes"][SESSION_SCHEME];
        assert_eq!(scheme["type"], "apiKey");
        assert_eq!(scheme["in"], "cookie");
        assert_eq!(scheme["name"], SESSION_COOKIE);
        let mut protected = 0;
        for (path, method, operation) in operations(&document) {
            let responses = &operation["responses"];
            let Some(security) = operation["security"].as_array() else {
                assert!(
                    responses.get("401").is_none() || path.starts_with("/ui/login"),
                    "{method} {path}"
                );
                continue;
            };
            if security.iter().any(|requirement| requirement == &json!({})) {
                // Signing out works without a session.
                assert_eq!(path, "/ui/logout");
                continue;
            }
            protected += 1;
            if method == "get" {
                assert!(
                    responses["303"]["description"]
                        .as_str()
                        .unwrap()
                        .contains("sign-in page"),
                    "{method} {path}"
                );
                let htmx = operation["parameters"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|parameter| parameter["name"] == HTMX_HEADER);
                assert!(htmx, "{method} {path}");
            }
            assert!(responses.get("401").is_some(), "{method} {path}");
        }
        assert!(
            protected >= 20,
            "only {protected} operations need a session"
        );
    }

    #[test]
    fn every_post_takes_a_form_with_its_token() {
        let document = console_json();
        let schemas = &document["components"]["schemas"];
        let mut posts = 0;
        for (path, method, operation) in operations(&document) {
            if method != "post" {
                assert!(operation.get("requestBody").is_none(), "{method} {path}");
                continue;
            }
            posts += 1;
            let body = &operation["requestBody"]["content"]["application/x-www-form-urlencoded"];
            let name = body["schema"]["$ref"]
                .as_str()
                .unwrap()
                .trim_start_matches("#/components/schemas/");
            // The server forms are `allOf` their fields and what each mode needs.
            let fields = schemas[name]
                .get("allOf")
                .map_or(&schemas[name], |parts| &parts[0]);
            let required = fields["required"].as_array().unwrap();
            let token = if path.starts_with("/ui/login") {
                "login_token"
            } else {
                CSRF_FIELD
            };
            assert!(required.contains(&json!(token)), "{path}: {required:?}");
            assert!(
                operation["responses"]["413"]["description"]
                    .as_str()
                    .unwrap()
                    .contains("256 KiB"),
                "{path}"
            );
            for status in ["400", "408", "415", "422"] {
                assert!(
                    operation["responses"].get(status).is_some(),
                    "{path} documents no {status}"
                );
            }
        }
        assert!(posts >= 10, "only {posts} posts");
        // The server form takes the registered launch modes too.
        for form in ["NewServerForm", "ServerForm"] {
            assert_eq!(
                schemas[form]["allOf"][0]["properties"]["mode"]["enum"],
                json!(["subprocess", "docker", "remote", "in_process"]),
                "{form}"
            );
            // One alternative per built-in mode, and one for the registered ones.
            assert_eq!(
                schemas[form]["allOf"][1]["anyOf"].as_array().unwrap().len(),
                4,
                "{form}"
            );
        }
        assert!(
            schemas["NewServerForm"]["allOf"][0]["required"]
                .as_array()
                .unwrap()
                .contains(&json!("mcp_server_id"))
        );
    }
}
