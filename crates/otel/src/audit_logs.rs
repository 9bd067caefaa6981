//! Audit records as OTLP log records: the `otlp` audit sink.
//!
//! Each record becomes one log record: the event type as its event name (and the `event.name`
//! attribute), the record's severity, the time the event was published, the event as the JSON
//! text the event stream shows (lossless: a missing value stays `null`, as log backends parse
//! JSON bodies), and as attributes the event id, the replica and the event's top-level values
//! (`mcpgw.event.principal`, `mcpgw.event.reason`, ...) for querying without parsing. A batch of
//! records is one export, awaited, so the audit exporter in front of this sink sees every
//! failure (and retries, or counts what it drops) and the order of records is kept.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use mcpgw_config::OtlpProtocol;
use mcpgw_core::audit::{AuditRecord, AuditSeverity, AuditSink, AuditSinkError};
use opentelemetry::InstrumentationScope;
use opentelemetry::logs::{AnyValue, LogRecord as _, Logger as _, LoggerProvider as _, Severity};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::logs::{LogBatch, LogExporter as _, SdkLogger, SdkLoggerProvider};

use crate::OtelError;

/// Where the audit log records go: resolved like the trace settings, from the sink's own keys
/// with the `OTEL_EXPORTER_OTLP_LOGS_*` and `OTEL_EXPORTER_OTLP_*` variables laid over them.
#[derive(Debug, Clone, PartialEq)]
pub struct LogSettings {
    /// The full URL records are sent to: `.../v1/logs` for OTLP/HTTP, the collector's address
    /// for gRPC.
    pub endpoint: String,
    pub protocol: OtlpProtocol,
    pub headers: BTreeMap<String, String>,
    pub timeout: Duration,
    pub service_name: String,
}

impl LogSettings {
    /// An `otlp` sink's settings: its own keys, then the `OTEL_EXPORTER_OTLP_LOGS_*` and
    /// `OTEL_EXPORTER_OTLP_*` variables for what it leaves out, then OTLP's defaults. Headers
    /// of the variables come first and the sink's own win.
    pub fn resolve(
        endpoint: Option<&str>,
        protocol: Option<OtlpProtocol>,
        headers: &BTreeMap<String, String>,
        timeout: Duration,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, crate::SettingsError> {
        let set = |name: &'static str| {
            env(name)
                .filter(|value| !value.trim().is_empty())
                .map(|value| (name, value))
        };
        let protocol = match protocol {
            Some(protocol) => protocol,
            None => match set("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL")
                .or_else(|| set("OTEL_EXPORTER_OTLP_PROTOCOL"))
            {
                Some((name, value)) => OtlpProtocol::parse(&value).ok_or_else(|| {
                    crate::settings::invalid(
                        name,
                        &value,
                        "the gateway exports `http/protobuf` or `grpc`",
                    )
                })?,
                None => OtlpProtocol::default(),
            },
        };
        let with_path = |base: &str| match protocol {
            OtlpProtocol::HttpProtobuf => format!("{}/v1/logs", base.trim_end_matches('/')),
            OtlpProtocol::Grpc => base.to_owned(),
        };
        let endpoint = match endpoint {
            Some(endpoint) => with_path(endpoint),
            None => match set("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT") {
                Some((_, value)) => value.trim().to_owned(),
                None => with_path(
                    &set("OTEL_EXPORTER_OTLP_ENDPOINT")
                        .map_or_else(|| protocol.default_endpoint().to_owned(), |(_, v)| v),
                ),
            },
        };
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            return Err(crate::settings::invalid(
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                &endpoint,
                "must be an http:// or https:// URL, such as http://localhost:4318",
            ));
        }
        let mut merged = BTreeMap::new();
        for name in [
            "OTEL_EXPORTER_OTLP_HEADERS",
            "OTEL_EXPORTER_OTLP_LOGS_HEADERS",
        ] {
            if let Some((name, value)) = set(name) {
                merged.extend(crate::settings::parse_headers(name, &value)?);
            }
        }
        merged.extend(headers.clone());
        let service_name = set("OTEL_SERVICE_NAME").map_or_else(
            || crate::TracesConfig::DEFAULT_SERVICE_NAME.to_owned(),
            |(_, name)| name.trim().to_owned(),
        );
        Ok(Self {
            endpoint,
            protocol,
            headers: merged,
            timeout,
            service_name,
        })
    }
}

/// The `otlp` audit sink.
pub struct OtlpLogSink {
    exporter: opentelemetry_otlp::LogExporter,
    /// Makes the SDK's log records (it exports nothing itself).
    logger: SdkLogger,
    scope: InstrumentationScope,
    endpoint: String,
    name: String,
}

