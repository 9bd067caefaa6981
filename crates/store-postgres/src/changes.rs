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
    /// The tool pin ledger: pins, observed changes and operators' decisions.
    ToolPins,
    /// Curated endpoints created, updated or deleted at run time.
    Endpoints,
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
    pub const ALL: [Topic; 10] = [
        Topic::Servers,
        Topic::Groups,
        Topic::ToolLists,
        Topic::ToolPins,
        Topic::Endpoints,
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
            Topic::ToolPins => "tool_pins",
            Topic::Endpoints => "endpoints",
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The wire names are what replicas of different releases agree on, so they never change.
    #[test]
    fn the_wire_names_are_fixed() {
        for (topic, name) in [
            (Topic::Servers, "servers"),
            (Topic::Groups, "groups"),
            (Topic::ToolLists, "tool_lists"),
            (Topic::ToolPins, "tool_pins"),
            (Topic::Endpoints, "endpoints"),
            (Topic::Keys, "keys"),
            (Topic::Access, "access"),
            (Topic::Users, "users"),
            (Topic::Discovery, "discovery"),
            (Topic::Events, "events"),
        ] {
            assert_eq!(topic.name(), name);
            assert!(Topic::ALL.contains(&topic), "{name} is not in `Topic::ALL`");
        }
    }

    #[test]
    fn every_topic_is_listed_once_and_its_name_reads_back() {
        for (index, topic) in Topic::ALL.into_iter().enumerate() {
            assert!(
                !Topic::ALL[..index].contains(&topic)
                    && !Topic::ALL[..index]
                        .iter()
                        .any(|earlier| earlier.name() == topic.name()),
                "{} is listed twice",
                topic.name()
            );
            assert_eq!(Topic::from_name(topic.name()), Some(topic));
            let payload = format!("{} origin-1", topic.name());
            assert_eq!(parse_payload(&payload), Some((topic, "origin-1")));
        }
    }

    /// Bad input: names of no topic, a topic's name in another case, and an empty payload.
    #[test]
    fn unknown_topics_are_not_read() {
        for payload in ["tool_pin", "TOOL_PINS origin", "", " origin", "mark"] {
            assert_eq!(parse_payload(payload), None, "{payload:?}");
        }
        assert_eq!(parse_payload("tool_pins"), Some((Topic::ToolPins, "")));
        for payload in ["endpoint", "ENDPOINTS origin", "endpoints\torigin"] {
            assert_eq!(parse_payload(payload), None, "{payload:?}");
        }
        assert_eq!(
            parse_payload("endpoints origin-2"),
            Some((Topic::Endpoints, "origin-2"))
        );
    }
}
