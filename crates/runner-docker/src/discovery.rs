//! The discovery source of type `docker`: the running containers of an engine that carry the
//! label `mcp.gateway.enabled`, read as candidates by [`mcpgw_discovery::labels`].
//!
//! The source connects lazily: building it never touches the engine, so a gateway starts while
//! the engine is down and the source shows the error of its scans until the engine answers. A
//! failed request drops the client, so the next scan connects afresh (the engine may have been
//! restarted, its socket re-created). Every scan is bounded by [`SCAN_TIMEOUT`].
//!
//! [`DiscoverySource::changed`] follows the engine's event stream in a task of its own, started
//! by the first scan (so that what happens between a scan and the wait for changes is not
//! missed) or the first call, and stopped when the source is dropped: a labelled container that
//! starts, dies or is removed marks the source changed until the next scan. Events are filtered here
//! rather than by the engine because Docker and podman name them differently (`destroy` and
//! `remove`) and podman does not filter events on a label's presence.

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use async_trait::async_trait;
use bollard::Docker;
use bollard::models::{ContainerSummary, EventMessage, EventMessageTypeEnum};
use bollard::query_parameters::{EventsOptions, ListContainersOptions};
use futures::StreamExt;
use mcpgw_discovery::labels::{ContainerFacts, ENABLED_LABEL, candidate_from_labels};
use mcpgw_discovery::{
    DiscoveredCandidate, DiscoverySource, DiscoverySourceFactory, REMOVAL_GRACE_KEY,
    SourceDefinition, SourceError,
};
use serde_json::Value;
use tokio::sync::{Mutex, watch};
use tokio::task::JoinHandle;

use crate::engine::{EngineAddress, connect_engine, default_engine_address};

/// The `source_type` [`DockerSourceFactory`] builds.
pub const DOCKER_SOURCE_TYPE: &str = "docker";

/// The `config` key naming the engine's socket (`unix:///path` or an absolute path).
pub const SOCKET_PATH_KEY: &str = "socket_path";

/// The longest a scan waits for the engine, connecting included.
pub(crate) const SCAN_TIMEOUT: Duration = Duration::from_secs(5);

/// How long the event follower waits before it tries again after the engine failed it: long
/// enough not to hammer an engine that is down, short enough to notice one that came back.
const EVENT_RETRY_DELAY: Duration = Duration::from_secs(3);

/// Container events after which the set of running labelled containers may differ. `died` and
/// `remove` are podman's names where Docker says `die` and `destroy`.
const CHANGING_ACTIONS: [&str; 5] = ["start", "die", "died", "destroy", "remove"];

/// The running containers labelled `mcp.gateway.enabled` on one engine, as candidates.
pub struct DockerDiscoverySource {
    address: EngineAddress,
    /// The connected client, `None` until the first scan and after a failure.
    client: Mutex<Option<Docker>>,
    /// How many relevant events the follower has seen; `changed` waits for it to move past
    /// `seen_at_scan`.
    events_seen: Arc<watch::Sender<u64>>,
    seen_at_scan: AtomicU64,
    follower: StdMutex<Option<JoinHandle<()>>>,
}

impl DockerDiscoverySource {
    /// A source for the engine at `address`; nothing is contacted until the first scan.
    pub fn new(address: EngineAddress) -> Self {
        Self {
            address,
            client: Mutex::new(None),
            events_seen: Arc::new(watch::Sender::new(0)),
            seen_at_scan: AtomicU64::new(0),
            follower: StdMutex::new(None),
        }
    }

    /// The engine this source reads.
    pub fn address(&self) -> &EngineAddress {
        &self.address
    }

    async fn list_candidates(&self) -> Result<Vec<DiscoveredCandidate>, String> {
        let client = {
            let mut slot = self.client.lock().await;
            match slot.as_ref() {
                Some(client) => client.clone(),
                None => {
                    let client = connect_engine(&self.address).await?;
                    *slot = Some(client.clone());
                    client
                }
            }
        };
        let options = ListContainersOptions {
            all: false,
            filters: Some(HashMap::from([(
                "label".to_owned(),
                vec![ENABLED_LABEL.to_owned()],
            )])),
            ..ListContainersOptions::default()
        };
        let containers = crate::cleanup::list_with_retries(&client, options)
            .await
            .map_err(|error| {
                format!(
                    "cannot list the containers of the engine at {}: {error}; check that the \
                     engine is running and that the gateway may use its socket",
                    self.address.socket().display()
                )
            })?;
        let engine_host = self.address.to_string();
        let mut candidates: Vec<DiscoveredCandidate> = containers
            .into_iter()
            .filter_map(|summary| candidate_from_labels(&facts(summary), &engine_host))
            .collect();
        candidates.sort_by(|a, b| (&a.name, &a.location).cmp(&(&b.name, &b.location)));
        Ok(candidates)
    }

    fn ensure_follower(&self) {
        let mut follower = self
            .follower
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if follower.as_ref().is_none_or(JoinHandle::is_finished) {
            *follower = Some(tokio::spawn(follow_events(
                self.address.clone(),
                Arc::clone(&self.events_seen),
            )));
        }
    }
}

impl Drop for DockerDiscoverySource {
    fn drop(&mut self) {
        let follower = self
            .follower
            .get_mut()
            .unwrap_or_else(|poison| poison.into_inner());
        if let Some(task) = follower.take() {
            task.abort();
        }
    }
}

