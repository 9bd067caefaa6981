//! The group aggregate: members, rotation, state and member selection.

use mcpgw_core::ServerId;

use crate::error::GroupError;
use crate::random::RandomSource;
use crate::strategy::{GroupState, GroupStrategy};

/// What a caller asks for when adding a member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSpec {
    pub id: ServerId,
    /// Share of the calls under `weighted_round_robin` and `random`; at least 1.
    pub weight: u32,
    /// Order under `priority`: the lowest number is tried first.
    pub priority: u32,
}

impl MemberSpec {
    pub const DEFAULT_WEIGHT: u32 = 1;
    pub const DEFAULT_PRIORITY: u32 = 0;

    /// A member with the default weight and priority.
    pub fn new(id: ServerId) -> Self {
        Self {
            id,
            weight: Self::DEFAULT_WEIGHT,
            priority: Self::DEFAULT_PRIORITY,
        }
    }

    pub fn with_weight(mut self, weight: u32) -> Self {
        self.weight = weight;
        self
    }

    pub fn with_priority(mut self, priority: u32) -> Self {
        self.priority = priority;
        self
    }
}

/// A member as the group sees it. Read-only outside the group so that rotation, weights and
/// in-flight counts change only through the group's rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMember {
    id: ServerId,
    weight: u32,
    priority: u32,
    in_rotation: bool,
    in_flight: u32,
    /// The running "current weight" of smooth weighted round robin.
    smooth_weight: i64,
}

impl GroupMember {
    pub fn id(&self) -> &ServerId {
        &self.id
    }

    pub fn weight(&self) -> u32 {
        self.weight
    }

    pub fn priority(&self) -> u32 {
        self.priority
    }

    /// Whether the member may be selected for calls.
    pub fn in_rotation(&self) -> bool {
        self.in_rotation
    }

    /// Calls started on this member and not yet finished.
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }
}

/// How a call on a member ended, as far as rotation cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CallOutcome {
    Success,
    /// The member answered with an error (a tool error, an invalid request): it works, so it
    /// stays in rotation and the call is not retried elsewhere.
    ToolError,
    /// The member could not be reached or its session broke: it leaves rotation and the call
    /// may be retried once on another member.
    TransportFailure,
}

impl CallOutcome {
    pub fn is_retryable(self) -> bool {
        self == CallOutcome::TransportFailure
    }
}

/// Why a member left rotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LeaveReason {
    /// A health check (or a rebalance that re-read health) found it unhealthy.
    Unhealthy,
    /// A call on it failed for a transport reason.
    TransportFailure,
}

impl LeaveReason {
    pub fn as_str(self) -> &'static str {
        match self {
            LeaveReason::Unhealthy => "unhealthy",
            LeaveReason::TransportFailure => "transport_failure",
        }
    }
}

/// A change the application layer publishes as a domain event. Every mutating method returns
/// the changes it made, in the order they happened; a call that changes nothing returns none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupEvent {
    MemberLeftRotation {
        group: ServerId,
        member: ServerId,
        reason: LeaveReason,
    },
    MemberReturned {
        group: ServerId,
        member: ServerId,
    },
    StateChanged {
        group: ServerId,
        from: GroupState,
        to: GroupState,
    },
}

/// A group of MCP servers behind one id.
///
/// Invariants: member ids are unique and never the group's own id, every weight is at least 1,
/// `min_healthy` is at least 1. `min_healthy` may exceed the member count only because members
/// arrive after the group is created (or were removed); raising it above the member count is
/// refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    id: ServerId,
    strategy: GroupStrategy,
    min_healthy: u32,
    members: Vec<GroupMember>,
    /// Index of the member whose turn comes next under the round-robin rules (round robin
    /// itself, and the tie-breaks of least_connections and priority).
    cursor: usize,
}

impl Group {
    pub const DEFAULT_MIN_HEALTHY: u32 = 1;

