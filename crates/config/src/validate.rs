//! Semantic validation after parsing: ranges, required keys per mode, keys that belong to
//! another mode, references between servers and groups, and the formats of URLs, ids and
//! network ranges. It collects every problem instead of stopping at the first.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use mcpgw_core::{LaunchMode, ServerId};

use crate::error::ConfigErrorKind;
use crate::path::KeyPath;
use crate::schema::{
    AuthConfig, ClusterConfig, ConsoleConfig, DiscoveryConfig, EventLogConfig, GatewayConfig,
    OAuthConfig, RateLimitConfig, ServerDefinition, ServerMode, StoreConfig,
};
use crate::suggest::{nearest, quoted_list};

pub(crate) mod endpoints;
mod tool_names;

/// The range of a server's `idle_ttl_s`: (minimum, maximum), both allowed.
pub const IDLE_TTL_S: (u64, u64) = (1, 86_400);
/// The range of a server's `health_check_interval_s`: (minimum, maximum), both allowed.
pub const HEALTH_CHECK_INTERVAL_S: (u64, u64) = (5, 3_600);
/// The range of a server's `max_consecutive_failures`: (minimum, maximum), both allowed.
pub const MAX_CONSECUTIVE_FAILURES: (u64, u64) = (1, 100);
pub(crate) const TOOL_TIMEOUT_S: (u64, u64) = (1, 86_400);
pub(crate) const PROBE_CONCURRENCY: (u64, u64) = (1, 64);
pub(crate) const REFRESH_INTERVAL_S: (u64, u64) = (1, 86_400);
/// A century at most: beyond it the age in microseconds stops fitting the clock's range.
pub(crate) const EVENT_LOG_MAX_AGE_DAYS: (u64, u64) = (0, 36_500);
pub(crate) const COMPACTION_INTERVAL_S: (u64, u64) = (1, 86_400);

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finding {
    pub(crate) kind: ConfigErrorKind,
    pub(crate) path: KeyPath,
    pub(crate) message: String,
}

#[derive(Debug, Default)]
pub(crate) struct Findings {
    pub(crate) errors: Vec<Finding>,
    pub(crate) warnings: Vec<Finding>,
}

impl Findings {
    fn error(&mut self, kind: ConfigErrorKind, path: KeyPath, message: impl Into<String>) {
        self.errors.push(Finding {
            kind,
            path,
            message: message.into(),
        });
    }

    fn warning(&mut self, path: KeyPath, message: impl Into<String>) {
        self.warnings.push(Finding {
            kind: ConfigErrorKind::InvalidValue,
            path,
            message: message.into(),
        });
    }

    fn range(&mut self, path: KeyPath, value: u64, (minimum, maximum): (u64, u64)) {
        if !(minimum..=maximum).contains(&value) {
            self.error(
                ConfigErrorKind::OutOfRange,
                path,
                format!("must be between {minimum} and {maximum}, got {value}"),
            );
        }
    }
}

/// The modes a key can belong to: the built-in ones, and every registered mode at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyMode {
    Subprocess,
    Docker,
    Remote,
    Group,
    Registered,
}

impl KeyMode {
    fn of(mode: &ServerMode) -> Self {
        match mode {
            ServerMode::Subprocess => KeyMode::Subprocess,
            ServerMode::Docker => KeyMode::Docker,
            ServerMode::Remote => KeyMode::Remote,
            ServerMode::Group => KeyMode::Group,
            ServerMode::Registered(_) => KeyMode::Registered,
        }
    }

    /// The built-in mode's name; `None` for registered modes.
    fn built_in_name(self) -> Option<&'static str> {
        match self {
            KeyMode::Subprocess => Some("subprocess"),
            KeyMode::Docker => Some("docker"),
            KeyMode::Remote => Some("remote"),
            KeyMode::Group => Some("group"),
            KeyMode::Registered => None,
        }
    }
}

/// Which modes each mode-specific key of a server definition belongs to. `mode` and
/// `description` belong to all of them.
const SERVER_KEY_MODES: &[(&str, &[KeyMode])] = {
    use KeyMode::{Docker, Group, Registered, Remote, Subprocess};
    &[
        ("command", &[Subprocess, Docker]),
        ("env", &[Subprocess, Docker]),
        ("cwd", &[Subprocess]),
        ("idle_ttl_s", &[Subprocess, Docker, Remote, Registered]),
        (
            "health_check_interval_s",
            &[Subprocess, Docker, Remote, Registered],
        ),
        (
            "max_consecutive_failures",
            &[Subprocess, Docker, Remote, Registered],
        ),
        ("tools", &[Subprocess, Docker, Remote, Registered]),
        ("caller_meta", &[Subprocess, Docker, Remote, Registered]),
        ("tool_pinning", &[Subprocess, Docker, Remote, Registered]),
        ("image", &[Docker]),
        ("args", &[Docker]),
        ("network", &[Docker]),
        ("memory", &[Docker]),
        ("cpus", &[Docker]),
        ("read_only", &[Docker]),
        ("volumes", &[Docker]),
        ("runtime", &[Docker]),
        ("docker_host", &[Docker]),
        ("endpoint", &[Remote]),
        ("headers", &[Remote]),
        ("token_exchange", &[Remote]),
        ("settings", &[Registered]),
        ("strategy", &[Group]),
        ("min_healthy", &[Group]),
        ("members", &[Group]),
    ]
};

fn present_keys(definition: &ServerDefinition) -> Vec<&'static str> {
    let presence = [
        ("command", definition.command.is_some()),
        ("env", definition.env.is_some()),
        ("cwd", definition.cwd.is_some()),
        ("idle_ttl_s", definition.idle_ttl_s.is_some()),
        (
            "health_check_interval_s",
            definition.health_check_interval_s.is_some(),
        ),
        (
            "max_consecutive_failures",
            definition.max_consecutive_failures.is_some(),
        ),
        ("tools", definition.tools.is_some()),
        ("caller_meta", definition.caller_meta.is_some()),
        ("tool_pinning", definition.tool_pinning.is_some()),
        ("image", definition.image.is_some()),
        ("args", definition.args.is_some()),
        ("network", definition.network.is_some()),
        ("memory", definition.memory.is_some()),
        ("cpus", definition.cpus.is_some()),
        ("read_only", definition.read_only.is_some()),
        ("volumes", definition.volumes.is_some()),
        ("runtime", definition.runtime.is_some()),
        ("docker_host", definition.docker_host.is_some()),
        ("endpoint", definition.endpoint.is_some()),
        ("headers", definition.headers.is_some()),
        ("token_exchange", definition.token_exchange.is_some()),
        ("settings", definition.settings.is_some()),
        ("strategy", definition.strategy.is_some()),
        ("min_healthy", definition.min_healthy.is_some()),
        ("members", definition.members.is_some()),
    ];
    presence
        .into_iter()
        .filter(|(_, present)| *present)
        .map(|(key, _)| key)
        .collect()
}

