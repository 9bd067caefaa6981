//! How to embed mcpgw in a service of one's own, with a launcher of one's own.
//!
//! The bundled server launches MCP servers as processes; this example plugs in a different
//! adapter instead: an in-process "calculator" that implements the [`McpSession`] port directly,
//! and a [`ServerLauncher`] that hands it out. Everything else (the lifecycle, lazy start with
//! single flight, failure counting, idle reaping, events) comes from the core unchanged.
//!
//! It must stay small and use only the public API of `mcpgw-core` and `mcpgw-gateway`, because
//! it is what an embedder copies from.

use std::sync::Arc;

use async_trait::async_trait;
use mcpgw_core::{
    CallContext, ExitStatusInfo, LaunchError, LaunchedServer, LogBuffer, ManagerSettings,
    McpSession, ServerId, ServerLauncher, ServerManager, ServerSpec, SessionError,
    SessionErrorKind, Tool, ToolCall, ToolCallOutcome,
};
use mcpgw_gateway::{EventBus, TokioClock, TokioSpawner};
use serde_json::json;
use tokio::sync::watch;

/// An MCP server that lives inside this process: one tool, `multiply`.
pub struct Calculator {
    closed: watch::Sender<bool>,
}

#[async_trait]
impl McpSession for Calculator {
    async fn list_tools(&self) -> Result<Vec<Tool>, SessionError> {
        Ok(vec![Tool::new("multiply").with_description("multiplies a by b").with_input_schema(
            json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                   "required": ["a", "b"]}),
        )])
    }

    async fn call_tool(
        &self,
        call: ToolCall,
        _ctx: CallContext,
    ) -> Result<ToolCallOutcome, SessionError> {
        if call.name != "multiply" {
            return Err(SessionError::new(
                SessionErrorKind::Protocol { code: -32602 },
                format!("unknown tool: {}", call.name),
            ));
        }
        let argument = |name: &str| {
            call.arguments
                .as_ref()
                .and_then(|arguments| arguments.get(name))
                .and_then(|v| v.as_f64())
        };
        let (Some(a), Some(b)) = (argument("a"), argument("b")) else {
            return Ok(ToolCallOutcome {
                result: json!({"content": [{"type": "text", "text": "a and b must be numbers"}],
                               "isError": true}),
                is_error: true,
            });
        };
        let product = a * b;
        Ok(ToolCallOutcome {
            result: json!({"content": [{"type": "text", "text": product.to_string()}],
                           "structuredContent": {"product": product}}),
            is_error: false,
        })
    }

    async fn ping(&self) -> Result<(), SessionError> {
        Ok(())
    }

    async fn close(&self) {
        self.closed.send_replace(true);
    }

    async fn closed(&self) -> ExitStatusInfo {
        let mut receiver = self.closed.subscribe();
        let _ = receiver.wait_for(|closed| *closed).await;
        ExitStatusInfo {
            description: "closed".into(),
            ..ExitStatusInfo::default()
        }
    }
}

/// The embedder's adapter for the `ServerLauncher` port.
pub struct InProcessLauncher;

#[async_trait]
impl ServerLauncher for InProcessLauncher {
    async fn launch(
        &self,
        _spec: &ServerSpec,
        logs: Arc<LogBuffer>,
    ) -> Result<LaunchedServer, LaunchError> {
        logs.push_raw(b"calculator started in-process");
        Ok(LaunchedServer {
            session: Arc::new(Calculator {
                closed: watch::channel(false).0,
            }),
        })
    }
}

/// Builds a manager on the in-process launcher, registers one server, calls it, and returns
/// the product and the states it went through.
pub async fn run() -> Result<(f64, Vec<String>), mcpgw_core::CoreError> {
    let events = Arc::new(EventBus::new(64));
    let mut subscription = events.subscribe();
    let manager = ServerManager::new(
        Arc::new(InProcessLauncher),
        Arc::new(TokioClock::default()),
        events,
        Arc::new(TokioSpawner::current()),
        None,
        ManagerSettings::default(),
    );
    let id =
        ServerId::parse("calculator").map_err(|e| mcpgw_core::CoreError::Invalid(e.to_string()))?;
    manager
        .register(ServerSpec::subprocess(
            id.clone(),
            vec!["in-process".into()],
        ))
        .await?;

    // The first call starts the server lazily.
    let arguments = json!({"a": 6, "b": 7}).as_object().cloned();
    let outcome = manager
        .call_tool(
            &id,
            ToolCall {
                name: "multiply".into(),
                arguments,
            },
            CallContext::default(),
        )
        .await?;
    let product = outcome.result["structuredContent"]["product"]
        .as_f64()
        .unwrap_or(f64::NAN);
    manager.shutdown().await;

    let mut states = Vec::new();
    while let Ok(published) = subscription.try_recv() {
        if let mcpgw_core::DomainEvent::McpServerStateChanged { to, .. } = &published.event {
            states.push(to.to_string());
        }
    }
    Ok((product, states))
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn the_embedded_calculator_runs_through_the_core_lifecycle() {
        let (product, states) = super::run().await.unwrap();
        assert_eq!(product, 42.0);
        assert_eq!(states, ["initializing", "ready", "cold"]);
    }
}