impl std::fmt::Debug for OtlpLogSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtlpLogSink")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl OtlpLogSink {
    /// A sink exporting to `settings`. gRPC needs a Tokio runtime: call this from within one.
    pub fn new(settings: &LogSettings) -> Result<Self, OtelError> {
        let exporter_error = |message: String| OtelError::Exporter {
            endpoint: settings.endpoint.clone(),
            message,
        };
        let mut exporter = match settings.protocol {
            OtlpProtocol::HttpProtobuf => {
                let client = reqwest::Client::builder()
                    .timeout(settings.timeout)
                    .build()
                    .map_err(|error| exporter_error(error.to_string()))?;
                opentelemetry_otlp::LogExporter::builder()
                    .with_http()
                    .with_http_client(client)
                    .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                    .with_endpoint(settings.endpoint.clone())
                    .with_timeout(settings.timeout)
                    .with_headers(settings.headers.clone().into_iter().collect())
                    .build()
                    .map_err(|error| exporter_error(error.to_string()))?
            }
            OtlpProtocol::Grpc => crate::grpc_exporter(
                opentelemetry_otlp::LogExporter::builder().with_tonic(),
                &settings.endpoint,
                &settings.headers,
                settings.timeout,
            )
            .map_err(&exporter_error)?
            .build()
            .map_err(|error| exporter_error(error.to_string()))?,
        };
        let resource = Resource::builder()
            .with_service_name(settings.service_name.clone())
            .build();
        opentelemetry_sdk::logs::LogExporter::set_resource(&mut exporter, &resource);
        let logger = SdkLoggerProvider::builder().build().logger("mcpgw.audit");
        Ok(Self {
            exporter,
            logger,
            scope: InstrumentationScope::builder("mcpgw.audit")
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
            endpoint: settings.endpoint.clone(),
            name: "otlp".to_owned(),
        })
    }

    /// The same sink under another name (in metrics and logs); `otlp` by default.
    #[must_use]
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }
}

#[async_trait]
impl AuditSink for OtlpLogSink {
    fn name(&self) -> &str {
        &self.name
    }

    async fn write(&self, records: &[AuditRecord]) -> Result<(), AuditSinkError> {
        if records.is_empty() {
            return Ok(());
        }
        let made: Vec<_> = records
            .iter()
            .map(|record| self.log_record(record))
            .collect();
        let pairs: Vec<_> = made.iter().map(|record| (record, &self.scope)).collect();
        self.exporter
            .export(LogBatch::new(&pairs))
            .await
            .map_err(|error| {
                AuditSinkError::Unavailable(format!(
                    "the OTLP collector at {} did not take the records: {error}",
                    self.endpoint
                ))
            })
    }
}

impl OtlpLogSink {
    fn log_record(&self, record: &AuditRecord) -> opentelemetry_sdk::logs::SdkLogRecord {
        let mut log = self.logger.create_log_record();
        if let Some(name) = mcpgw_core::EVENT_TYPES
            .iter()
            .find(|name| **name == record.event_type)
        {
            log.set_event_name(name);
        }
        log.set_timestamp(system_time(&record.occurred_at).unwrap_or_else(SystemTime::now));
        log.set_observed_timestamp(SystemTime::now());
        let (number, text) = match record.severity {
            AuditSeverity::Info => (Severity::Info, "INFO"),
            AuditSeverity::Notice => (Severity::Info2, "NOTICE"),
            AuditSeverity::Warning => (Severity::Warn, "WARN"),
            _ => (Severity::Info, "INFO"),
        };
        log.set_severity_number(number);
        log.set_severity_text(text);
        let body = serde_json::to_string(&record.event).unwrap_or_default();
        log.set_body(AnyValue::String(body.into()));
        log.add_attribute("event.name", record.event_type.clone());
        log.add_attribute("mcpgw.event_id", record.event_id.to_string());
        if let Some(replica) = &record.replica {
            log.add_attribute("mcpgw.replica", replica.clone());
        }
        for (key, value) in &record.event {
            if let Some(value) = scalar_value(value) {
                log.add_attribute(format!("mcpgw.event.{key}"), value);
            }
        }
        log
    }
}

/// A JSON scalar (text, number, boolean) as an OTLP value; `None` for null, arrays and objects,
/// which the body carries.
fn scalar_value(value: &serde_json::Value) -> Option<AnyValue> {
    match value {
        serde_json::Value::Bool(flag) => Some(AnyValue::Boolean(*flag)),
        serde_json::Value::Number(number) => Some(match number.as_i64() {
            Some(whole) => AnyValue::Int(whole),
            None => AnyValue::Double(number.as_f64().unwrap_or_default()),
        }),
        serde_json::Value::String(text) => Some(AnyValue::String(text.clone().into())),
        _ => None,
    }
}