fn modes_of(key: &str) -> &'static [KeyMode] {
    SERVER_KEY_MODES
        .iter()
        .find(|(name, _)| *name == key)
        .map_or(&[], |(_, modes)| modes)
}

/// Whether `key` may be given; with an unknown mode, every key may.
fn belongs(key: &str, mode: Option<KeyMode>) -> bool {
    mode.is_none_or(|mode| modes_of(key).contains(&mode))
}

/// Where a key is used, for the message that says it does not belong to a mode.
fn used_with(key: &str) -> String {
    let built_in: Vec<&str> = modes_of(key)
        .iter()
        .filter_map(|mode| mode.built_in_name())
        .collect();
    if built_in.is_empty() {
        "it is used with modes registered by the gateway's embedder".to_owned()
    } else {
        format!("it is used with mode {}", quoted_list(&built_in))
    }
}

pub(crate) fn validate_config(config: &GatewayConfig, options: &crate::ParseOptions) -> Findings {
    let mut findings = Findings::default();
    let servers_path = KeyPath::root().key("mcp_servers");
    for (id, definition) in &config.mcp_servers {
        let path = servers_path.key(id.as_str());
        validate_server_id(id, &path, &mut findings);
        validate_server(id, definition, &path, &options.launch_modes, &mut findings);
        if definition.mode == Some(ServerMode::Group) {
            validate_member_references(id, definition, &path, &config.mcp_servers, &mut findings);
        }
    }
    if let Some(discovery) = &config.discovery {
        validate_discovery(
            discovery,
            &options.discovery_source_types,
            &KeyPath::root().key("discovery"),
            &mut findings,
        );
    }
    validate_auth(&config.auth, &KeyPath::root().key("auth"), &mut findings);
    validate_console(
        &config.console,
        &KeyPath::root().key("console"),
        &mut findings,
    );
    validate_rate_limit(
        &config.rate_limit,
        &KeyPath::root().key("rate_limit"),
        &mut findings,
    );
    validate_event_log(
        &config.event_log,
        &KeyPath::root().key("event_log"),
        &mut findings,
    );
    crate::audit::validate_audit(&config.audit, &KeyPath::root().key("audit"), &mut findings);
    crate::telemetry::validate_telemetry(
        &config.telemetry,
        &KeyPath::root().key("telemetry"),
        &mut findings,
    );
    if let Some(store) = &config.store {
        validate_store(store, &KeyPath::root().key("store"), &mut findings);
    }
    validate_cluster(
        &config.cluster,
        &KeyPath::root().key("cluster"),
        &mut findings,
    );
    findings.range(
        KeyPath::root().key("tool_timeout_s"),
        config.tool_timeout_s,
        TOOL_TIMEOUT_S,
    );
    findings.range(
        KeyPath::root().key("probe_concurrency"),
        config.probe_concurrency,
        PROBE_CONCURRENCY,
    );
    validate_hosts(
        &config.allowed_hosts,
        &KeyPath::root().key("allowed_hosts"),
        &mut findings,
    );
    let endpoint = KeyPath::root().key("mcp_endpoint");
    validate_hosts(
        &config.mcp_endpoint.allowed_hosts,
        &endpoint.key("allowed_hosts"),
        &mut findings,
    );
    validate_origins(
        &config.mcp_endpoint.allowed_origins,
        &endpoint.key("allowed_origins"),
        &mut findings,
    );
    endpoints::validate_endpoints(config, &mut findings);
    tool_names::validate_tool_names(config, &mut findings);
    findings
}

/// `Host` names: `*`, or a name or address with an optional port, such as `gw.example.com`,
/// `gw.example.com:8443`, `10.0.0.5`, `[fd00::5]:8000`.
fn validate_hosts(hosts: &[String], path: &KeyPath, findings: &mut Findings) {
    for (index, host) in hosts.iter().enumerate() {
        if let Err(why) = check_host(host.trim()) {
            findings.error(
                ConfigErrorKind::InvalidValue,
                path.index(index),
                format!(
                    "`{host}` is not a host name: {why}; write the name alone (gw.example.com, any \
                     port), with a port (gw.example.com:8443), or `*` for any host"
                ),
            );
        }
    }
}

fn check_host(host: &str) -> Result<(), String> {
    if host == "*" {
        return Ok(());
    }
    if host.is_empty() {
        return Err("it is empty".to_owned());
    }
    if host.contains("://") || host.contains(['/', '?', '#', '@', ' ', '\t']) {
        return Err("a host has no scheme, path, credentials or spaces".to_owned());
    }
    let (name, port) = match host.strip_prefix('[') {
        Some(rest) => {
            let (address, after) = rest
                .split_once(']')
                .ok_or("an IPv6 address in brackets needs its `]`")?;
            if address.parse::<std::net::Ipv6Addr>().is_err() {
                return Err(format!("`{address}` is not an IPv6 address"));
            }
            let port = match after {
                "" => None,
                after => Some(
                    after
                        .strip_prefix(':')
                        .ok_or("only `:port` may follow `]`")?,
                ),
            };
            (None, port)
        }
        None if host.matches(':').count() > 1 => {
            return Err(format!(
                "write an IPv6 address in brackets, such as [{host}]"
            ));
        }
        None => match host.split_once(':') {
            Some((name, port)) => (Some(name), Some(port)),
            None => (Some(host), None),
        },
    };
    if let Some(name) = name {
        let valid = !name.is_empty()
            && name
                .chars()
                .all(|character| character.is_ascii_alphanumeric() || "-._".contains(character));
        if !valid {
            return Err("a name has letters, digits, `-`, `_` and `.` only".to_owned());
        }
    }
    if let Some(port) = port
        && port.parse::<u16>().is_err()
    {
        return Err(format!("the port `{port}` is not a number from 0 to 65535"));
    }
    Ok(())
}

