//! The `telemetry` section: OpenTelemetry traces exported over OTLP, and the bounds of the
//! Prometheus metrics.
//!
//! ```yaml
//! telemetry:
//!   metrics:
//!     max_tool_labels: 1000                 # distinct `tool` label values per server
//!   traces:
//!     enabled: true
//!     endpoint: "http://collector:4318"     # OTLP/HTTP: /v1/traces is appended
//!     protocol: http/protobuf               # or grpc (port 4317 by default)
//!     headers: {x-api-key: "${OTLP_KEY}"}
//!     sampler: parentbased_traceidratio
//!     sampler_arg: 0.01
//!     service_name: mcpgw
//! ```
//!
//! The standard `OTEL_*` environment variables win over the file, as in every OpenTelemetry
//! SDK: `OTEL_TRACES_EXPORTER=otlp` alone turns tracing on (and `none` off),
//! `OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT`, `..._PROTOCOL`, `..._HEADERS`, `..._TIMEOUT`,
//! `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER` and
//! `OTEL_TRACES_SAMPLER_ARG`. The section takes effect at the next start.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::de;
use crate::error::ConfigErrorKind;
use crate::path::KeyPath;
use crate::validate::{Finding, Findings};

/// The `telemetry` section.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryConfig {
    /// Traces of requests, tool calls, starts and store writes.
    #[serde(default, deserialize_with = "de::null_as_default")]
    pub traces: TracesConfig,
    /// The Prometheus metrics of `/metrics`.
    #[serde(default, deserialize_with = "de::null_as_default")]
    pub metrics: MetricsConfig,
}

/// `telemetry.metrics`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// Distinct `tool` label values per server (1..100,000); calls of further tools are counted
    /// under `tool="(other)"`.
    pub max_tool_labels: u64,
}

impl MetricsConfig {
    pub const DEFAULT_MAX_TOOL_LABELS: u64 = 1000;
}

impl Default for MetricsConfig {
    fn default() -> Self {
        Self {
            max_tool_labels: Self::DEFAULT_MAX_TOOL_LABELS,
        }
    }
}

const MAX_TOOL_LABELS: (u64, u64) = (1, 100_000);

impl TelemetryConfig {
    /// Whether the section is what leaving it out gives.
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// How traces are exported: OTLP over HTTP (protobuf) or gRPC.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum OtlpProtocol {
    #[default]
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
    #[serde(rename = "grpc")]
    Grpc,
}

impl OtlpProtocol {
    /// The protocol's name, as `OTEL_EXPORTER_OTLP_PROTOCOL` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            OtlpProtocol::HttpProtobuf => "http/protobuf",
            OtlpProtocol::Grpc => "grpc",
        }
    }

    /// The protocol an `OTEL_EXPORTER_OTLP_PROTOCOL` value names; `None` for any other.
    pub fn parse(name: &str) -> Option<Self> {
        match name.trim() {
            "http/protobuf" => Some(OtlpProtocol::HttpProtobuf),
            "grpc" => Some(OtlpProtocol::Grpc),
            _ => None,
        }
    }

    /// The collector's address when none is configured (OTLP's default ports).
    pub fn default_endpoint(self) -> &'static str {
        match self {
            OtlpProtocol::HttpProtobuf => "http://localhost:4318",
            OtlpProtocol::Grpc => "http://localhost:4317",
        }
    }
}

/// Which traces are recorded, as `OTEL_TRACES_SAMPLER` names the choices.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SamplerName {
    AlwaysOn,
    AlwaysOff,
    TraceIdRatio,
    /// A caller's sampled trace is recorded, its unsampled one not; new traces always.
    #[default]
    ParentbasedAlwaysOn,
    ParentbasedAlwaysOff,
    /// A caller's decision is followed; new traces are recorded at `sampler_arg`'s ratio.
    ParentbasedTraceidratio,
}

impl SamplerName {
    pub const NAMES: &[&str] = &[
        "always_on",
        "always_off",
        "traceidratio",
        "parentbased_always_on",
        "parentbased_always_off",
        "parentbased_traceidratio",
    ];

