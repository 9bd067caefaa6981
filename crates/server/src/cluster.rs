//! Running as one replica of a fleet that shares a PostgreSQL store: connecting to it, hearing
//! what the other replicas change, the heartbeat, and the leases of work that runs once.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use mcpgw_config::{ClusterConfig, StoreConfig};
use mcpgw_core::{Clock, EventLog, EventRetention, ServerManager};
use mcpgw_gateway::authz::AuthStore;
use mcpgw_gateway::{
    AuthService, DiscoveryService, Fleet, GroupService, LEASE_DISCOVERY,
    LEASE_EVENT_LOG_COMPACTION, ToolListKeeper,
};
use mcpgw_store_postgres::{Change, PostgresSettings, PostgresStore, Topic};
use tokio::task::JoinHandle;

use crate::StartError;

/// Connects to the shared store the `store` section names, with the password from
/// `password_file` when there is one, and brings its schema up to date.
pub(crate) async fn connect(section: &StoreConfig) -> Result<PostgresStore, StartError> {
    let mut settings = PostgresSettings::new(section.url.clone());
    settings.max_connections = usize::try_from(section.max_connections).unwrap_or(8);
    if let Some(file) = &section.password_file {
        let text = std::fs::read_to_string(file).map_err(|error| {
            StartError::new(format!(
                "cannot read store.password_file {file}: {error}; mount the secret there or \
                 leave the key out"
            ))
        })?;
        settings.password = Some(text.trim_end_matches(['\n', '\r']).to_owned());
    }
    let target = settings.target();
    PostgresStore::connect(settings).await.map_err(|error| {
        StartError::new(format!("cannot use the shared store at {target}: {error}"))
    })
}

/// This replica's name: `cluster.replica_id`, else the host name (a pod's name), else the data
/// directory's instance id.
pub(crate) fn replica_id(section: &ClusterConfig, data_dir: &Path) -> Result<String, StartError> {
    if let Some(id) = &section.replica_id {
        return Ok(id.clone());
    }
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| {
            !name.is_empty()
                && name.len() <= 128
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        });
    match host {
        Some(host) => Ok(host),
        None => crate::instance_id(data_dir),
    }
}

/// What the replica's background work acts on.
pub(crate) struct Replica {
    pub(crate) store: PostgresStore,
    pub(crate) fleet: Arc<Fleet>,
    pub(crate) resync_interval: Duration,
}

/// The services a resync brings in line with the store.
pub(crate) struct Followers {
    pub(crate) manager: ServerManager,
    pub(crate) groups: Arc<GroupService>,
    pub(crate) auth: Arc<AuthService>,
    pub(crate) auth_store: Arc<dyn AuthStore>,
    pub(crate) tool_lists: Arc<ToolListKeeper>,
    pub(crate) tool_pins: Arc<mcpgw_gateway::ToolPins>,
    pub(crate) endpoints: Arc<mcpgw_gateway::EndpointService>,
}

/// Work that only the holder of a lease does.
pub(crate) struct LeasedWork {
    pub(crate) discovery: Option<Arc<DiscoveryService>>,
    pub(crate) event_log: Arc<dyn EventLog>,
    pub(crate) retention: EventRetention,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) compaction_interval: Duration,
}

/// Hears the other replicas' changes and reads what they name again; reads everything again
/// when the listening connection comes back and every `resync_interval` in any case.
pub(crate) fn spawn_followers(replica: &Replica, followers: Followers) -> JoinHandle<()> {
    let mut listener = replica.store.listen();
    let resync_interval = replica.resync_interval;
    tokio::spawn(async move {
        let mut resync = tokio::time::interval(resync_interval);
        resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        resync.tick().await;
        loop {
            let mut topics = HashSet::new();
            // Woken by this replica's own writes too, which add nothing to read.
            tokio::select! {
                change = listener.next() => match change {
                    None => return,
                    Some(change) => {
                        add(&mut topics, change);
                        // Coalesce what arrives together: one read per topic.
                        while let Some(change) = listener.try_next() {
                            add(&mut topics, change);
                        }
                    }
                },
                _ = resync.tick() => topics.extend(Topic::ALL),
            }
            if !topics.is_empty() {
                follow(&followers, &topics).await;
            }
        }
    })
}

fn add(topics: &mut HashSet<Topic>, change: Change) {
    match change {
        Change::Topic(topic) => {
            topics.insert(topic);
        }
        // This replica's own writes are in its memory already.
        Change::Own(_) => {}
        Change::Listening => topics.extend(Topic::ALL),
    }
}