/// Browser origins: `*`, `null`, or `scheme://host[:port]` with `:*` for any port.
fn validate_origins(origins: &[String], path: &KeyPath, findings: &mut Findings) {
    for (index, origin) in origins.iter().enumerate() {
        let origin_text = origin.trim().trim_end_matches('/');
        let valid = origin_text == "*"
            || origin_text == "null"
            || origin_text.split_once("://").is_some_and(|(scheme, rest)| {
                !scheme.is_empty()
                    && scheme.chars().all(|character| {
                        character.is_ascii_alphanumeric() || "+-.".contains(character)
                    })
                    && check_host(rest.strip_suffix(":*").unwrap_or(rest)).is_ok()
                    && rest != "*"
            });
        if !valid {
            findings.error(
                ConfigErrorKind::InvalidValue,
                path.index(index),
                format!(
                    "`{origin}` is not an origin; write scheme://host[:port] (such as \
                     https://app.example.com, or http://localhost:* for any port), `null` or `*`"
                ),
            );
        }
    }
}

pub(crate) fn validate_server_id(id: &str, path: &KeyPath, findings: &mut Findings) {
    if let Err(error) = ServerId::parse(id) {
        findings.error(
            ConfigErrorKind::InvalidValue,
            path.clone(),
            format!("{error}; ids match ^[A-Za-z0-9_-]{{1,64}}$ without `__`"),
        );
    }
}

/// Everything about one definition that does not need the other servers. `launch_modes` are
/// the registered modes a definition may name besides the built-in ones.
pub(crate) fn validate_server(
    id: &str,
    definition: &ServerDefinition,
    path: &KeyPath,
    launch_modes: &[LaunchMode],
    findings: &mut Findings,
) {
    let registered = |name: &str| launch_modes.iter().find(|mode| mode.name() == name);
    let mode = match &definition.mode {
        None => {
            let mut names: Vec<&str> = ["subprocess", "docker", "remote"].to_vec();
            names.extend(launch_modes.iter().map(LaunchMode::name));
            names.push("group");
            findings.error(
                ConfigErrorKind::MissingKey,
                path.clone(),
                format!("missing key `mode`; set it to {}", quoted_list(&names)),
            );
            None
        }
        Some(ServerMode::Registered(name)) if registered(name).is_none() => {
            let mut known: Vec<&str> = ServerMode::ALL.iter().map(ServerMode::as_str).collect();
            known.extend(launch_modes.iter().map(LaunchMode::name));
            let advice = match nearest(name, known.iter().copied()) {
                Some(suggestion) => format!("did you mean `{suggestion}`?"),
                None => format!("expected {}", quoted_list(&known)),
            };
            findings.error(
                ConfigErrorKind::InvalidValue,
                path.key("mode"),
                format!(
                    "unknown value `{}`; {advice}",
                    mcpgw_core::bounded_for_message(name)
                ),
            );
            // Which keys belong is unknowable without the mode.
            None
        }
        Some(mode) => {
            let key_mode = KeyMode::of(mode);
            for key in present_keys(definition) {
                if !belongs(key, Some(key_mode)) {
                    findings.error(
                        ConfigErrorKind::WrongMode,
                        path.key(key),
                        format!(
                            "`{key}` does not belong to mode `{mode}`; {}: remove it or change \
                             `mode`",
                            used_with(key)
                        ),
                    );
                }
            }
            Some(key_mode)
        }
    };
    if let Some(value) = definition
        .idle_ttl_s
        .filter(|_| belongs("idle_ttl_s", mode))
    {
        findings.range(path.key("idle_ttl_s"), value, IDLE_TTL_S);
    }
    if let Some(value) = definition
        .health_check_interval_s
        .filter(|_| belongs("health_check_interval_s", mode))
    {
        findings.range(
            path.key("health_check_interval_s"),
            value,
            HEALTH_CHECK_INTERVAL_S,
        );
    }
    if let Some(value) = definition
        .max_consecutive_failures
        .filter(|_| belongs("max_consecutive_failures", mode))
    {
        findings.range(
            path.key("max_consecutive_failures"),
            u64::from(value),
            MAX_CONSECUTIVE_FAILURES,
        );
    }
    if let Some(env) = definition.env.as_ref().filter(|_| belongs("env", mode)) {
        validate_env(env, &path.key("env"), findings);
    }
    if let Some(tools) = definition.tools.as_ref().filter(|_| belongs("tools", mode)) {
        validate_tools(tools, &path.key("tools"), findings);
    }
    if let Some(key) = &definition.caller_meta {
        let problem = if key.is_empty()
            || key
                .chars()
                .any(|c| c.is_whitespace() || c.is_control() || c == '"')
        {
            Some(format!(
                "`{}` is not a `_meta` key: write one word such as com.example/caller",
                mcpgw_core::bounded_for_message(key)
            ))
        } else if key.starts_with("io.modelcontextprotocol/")
            || key.starts_with("io.mcpgw/")
            || key == "progressToken"
        {
            Some(format!(
                "`{key}` is reserved (by MCP or the gateway); name it under your own domain, \
                 such as com.example/caller"
            ))
        } else {
            None
        };
        if let Some(problem) = problem {
            findings.error(
                ConfigErrorKind::InvalidValue,
                path.key("caller_meta"),
                problem,
            );
        }
    }

    match &definition.mode {
        Some(ServerMode::Subprocess) => validate_subprocess(definition, path, findings),
        Some(ServerMode::Docker) => validate_docker(definition, path, findings),
        Some(ServerMode::Remote) => validate_remote(definition, path, findings),
        Some(ServerMode::Group) => validate_group(id, definition, path, findings),
        Some(ServerMode::Registered(name)) => {
            if let Some(launch_mode) = registered(name) {
                validate_settings(launch_mode, definition, path, findings);
            }
        }
        None => {}
    }
}

/// A registered mode's check of the definition's `settings` (an empty mapping when absent).
fn validate_settings(
    launch_mode: &LaunchMode,
    definition: &ServerDefinition,
    path: &KeyPath,
    findings: &mut Findings,
) {
    let empty = serde_json::Map::new();
    let settings = definition.settings.as_ref().unwrap_or(&empty);
    if let Err(problem) = launch_mode.check(settings) {
        let mut at = path.key("settings");
        for key in problem.key.iter().flat_map(|key| key.split('.')) {
            at = at.key(key);
        }
        let kind = if definition.settings.is_none() {
            ConfigErrorKind::MissingKey
        } else {
            ConfigErrorKind::InvalidValue
        };
        findings.error(kind, at, problem.message);
    }
}

fn validate_subprocess(definition: &ServerDefinition, path: &KeyPath, findings: &mut Findings) {
    match &definition.command {
        None => findings.error(
            ConfigErrorKind::MissingKey,
            path.clone(),
            "missing key `command`: mode `subprocess` needs the program and its arguments, \
             such as [python3, -m, my_server]",
        ),
        Some(command) => validate_command(command, &path.key("command"), findings),
    }
    if definition
        .cwd
        .as_deref()
        .is_some_and(|cwd| cwd.trim().is_empty())
    {
        findings.error(
            ConfigErrorKind::InvalidValue,
            path.key("cwd"),
            "must not be empty; leave it out to use the gateway's working directory",
        );
    }
}

