//! OpenTelemetry traces of mcpgw, exported over OTLP.
//!
//! [`start`] builds an SDK tracer provider from [`TraceSettings`] (the `telemetry.traces`
//! section with the standard `OTEL_*` variables laid over it), exporting by OTLP/HTTP with
//! protobuf bodies or by gRPC, and installs it as the gateway's tracer
//! ([`mcpgw_core::trace::install`]). Spans are sampled by the configured sampler, batched, and
//! exported from the SDK's own thread: a slow or absent collector never slows a request (the
//! batch queue is bounded; spans beyond it are dropped by the SDK). [`Tracing::shutdown`]
//! exports what is queued and uninstalls the tracer.
//!
//! An embedder that runs its own OpenTelemetry pipeline can skip [`start`] and install
//! [`OtelTracer`] over a tracer of its own provider instead.

mod audit_logs;
mod settings;
mod tracer;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use mcpgw_config::{OtlpProtocol, SamplerName, TracesConfig};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig, WithTonicConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};

pub use audit_logs::{LogSettings, OtlpLogSink};
pub use settings::{SettingsError, TraceSettings};
pub use tracer::OtelTracer;

/// Why tracing could not start.
#[derive(Debug, thiserror::Error)]
pub enum OtelError {
    #[error(transparent)]
    Settings(#[from] SettingsError),
    #[error("the OTLP exporter for {endpoint} could not be built: {message}")]
    Exporter { endpoint: String, message: String },
}

/// Running trace export; [`Tracing::shutdown`] ends it.
pub struct Tracing {
    provider: SdkTracerProvider,
    settings: TraceSettings,
}

impl std::fmt::Debug for Tracing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracing")
            .field("endpoint", &self.settings.endpoint)
            .field("protocol", &self.settings.protocol)
            .finish_non_exhaustive()
    }
}

impl Tracing {
    /// What it exports to, for the startup log.
    pub fn settings(&self) -> &TraceSettings {
        &self.settings
    }

    /// Stops recording spans, then exports what is queued (waiting at most `timeout`). It
    /// blocks: call it outside the runtime's tasks (as the bundled server does after its
    /// runtime's last `block_on`), or in `spawn_blocking`.
    pub fn shutdown(self, timeout: Duration) {
        mcpgw_core::trace::uninstall();
        if let Err(error) = self.provider.shutdown_with_timeout(timeout) {
            tracing::warn!(%error, "not every span could be exported at shutdown");
        }
    }
}

/// Starts exporting traces as `settings` say and installs the tracer; `Ok(None)` when tracing
/// is off. gRPC export needs a Tokio runtime: call this from within one.
pub fn start(settings: TraceSettings) -> Result<Option<Tracing>, OtelError> {
    if !settings.enabled {
        return Ok(None);
    }
    let exporter_error = |error: opentelemetry_otlp::ExporterBuildError| OtelError::Exporter {
        endpoint: settings.endpoint.clone(),
        message: error.to_string(),
    };
    let exporter = match settings.protocol {
        OtlpProtocol::HttpProtobuf => opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(blocking_client(settings.timeout).map_err(|message| {
                OtelError::Exporter {
                    endpoint: settings.endpoint.clone(),
                    message,
                }
            })?)
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_endpoint(settings.endpoint.clone())
            .with_timeout(settings.timeout)
            .with_headers(
                settings
                    .headers
                    .iter()
                    .map(|(key, value)| (key.clone(), value.clone()))
                    .collect::<HashMap<_, _>>(),
            )
            .build()
            .map_err(exporter_error)?,
        OtlpProtocol::Grpc => {
            let builder = grpc_exporter(
                opentelemetry_otlp::SpanExporter::builder().with_tonic(),
                &settings.endpoint,
                &settings.headers,
                settings.timeout,
            )
            .map_err(|message| OtelError::Exporter {
                endpoint: settings.endpoint.clone(),
                message,
            })?;
            builder.build().map_err(exporter_error)?
        }
    };
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_sampler(sampler_of(settings.sampler, settings.ratio))
        .with_resource(
            Resource::builder()
                .with_service_name(settings.service_name.clone())
                .with_attribute(opentelemetry::KeyValue::new(
                    "service.version",
                    env!("CARGO_PKG_VERSION"),
                ))
                .build(),
        )
        .build();
    let tracer = provider.tracer("mcpgw");
    mcpgw_core::trace::install(Arc::new(OtelTracer::new(tracer)));
    Ok(Some(Tracing { provider, settings }))
}

/// The blocking HTTP client the SDK's export thread sends spans with. Made on a thread of its
/// own: a blocking client runs a runtime of its own, which cannot be made inside the gateway's.
fn blocking_client(timeout: Duration) -> Result<reqwest::blocking::Client, String> {
    std::thread::spawn(move || {
        reqwest::blocking::Client::builder()
            .timeout(timeout)
            .build()
    })
    .join()
    .map_err(|_| "the thread making the HTTP client failed".to_owned())?
    .map_err(|error| format!("the HTTP client cannot be made: {error}"))
}

/// A gRPC exporter's builder sending to `endpoint` with `headers` as metadata, TLS with the
/// system's roots for an `https://` endpoint; the error names a header that cannot be sent.
pub(crate) fn grpc_exporter<B: WithExportConfig + WithTonicConfig>(
    builder: B,
    endpoint: &str,
    headers: &std::collections::BTreeMap<String, String>,
    timeout: Duration,
) -> Result<B, String> {
    let mut builder = builder
        .with_endpoint(endpoint.to_owned())
        .with_timeout(timeout)
        .with_metadata(grpc_metadata(headers)?);
    if endpoint.starts_with("https://") {
        builder = builder.with_tls_config(
            opentelemetry_otlp::tonic_types::transport::ClientTlsConfig::new().with_native_roots(),
        );
    }
    Ok(builder)
}

/// Headers as gRPC metadata; the error names a header that cannot be one.
fn grpc_metadata(
    headers: &std::collections::BTreeMap<String, String>,
) -> Result<opentelemetry_otlp::tonic_types::metadata::MetadataMap, String> {
    let mut map = http::HeaderMap::new();
    for (key, value) in headers {
        let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(key.as_bytes()),
            http::HeaderValue::from_str(value),
        ) else {
            return Err(format!(
                "the header `{key}` cannot be sent as gRPC metadata"
            ));
        };
        map.insert(name, value);
    }
    Ok(opentelemetry_otlp::tonic_types::metadata::MetadataMap::from_headers(map))
}

fn sampler_of(name: SamplerName, ratio: f64) -> Sampler {
    match name {
        SamplerName::AlwaysOn => Sampler::AlwaysOn,
        SamplerName::AlwaysOff => Sampler::AlwaysOff,
        SamplerName::TraceIdRatio => Sampler::TraceIdRatioBased(ratio),
        SamplerName::ParentbasedAlwaysOn => Sampler::ParentBased(Box::new(Sampler::AlwaysOn)),
        SamplerName::ParentbasedAlwaysOff => Sampler::ParentBased(Box::new(Sampler::AlwaysOff)),
        SamplerName::ParentbasedTraceidratio => {
            Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(ratio)))
        }
    }
}
