//! The retry rule of a call routed through a group.

use mcpgw_core::ServerId;

use crate::group::{CallOutcome, Group};
use crate::random::RandomSource;

/// A call is tried on at most this many members: the first pick and one retry after a
/// transport failure.
pub const MAX_ATTEMPTS_PER_CALL: usize = 2;

/// The members one call has tried, so that its retry goes to another member.
///
/// The application layer runs the loop (it holds the group behind its lock and does the I/O):
///
/// ```
/// # use mcpgw_core::ServerId;
/// # use mcpgw_groups::{CallOutcome, CallPlan, Group, GroupStrategy, MemberSpec, RandomSource};
/// # struct Zero;
/// # impl RandomSource for Zero { fn next_u64(&mut self) -> u64 { 0 } }
/// # let id = |raw: &str| ServerId::parse(raw).unwrap();
/// let mut group = Group::with_members(
///     id("search"),
///     GroupStrategy::RoundRobin,
///     1,
///     [MemberSpec::new(id("a")), MemberSpec::new(id("b"))],
/// )
/// .unwrap();
/// let mut plan = CallPlan::new();
/// let mut answered_by = None;
/// while let Some(member) = plan.next_member(&mut group, &mut Zero) {
///     group.call_started(&member).unwrap();
///     // The real call happens here; pretend `a` is unreachable.
///     let outcome = if member == id("a") { CallOutcome::TransportFailure } else { CallOutcome::Success };
///     let _events_to_publish = group.call_finished(&member, outcome).unwrap();
///     if !plan.should_retry(outcome) {
///         answered_by = Some(member);
///         break;
///     }
/// }
/// assert_eq!(answered_by, Some(id("b")));
/// assert_eq!(plan.tried(), [id("a"), id("b")]);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallPlan {
    tried: Vec<ServerId>,
}

impl CallPlan {
    pub fn new() -> Self {
        Self::default()
    }

    /// The member for the next attempt, or `None` when the attempts are used up or no member
    /// that this call has not tried is in rotation.
    pub fn next_member(
        &mut self,
        group: &mut Group,
        random: &mut dyn RandomSource,
    ) -> Option<ServerId> {
        if self.tried.len() >= MAX_ATTEMPTS_PER_CALL {
            return None;
        }
        let member = group.select(&self.tried, random)?;
        self.tried.push(member.clone());
        Some(member)
    }

    /// Whether an attempt that ended with `outcome` is tried again on another member.
    pub fn should_retry(&self, outcome: CallOutcome) -> bool {
        outcome.is_retryable() && self.tried.len() < MAX_ATTEMPTS_PER_CALL
    }

    /// The members tried so far, in order.
    pub fn tried(&self) -> &[ServerId] {
        &self.tried
    }
}