fn validate_command(command: &[String], path: &KeyPath, findings: &mut Findings) {
    match command.first() {
        None => findings.error(
            ConfigErrorKind::InvalidValue,
            path.clone(),
            "must not be empty; give the program and its arguments, such as \
             [python3, -m, my_server]",
        ),
        Some(program) if program.trim().is_empty() => findings.error(
            ConfigErrorKind::InvalidValue,
            path.index(0),
            "the program name must not be empty",
        ),
        Some(_) => {}
    }
    for (index, argument) in command.iter().enumerate() {
        if argument.contains('\0') {
            findings.error(
                ConfigErrorKind::InvalidValue,
                path.index(index),
                "must not contain a NUL character",
            );
        }
    }
}

fn validate_docker(definition: &ServerDefinition, path: &KeyPath, findings: &mut Findings) {
    match definition.image.as_deref() {
        None => findings.error(
            ConfigErrorKind::MissingKey,
            path.clone(),
            "missing key `image`: mode `docker` needs the image to run, such as repo/img:tag",
        ),
        Some(image) if image.is_empty() || image.contains(char::is_whitespace) => findings.error(
            ConfigErrorKind::InvalidValue,
            path.key("image"),
            format!("`{image}` is not an image reference; write one such as repo/img:tag"),
        ),
        Some(_) => {}
    }
    if definition.args.is_some() && definition.command.is_some() {
        findings.error(
            ConfigErrorKind::InvalidValue,
            path.key("command"),
            "`command` is a synonym of `args` in mode `docker`; give only one of them",
        );
    }
    if let Some(host) = definition.docker_host.as_deref() {
        if definition.runtime.is_some() {
            findings.error(
                ConfigErrorKind::InvalidValue,
                path.key("docker_host"),
                "`docker_host` names an Engine API and `runtime` a command-line client; give \
                 only one of them",
            );
        }
        let socket = host.strip_prefix("unix://").unwrap_or(host);
        if !socket.starts_with('/') {
            findings.error(
                ConfigErrorKind::InvalidValue,
                path.key("docker_host"),
                format!(
                    "`{host}` is not a unix socket; write unix:///path/to/docker.sock or an \
                     absolute socket path"
                ),
            );
        }
    }
    if definition
        .network
        .as_deref()
        .is_some_and(|network| network.trim().is_empty())
    {
        findings.error(
            ConfigErrorKind::InvalidValue,
            path.key("network"),
            "must not be empty; write `none` for no network",
        );
    }
    if let Some(memory) = definition.memory.as_deref()
        && !is_memory_size(memory)
    {
        findings.error(
            ConfigErrorKind::InvalidValue,
            path.key("memory"),
            format!(
                "`{memory}` is not a memory size; write a number with an optional unit, such \
                 as 512m or 2g"
            ),
        );
    }
    if let Some(cpus) = definition.cpus.as_deref()
        && !cpus
            .trim()
            .parse::<f64>()
            .is_ok_and(|count| count.is_finite() && count > 0.0)
    {
        findings.error(
            ConfigErrorKind::InvalidValue,
            path.key("cpus"),
            format!("`{cpus}` is not a CPU count; write a number above 0, such as \"1.5\""),
        );
    }
    for (index, volume) in definition.volumes.iter().flatten().enumerate() {
        if volume.trim().is_empty() {
            findings.error(
                ConfigErrorKind::InvalidValue,
                path.key("volumes").index(index),
                "must not be empty; write a mount such as /host/data:/data:ro",
            );
        }
    }
}

fn validate_remote(definition: &ServerDefinition, path: &KeyPath, findings: &mut Findings) {
    match definition.endpoint.as_deref() {
        None => findings.error(
            ConfigErrorKind::MissingKey,
            path.clone(),
            "missing key `endpoint`: mode `remote` needs the server's MCP URL, such as \
             https://host/mcp",
        ),
        Some(endpoint) => {
            if let Err(problem) = check_http_url(endpoint) {
                findings.error(ConfigErrorKind::InvalidValue, path.key("endpoint"), problem);
            }
        }
    }
    for (name, value) in definition.headers.iter().flatten() {
        let header_path = path.key("headers").key(name.as_str());
        if !is_header_name(name) {
            findings.error(
                ConfigErrorKind::InvalidValue,
                header_path.clone(),
                format!("`{name}` is not an HTTP header name; use letters, digits and `-`"),
            );
        }
        if value.contains(['\r', '\n', '\0']) {
            findings.error(
                ConfigErrorKind::InvalidValue,
                header_path.clone(),
                "a header value must not contain line breaks or NUL characters",
            );
        }
        if definition.token_exchange.is_some() && name.eq_ignore_ascii_case("authorization") {
            findings.error(
                ConfigErrorKind::InvalidValue,
                header_path,
                "with `token_exchange` the gateway sets Authorization itself, per caller; \
                 remove this header",
            );
        }
    }
    if let Some(exchange) = &definition.token_exchange {
        let exchange_path = path.key("token_exchange");
        for (key, value) in [
            ("token_endpoint", Some(&exchange.token_endpoint)),
            ("resource", exchange.resource.as_ref()),
        ] {
            if let Some(value) = value
                && let Err(problem) = check_http_url(value)
            {
                findings.error(
                    ConfigErrorKind::InvalidValue,
                    exchange_path.key(key),
                    problem,
                );
            }
        }
        for (key, value) in [
            ("client_id", &exchange.client_id),
            ("client_secret", &exchange.client_secret),
        ] {
            if value.trim().is_empty() {
                findings.error(
                    ConfigErrorKind::InvalidValue,
                    exchange_path.key(key),
                    "must not be empty: the gateway's client at the authorization server",
                );
            }
        }
    }
}

