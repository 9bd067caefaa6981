//! The `audit` section: which events are exported as audit records, and to which sinks.
//!
//! ```yaml
//! audit:
//!   queue_size: 10000            # per sink, 1..1000000
//!   event_types: [AuthenticationFailed, ApiKeyCreated]   # optional; the security set by default
//!   sinks:
//!     - {type: file, path: /var/log/mcpgw/audit.jsonl}
//!     - {type: syslog, address: "udp://127.0.0.1:514", facility: authpriv, app_name: mcpgw}
//! ```
//!
//! The section takes effect at the next start: a reload that changes it reports `audit` among
//! the sections that need a restart.

use serde::{Deserialize, Serialize};

use crate::de;
use crate::error::ConfigErrorKind;
use crate::path::KeyPath;
use crate::suggest::{nearest, quoted_list};
use crate::validate::{Finding, Findings};

/// The `audit` section. Without sinks nothing is exported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditConfig {
    /// Records each sink may have waiting before new ones are dropped for it (1..1,000,000).
    #[serde(default = "default_queue_size")]
    pub queue_size: u64,
    /// The event types exported, by name; the security set
    /// (`mcpgw_core::audit::SECURITY_EVENT_TYPES`) when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_types: Option<Vec<String>>,
    /// Where the records go; each sink gets every record.
    #[serde(
        default,
        deserialize_with = "de::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub sinks: Vec<AuditSinkConfig>,
}

impl AuditConfig {
    pub const DEFAULT_QUEUE_SIZE: u64 = 10_000;

    /// Whether the section is what leaving it out gives.
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// The event types to export: those named, else the security set.
    pub fn event_types(&self) -> Vec<&str> {
        match &self.event_types {
            Some(names) => names.iter().map(String::as_str).collect(),
            None => mcpgw_core::audit::SECURITY_EVENT_TYPES.to_vec(),
        }
    }
}

impl Default for AuditConfig {
    fn default() -> Self {
        Self {
            queue_size: Self::DEFAULT_QUEUE_SIZE,
            event_types: None,
            sinks: Vec::new(),
        }
    }
}

fn default_queue_size() -> u64 {
    AuditConfig::DEFAULT_QUEUE_SIZE
}

/// One sink, by its `type`.
///
/// A new kind of sink (such as `otlp`) is a new variant here, named as its `type` is written
/// (snake case) with a struct of its keys; its checks go in [`validate_audit`], and
/// `mcpgw-server` builds its adapter where it builds the others (its `audit` module).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum AuditSinkConfig {
    /// One JSON object per line, appended to a file.
    File(FileAuditSinkConfig),
    /// RFC 5424 messages to a syslog daemon or collector.
    Syslog(SyslogAuditSinkConfig),
    /// OTLP log records to an OpenTelemetry collector (or any OTLP receiver of logs).
    Otlp(OtlpAuditSinkConfig),
}

impl AuditSinkConfig {
    /// The `type` as written.
    pub fn type_name(&self) -> &'static str {
        match self {
            AuditSinkConfig::File(_) => "file",
            AuditSinkConfig::Syslog(_) => "syslog",
            AuditSinkConfig::Otlp(_) => "otlp",
        }
    }

    /// The sink's name in metrics and logs: its `name`, else its type.
    pub fn name(&self) -> &str {
        let name = match self {
            AuditSinkConfig::File(file) => file.name.as_deref(),
            AuditSinkConfig::Syslog(syslog) => syslog.name.as_deref(),
            AuditSinkConfig::Otlp(otlp) => otlp.name.as_deref(),
        };
        name.unwrap_or_else(|| self.type_name())
    }
}

/// `type: file`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileAuditSinkConfig {
    /// The sink's name in metrics and logs; `file` by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The file records are appended to; made (readable by the gateway's user alone) when
    /// missing. Its directory must exist.
    pub path: String,
}

/// `type: syslog`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyslogAuditSinkConfig {
    /// The sink's name in metrics and logs; `syslog` by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `udp://host:port`, `tcp://host:port` or `unix:///path` (a datagram socket such as the
    /// local daemon's `/dev/log`).
    pub address: String,
    /// The syslog facility, by name (`authpriv` by default; see [`SYSLOG_FACILITIES`]).
    #[serde(default = "default_facility")]
    pub facility: String,
    /// APP-NAME of every message.
    #[serde(default = "default_app_name")]
    pub app_name: String,
    /// HOSTNAME of every message; the machine's name when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
}

