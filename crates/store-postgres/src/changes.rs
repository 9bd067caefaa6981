//! Telling the other replicas what changed: every write that another replica must see sends a
//! notification on one channel, in the same transaction (PostgreSQL delivers it only if the
//! transaction commits, and in commit order).

/// The channel every replica listens on.
pub const CHANNEL: &str = "mcpgw_changes";

/// What changed. The payload of a notification is the topic's name.
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

/// Sends `topic`'s notification on `client` (a transaction, so that it goes out only if the
/// write commits).
pub(crate) async fn notify(
    client: &impl tokio_postgres::GenericClient,
    topic: Topic,
) -> Result<(), crate::StoreError> {
    client
        .execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &topic.name()])
        .await
        .map_err(crate::StoreError::postgres("notify the other replicas"))?;
    Ok(())
}