    /// An empty group: it is `unavailable` until members are added.
    pub fn new(
        id: ServerId,
        strategy: GroupStrategy,
        min_healthy: u32,
    ) -> Result<Self, GroupError> {
        if min_healthy == 0 {
            return Err(GroupError::MinHealthyZero(id));
        }
        Ok(Self {
            id,
            strategy,
            min_healthy,
            members: Vec::new(),
            cursor: 0,
        })
    }

    /// A group with its members, all in rotation (a group declared in the configuration file).
    pub fn with_members(
        id: ServerId,
        strategy: GroupStrategy,
        min_healthy: u32,
        members: impl IntoIterator<Item = MemberSpec>,
    ) -> Result<Self, GroupError> {
        let mut group = Self::new(id, strategy, min_healthy)?;
        for member in members {
            group.add_member(member)?;
        }
        Ok(group)
    }

    pub fn id(&self) -> &ServerId {
        &self.id
    }

    pub fn strategy(&self) -> GroupStrategy {
        self.strategy
    }

    pub fn min_healthy(&self) -> u32 {
        self.min_healthy
    }

    /// Members in the order they were added (the round-robin order).
    pub fn members(&self) -> &[GroupMember] {
        &self.members
    }

    pub fn member(&self, member: &ServerId) -> Option<&GroupMember> {
        self.members
            .iter()
            .find(|candidate| &candidate.id == member)
    }

    pub fn members_in_rotation(&self) -> usize {
        self.members
            .iter()
            .filter(|member| member.in_rotation)
            .count()
    }

    pub fn state(&self) -> GroupState {
        GroupState::from_counts(self.members_in_rotation(), self.min_healthy)
    }

    /// Picks the member for the next call among those in rotation and not in `exclude` (the
    /// members this call already tried), or `None` when there is none. Advances the strategy's
    /// position; it does not count the call as started (see [`Group::call_started`]).
    pub fn select(
        &mut self,
        exclude: &[ServerId],
        random: &mut dyn RandomSource,
    ) -> Option<ServerId> {
        let candidates: Vec<usize> = self
            .members
            .iter()
            .enumerate()
            .filter(|(_, member)| member.in_rotation && !exclude.contains(&member.id))
            .map(|(index, _)| index)
            .collect();
        if candidates.is_empty() {
            return None;
        }
        let chosen = match self.strategy {
            GroupStrategy::RoundRobin => self.next_in_turn(&candidates),
            GroupStrategy::WeightedRoundRobin => self.next_smooth_weighted(&candidates),
            GroupStrategy::LeastConnections => {
                let fewest = candidates
                    .iter()
                    .map(|&index| self.members[index].in_flight)
                    .min()?;
                let tied: Vec<usize> = candidates
                    .into_iter()
                    .filter(|&index| self.members[index].in_flight == fewest)
                    .collect();
                self.next_in_turn(&tied)
            }
            GroupStrategy::Random => self.weighted_draw(&candidates, random),
            GroupStrategy::Priority => {
                let lowest = candidates
                    .iter()
                    .map(|&index| self.members[index].priority)
                    .min()?;
                let tied: Vec<usize> = candidates
                    .into_iter()
                    .filter(|&index| self.members[index].priority == lowest)
                    .collect();
                self.next_in_turn(&tied)
            }
        };
        Some(self.members[chosen].id.clone())
    }

    /// The first of `tied` at or after the cursor, wrapping around; moves the cursor past it.
    fn next_in_turn(&mut self, tied: &[usize]) -> usize {
        let chosen = tied
            .iter()
            .copied()
            .find(|&index| index >= self.cursor)
            .unwrap_or(tied[0]);
        self.cursor = chosen + 1;
        chosen
    }

