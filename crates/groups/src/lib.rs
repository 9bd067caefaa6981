//! Groups of MCP servers behind one id, and the strategies that pick a member for each call.
//!
//! This crate is where load balancing and rotation will be decided: which members are in
//! rotation, which one takes the next call, and whether the group as a whole is healthy. It is
//! a domain crate: it must never do I/O, read a clock or draw randomness itself; those arrive
//! through ports so that every strategy can be tested deterministically.
//!
//! The [`Group`] aggregate holds the members (weight, priority, rotation, calls in flight) and
//! answers [`Group::select`] with the strategy of [`GroupStrategy`]; randomness for `random`
//! comes through the [`RandomSource`] port. Every change returns the [`GroupEvent`]s it caused
//! instead of publishing them, so the application layer decides where they go. [`CallPlan`]
//! holds the retry rule: a call that fails on one member for a transport reason is tried once
//! more on another. The group does not know server states or run health checks: the
//! application layer feeds it results through [`Group::member_health`], [`Group::call_finished`]
//! and [`Group::rebalance`].
//!
//! # Example
//!
//! Weights 3:1 give three of every four calls to the first member, interleaved; a member that
//! fails its health check leaves rotation, and the group says so.
//!
//! ```rust
//! use mcpgw_core::ServerId;
//! use mcpgw_groups::{Group, GroupState, GroupStrategy, MemberSpec, RandomSource};
//!
//! /// Only the `random` strategy draws numbers; an adapter wraps a real generator.
//! struct NoDraws;
//! impl RandomSource for NoDraws {
//!     fn next_u64(&mut self) -> u64 {
//!         unreachable!("weighted round robin draws nothing")
//!     }
//! }
//!
//! let id = |raw: &str| ServerId::parse(raw).expect("a valid id");
//! let mut group = Group::with_members(
//!     id("search"),
//!     GroupStrategy::WeightedRoundRobin,
//!     2, // healthy with at least two members in rotation
//!     [MemberSpec::new(id("big")).with_weight(3), MemberSpec::new(id("small"))],
//! )?;
//! let picks: Vec<String> = (0..4)
//!     .filter_map(|_| group.select(&[], &mut NoDraws))
//!     .map(|member| member.to_string())
//!     .collect();
//! assert_eq!(picks, ["big", "big", "small", "big"]);
//!
//! let events = group.member_health(&id("small"), false)?;
//! assert!(!events.is_empty(), "the application layer publishes these");
//! assert_eq!(group.state(), GroupState::Partial);
//! assert_eq!(group.select(&[], &mut NoDraws), Some(id("big")));
//! # Ok::<(), mcpgw_groups::GroupError>(())
//! ```

mod call;
mod error;
mod group;
mod random;
mod repository;
mod stored;
mod strategy;

#[cfg(test)]
mod tests;

pub use call::{CallPlan, MAX_ATTEMPTS_PER_CALL};
pub use error::GroupError;
pub use group::{CallOutcome, Group, GroupEvent, GroupMember, LeaveReason, MemberSpec};
pub use random::RandomSource;
pub use repository::{GroupRepository, GroupSpec};
pub use stored::{StoredGroup, StoredGroupError, StoredMember};
pub use strategy::{GroupState, GroupStrategy};