impl std::fmt::Debug for DockerDiscoverySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerDiscoverySource")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl DiscoverySource for DockerDiscoverySource {
    async fn scan(&self) -> Result<Vec<DiscoveredCandidate>, SourceError> {
        // Events from now on may not be reflected in this scan's answer: they count for the
        // next `changed`.
        self.seen_at_scan
            .store(*self.events_seen.borrow(), Ordering::SeqCst);
        self.ensure_follower();
        let outcome = match tokio::time::timeout(SCAN_TIMEOUT, self.list_candidates()).await {
            Ok(outcome) => outcome,
            Err(_) => Err(format!(
                "the container engine at {} did not answer within {} s; check that it is \
                 running and not overloaded",
                self.address.socket().display(),
                SCAN_TIMEOUT.as_secs()
            )),
        };
        if outcome.is_err() {
            *self.client.lock().await = None;
        }
        outcome.map_err(SourceError)
    }

    async fn changed(&self) {
        self.ensure_follower();
        let seen = self.seen_at_scan.load(Ordering::SeqCst);
        let mut events = self.events_seen.subscribe();
        if events.wait_for(|count| *count > seen).await.is_err() {
            // The sender lives as long as `self`; should that ever change, never answering is
            // the documented behaviour of a source that cannot tell.
            futures::future::pending::<()>().await;
        }
    }
}

fn facts(summary: ContainerSummary) -> ContainerFacts {
    let id = summary.id.unwrap_or_default();
    let name = summary
        .names
        .and_then(|names| names.into_iter().next())
        .unwrap_or_else(|| id.clone());
    ContainerFacts {
        name,
        image: summary.image.unwrap_or_default(),
        labels: summary
            .labels
            .map(|labels| labels.into_iter().collect::<BTreeMap<_, _>>())
            .unwrap_or_default(),
        id,
    }
}

fn is_relevant(event: &EventMessage) -> bool {
    event.typ == Some(EventMessageTypeEnum::CONTAINER)
        && event
            .action
            .as_deref()
            .is_some_and(|action| CHANGING_ACTIONS.contains(&action))
        && event
            .actor
            .as_ref()
            .and_then(|actor| actor.attributes.as_ref())
            .is_some_and(|attributes| attributes.contains_key(ENABLED_LABEL))
}

/// Counts the relevant events of the engine at `address` into `seen`, reconnecting after a
/// pause whenever the engine is unreachable or ends the stream; runs until aborted.
async fn follow_events(address: EngineAddress, seen: Arc<watch::Sender<u64>>) {
    loop {
        match connect_engine(&address).await {
            Ok(client) => {
                let options = EventsOptions {
                    filters: Some(HashMap::from([(
                        "type".to_owned(),
                        vec!["container".to_owned()],
                    )])),
                    ..EventsOptions::default()
                };
                let mut stream = client.events(Some(options));
                while let Some(item) = stream.next().await {
                    match item {
                        Ok(event) if is_relevant(&event) => seen.send_modify(|count| *count += 1),
                        Ok(_) => {}
                        Err(error) => {
                            tracing::debug!(
                                socket = %address.socket().display(),
                                %error,
                                "the container engine's event stream failed"
                            );
                            break;
                        }
                    }
                }
            }
            Err(error) => {
                tracing::debug!(%error, "cannot follow the container engine's events");
            }
        }
        tokio::time::sleep(EVENT_RETRY_DELAY).await;
    }
}

/// Builds [`DockerDiscoverySource`]s for sources of type `docker`.
///
/// Settings (`config`): `socket_path`, the engine's socket (`unix:///path` or an absolute
/// path; [`default_engine_address`] when absent), and the common `removal_grace_s`.
#[derive(Debug, Clone, Copy, Default)]
pub struct DockerSourceFactory;

impl DiscoverySourceFactory for DockerSourceFactory {
    fn source_types(&self) -> Vec<&'static str> {
        vec![DOCKER_SOURCE_TYPE]
    }

    fn build(&self, definition: &SourceDefinition) -> Result<Arc<dyn DiscoverySource>, String> {
        if definition.source_type != DOCKER_SOURCE_TYPE {
            return Err(format!(
                "source type `{}` is not built by the docker source factory; use type `{}`",
                definition.source_type, DOCKER_SOURCE_TYPE
            ));
        }
        definition.validate_common()?;
        if let Some(unknown) = definition
            .config
            .keys()
            .find(|key| ![SOCKET_PATH_KEY, REMOVAL_GRACE_KEY].contains(&key.as_str()))
        {
            return Err(format!(
                "config.{unknown} is not a setting of a docker source; the settings are \
                 {SOCKET_PATH_KEY} and {REMOVAL_GRACE_KEY}"
            ));
        }
        let address = match definition.config.get(SOCKET_PATH_KEY) {
            None | Some(Value::Null) => default_engine_address(),
            Some(Value::String(text)) => EngineAddress::parse(text)
                .map_err(|error| format!("config.{SOCKET_PATH_KEY}: {error}"))?,
            Some(other) => {
                return Err(format!(
                    "config.{SOCKET_PATH_KEY} must be a string such as \
                     unix:///var/run/docker.sock, not {other}"
                ));
            }
        };
        Ok(Arc::new(DockerDiscoverySource::new(address)))
    }
}