    /// The sampler an `OTEL_TRACES_SAMPLER` value names; `None` for any other.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name.trim() {
            "always_on" => SamplerName::AlwaysOn,
            "always_off" => SamplerName::AlwaysOff,
            "traceidratio" => SamplerName::TraceIdRatio,
            "parentbased_always_on" => SamplerName::ParentbasedAlwaysOn,
            "parentbased_always_off" => SamplerName::ParentbasedAlwaysOff,
            "parentbased_traceidratio" => SamplerName::ParentbasedTraceidratio,
            _ => return None,
        })
    }

    /// Whether `sampler_arg` (the ratio) counts for this sampler.
    pub fn takes_ratio(self) -> bool {
        matches!(
            self,
            SamplerName::TraceIdRatio | SamplerName::ParentbasedTraceidratio
        )
    }
}

/// `telemetry.traces`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TracesConfig {
    /// Export traces (off by default; `OTEL_TRACES_EXPORTER=otlp` turns it on).
    pub enabled: bool,
    /// The collector: a base URL for OTLP/HTTP (`/v1/traces` is appended) or the gRPC
    /// address; OTLP's default for the protocol when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    pub protocol: OtlpProtocol,
    /// Headers sent with every export (credentials of a hosted collector); shown masked.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    pub sampler: SamplerName,
    /// The ratio of new traces recorded by the ratio samplers, 0.0..=1.0.
    pub sampler_arg: f64,
    /// The `service.name` of the gateway's spans.
    pub service_name: String,
    /// Seconds an export may take before it is given up (1..300).
    pub timeout_s: u64,
}

impl TracesConfig {
    pub const DEFAULT_SERVICE_NAME: &str = "mcpgw";
    pub const DEFAULT_TIMEOUT_S: u64 = 10;
}

impl Default for TracesConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            endpoint: None,
            protocol: OtlpProtocol::default(),
            headers: BTreeMap::new(),
            sampler: SamplerName::default(),
            sampler_arg: 1.0,
            service_name: Self::DEFAULT_SERVICE_NAME.to_owned(),
            timeout_s: Self::DEFAULT_TIMEOUT_S,
        }
    }
}

const TIMEOUT_S: (u64, u64) = (1, 300);

pub(crate) fn validate_telemetry(
    telemetry: &TelemetryConfig,
    path: &KeyPath,
    findings: &mut Findings,
) {
    let traces = &telemetry.traces;
    let mut error = |kind, at: KeyPath, message: String| {
        findings.errors.push(Finding {
            kind,
            path: at,
            message,
        });
    };
    let (minimum, maximum) = MAX_TOOL_LABELS;
    let max_tool_labels = telemetry.metrics.max_tool_labels;
    if !(minimum..=maximum).contains(&max_tool_labels) {
        error(
            ConfigErrorKind::OutOfRange,
            path.key("metrics").key("max_tool_labels"),
            format!("must be between {minimum} and {maximum}, got {max_tool_labels}"),
        );
    }
    let path = path.key("traces");
    check_otlp(
        traces.endpoint.as_deref(),
        &traces.headers,
        traces.timeout_s,
        &path,
        &mut error,
    );
    if !(0.0..=1.0).contains(&traces.sampler_arg) {
        error(
            ConfigErrorKind::OutOfRange,
            path.key("sampler_arg"),
            format!(
                "must be a ratio between 0.0 and 1.0, got {}",
                traces.sampler_arg
            ),
        );
    }
    if traces.service_name.trim().is_empty() {
        error(
            ConfigErrorKind::InvalidValue,
            path.key("service_name"),
            "is empty; name the service the gateway's spans belong to (mcpgw by default)"
                .to_owned(),
        );
    }
}