/// Checks of a group that need no other server: weights, repeated members, itself as a member.
fn validate_group(
    id: &str,
    definition: &ServerDefinition,
    path: &KeyPath,
    findings: &mut Findings,
) {
    let members = definition.members.as_deref().unwrap_or_default();
    let mut seen = BTreeSet::new();
    for (index, member) in members.iter().enumerate() {
        let member_path = path.key("members").index(index);
        if member.weight == Some(0) {
            findings.error(
                ConfigErrorKind::OutOfRange,
                member_path.key("weight"),
                "must be at least 1, got 0; remove the member to take it out of rotation",
            );
        }
        if member.id == id {
            findings.error(
                ConfigErrorKind::Reference,
                member_path.key("id"),
                format!("group `{id}` cannot be a member of itself"),
            );
        } else if !seen.insert(member.id.as_str()) {
            findings.error(
                ConfigErrorKind::DuplicateKey,
                member_path.key("id"),
                format!(
                    "`{}` is listed twice; list each member once and raise its `weight` for a \
                     larger share",
                    member.id
                ),
            );
        }
    }
    if definition.min_healthy == Some(0) {
        findings.error(
            ConfigErrorKind::OutOfRange,
            path.key("min_healthy"),
            "must be at least 1, got 0; it is the number of members in rotation the group needs \
             to be healthy",
        );
    }
    let min_healthy = definition.min_healthy.unwrap_or(1);
    if usize::try_from(min_healthy).is_ok_and(|needed| needed > members.len()) {
        findings.warning(
            path.key(if definition.min_healthy.is_some() {
                "min_healthy"
            } else {
                "members"
            }),
            format!(
                "the group needs {min_healthy} healthy members but has {}; it will never be \
                 healthy",
                members.len()
            ),
        );
    }
}

/// Members must name servers declared in the same file, and not groups.
fn validate_member_references(
    id: &str,
    definition: &ServerDefinition,
    path: &KeyPath,
    servers: &BTreeMap<String, ServerDefinition>,
    findings: &mut Findings,
) {
    for (index, member) in definition.members.iter().flatten().enumerate() {
        if member.id == id {
            continue;
        }
        let member_path = path.key("members").index(index).key("id");
        match servers.get(&member.id) {
            None => {
                let server_ids = servers
                    .iter()
                    .filter(|(other, other_definition)| {
                        other.as_str() != id && other_definition.mode != Some(ServerMode::Group)
                    })
                    .map(|(other, _)| other.as_str());
                let advice = match nearest(&member.id, server_ids) {
                    Some(suggestion) => format!("; did you mean `{suggestion}`?"),
                    None => "; members name servers declared under mcp_servers".to_owned(),
                };
                findings.error(
                    ConfigErrorKind::Reference,
                    member_path,
                    format!(
                        "`{}` is not a server in this configuration{advice}",
                        member.id
                    ),
                );
            }
            Some(other) if other.mode == Some(ServerMode::Group) => findings.error(
                ConfigErrorKind::Reference,
                member_path,
                format!(
                    "`{}` is a group; members must be servers, groups do not nest",
                    member.id
                ),
            ),
            Some(_) => {}
        }
    }
}

fn validate_env(env: &BTreeMap<String, String>, path: &KeyPath, findings: &mut Findings) {
    for (name, value) in env {
        if name.is_empty() || name.contains(['=', '\0']) {
            findings.error(
                ConfigErrorKind::InvalidValue,
                path.key(name.as_str()),
                format!(
                    "`{name}` is not an environment variable name; it must be non-empty, \
                     without `=`"
                ),
            );
        } else if value.contains('\0') {
            findings.error(
                ConfigErrorKind::InvalidValue,
                path.key(name.as_str()),
                "an environment value must not contain a NUL character",
            );
        }
    }
}

fn validate_tools(tools: &[mcpgw_core::Tool], path: &KeyPath, findings: &mut Findings) {
    let mut seen = BTreeSet::new();
    for (index, tool) in tools.iter().enumerate() {
        let tool_path = path.index(index);
        if tool.name.trim().is_empty() {
            findings.error(
                ConfigErrorKind::InvalidValue,
                tool_path.key("name"),
                "a tool name must not be empty",
            );
        } else if !seen.insert(tool.name.as_str()) {
            findings.error(
                ConfigErrorKind::DuplicateKey,
                tool_path.key("name"),
                format!("tool `{}` is listed twice; list each tool once", tool.name),
            );
        }
        if !tool.input_schema.is_object() {
            findings.error(
                ConfigErrorKind::InvalidValue,
                tool_path.key("inputSchema"),
                "must be a JSON Schema object, such as {type: object}",
            );
        }
        // MCP clients read both as objects; anything else would be served to them as it is.
        if tool
            .output_schema
            .as_ref()
            .is_some_and(|schema| !schema.is_object())
        {
            findings.error(
                ConfigErrorKind::InvalidValue,
                tool_path.key("outputSchema"),
                "must be a JSON Schema object, such as {type: object}",
            );
        }
        if tool
            .annotations
            .as_ref()
            .is_some_and(|annotations| !annotations.is_object())
        {
            findings.error(
                ConfigErrorKind::InvalidValue,
                tool_path.key("annotations"),
                "must be an object of tool annotations, such as {readOnlyHint: true}",
            );
        }
    }
}

fn validate_discovery(
    discovery: &DiscoveryConfig,
    source_types: &[String],
    path: &KeyPath,
    findings: &mut Findings,
) {
    let known: Vec<&str> = source_types.iter().map(String::as_str).collect();
    findings.range(
        path.key("refresh_interval_s"),
        discovery.refresh_interval_s,
        REFRESH_INTERVAL_S,
    );
    let mut seen_ids = BTreeSet::new();
    for (index, (source_id, source)) in discovery.sources_with_ids().enumerate() {
        let source_path = path.key("sources").index(index);
        if !known.contains(&source.source_type.as_str()) {
            let advice = match nearest(&source.source_type, known.iter().copied()) {
                Some(suggestion) => format!("did you mean `{suggestion}`?"),
                None => format!("expected {}", quoted_list(&known)),
            };
            findings.error(
                ConfigErrorKind::InvalidValue,
                source_path.key("type"),
                format!("unknown source type `{}`; {advice}", source.source_type),
            );
        }
        if let Some(id) = &source.id
            && let Err(error) = ServerId::parse(id)
        {
            findings.error(
                ConfigErrorKind::InvalidValue,
                source_path.key("id"),
                error.to_string(),
            );
        }
        if !seen_ids.insert(source_id.clone()) {
            findings.error(
                ConfigErrorKind::DuplicateKey,
                source_path,
                format!("source id `{source_id}` is used twice; give the sources distinct `id`s"),
            );
        }
    }
}