/// `type: otlp`. What it leaves out comes from the `OTEL_EXPORTER_OTLP_LOGS_*` and
/// `OTEL_EXPORTER_OTLP_*` variables, then from OTLP's defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OtlpAuditSinkConfig {
    /// The sink's name in metrics and logs; `otlp` by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The collector: a base URL for OTLP/HTTP (`/v1/logs` is appended) or the gRPC address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// `http/protobuf` or `grpc`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<crate::OtlpProtocol>,
    /// Headers sent with every export (a hosted collector's credentials); shown masked.
    #[serde(
        default,
        deserialize_with = "de::null_as_default",
        skip_serializing_if = "std::collections::BTreeMap::is_empty"
    )]
    pub headers: std::collections::BTreeMap<String, String>,
    /// Seconds an export may take (1..300, 10 by default).
    #[serde(default = "default_otlp_timeout_s")]
    pub timeout_s: u64,
}

impl OtlpAuditSinkConfig {
    pub const DEFAULT_TIMEOUT_S: u64 = 10;
}

fn default_otlp_timeout_s() -> u64 {
    OtlpAuditSinkConfig::DEFAULT_TIMEOUT_S
}

impl SyslogAuditSinkConfig {
    pub const DEFAULT_FACILITY: &'static str = "authpriv";
    pub const DEFAULT_APP_NAME: &'static str = "mcpgw";

    /// The facility's code (0..=23), when `facility` names one.
    pub fn facility_code(&self) -> Option<u8> {
        syslog_facility_code(&self.facility)
    }
}

fn default_facility() -> String {
    SyslogAuditSinkConfig::DEFAULT_FACILITY.to_owned()
}

fn default_app_name() -> String {
    SyslogAuditSinkConfig::DEFAULT_APP_NAME.to_owned()
}

/// The syslog facilities by name, each at the position of its code (0 to 23).
pub const SYSLOG_FACILITIES: [&str; 24] = [
    "kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron", "authpriv",
    "ftp", "ntp", "audit", "alert", "clock", "local0", "local1", "local2", "local3", "local4",
    "local5", "local6", "local7",
];

/// The code of the syslog facility `name`.
pub fn syslog_facility_code(name: &str) -> Option<u8> {
    SYSLOG_FACILITIES
        .iter()
        .position(|known| *known == name)
        .and_then(|code| u8::try_from(code).ok())
}

/// The range of `queue_size`.
pub(crate) const QUEUE_SIZE: (u64, u64) = (1, 1_000_000);