/// The checks every OTLP exporter's keys get (`telemetry.traces`, an `otlp` audit sink):
/// `endpoint` an http(s) URL, `timeout_s` in range, header names that are names.
pub(crate) fn check_otlp(
    endpoint: Option<&str>,
    headers: &BTreeMap<String, String>,
    timeout_s: u64,
    at: &KeyPath,
    error: &mut dyn FnMut(ConfigErrorKind, KeyPath, String),
) {
    if let Some(endpoint) = endpoint {
        let scheme_ok = endpoint.starts_with("http://") || endpoint.starts_with("https://");
        if !scheme_ok || endpoint.len() <= "https://".len() {
            error(
                ConfigErrorKind::InvalidValue,
                at.key("endpoint"),
                format!(
                    "`{endpoint}` is not an http:// or https:// URL; give the collector's \
                     address, such as http://localhost:4318"
                ),
            );
        }
    }
    let (minimum, maximum) = TIMEOUT_S;
    if !(minimum..=maximum).contains(&timeout_s) {
        error(
            ConfigErrorKind::OutOfRange,
            at.key("timeout_s"),
            format!("must be between {minimum} and {maximum}, got {timeout_s}"),
        );
    }
    for name in headers.keys() {
        let valid = !name.is_empty()
            && name
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || b"-_".contains(&byte));
        if !valid {
            error(
                ConfigErrorKind::InvalidValue,
                at.key("headers").key(name.as_str()),
                format!("`{name}` is not a valid HTTP header name"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::ParseOptions;

    fn parse_config_str(
        yaml: &str,
        options: &ParseOptions,
    ) -> Result<crate::GatewayConfig, crate::ConfigErrors> {
        crate::parse_with("gateway.yaml", yaml, &|_| None, options)
    }

    fn errors_of(yaml: &str) -> String {
        match parse_config_str(yaml, &ParseOptions::default()) {
            Ok(_) => String::new(),
            Err(errors) => errors.to_string(),
        }
    }

    #[test]
    fn a_full_section_is_read() {
        let config = parse_config_str(
            "telemetry:\n  traces:\n    enabled: true\n    endpoint: http://collector:4317\n    \
             protocol: grpc\n    headers: {x-api-key: secret}\n    sampler: \
             parentbased_traceidratio\n    sampler_arg: 0.01\n    service_name: edge\n",
            &ParseOptions::default(),
        )
        .expect("valid");
        let traces = &config.telemetry.traces;
        assert!(traces.enabled);
        assert_eq!(traces.protocol, super::OtlpProtocol::Grpc);
        assert_eq!(traces.sampler, super::SamplerName::ParentbasedTraceidratio);
        assert!((traces.sampler_arg - 0.01).abs() < f64::EPSILON);
        assert_eq!(traces.service_name, "edge");
        assert_eq!(traces.headers["x-api-key"], "secret");
    }

    #[test]
    fn exporter_headers_are_shown_masked() {
        let config = parse_config_str(
            "telemetry:\n  traces:\n    headers: {authorization: Bearer-abc}\naudit:\n  sinks:\n    \
             - {type: otlp, endpoint: 'http://c:4318', headers: {x-api-key: key-xyz}}\n",
            &ParseOptions::default(),
        )
        .expect("valid");
        let shown = crate::sanitized(&config).to_string();
        assert!(!shown.contains("Bearer-abc"), "{shown}");
        assert!(!shown.contains("key-xyz"), "{shown}");
        assert!(shown.contains("***"), "{shown}");
    }

    #[test]
    fn bad_values_are_errors_at_their_keys() {
        // Bad input tried: an unknown protocol, an unknown sampler, a ratio above 1, a
        // timeout of 0, an endpoint that is no URL, an empty service name, an unknown key.
        let errors = errors_of("telemetry:\n  traces:\n    protocol: http/json\n");
        assert!(errors.contains("telemetry.traces.protocol"), "{errors}");
        let errors = errors_of("telemetry:\n  traces:\n    sampler: sometimes\n");
        assert!(errors.contains("telemetry.traces.sampler"), "{errors}");
        let errors = errors_of("telemetry:\n  traces:\n    sampler_arg: 1.5\n");
        assert!(errors.contains("telemetry.traces.sampler_arg"), "{errors}");
        let errors = errors_of("telemetry:\n  traces:\n    timeout_s: 0\n");
        assert!(errors.contains("telemetry.traces.timeout_s"), "{errors}");
        let errors = errors_of("telemetry:\n  traces:\n    endpoint: collector:4318\n");
        assert!(errors.contains("telemetry.traces.endpoint"), "{errors}");
        let errors = errors_of("telemetry:\n  traces:\n    service_name: ' '\n");
        assert!(errors.contains("telemetry.traces.service_name"), "{errors}");
        let errors = errors_of("telemetry:\n  metrics:\n    max_tool_labels: 0\n");
        assert!(
            errors.contains("telemetry.metrics.max_tool_labels"),
            "{errors}"
        );
        let errors = errors_of("telemetry:\n  traces:\n    sampling: 1\n");
        assert!(errors.contains("sampling"), "{errors}");
    }
}