fn validate_auth(auth: &AuthConfig, path: &KeyPath, findings: &mut Findings) {
    if !is_header_name(&auth.api_key.header_name) {
        findings.error(
            ConfigErrorKind::InvalidValue,
            path.key("api_key").key("header_name"),
            format!(
                "`{}` is not an HTTP header name; use letters, digits and `-`, such as X-API-Key",
                auth.api_key.header_name
            ),
        );
    }

    validate_oauth(&auth.oauth, &path.key("oauth"), findings);

    let oidc = &auth.oidc;
    let oidc_path = path.key("oidc");
    if oidc.enabled {
        for (key, value) in [("issuer", &oidc.issuer), ("audience", &oidc.audience)] {
            if value.as_deref().is_none_or(|value| value.trim().is_empty()) {
                findings.error(
                    ConfigErrorKind::MissingKey,
                    oidc_path.clone(),
                    format!("missing key `{key}`: OIDC with `enabled: true` needs the token {key}"),
                );
            }
        }
    }
    if let Some(issuer) = oidc
        .issuer
        .as_deref()
        .filter(|issuer| !issuer.trim().is_empty())
    {
        match check_http_url(issuer) {
            Err(problem) => {
                findings.error(
                    ConfigErrorKind::InvalidValue,
                    oidc_path.key("issuer"),
                    problem,
                );
            }
            Ok(()) if !issuer.to_ascii_lowercase().starts_with("https://") => findings.warning(
                oidc_path.key("issuer"),
                "the issuer is not HTTPS, so its keys can be tampered with on the way; use \
                 https:// outside tests",
            ),
            Ok(()) => {}
        }
    }
    if let Some(jwks_uri) = &oidc.jwks_uri
        && let Err(problem) = check_http_url(jwks_uri)
    {
        findings.error(
            ConfigErrorKind::InvalidValue,
            oidc_path.key("jwks_uri"),
            problem,
        );
    }
    for (key, claim) in [
        ("subject_claim", &oidc.subject_claim),
        ("groups_claim", &oidc.groups_claim),
        ("tenant_claim", &oidc.tenant_claim),
    ] {
        if claim.trim().is_empty() {
            findings.error(
                ConfigErrorKind::InvalidValue,
                oidc_path.key(key),
                "must not be empty; leave it out for the default",
            );
        }
    }

    let opa = &auth.opa;
    let opa_path = path.key("opa");
    if opa.enabled {
        for (key, value, example) in [
            ("url", &opa.url, "http://localhost:8181"),
            ("policy_path", &opa.policy_path, "v1/data/mcpgw/allow"),
        ] {
            if value.as_deref().is_none_or(|value| value.trim().is_empty()) {
                findings.error(
                    ConfigErrorKind::MissingKey,
                    opa_path.clone(),
                    format!(
                        "missing key `{key}`: OPA with `enabled: true` needs it, such as {example}"
                    ),
                );
            }
        }
    }
    if let Some(url) = opa.url.as_deref().filter(|url| !url.trim().is_empty())
        && let Err(problem) = check_http_url(url)
    {
        findings.error(ConfigErrorKind::InvalidValue, opa_path.key("url"), problem);
    }

    for (index, assignment) in auth.role_assignments.iter().enumerate() {
        let assignment_path = path.key("role_assignments").index(index);
        let principal_ok = assignment
            .principal
            .split_once(':')
            .is_some_and(|(kind, name)| !kind.is_empty() && !name.is_empty());
        if !principal_ok {
            findings.error(
                ConfigErrorKind::InvalidValue,
                assignment_path.key("principal"),
                format!(
                    "`{}` is not a principal; write `kind:id`, such as user:alice, group:ops or \
                     service:ci",
                    assignment.principal
                ),
            );
        }
        if assignment.role.trim().is_empty() {
            findings.error(
                ConfigErrorKind::InvalidValue,
                assignment_path.key("role"),
                "must not be empty",
            );
        }
        let scope_ok = assignment.scope == "global"
            || assignment
                .scope
                .strip_prefix("tenant:")
                .is_some_and(|tenant| !tenant.is_empty());
        if !scope_ok {
            findings.error(
                ConfigErrorKind::InvalidValue,
                assignment_path.key("scope"),
                format!(
                    "`{}` is not a scope; write `global` or `tenant:<tenant_id>`",
                    assignment.scope
                ),
            );
        }
    }

    for (index, range) in auth.trusted_proxies.iter().enumerate() {
        if !is_network_range(range) {
            findings.error(
                ConfigErrorKind::InvalidValue,
                path.key("trusted_proxies").index(index),
                format!(
                    "`{range}` is not an IP address or network range; write one such as \
                     10.0.0.0/8 or ::1"
                ),
            );
        }
    }
}

fn validate_rate_limit(rate_limit: &RateLimitConfig, path: &KeyPath, findings: &mut Findings) {
    if !(rate_limit.rps.is_finite() && rate_limit.rps >= 0.0) {
        findings.error(
            ConfigErrorKind::OutOfRange,
            path.key("rps"),
            format!(
                "must be 0 or more (0 turns rate limiting off), got {}",
                rate_limit.rps
            ),
        );
    }
    if rate_limit.burst == 0 {
        findings.error(
            ConfigErrorKind::OutOfRange,
            path.key("burst"),
            "must be at least 1, got 0",
        );
    }
}

fn validate_event_log(event_log: &EventLogConfig, path: &KeyPath, findings: &mut Findings) {
    findings.range(
        path.key("max_age_days"),
        event_log.max_age_days,
        EVENT_LOG_MAX_AGE_DAYS,
    );
    findings.range(
        path.key("compaction_interval_s"),
        event_log.compaction_interval_s,
        COMPACTION_INTERVAL_S,
    );
}