/// `2026-03-01T09:30:00.123456Z` (what records carry) as a time; `None` for anything else.
fn system_time(text: &str) -> Option<SystemTime> {
    let text = text.strip_suffix('Z')?;
    let (date, time) = text.split_once('T')?;
    let mut date = date.split('-').map(str::parse::<i64>);
    let (year, month, day) = (date.next()?.ok()?, date.next()?.ok()?, date.next()?.ok()?);
    let (clock, fraction) = time.split_once('.').unwrap_or((time, "0"));
    let mut clock = clock.split(':').map(str::parse::<i64>);
    let (hour, minute, second) = (
        clock.next()?.ok()?,
        clock.next()?.ok()?,
        clock.next()?.ok()?,
    );
    let digits: String = fraction.chars().take(9).collect();
    let nanos = digits.parse::<u64>().ok()? * 10u64.pow(9 - u32::try_from(digits.len()).ok()?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    // Days since 1970-01-01 of a proleptic Gregorian date.
    let shifted = if month <= 2 { year - 1 } else { year };
    let era = shifted.div_euclid(400);
    let year_of_era = shifted - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = era * 146_097 + day_of_era - 719_468;
    let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second;
    let seconds = u64::try_from(seconds).ok()?;
    Some(UNIX_EPOCH + Duration::from_secs(seconds) + Duration::from_nanos(nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sinks_keys_win_and_the_variables_fill_in() {
        let env = |name: &str| match name {
            "OTEL_EXPORTER_OTLP_ENDPOINT" => Some("http://collector:4318/".to_owned()),
            "OTEL_EXPORTER_OTLP_HEADERS" => Some("tenant=a,x-key=k".to_owned()),
            "OTEL_SERVICE_NAME" => Some("edge".to_owned()),
            _ => None,
        };
        let own = BTreeMap::from([("tenant".to_owned(), "b".to_owned())]);
        let settings =
            LogSettings::resolve(None, None, &own, Duration::from_secs(3), &env).expect("valid");
        assert_eq!(settings.endpoint, "http://collector:4318/v1/logs");
        assert_eq!(
            settings.headers["tenant"], "b",
            "the sink's own header wins"
        );
        assert_eq!(settings.headers["x-key"], "k");
        assert_eq!(settings.service_name, "edge");
        let settings = LogSettings::resolve(
            Some("http://other:4317"),
            Some(OtlpProtocol::Grpc),
            &BTreeMap::new(),
            Duration::from_secs(3),
            &env,
        )
        .expect("valid");
        assert_eq!(settings.endpoint, "http://other:4317");
        // Bad input tried: a protocol variable the gateway cannot export with.
        let bad = |name: &str| (name == "OTEL_EXPORTER_OTLP_PROTOCOL").then(|| "http/json".into());
        let error = LogSettings::resolve(None, None, &BTreeMap::new(), Duration::ZERO, &bad)
            .expect_err("refused");
        assert!(
            error.to_string().starts_with("OTEL_EXPORTER_OTLP_PROTOCOL"),
            "{error}"
        );
    }

    #[test]
    fn record_times_are_read_to_the_microsecond() {
        let time = system_time("2026-03-01T09:30:00.123456Z").expect("valid");
        let since = time.duration_since(UNIX_EPOCH).unwrap();
        assert_eq!(since.as_secs(), 1_772_357_400);
        assert_eq!(since.subsec_micros(), 123_456);
        assert_eq!(
            system_time("1970-01-01T00:00:00Z"),
            Some(UNIX_EPOCH),
            "whole seconds"
        );
        // Bad input tried: no zone, a month 13, words, an empty text.
        for bad in [
            "2026-03-01T09:30:00",
            "2026-13-01T00:00:00Z",
            "yesterday",
            "",
        ] {
            assert_eq!(system_time(bad), None, "{bad}");
        }
    }

    #[test]
    fn json_scalars_become_otlp_values_and_the_rest_stays_in_the_body() {
        let values = [
            (serde_json::json!(1), Some(AnyValue::Int(1))),
            (serde_json::json!(2.5), Some(AnyValue::Double(2.5))),
            (serde_json::json!("x"), Some(AnyValue::String("x".into()))),
            (serde_json::json!(true), Some(AnyValue::Boolean(true))),
            (serde_json::json!(null), None),
            (serde_json::json!([1]), None),
            (serde_json::json!({"a": 1}), None),
        ];
        for (value, expected) in values {
            assert_eq!(scalar_value(&value), expected, "{value}");
        }
    }
}
