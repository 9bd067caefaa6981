//! The names of the selection strategies and of the group states.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::GroupError;

/// How a group picks the member that takes the next call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupStrategy {
    /// Members in turn, in the order they were added.
    #[default]
    RoundRobin,
    /// Smooth weighted round robin: deterministic, weights 3:1 give exactly 3 of every 4 calls to
    /// the first member, interleaved rather than in bursts.
    WeightedRoundRobin,
    /// The member with the fewest calls in flight; ties go round robin.
    LeastConnections,
    /// A random member, each drawn with probability weight / total weight.
    Random,
    /// The lowest priority number first; the next one only when it is excluded or out of
    /// rotation. Members sharing the lowest number go round robin.
    Priority,
}

impl GroupStrategy {
    pub const ALL: [GroupStrategy; 5] = [
        GroupStrategy::RoundRobin,
        GroupStrategy::WeightedRoundRobin,
        GroupStrategy::LeastConnections,
        GroupStrategy::Random,
        GroupStrategy::Priority,
    ];

    pub fn parse(raw: &str) -> Result<Self, GroupError> {
        Self::ALL
            .into_iter()
            .find(|strategy| strategy.as_str() == raw)
            .ok_or_else(|| GroupError::UnknownStrategy(mcpgw_core::bounded_for_message(raw)))
    }

    pub fn as_str(self) -> &'static str {
        match self {
            GroupStrategy::RoundRobin => "round_robin",
            GroupStrategy::WeightedRoundRobin => "weighted_round_robin",
            GroupStrategy::LeastConnections => "least_connections",
            GroupStrategy::Random => "random",
            GroupStrategy::Priority => "priority",
        }
    }
}

impl fmt::Display for GroupStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for GroupStrategy {
    type Err = GroupError;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        Self::parse(raw)
    }
}

/// Whether a group can take calls, judged by how many members are in rotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupState {
    /// At least `min_healthy` members in rotation.
    Healthy,
    /// At least one member in rotation, fewer than `min_healthy`.
    Partial,
    /// No member in rotation: calls to the group fail.
    Unavailable,
}

impl GroupState {
    pub fn from_counts(in_rotation: usize, min_healthy: u32) -> Self {
        if in_rotation == 0 {
            GroupState::Unavailable
        } else if in_rotation as u64 >= u64::from(min_healthy) {
            GroupState::Healthy
        } else {
            GroupState::Partial
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            GroupState::Healthy => "healthy",
            GroupState::Partial => "partial",
            GroupState::Unavailable => "unavailable",
        }
    }
}

impl fmt::Display for GroupState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpgw_core::ErrorKind;

    #[test]
    fn every_strategy_parses_from_its_own_name() {
        let names: Vec<&str> = GroupStrategy::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(
            names,
            [
                "round_robin",
                "weighted_round_robin",
                "least_connections",
                "random",
                "priority"
            ]
        );
        for strategy in GroupStrategy::ALL {
            assert_eq!(GroupStrategy::parse(strategy.as_str()), Ok(strategy));
            assert_eq!(strategy.to_string().parse::<GroupStrategy>(), Ok(strategy));
        }
    }

    #[test]
    fn an_unknown_strategy_is_invalid_and_names_the_choices() {
        for bad in [
            "",
            "Round_Robin",
            "roundrobin",
            "least-connections",
            "fastest",
        ] {
            let error = GroupStrategy::parse(bad).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::Invalid, "{bad}");
            let message = error.to_string();
            assert!(message.contains(&format!("`{bad}`")), "{message}");
            assert!(message.contains("weighted_round_robin"), "{message}");
        }
    }

    #[test]
    fn a_long_unknown_strategy_is_shortened_in_the_message() {
        let error = GroupStrategy::parse(&"x".repeat(10_000)).unwrap_err();
        assert!(error.to_string().len() < 300, "{error}");
    }

    #[test]
    fn serde_uses_the_same_names_as_parse() {
        for strategy in GroupStrategy::ALL {
            let json = serde_json::to_string(&strategy).unwrap();
            assert_eq!(json, format!("\"{}\"", strategy.as_str()));
            assert_eq!(
                serde_json::from_str::<GroupStrategy>(&json).unwrap(),
                strategy
            );
        }
        for state in [
            GroupState::Healthy,
            GroupState::Partial,
            GroupState::Unavailable,
        ] {
            let json = serde_json::to_string(&state).unwrap();
            assert_eq!(json, format!("\"{}\"", state.as_str()));
        }
        assert_eq!(GroupStrategy::default(), GroupStrategy::RoundRobin);
    }

    #[test]
    fn state_follows_the_members_in_rotation() {
        assert_eq!(GroupState::from_counts(0, 1), GroupState::Unavailable);
        assert_eq!(GroupState::from_counts(0, 3), GroupState::Unavailable);
        assert_eq!(GroupState::from_counts(1, 3), GroupState::Partial);
        assert_eq!(GroupState::from_counts(2, 3), GroupState::Partial);
        assert_eq!(GroupState::from_counts(3, 3), GroupState::Healthy);
        assert_eq!(GroupState::from_counts(4, 3), GroupState::Healthy);
        assert_eq!(GroupState::from_counts(1, 1), GroupState::Healthy);
        assert_eq!(GroupState::Unavailable.to_string(), "unavailable");
        assert_eq!(GroupState::Healthy.to_string(), "healthy");
    }
}
