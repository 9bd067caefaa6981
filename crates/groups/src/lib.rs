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

mod call;
mod error;
mod group;
mod random;
mod repository;
mod strategy;

#[cfg(test)]
mod tests;

pub use call::{CallPlan, MAX_ATTEMPTS_PER_CALL};
pub use error::GroupError;
pub use group::{CallOutcome, Group, GroupEvent, GroupMember, LeaveReason, MemberSpec};
pub use random::RandomSource;
pub use repository::{GroupRepository, GroupSpec};
pub use strategy::{GroupState, GroupStrategy};
