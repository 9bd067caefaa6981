//! The gateway facade.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use mcpgw_core::{Clock, MonoTime, ServerManager};

/// Facts about the running gateway that the API reports.
#[derive(Debug, Clone)]
pub struct GatewayInfo {
    pub version: String,
    /// Where the configuration came from, when it came from a file.
    pub config_path: Option<String>,
}

/// The facade over the gateway's use cases. Cheap to clone.
#[derive(Clone)]
pub struct Gateway {
    servers: ServerManager,
    info: Arc<GatewayInfo>,
    clock: Arc<dyn Clock>,
    started: MonoTime,
    startup_complete: Arc<AtomicBool>,
    shutting_down: Arc<AtomicBool>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

impl Gateway {
    pub fn new(servers: ServerManager, info: GatewayInfo) -> Self {
        let clock = Arc::clone(servers.clock());
        let started = clock.now();
        Self {
            servers,
            info: Arc::new(info),
            clock,
            started,
            startup_complete: Arc::new(AtomicBool::new(false)),
            shutting_down: Arc::new(AtomicBool::new(false)),
        }
    }

    pub fn servers(&self) -> &ServerManager {
        &self.servers
    }

    pub fn info(&self) -> &GatewayInfo {
        &self.info
    }

    pub fn uptime(&self) -> Duration {
        self.clock.now().saturating_since(self.started)
    }

    /// Marks the end of start-up: the configuration is loaded and the stores are open.
    pub fn mark_startup_complete(&self) {
        self.startup_complete.store(true, Ordering::Release);
    }

    pub fn startup_complete(&self) -> bool {
        self.startup_complete.load(Ordering::Acquire)
    }

    /// Marks the start of shutdown: readiness turns false so load balancers stop sending.
    pub fn mark_shutting_down(&self) {
        self.shutting_down.store(true, Ordering::Release);
    }

    pub fn shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }

    /// Ready to take traffic: started up and not shutting down.
    pub fn ready(&self) -> bool {
        self.startup_complete() && !self.shutting_down()
    }

    /// Stops every managed server; call once the listeners are closed.
    pub async fn shutdown(&self) {
        self.mark_shutting_down();
        self.servers.shutdown().await;
    }
}