/// An absolute http(s) URL with a host. Deliberately small: the adapters parse URLs for real,
/// this only catches what is clearly not one, before anything starts.
/// `auth.oauth`: the resource and every issuer must be usable URLs, the issuers distinct, the
/// claims named, and each configured scope must name a role.
fn validate_oauth(oauth: &OAuthConfig, path: &KeyPath, findings: &mut Findings) {
    if let Some(resource) = &oauth.resource {
        let problem = check_http_url(resource).err().or_else(|| {
            resource
                .contains('#')
                .then(|| format!("`{resource}` has a fragment; a resource URI must not (RFC 8707)"))
        });
        if let Some(problem) = problem {
            findings.error(ConfigErrorKind::InvalidValue, path.key("resource"), problem);
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    for (index, issuer) in oauth.issuers.iter().enumerate() {
        let issuer_path = path.key("issuers").index(index);
        match check_http_url(&issuer.issuer) {
            Err(problem) => {
                findings.error(
                    ConfigErrorKind::InvalidValue,
                    issuer_path.key("issuer"),
                    problem,
                );
            }
            Ok(()) if !issuer.issuer.to_ascii_lowercase().starts_with("https://") => findings
                .warning(
                    issuer_path.key("issuer"),
                    "the issuer is not HTTPS, so its keys can be tampered with on the way; use \
                     https:// outside tests",
                ),
            Ok(()) => {}
        }
        if !seen.insert(issuer.issuer.trim_end_matches('/')) {
            findings.error(
                ConfigErrorKind::DuplicateKey,
                issuer_path.key("issuer"),
                format!(
                    "issuer `{}` is listed twice; list each authorization server once",
                    issuer.issuer
                ),
            );
        }
        for (key, value) in [
            ("audience", &issuer.audience),
            ("jwks_uri", &issuer.jwks_uri),
        ] {
            if let Some(value) = value
                && let Err(problem) = check_http_url(value).or_else(|problem| {
                    // An audience may be any string an issuer puts in `aud`; only a blank
                    // one is refused.
                    if key == "audience" && !value.trim().is_empty() {
                        Ok(())
                    } else {
                        Err(problem)
                    }
                })
            {
                findings.error(ConfigErrorKind::InvalidValue, issuer_path.key(key), problem);
            }
        }
        for (key, claim) in [
            ("subject_claim", &issuer.subject_claim),
            ("groups_claim", &issuer.groups_claim),
            ("tenant_claim", &issuer.tenant_claim),
            ("scope_claim", &issuer.scope_claim),
        ] {
            if claim.trim().is_empty() {
                findings.error(
                    ConfigErrorKind::InvalidValue,
                    issuer_path.key(key),
                    "must not be empty; leave it out for the default",
                );
            }
        }
        if issuer.clock_skew_s > 300 {
            findings.error(
                ConfigErrorKind::InvalidValue,
                issuer_path.key("clock_skew_s"),
                format!(
                    "{} is out of range: clock_skew_s is 0..=300 seconds",
                    issuer.clock_skew_s
                ),
            );
        }
        for (scope, role) in &issuer.scopes {
            let problem = if scope.is_empty()
                || scope
                    .chars()
                    .any(|c| c.is_whitespace() || c.is_control() || c == '"' || c == '\\')
            {
                Some(format!(
                    "`{scope}` is not a scope: a scope is one word without blanks or quotes"
                ))
            } else if role.trim().is_empty() {
                Some(format!(
                    "scope `{scope}` names no role; write the role it stands for"
                ))
            } else {
                None
            };
            if let Some(problem) = problem {
                findings.error(
                    ConfigErrorKind::InvalidValue,
                    issuer_path.key("scopes").key(scope),
                    problem,
                );
            }
        }
    }
}

fn validate_store(store: &StoreConfig, path: &KeyPath, findings: &mut Findings) {
    let scheme = store
        .url
        .split_once("://")
        .map(|(scheme, _)| scheme.to_ascii_lowercase());
    if !matches!(scheme.as_deref(), Some("postgres" | "postgresql")) {
        findings.error(
            ConfigErrorKind::InvalidValue,
            path.key("url"),
            "is not a PostgreSQL URL: write postgres://user@host:5432/database (leave the \
             store section out to keep the SQLite files under the data directory)",
        );
    }
    if store
        .password_file
        .as_deref()
        .is_some_and(|file| file.trim().is_empty())
    {
        findings.error(
            ConfigErrorKind::InvalidValue,
            path.key("password_file"),
            "must not be empty; leave it out when the URL or the server needs no password",
        );
    }
    if !(1..=100).contains(&store.max_connections) {
        findings.error(
            ConfigErrorKind::InvalidValue,
            path.key("max_connections"),
            format!(
                "{} is out of range: max_connections is 1..=100",
                store.max_connections
            ),
        );
    }
}

fn validate_cluster(cluster: &ClusterConfig, path: &KeyPath, findings: &mut Findings) {
    for (key, value, range) in [
        ("heartbeat_interval_s", cluster.heartbeat_interval_s, 1..=60),
        ("lease_s", cluster.lease_s, 3..=300),
        ("resync_interval_s", cluster.resync_interval_s, 1..=3600),
    ] {
        if !range.contains(&value) {
            findings.error(
                ConfigErrorKind::InvalidValue,
                path.key(key),
                format!(
                    "{value} is out of range: {key} is {}..={}",
                    range.start(),
                    range.end()
                ),
            );
        }
    }
    if cluster.lease_s <= cluster.heartbeat_interval_s {
        findings.error(
            ConfigErrorKind::InvalidValue,
            path.key("lease_s"),
            format!(
                "must be longer than heartbeat_interval_s ({} s), or a live replica loses its \
                 lease between two renewals",
                cluster.heartbeat_interval_s
            ),
        );
    }
    if let Some(replica) = &cluster.replica_id
        && (replica.is_empty()
            || replica.len() > 128
            || !replica
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        findings.error(
            ConfigErrorKind::InvalidValue,
            path.key("replica_id"),
            "is 1 to 128 letters, digits, `-`, `_` or `.`",
        );
    }
    if cluster
        .secret_file
        .as_deref()
        .is_some_and(|file| file.trim().is_empty())
    {
        findings.error(
            ConfigErrorKind::InvalidValue,
            path.key("secret_file"),
            "must not be empty; leave it out for a lone gateway",
        );
    }
}

fn validate_console(console: &ConsoleConfig, path: &KeyPath, findings: &mut Findings) {
    for (key, value, range) in [
        (
            "session_idle_minutes",
            console.session_idle_minutes,
            1..=1440,
        ),
        ("session_max_hours", console.session_max_hours, 1..=168),
    ] {
        if !range.contains(&value) {
            findings.error(
                ConfigErrorKind::InvalidValue,
                path.key(key),
                format!(
                    "{value} is out of range: {key} is {}..={}",
                    range.start(),
                    range.end()
                ),
            );
        }
    }
    let Some(sso) = &console.sso else {
        return;
    };
    let sso_path = path.key("sso");
    match check_http_url(&sso.issuer) {
        Err(problem) => findings.error(
            ConfigErrorKind::InvalidValue,
            sso_path.key("issuer"),
            problem,
        ),
        Ok(()) if !sso.issuer.to_ascii_lowercase().starts_with("https://") => findings.warning(
            sso_path.key("issuer"),
            "the issuer is not HTTPS, so sign-ins can be tampered with on the way; use https:// \
             outside tests",
        ),
        Ok(()) => {}
    }
    if sso.client_id.trim().is_empty() {
        findings.error(
            ConfigErrorKind::InvalidValue,
            sso_path.key("client_id"),
            "must not be empty; use the client id the provider registered for the console",
        );
    }
    if sso
        .client_secret
        .as_deref()
        .is_some_and(|secret| secret.trim().is_empty())
    {
        findings.error(
            ConfigErrorKind::InvalidValue,
            sso_path.key("client_secret"),
            "must not be empty; leave it out for a public client",
        );
    }
    if let Some(uri) = &sso.redirect_uri {
        let problem = check_http_url(uri).err().or_else(|| {
            (!uri.ends_with("/ui/login/sso/callback")).then(|| {
                format!("`{uri}` must end with /ui/login/sso/callback, where the console listens")
            })
        });
        if let Some(problem) = problem {
            findings.error(
                ConfigErrorKind::InvalidValue,
                sso_path.key("redirect_uri"),
                problem,
            );
        }
    }
    for (index, scope) in sso.scopes.iter().enumerate() {
        if scope.is_empty() || scope.chars().any(|c| c.is_whitespace() || c.is_control()) {
            findings.error(
                ConfigErrorKind::InvalidValue,
                sso_path.key("scopes").index(index),
                format!("`{scope}` is not a scope: a scope is one word without blanks"),
            );
        }
    }
}

pub(crate) fn check_http_url(value: &str) -> Result<(), String> {
    let lowered = value.to_ascii_lowercase();
    let Some(scheme_length) = ["https://", "http://"]
        .into_iter()
        .find(|scheme| lowered.starts_with(scheme))
        .map(str::len)
    else {
        return Err(format!("`{value}` is not an http:// or https:// URL"));
    };
    if value
        .chars()
        .any(|character| character.is_whitespace() || character.is_control())
    {
        return Err(format!(
            "`{value}` is not a URL: it contains blanks or control characters"
        ));
    }
    let host = value[scheme_length..]
        .split(['/', '?', '#'])
        .next()
        .unwrap_or_default();
    let host = host.rsplit('@').next().unwrap_or_default();
    if host.is_empty() || host.starts_with(':') {
        return Err(format!(
            "`{value}` has no host; write one such as https://host/mcp"
        ));
    }
    Ok(())
}

fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte))
}

