//! The audit exporter of the `audit` section: the sinks it names, built with the adapters of
//! `mcpgw-audit` (files, syslog) and `mcpgw-otel` (OTLP logs), and those an embedder hands the
//! builder.

use std::sync::Arc;

use mcpgw_config::{AuditSinkConfig, GatewayConfig};
use mcpgw_core::audit::AuditSink;
use mcpgw_gateway::audit::{AuditExporter, AuditSettings};

use crate::StartError;

/// Starts exporting to the configured sinks and to `extra`, with records naming `replica`;
/// `None` when there is no sink at all. A sink that cannot be built stops the start, naming
/// its key.
pub(crate) fn start(
    config: &GatewayConfig,
    extra: Vec<Arc<dyn AuditSink>>,
    replica: Option<String>,
    environment: &mcpgw_gateway::Environment,
) -> Result<Option<AuditExporter>, StartError> {
    let section = &config.audit;
    let mut sinks = Vec::new();
    for (index, sink) in section.sinks.iter().enumerate() {
        let cannot = |error: &dyn std::fmt::Display| {
            StartError::new(format!("audit.sinks[{index}]: {error}"))
        };
        let built: Arc<dyn AuditSink> = match sink {
            AuditSinkConfig::File(file) => Arc::new(
                mcpgw_audit::JsonLinesFileSink::open(&file.path)
                    .map_err(|e| cannot(&e))?
                    .with_name(sink.name()),
            ),
            AuditSinkConfig::Syslog(syslog) => {
                let address =
                    mcpgw_audit::SyslogAddress::parse(&syslog.address).map_err(|e| cannot(&e))?;
                let facility = syslog.facility_code().ok_or_else(|| {
                    cannot(&format!("unknown syslog facility `{}`", syslog.facility))
                })?;
                let settings = mcpgw_audit::SyslogSettings {
                    facility,
                    app_name: syslog.app_name.clone(),
                    hostname: syslog.hostname.clone(),
                    ..mcpgw_audit::SyslogSettings::new(address)
                };
                Arc::new(
                    mcpgw_audit::SyslogSink::new(settings)
                        .map_err(|e| cannot(&e))?
                        .with_name(sink.name()),
                )
            }
            AuditSinkConfig::Otlp(otlp) => {
                let settings = mcpgw_otel::LogSettings::resolve(
                    otlp.endpoint.as_deref(),
                    otlp.protocol,
                    &otlp.headers,
                    std::time::Duration::from_secs(otlp.timeout_s),
                    &|name| environment(name),
                )
                .map_err(|e| cannot(&e))?;
                Arc::new(
                    mcpgw_otel::OtlpLogSink::new(&settings)
                        .map_err(|e| cannot(&e))?
                        .with_name(sink.name()),
                )
            }
            // A sink type the configuration knows and this build has no adapter for.
            other => {
                return Err(cannot(&format!(
                    "sinks of type `{}` cannot be built by this gateway",
                    other.type_name()
                )));
            }
        };
        sinks.push(built);
    }
    sinks.extend(extra);
    if sinks.is_empty() {
        return Ok(None);
    }
    let settings = AuditSettings {
        queue_size: usize::try_from(section.queue_size)
            .unwrap_or(AuditSettings::DEFAULT_QUEUE_SIZE),
        replica,
        ..AuditSettings::default()
    }
    .with_event_types(section.event_types())
    .map_err(|error| StartError::new(format!("audit.event_types: {error}")))?;
    Ok(Some(AuditExporter::start(sinks, settings)))
}