    /// Smooth weighted round robin: every candidate gains its weight, the richest (the first
    /// one on a tie) is chosen and pays the total. Over any run of `total` calls with the same
    /// candidates each member is chosen exactly `weight` times, interleaved.
    fn next_smooth_weighted(&mut self, candidates: &[usize]) -> usize {
        let mut total: i64 = 0;
        for &index in candidates {
            let member = &mut self.members[index];
            member.smooth_weight += i64::from(member.weight);
            total += i64::from(member.weight);
        }
        let mut chosen = candidates[0];
        for &index in candidates {
            if self.members[index].smooth_weight > self.members[chosen].smooth_weight {
                chosen = index;
            }
        }
        self.members[chosen].smooth_weight -= total;
        chosen
    }

    /// One draw in `0..total weight`, mapped onto the candidates' cumulative weights.
    fn weighted_draw(&self, candidates: &[usize], random: &mut dyn RandomSource) -> usize {
        let total: u64 = candidates
            .iter()
            .map(|&index| u64::from(self.members[index].weight))
            .sum();
        let mut draw = random.below(total);
        for &index in candidates {
            let weight = u64::from(self.members[index].weight);
            if draw < weight {
                return index;
            }
            draw -= weight;
        }
        // Unreachable while `below` keeps its promise; a faulty source still gets a member.
        candidates[candidates.len() - 1]
    }

    /// Counts a call as in flight on `member` (what `least_connections` balances).
    pub fn call_started(&mut self, member: &ServerId) -> Result<(), GroupError> {
        let index = self.index_of(member)?;
        self.members[index].in_flight = self.members[index].in_flight.saturating_add(1);
        Ok(())
    }

    /// Counts the call as finished; a transport failure takes the member out of rotation.
    pub fn call_finished(
        &mut self,
        member: &ServerId,
        outcome: CallOutcome,
    ) -> Result<Vec<GroupEvent>, GroupError> {
        let index = self.index_of(member)?;
        self.members[index].in_flight = self.members[index].in_flight.saturating_sub(1);
        let mut events = Vec::new();
        if outcome == CallOutcome::TransportFailure {
            self.track_state(&mut events, |group, events| {
                group.set_rotation(index, false, LeaveReason::TransportFailure, events);
            });
        }
        Ok(events)
    }

    /// Applies a health-check result: a healthy member returns to rotation, an unhealthy one
    /// leaves it.
    pub fn member_health(
        &mut self,
        member: &ServerId,
        healthy: bool,
    ) -> Result<Vec<GroupEvent>, GroupError> {
        let index = self.index_of(member)?;
        let mut events = Vec::new();
        self.track_state(&mut events, |group, events| {
            group.set_rotation(index, healthy, LeaveReason::Unhealthy, events);
        });
        Ok(events)
    }

    /// Re-reads member health: exactly the members in `healthy_members` are in rotation
    /// afterwards, and the strategy starts over (round-robin position and smooth weights).
    /// Ids that are not members are ignored; in-flight counts stay, those calls are still
    /// running.
    pub fn rebalance(&mut self, healthy_members: &[ServerId]) -> Vec<GroupEvent> {
        let mut events = Vec::new();
        self.track_state(&mut events, |group, events| {
            for index in 0..group.members.len() {
                let healthy = healthy_members.contains(&group.members[index].id);
                group.set_rotation(index, healthy, LeaveReason::Unhealthy, events);
            }
        });
        self.reset_strategy_state();
        events
    }

    /// Adds a member in rotation, at the end of the round-robin order.
    pub fn add_member(&mut self, member: MemberSpec) -> Result<Vec<GroupEvent>, GroupError> {
        if member.id == self.id {
            return Err(GroupError::GroupAsItsOwnMember(member.id));
        }
        if self.member(&member.id).is_some() {
            return Err(GroupError::MemberAlreadyExists {
                group: self.id.clone(),
                member: member.id,
            });
        }
        validate_weight(&member.id, member.weight)?;
        let mut events = Vec::new();
        self.track_state(&mut events, |group, _| {
            group.members.push(GroupMember {
                id: member.id,
                weight: member.weight,
                priority: member.priority,
                in_rotation: true,
                in_flight: 0,
                smooth_weight: 0,
            });
            group.reset_smooth_weights();
        });
        Ok(events)
    }