/// Docker's memory sizes: a number, an optional unit (`k`, `m`, `g`, `t`, `p`), an optional
/// `i` and `b` (`512m`, `1.5g`, `256MiB`, `1073741824`).
fn is_memory_size(value: &str) -> bool {
    let value = value.trim();
    let number_end = value
        .find(|character: char| !(character.is_ascii_digit() || character == '.'))
        .unwrap_or(value.len());
    let (number, unit) = value.split_at(number_end);
    if number.parse::<f64>().is_err() {
        return false;
    }
    let unit = unit.trim_start().to_ascii_lowercase();
    let unit = unit.strip_suffix('b').unwrap_or(&unit);
    let unit = unit.strip_suffix('i').unwrap_or(unit);
    matches!(unit, "" | "k" | "m" | "g" | "t" | "p")
}

fn is_network_range(value: &str) -> bool {
    let (address, prefix) = match value.split_once('/') {
        Some((address, prefix)) => (address, Some(prefix)),
        None => (value, None),
    };
    let Ok(address) = address.parse::<IpAddr>() else {
        return false;
    };
    let maximum = if address.is_ipv4() { 32 } else { 128 };
    prefix.is_none_or(|prefix| prefix.parse::<u8>().is_ok_and(|prefix| prefix <= maximum))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_need_a_scheme_and_a_host() {
        for good in [
            "https://host/mcp",
            "http://127.0.0.1:8080/mcp",
            "HTTPS://h",
            "https://u:p@h:1/x?y",
        ] {
            assert_eq!(check_http_url(good), Ok(()), "{good}");
        }
        for bad in [
            "host/mcp",
            "ftp://host",
            "https://",
            "https:///mcp",
            "https://h /x",
            "https://:80/",
        ] {
            assert!(check_http_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn memory_sizes_follow_docker() {
        for good in ["512m", "1g", "1.5G", "256MiB", "1073741824", "64 kb"] {
            assert!(is_memory_size(good), "{good}");
        }
        for bad in ["", "m", "lots", "5x", "1..2m", "-5m"] {
            assert!(!is_memory_size(bad), "{bad}");
        }
    }

    #[test]
    fn network_ranges_are_addresses_with_optional_prefixes() {
        for good in ["10.0.0.0/8", "127.0.0.1", "::1", "fd00::/8", "0.0.0.0/0"] {
            assert!(is_network_range(good), "{good}");
        }
        for bad in [
            "10.0.0.0/33",
            "::/129",
            "example.com",
            "10.0.0/8",
            "10.0.0.0/",
            "",
        ] {
            assert!(!is_network_range(bad), "{bad}");
        }
    }

    #[test]
    fn every_schema_key_of_a_server_has_modes() {
        for (key, _) in SERVER_KEY_MODES {
            assert!(!modes_of(key).is_empty(), "{key}");
        }
        let every_key = ServerDefinition {
            command: Some(vec![]),
            env: Some(BTreeMap::new()),
            cwd: Some(String::new()),
            idle_ttl_s: Some(1),
            health_check_interval_s: Some(1),
            max_consecutive_failures: Some(1),
            tools: Some(vec![]),
            image: Some(String::new()),
            args: Some(vec![]),
            network: Some(String::new()),
            memory: Some(String::new()),
            cpus: Some(String::new()),
            read_only: Some(true),
            volumes: Some(vec![]),
            runtime: Some(crate::schema::ContainerRuntime::Docker),
            docker_host: Some(String::new()),
            endpoint: Some(String::new()),
            headers: Some(BTreeMap::new()),
            token_exchange: Some(mcpgw_core::TokenExchange {
                token_endpoint: String::new(),
                client_id: String::new(),
                client_secret: String::new(),
                client_auth: mcpgw_core::ClientAuth::default(),
                resource: None,
                audience: None,
                scope: None,
            }),
            caller_meta: Some(String::new()),
            tool_pinning: Some(mcpgw_core::ToolPinning::OFF),
            settings: Some(serde_json::Map::new()),
            strategy: Some(crate::schema::GroupStrategy::Random),
            min_healthy: Some(1),
            members: Some(vec![]),
            ..ServerDefinition::default()
        };
        assert_eq!(present_keys(&every_key).len(), SERVER_KEY_MODES.len());

        // A key added to the schema but not to the mode table would be accepted in every mode.
        let every_key = ServerDefinition {
            mode: Some(ServerMode::Docker),
            description: Some(String::new()),
            ..every_key
        };
        let serialized = serde_json::to_value(&every_key).unwrap();
        let mut schema_keys: Vec<&str> = serialized
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        schema_keys.sort_unstable();
        let mut table_keys: Vec<&str> = SERVER_KEY_MODES.iter().map(|(key, _)| *key).collect();
        table_keys.extend(["mode", "description"]);
        table_keys.sort_unstable();
        assert_eq!(schema_keys, table_keys);
    }
}
