//! The [`ProcessControl`] of a container, whichever backend runs it.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use mcpgw_core::{ExitStatusInfo, ProcessControl};
use tokio::sync::watch;

/// A container a backend started: it can be stopped and removed, and it says how it ended.
#[async_trait]
pub(crate) trait RunningContainer: Send + Sync + 'static {
    /// The container's name, for logs.
    fn name(&self) -> &str;
    /// Becomes `Some` once the container (or the client relaying it) has ended.
    fn exit_status(&self) -> watch::Receiver<Option<ExitStatusInfo>>;
    /// Stops the container (the stop signal, a kill once `grace` has passed) and removes it;
    /// idempotent, and safe to call concurrently.
    async fn stop_and_remove(&self, grace: Duration);
}

/// The control the launcher holds: no pid (signalling a process does not reach a container,
/// not even the client's that relays it), termination by stop-and-remove, and removal in the
/// background when every handle is dropped while the container may still exist.
pub(crate) struct ContainerControl<C: RunningContainer> {
    container: Arc<C>,
    /// Used when the last handle is dropped while the container still exists.
    stop_grace: Duration,
}

impl<C: RunningContainer> ContainerControl<C> {
    pub(crate) fn new(container: C, stop_grace: Duration) -> Self {
        Self {
            container: Arc::new(container),
            stop_grace,
        }
    }
}

#[async_trait]
impl<C: RunningContainer> ProcessControl for ContainerControl<C> {
    fn pid(&self) -> Option<u32> {
        None
    }

    async fn terminate(&self, grace: Duration) {
        self.container.stop_and_remove(grace).await;
    }

    async fn exited(&self) -> ExitStatusInfo {
        let mut exit_status = self.container.exit_status();
        match exit_status.wait_for(Option::is_some).await {
            Ok(status) => status.clone().unwrap_or_default(),
            Err(_watcher_gone) => ExitStatusInfo {
                code: None,
                signal: None,
                description: "the gateway's runtime shut down while the container ran".to_owned(),
            },
        }
    }
}

impl<C: RunningContainer> Drop for ContainerControl<C> {
    /// Nobody can remove the container any more, so remove it now, as `terminate` would.
    fn drop(&mut self) {
        let container = Arc::clone(&self.container);
        let grace = self.stop_grace;
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move { container.stop_and_remove(grace).await });
            }
            Err(_) => tracing::warn!(
                container = %container.name(),
                "a server container was dropped outside the gateway's runtime; the next start \
                 of the gateway removes it"
            ),
        }
    }
}