    /// Removes a member; the others keep their turn order.
    pub fn remove_member(&mut self, member: &ServerId) -> Result<Vec<GroupEvent>, GroupError> {
        let index = self.index_of(member)?;
        let mut events = Vec::new();
        self.track_state(&mut events, |group, _| {
            group.members.remove(index);
            if index < group.cursor {
                group.cursor -= 1;
            }
            group.reset_smooth_weights();
        });
        Ok(events)
    }

    /// Changes a member's weight and priority, keeping its rotation and in-flight calls.
    pub fn update_member(
        &mut self,
        member: &ServerId,
        weight: u32,
        priority: u32,
    ) -> Result<(), GroupError> {
        let index = self.index_of(member)?;
        validate_weight(member, weight)?;
        self.members[index].weight = weight;
        self.members[index].priority = priority;
        self.reset_smooth_weights();
        Ok(())
    }

    /// Switches strategy; the new one starts from its beginning.
    pub fn set_strategy(&mut self, strategy: GroupStrategy) {
        self.strategy = strategy;
        self.reset_strategy_state();
    }

    /// Changes `min_healthy`. Lowering is always allowed; raising it above the member count is
    /// refused, because such a group could never be healthy.
    pub fn set_min_healthy(&mut self, min_healthy: u32) -> Result<Vec<GroupEvent>, GroupError> {
        if min_healthy == 0 {
            return Err(GroupError::MinHealthyZero(self.id.clone()));
        }
        if min_healthy > self.min_healthy && min_healthy as usize > self.members.len() {
            return Err(GroupError::MinHealthyAboveMembers {
                group: self.id.clone(),
                min_healthy,
                members: self.members.len(),
            });
        }
        let mut events = Vec::new();
        self.track_state(&mut events, |group, _| group.min_healthy = min_healthy);
        Ok(events)
    }

    fn index_of(&self, member: &ServerId) -> Result<usize, GroupError> {
        self.members
            .iter()
            .position(|candidate| &candidate.id == member)
            .ok_or_else(|| GroupError::MemberNotFound {
                group: self.id.clone(),
                member: member.clone(),
            })
    }

    /// Runs `change` and appends a `StateChanged` after its own events when the state moved.
    fn track_state(
        &mut self,
        events: &mut Vec<GroupEvent>,
        change: impl FnOnce(&mut Self, &mut Vec<GroupEvent>),
    ) {
        let before = self.state();
        change(self, events);
        let after = self.state();
        if before != after {
            events.push(GroupEvent::StateChanged {
                group: self.id.clone(),
                from: before,
                to: after,
            });
        }
    }

    fn set_rotation(
        &mut self,
        index: usize,
        in_rotation: bool,
        reason: LeaveReason,
        events: &mut Vec<GroupEvent>,
    ) {
        if self.members[index].in_rotation == in_rotation {
            return;
        }
        self.members[index].in_rotation = in_rotation;
        // The smooth sequence is only exact for a fixed set of members: start it over.
        self.reset_smooth_weights();
        let group = self.id.clone();
        let member = self.members[index].id.clone();
        events.push(if in_rotation {
            GroupEvent::MemberReturned { group, member }
        } else {
            GroupEvent::MemberLeftRotation {
                group,
                member,
                reason,
            }
        });
    }

    fn reset_smooth_weights(&mut self) {
        for member in &mut self.members {
            member.smooth_weight = 0;
        }
    }

    fn reset_strategy_state(&mut self) {
        self.cursor = 0;
        self.reset_smooth_weights();
    }
}

fn validate_weight(member: &ServerId, weight: u32) -> Result<(), GroupError> {
    if weight == 0 {
        return Err(GroupError::InvalidWeight {
            member: member.clone(),
            weight,
        });
    }
    Ok(())
}