/// Checks the section: ranges, event type names, each sink's keys, unique sink names.
pub(crate) fn validate_audit(audit: &AuditConfig, path: &KeyPath, findings: &mut Findings) {
    let mut error = |kind, at: KeyPath, message: String| {
        findings.errors.push(Finding {
            kind,
            path: at,
            message,
        });
    };
    let (minimum, maximum) = QUEUE_SIZE;
    if !(minimum..=maximum).contains(&audit.queue_size) {
        error(
            ConfigErrorKind::OutOfRange,
            path.key("queue_size"),
            format!(
                "must be between {minimum} and {maximum}, got {}",
                audit.queue_size
            ),
        );
    }
    if let Some(names) = &audit.event_types {
        if names.is_empty() {
            error(
                ConfigErrorKind::InvalidValue,
                path.key("event_types"),
                "lists no event type; name at least one, or leave the key out to export the \
                 security events"
                    .to_owned(),
            );
        }
        for (index, name) in names.iter().enumerate() {
            if mcpgw_core::audit::event_type_named(name).is_none() {
                let advice = match nearest(name, mcpgw_core::EVENT_TYPES.iter().copied()) {
                    Some(suggestion) => format!("did you mean `{suggestion}`?"),
                    None => "name types as the event stream does (AuthenticationFailed, \
                             ApiKeyCreated, ...)"
                        .to_owned(),
                };
                error(
                    ConfigErrorKind::InvalidValue,
                    path.key("event_types").index(index),
                    format!("unknown event type `{name}`; {advice}"),
                );
            }
        }
    }
    let mut names: Vec<&str> = Vec::new();
    for (index, sink) in audit.sinks.iter().enumerate() {
        let at = path.key("sinks").index(index);
        let name = sink.name();
        if let Err(problem) = check_sink_name(name) {
            error(ConfigErrorKind::InvalidValue, at.key("name"), problem);
        } else if names.contains(&name) {
            error(
                ConfigErrorKind::InvalidValue,
                at.key("name"),
                format!(
                    "another sink is named `{name}` already; give each sink of the same type a \
                     `name` of its own"
                ),
            );
        }
        names.push(name);
        match sink {
            AuditSinkConfig::File(file) => {
                if file.path.trim().is_empty() {
                    error(
                        ConfigErrorKind::InvalidValue,
                        at.key("path"),
                        "is empty; name the file records are appended to, such as \
                         /var/log/mcpgw/audit.jsonl"
                            .to_owned(),
                    );
                } else if file.path.ends_with('/') {
                    error(
                        ConfigErrorKind::InvalidValue,
                        at.key("path"),
                        format!(
                            "`{}` names a directory; name a file in it, such as {}audit.jsonl",
                            file.path, file.path
                        ),
                    );
                }
            }
            AuditSinkConfig::Syslog(syslog) => {
                if let Err(problem) = check_syslog_address(&syslog.address) {
                    error(ConfigErrorKind::InvalidValue, at.key("address"), problem);
                }
                if syslog.facility_code().is_none() {
                    let advice = match nearest(&syslog.facility, SYSLOG_FACILITIES) {
                        Some(suggestion) => format!("did you mean `{suggestion}`?"),
                        None => format!("expected {}", quoted_list(&SYSLOG_FACILITIES)),
                    };
                    error(
                        ConfigErrorKind::InvalidValue,
                        at.key("facility"),
                        format!("unknown facility `{}`; {advice}", syslog.facility),
                    );
                }
                if let Err(problem) = check_header_field(&syslog.app_name, 48) {
                    error(ConfigErrorKind::InvalidValue, at.key("app_name"), problem);
                }
                if let Some(hostname) = &syslog.hostname
                    && let Err(problem) = check_header_field(hostname, 255)
                {
                    error(ConfigErrorKind::InvalidValue, at.key("hostname"), problem);
                }
            }
            AuditSinkConfig::Otlp(otlp) => crate::telemetry::check_otlp(
                otlp.endpoint.as_deref(),
                &otlp.headers,
                otlp.timeout_s,
                &at,
                &mut error,
            ),
        }
    }
}

/// A sink name: what a metric label and a log line can carry plainly.
fn check_sink_name(name: &str) -> Result<(), String> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if valid {
        Ok(())
    } else {
        Err(format!(
            "`{name}` is not a sink name; use 1 to 64 letters, digits, `-`, `_` or `.`"
        ))
    }
}

/// A field of the syslog header: 1 to `longest` printable ASCII characters, no space.
fn check_header_field(value: &str, longest: usize) -> Result<(), String> {
    if value.is_empty() || value.len() > longest || !value.bytes().all(|b| (33..=126).contains(&b))
    {
        return Err(format!(
            "`{value}` cannot be a syslog header field: use 1 to {longest} printable ASCII \
             characters without spaces"
        ));
    }
    Ok(())
}

