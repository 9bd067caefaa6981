//! The lifecycle of a managed MCP server.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The five states of a managed MCP server.
///
/// - `cold`: registered, nothing running. Its predefined tools (if any) are still listed.
/// - `initializing`: being launched and initialized.
/// - `ready`: running and answering.
/// - `degraded`: it failed `max_consecutive_failures` times in a row; the gateway restarts it
///   once the restart backoff has passed.
/// - `dead`: it exited, crashed or failed to start; the next use (or an explicit start) starts
///   it again, subject to the backoff.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum ServerState {
    Cold,
    Initializing,
    Ready,
    Degraded,
    Dead,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("an mcp server cannot go from {from} to {to}")]
pub struct TransitionError {
    pub from: ServerState,
    pub to: ServerState,
}

impl ServerState {
    pub const ALL: [ServerState; 5] = [
        ServerState::Cold,
        ServerState::Initializing,
        ServerState::Ready,
        ServerState::Degraded,
        ServerState::Dead,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ServerState::Cold => "cold",
            ServerState::Initializing => "initializing",
            ServerState::Ready => "ready",
            ServerState::Degraded => "degraded",
            ServerState::Dead => "dead",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|state| state.as_str() == raw)
    }

    /// The twelve legal lifecycle transitions, and no others.
    pub fn can_transition_to(self, to: ServerState) -> bool {
        use ServerState::*;
        matches!(
            (self, to),
            (Cold, Initializing)
                | (Initializing, Ready | Degraded | Dead)
                | (Ready, Cold | Degraded | Dead)
                | (Degraded, Initializing | Cold | Dead)
                | (Dead, Initializing | Degraded)
        )
    }

    pub fn check_transition(self, to: ServerState) -> Result<(), TransitionError> {
        if self.can_transition_to(to) {
            Ok(())
        } else {
            Err(TransitionError { from: self, to })
        }
    }

    /// Whether a session is expected to be running in this state.
    pub fn is_running(self) -> bool {
        matches!(self, ServerState::Ready | ServerState::Degraded)
    }
}

impl fmt::Display for ServerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::ServerState::{self, *};

    const LEGAL: [(ServerState, ServerState); 12] = [
        (Cold, Initializing),
        (Initializing, Ready),
        (Initializing, Degraded),
        (Initializing, Dead),
        (Ready, Cold),
        (Ready, Degraded),
        (Ready, Dead),
        (Degraded, Initializing),
        (Degraded, Cold),
        (Degraded, Dead),
        (Dead, Initializing),
        (Dead, Degraded),
    ];

    #[test]
    fn exactly_the_twelve_transitions_are_legal() {
        for from in ServerState::ALL {
            for to in ServerState::ALL {
                let expected = LEGAL.contains(&(from, to));
                assert_eq!(from.can_transition_to(to), expected, "{from} -> {to}");
                assert_eq!(
                    from.check_transition(to).is_ok(),
                    expected,
                    "{from} -> {to}"
                );
            }
        }
    }

    #[test]
    fn illegal_transitions_name_both_states() {
        let error = Cold.check_transition(Ready).unwrap_err();
        assert_eq!(
            error.to_string(),
            "an mcp server cannot go from cold to ready"
        );
        assert!(Dead.check_transition(Cold).is_err());
        assert!(Ready.check_transition(Ready).is_err());
    }

    #[test]
    fn names_round_trip() {
        for state in ServerState::ALL {
            assert_eq!(ServerState::parse(state.as_str()), Some(state));
            let json = serde_json::to_string(&state).unwrap();
            assert_eq!(json, format!("\"{}\"", state.as_str()));
        }
        assert_eq!(ServerState::parse("running"), None);
        assert_eq!(ServerState::parse("READY"), None);
    }
}