async fn follow(followers: &Followers, topics: &HashSet<Topic>) {
    if topics.contains(&Topic::Keys)
        && let Err(error) = followers.auth_store.refresh_keys().await
    {
        tracing::warn!(%error, "could not read the API keys again from the shared store");
    }
    if topics.contains(&Topic::Access)
        && let Err(error) = followers.auth.refresh().await
    {
        tracing::warn!(%error, "could not read the roles and policies again from the shared store");
    }
    // Servers before groups: a new group may name a new server.
    if topics.contains(&Topic::Servers) {
        match followers.manager.resync_from_repository().await {
            Ok(report) if !report.is_empty() => tracing::info!(
                added = ?report.added,
                updated = ?report.updated,
                removed = ?report.removed,
                "mcp servers changed by another replica"
            ),
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(%error, "could not read the mcp servers again from the shared store");
            }
        }
    }
    if topics.contains(&Topic::Servers) || topics.contains(&Topic::Groups) {
        match followers.groups.resync_from_repository().await {
            Ok(report) if !report.is_empty() => tracing::info!(
                added = ?report.added,
                updated = ?report.updated,
                removed = ?report.removed,
                "groups changed by another replica"
            ),
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(%error, "could not read the groups again from the shared store");
            }
        }
    }
    if topics.contains(&Topic::Endpoints)
        && let Err(error) = followers.endpoints.resync_from_repository().await
    {
        tracing::warn!(%error, "could not read the curated endpoints again from the shared store");
    }
    if topics.contains(&Topic::ToolPins)
        && let Err(error) = followers.tool_pins.load().await
    {
        tracing::warn!(%error, "could not read the tool pin ledger again from the shared store");
    }
    if (topics.contains(&Topic::Servers) || topics.contains(&Topic::ToolLists))
        && let Err(error) = followers.tool_lists.restore().await
    {
        tracing::warn!(%error, "could not read the kept tool lists again from the shared store");
    }
}

/// Records the heartbeat and renews the leases every heartbeat interval; starts the work of a
/// lease when this replica takes it and stops it when the lease is lost.
pub(crate) fn spawn_heartbeat(replica: &Replica, work: LeasedWork) -> JoinHandle<()> {
    let fleet = Arc::clone(&replica.fleet);
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(fleet.settings().heartbeat_interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut scanning = false;
        // Dropped with this task at shutdown, which ends the compaction too.
        let mut compaction: Option<AbortOnDrop> = None;
        loop {
            ticker.tick().await;
            if let Err(error) = fleet.heartbeat().await {
                tracing::warn!(%error, "could not record this replica's heartbeat");
            }
            if let Some(discovery) = &work.discovery {
                let held = fleet.renew(LEASE_DISCOVERY).await;
                if held && !scanning {
                    tracing::info!("this replica now runs the discovery scans");
                    discovery.start_scanning();
                } else if !held && scanning {
                    tracing::info!("another replica runs the discovery scans now");
                    discovery.stop_scanning();
                }
                scanning = held;
            }
            let held = fleet.renew(LEASE_EVENT_LOG_COMPACTION).await;
            if held {
                fleet.forget_silent().await;
            }
            match (held, compaction.is_some()) {
                (true, false) => {
                    compaction = Some(AbortOnDrop(tokio::spawn(
                        mcpgw_gateway::run_event_log_compaction(
                            work.event_log.clone(),
                            work.retention,
                            work.clock.clone(),
                            work.compaction_interval,
                        ),
                    )));
                }
                (false, true) => compaction = None,
                _ => {}
            }
        }
    })
}

/// A task that ends when its handle is dropped.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How many events of the fleet wait for a slow WebSocket client before it loses the oldest.
const FLEET_FEED_CAPACITY: usize = 4096;
/// Events read from the shared log at once.
const FLEET_FEED_PAGE: usize = 500;
/// How often the shared log is read even without an announcement of new events.
const FLEET_FEED_POLL: Duration = Duration::from_secs(1);

/// Follows the shared event log from its end, in its order, and hands every event (of every
/// replica, this one's included) to the event streams: what `/api/ws/events` shows in a fleet.
pub(crate) fn spawn_event_feed(
    replica: &Replica,
    log: Arc<mcpgw_store_postgres::PostgresEventLog>,
) -> (
    JoinHandle<()>,
    tokio::sync::broadcast::Sender<Arc<mcpgw_http_actix::FleetEvent>>,
) {
    let (feed, _) = tokio::sync::broadcast::channel(FLEET_FEED_CAPACITY);
    let sender = feed.clone();
    let mut listener = replica.store.listen();
    let task = tokio::spawn(async move {
        let mut last = loop {
            match log.last_position().await {
                Ok(position) => break position,
                Err(error) => {
                    tracing::warn!(%error, "cannot read the shared event log's end; trying again");
                    tokio::time::sleep(FLEET_FEED_POLL).await;
                }
            }
        };
        let mut poll = tokio::time::interval(FLEET_FEED_POLL);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                change = listener.next() => match change {
                    None => return,
                    Some(
                        Change::Topic(Topic::Events)
                        | Change::Own(Topic::Events)
                        | Change::Listening,
                    ) => {}
                    Some(Change::Topic(_) | Change::Own(_)) => continue,
                },
                _ = poll.tick() => {}
            }
            loop {
                let page = match log.events_after(last, FLEET_FEED_PAGE).await {
                    Ok(page) => page,
                    Err(error) => {
                        tracing::warn!(%error, "cannot read the shared event log");
                        break;
                    }
                };
                let full = page.len() == FLEET_FEED_PAGE;
                for stored in page {
                    last = stored.position;
                    // Nobody listening is not an error: the event is in the log.
                    let _ = sender.send(Arc::new(mcpgw_http_actix::FleetEvent::new(
                        stored.event_type,
                        stored.mcp_server_id.map(|id| id.to_string()),
                        stored.group_id.map(|id| id.to_string()),
                        stored.payload,
                    )));
                }
                if !full {
                    break;
                }
            }
        }
    });
    (task, feed)
}