/// `udp://host:port`, `tcp://host:port` or `unix:///absolute/path`. Deliberately small: the
/// syslog adapter parses the address for real; this catches what clearly is not one.
fn check_syslog_address(address: &str) -> Result<(), String> {
    const SHAPES: &str = "write udp://host:port, tcp://host:port or unix:///path";
    let Some((scheme, rest)) = address.split_once("://") else {
        return Err(format!("`{address}` is not a syslog address; {SHAPES}"));
    };
    match scheme {
        "udp" | "tcp" => {
            let (host, port) = rest
                .rsplit_once(':')
                .ok_or_else(|| format!("`{address}` has no port; {SHAPES}"))?;
            let host = host
                .strip_prefix('[')
                .and_then(|inner| inner.strip_suffix(']'))
                .unwrap_or(host);
            if host.is_empty() || host.contains(['/', ' ', '[', ']']) {
                return Err(format!("`{address}` has no valid host; {SHAPES}"));
            }
            match port.parse::<u16>() {
                Ok(port) if port > 0 => Ok(()),
                _ => Err(format!(
                    "`{address}` has no valid port (1 to 65535); {SHAPES}"
                )),
            }
        }
        "unix" => {
            if rest.starts_with('/') && rest.len() > 1 {
                Ok(())
            } else {
                Err(format!(
                    "`{address}` does not name an absolute socket path, such as unix:///dev/log"
                ))
            }
        }
        other => Err(format!("`{other}` is not a syslog transport; {SHAPES}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GatewayConfig;

    fn parse(text: &str) -> Result<GatewayConfig, String> {
        crate::parse("gateway.yaml", text, &|_| None).map_err(|errors| errors.to_string())
    }

    #[test]
    fn a_full_section_reads_and_writes_back_the_same() {
        let config = parse(
            "audit:\n  queue_size: 50\n  event_types: [ApiKeyCreated, McpServerRemoved]\n  sinks:\n\
             \x20   - {type: file, path: /var/log/mcpgw/audit.jsonl}\n\
             \x20   - {type: syslog, name: siem, address: \"tcp://[::1]:6514\", facility: local3, \
             app_name: gw, hostname: gw-1.example.com}\n",
        )
        .unwrap();
        let audit = &config.audit;
        assert_eq!(audit.queue_size, 50);
        assert_eq!(audit.event_types(), ["ApiKeyCreated", "McpServerRemoved"]);
        assert_eq!(
            audit.sinks[0],
            AuditSinkConfig::File(FileAuditSinkConfig {
                name: None,
                path: "/var/log/mcpgw/audit.jsonl".into(),
            })
        );
        let AuditSinkConfig::Syslog(syslog) = &audit.sinks[1] else {
            panic!("{:?}", audit.sinks[1]);
        };
        assert_eq!(syslog.facility_code(), Some(19));
        assert_eq!(audit.sinks[1].name(), "siem");
        assert_eq!(audit.sinks[0].name(), "file");
        // The export reads back as the same section.
        let again = parse(&crate::export_yaml(&config)).unwrap();
        assert_eq!(again.audit, config.audit);
        assert_eq!(again, config);
    }

    #[test]
    fn defaults_apply_and_an_absent_section_is_not_written() {
        let config =
            parse("audit:\n  sinks: [{type: syslog, address: \"unix:///dev/log\"}]\n").unwrap();
        let AuditSinkConfig::Syslog(syslog) = &config.audit.sinks[0] else {
            panic!();
        };
        assert_eq!(syslog.facility, "authpriv");
        assert_eq!(syslog.facility_code(), Some(10));
        assert_eq!(syslog.app_name, "mcpgw");
        assert_eq!(config.audit.queue_size, 10_000);
        assert_eq!(
            config.audit.event_types(),
            mcpgw_core::audit::SECURITY_EVENT_TYPES
        );
        let empty = parse("audit:\n").unwrap();
        assert!(empty.audit.is_default());
        assert!(!crate::export_yaml(&empty).contains("audit"));
        assert_eq!(empty, GatewayConfig::default());
    }

    #[test]
    fn bad_values_are_refused_naming_their_keys() {
        // Bad input: a queue too large, an unknown and a misspelt event type, an empty file
        // path, a directory, a syslog address without a port, an unknown transport, a relative
        // socket path, an unknown facility, an app name with a space, and two sinks of one name.
        let errors = parse(
            "audit:\n  queue_size: 2000000\n  event_types: [ApiKeyCreatd, Nothing]\n  sinks:\n\
             \x20   - {type: file, path: \"\"}\n\
             \x20   - {type: file, name: dir, path: /var/log/}\n\
             \x20   - {type: syslog, address: \"udp://localhost\"}\n\
             \x20   - {type: syslog, name: b, address: \"http://x:1\", facility: authpirv}\n\
             \x20   - {type: syslog, name: c, address: \"unix://dev/log\", app_name: \"my app\"}\n\
             \x20   - {type: syslog, name: c, address: \"tcp://h:0\"}\n",
        )
        .unwrap_err();
        for expected in [
            "audit.queue_size: must be between 1 and 1000000, got 2000000",
            "audit.event_types[0]: unknown event type `ApiKeyCreatd`; did you mean `ApiKeyCreated`?",
            "audit.event_types[1]: unknown event type `Nothing`",
            "audit.sinks[0].path: is empty",
            "audit.sinks[1].path: `/var/log/` names a directory",
            "audit.sinks[2].address: `udp://localhost` has no port",
            "audit.sinks[3].address: `http` is not a syslog transport",
            "audit.sinks[3].facility: unknown facility `authpirv`; did you mean `authpriv`?",
            "audit.sinks[4].address: `unix://dev/log` does not name an absolute socket path",
            "audit.sinks[4].app_name: `my app` cannot be a syslog header field",
            "audit.sinks[5].name: another sink is named `c` already",
            "audit.sinks[5].address: `tcp://h:0` has no valid port",
        ] {
            assert!(errors.contains(expected), "{expected}\nnot in:\n{errors}");
        }
    }

    #[test]
    fn an_empty_type_list_an_unknown_sink_type_and_unknown_keys_are_refused() {
        // Bad input: an empty list of event types.
        let errors = parse("audit:\n  event_types: []\n").unwrap_err();
        assert!(
            errors.contains("audit.event_types: lists no event type"),
            "{errors}"
        );
        // Bad input: a sink type that does not exist.
        let errors = parse("audit:\n  sinks: [{type: kafka, endpoint: x}]\n").unwrap_err();
        assert!(errors.contains("audit.sinks"), "{errors}");
        assert!(errors.contains("unknown value `kafka`"), "{errors}");
        // Bad input: an otlp sink whose endpoint is no URL, a timeout of 0, a header name
        // with a space.
        let errors = parse(
            "audit:\n  sinks: [{type: otlp, endpoint: x, timeout_s: 0, headers: {'a b': c}}]\n",
        )
        .unwrap_err();
        assert!(errors.contains("audit.sinks[0].endpoint"), "{errors}");
        assert!(errors.contains("audit.sinks[0].timeout_s"), "{errors}");
        assert!(
            errors.contains("is not a valid HTTP header name"),
            "{errors}"
        );
        // Bad input: a key of the syslog sink given to the file sink, and a misspelt key.
        let errors =
            parse("audit:\n  sinks: [{type: file, path: /a, facility: auth}]\n").unwrap_err();
        assert!(errors.contains("unknown key `facility`"), "{errors}");
        let errors = parse("audit:\n  queue_sise: 5\n").unwrap_err();
        assert!(
            errors
                .contains("audit.queue_sise: unknown key `queue_sise`; did you mean `queue_size`?"),
            "{errors}"
        );
        // Bad input: a sink without its required key.
        let errors = parse("audit:\n  sinks: [{type: syslog}]\n").unwrap_err();
        assert!(errors.contains("address"), "{errors}");
    }

    #[test]
    fn changing_the_section_needs_a_restart() {
        let old = parse("audit:\n  sinks: [{type: file, path: /a}]\n").unwrap();
        let new = parse("audit:\n  sinks: [{type: file, path: /b}]\n").unwrap();
        assert_ne!(old, new);
        assert_eq!(crate::changes(&old, &new).restart_required, ["audit"]);
        // Written out with its defaults, the section equals the section left out.
        let spelled = parse("audit: {queue_size: 10000}\n").unwrap();
        assert!(
            crate::changes(&GatewayConfig::default(), &spelled)
                .restart_required
                .is_empty()
        );
    }

    #[test]
    fn facility_names_map_to_their_codes() {
        assert_eq!(syslog_facility_code("kern"), Some(0));
        assert_eq!(syslog_facility_code("auth"), Some(4));
        assert_eq!(syslog_facility_code("local7"), Some(23));
        // Bad input: a name in capitals, and one that is no facility.
        assert_eq!(syslog_facility_code("AUTH"), None);
        assert_eq!(syslog_facility_code("local8"), None);
    }
}
