//! Telling the other replicas what changed: every write that another replica must see sends a
//! notification on one channel, in the same transaction (PostgreSQL delivers it only if the
//! transaction commits, and in commit order).
//!
//! A notification's payload is the topic's name, a space, and the origin of the store that
//! wrote (a token drawn when it connected), so that a replica can tell its own writes, which it
//! knows already, from another's.

/// The channel every replica listens on.
pub const CHANNEL: &str = "mcpgw_changes";

/// What changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Topic {
    /// Servers created, updated or deleted at run time.
    Servers,
    /// Groups created, updated or deleted at run time.
    Groups,
    /// Learned tool lists.
    ToolLists,
    /// API keys created or revoked.
    Keys,
    /// Custom roles, role assignments and tool access policies.
    Access,
    /// Local users.
    Users,
    /// Discovery's sources and rejections.
    Discovery,
    /// New events in the event log.
    Events,
}

impl Topic {
    pub const ALL: [Topic; 8] = [
        Topic::Servers,
        Topic::Groups,
        Topic::ToolLists,
        Topic::Keys,
        Topic::Access,
        Topic::Users,
        Topic::Discovery,
        Topic::Events,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Topic::Servers => "servers",
            Topic::Groups => "groups",
            Topic::ToolLists => "tool_lists",
            Topic::Keys => "keys",
            Topic::Access => "access",
            Topic::Users => "users",
            Topic::Discovery => "discovery",
            Topic::Events => "events",
        }
    }

    pub fn from_name(name: &str) -> Option<Topic> {
        Topic::ALL.into_iter().find(|topic| topic.name() == name)
    }
}

/// Sends `topic`'s notification from the store of `origin` on `client` (a transaction, so that
/// it goes out only if the write commits).
pub(crate) async fn notify(
    client: &impl tokio_postgres::GenericClient,
    topic: Topic,
    origin: &str,
) -> Result<(), crate::StoreError> {
    let payload = format!("{} {origin}", topic.name());
    client
        .execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &payload])
        .await
        .map_err(crate::StoreError::postgres("notify the other replicas"))?;
    Ok(())
}

/// The topic and the origin a payload names; `None` for a payload of no known topic. A payload
/// without an origin (sent by hand) counts as another store's.
pub fn parse_payload(payload: &str) -> Option<(Topic, &str)> {
    let (topic, origin) = payload.split_once(' ').unwrap_or((payload, ""));
    Topic::from_name(topic).map(|topic| (topic, origin))
}

/// A token that no other store connection made: the process, the time and a count.
pub(crate) fn new_origin() -> String {
    static MADE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let made = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos());
    format!("{:x}-{nanos:x}-{made:x}", std::process::id())
}
