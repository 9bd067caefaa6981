//! The OpenTelemetry tracer against the tracing port's contract, over an SDK provider with the
//! default sampler (parent-based, always on) and no exporter: what is checked is what the
//! gateway's code sees of a span, not what leaves the process (the end-to-end tests check that).

use std::sync::Arc;

use mcpgw_core::trace::Tracer;
use mcpgw_otel::OtelTracer;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;

fn tracer() -> Arc<dyn Tracer> {
    let provider = SdkTracerProvider::builder().build();
    Arc::new(OtelTracer::new(provider.tracer("contract")))
}

mcpgw_testkit::tracer_contract_suite!(tracer());
