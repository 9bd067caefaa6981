//! Behaviour of the group aggregate: exact distributions, rotation, state and errors.

use mcpgw_core::{ErrorKind, ServerId};

use crate::random::tests::ScriptedRandom;
use crate::{
    CallOutcome, CallPlan, Group, GroupError, GroupEvent, GroupState, GroupStrategy, LeaveReason,
    MAX_ATTEMPTS_PER_CALL, MemberSpec,
};

fn id(raw: &str) -> ServerId {
    ServerId::parse(raw).unwrap()
}

fn group(strategy: GroupStrategy, min_healthy: u32, members: &[(&str, u32, u32)]) -> Group {
    Group::with_members(
        id("g"),
        strategy,
        min_healthy,
        members.iter().map(|&(member, weight, priority)| {
            MemberSpec::new(id(member))
                .with_weight(weight)
                .with_priority(priority)
        }),
    )
    .unwrap()
}

/// A source for strategies that must not draw: any draw fails the test.
fn no_randomness() -> ScriptedRandom {
    ScriptedRandom::new([])
}

/// `calls` selections with nothing excluded, as the member ids joined by spaces.
fn picks(group: &mut Group, calls: usize) -> String {
    let mut random = no_randomness();
    picks_with(group, calls, &mut random)
}

fn picks_with(group: &mut Group, calls: usize, random: &mut ScriptedRandom) -> String {
    (0..calls)
        .map(|_| {
            group
                .select(&[], random)
                .expect("a member in rotation")
                .to_string()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn left(member: &str, reason: LeaveReason) -> GroupEvent {
    GroupEvent::MemberLeftRotation {
        group: id("g"),
        member: id(member),
        reason,
    }
}

fn returned(member: &str) -> GroupEvent {
    GroupEvent::MemberReturned {
        group: id("g"),
        member: id(member),
    }
}

fn state_changed(from: GroupState, to: GroupState) -> GroupEvent {
    GroupEvent::StateChanged {
        group: id("g"),
        from,
        to,
    }
}

// ---- round robin ----

#[test]
fn round_robin_cycles_through_the_members_in_order() {
    let mut group = group(
        GroupStrategy::RoundRobin,
        1,
        &[("a", 1, 0), ("b", 5, 0), ("c", 1, 0)],
    );
    // Weights do not matter to plain round robin.
    assert_eq!(picks(&mut group, 7), "a b c a b c a");
}

#[test]
fn round_robin_skips_members_out_of_rotation_and_takes_them_back_in_turn() {
    let mut group = group(
        GroupStrategy::RoundRobin,
        1,
        &[("a", 1, 0), ("b", 1, 0), ("c", 1, 0)],
    );
    assert_eq!(picks(&mut group, 1), "a");
    group.member_health(&id("b"), false).unwrap();
    assert_eq!(picks(&mut group, 4), "c a c a");
    group.member_health(&id("b"), true).unwrap();
    assert_eq!(picks(&mut group, 3), "b c a");
}

#[test]
fn removing_a_member_keeps_the_turn_of_the_others() {
    let mut group = group(
        GroupStrategy::RoundRobin,
        1,
        &[("a", 1, 0), ("b", 1, 0), ("c", 1, 0)],
    );
    assert_eq!(picks(&mut group, 2), "a b");
    group.remove_member(&id("a")).unwrap();
    assert_eq!(picks(&mut group, 3), "c b c");
}

// ---- smooth weighted round robin ----

#[test]
fn weighted_round_robin_three_to_one_gives_exactly_three_of_every_four_calls() {
    let mut group = group(
        GroupStrategy::WeightedRoundRobin,
        1,
        &[("a", 3, 0), ("b", 1, 0)],
    );
    let mut random = no_randomness();
    for window in 0..25 {
        let chosen: Vec<ServerId> = (0..4)
            .map(|_| group.select(&[], &mut random).unwrap())
            .collect();
        let to_a = chosen.iter().filter(|member| **member == id("a")).count();
        assert_eq!(to_a, 3, "window {window}: {chosen:?}");
    }
    assert_eq!(picks(&mut group, 8), "a a b a a a b a");
}

#[test]
fn weighted_round_robin_interleaves_five_one_one_classically() {
    let mut group = group(
        GroupStrategy::WeightedRoundRobin,
        1,
        &[("a", 5, 0), ("b", 1, 0), ("c", 1, 0)],
    );
    assert_eq!(picks(&mut group, 7), "a a b a c a a");
    assert_eq!(picks(&mut group, 7), "a a b a c a a");
}

#[test]
fn weighted_round_robin_with_equal_weights_is_round_robin() {
    let mut group = group(
        GroupStrategy::WeightedRoundRobin,
        1,
        &[("a", 2, 0), ("b", 2, 0), ("c", 2, 0)],
    );
    assert_eq!(picks(&mut group, 6), "a b c a b c");
}

#[test]
fn weighted_round_robin_starts_over_when_the_rotation_changes() {
    let mut group = group(
        GroupStrategy::WeightedRoundRobin,
        1,
        &[("a", 5, 0), ("b", 1, 0), ("c", 1, 0)],
    );
    assert_eq!(picks(&mut group, 3), "a a b");
    group.member_health(&id("c"), false).unwrap();
    // a and b at 5:1 from a fresh start.
    assert_eq!(picks(&mut group, 6), "a a a b a a");
    group.member_health(&id("c"), true).unwrap();
    assert_eq!(picks(&mut group, 7), "a a b a c a a");
}

#[test]
fn weighted_round_robin_follows_a_weight_update() {
    let mut group = group(
        GroupStrategy::WeightedRoundRobin,
        1,
        &[("a", 1, 0), ("b", 1, 0)],
    );
    assert_eq!(picks(&mut group, 1), "a");
    group.update_member(&id("b"), 3, 0).unwrap();
    assert_eq!(picks(&mut group, 4), "b a b b");
    assert_eq!(group.member(&id("b")).unwrap().weight(), 3);
}

// ---- least connections ----

#[test]
fn least_connections_picks_the_member_with_fewest_calls_in_flight() {
    let mut group = group(
        GroupStrategy::LeastConnections,
        1,
        &[("a", 1, 0), ("b", 1, 0), ("c", 1, 0)],
    );
    let mut random = no_randomness();
    // Calls that stay in flight spread one per member, then a second round.
    let mut chosen = Vec::new();
    for _ in 0..6 {
        let member = group.select(&[], &mut random).unwrap();
        group.call_started(&member).unwrap();
        chosen.push(member.to_string());
    }
    assert_eq!(chosen.join(" "), "a b c a b c");
    for (member, expected) in [("a", 2), ("b", 2), ("c", 2)] {
        assert_eq!(group.member(&id(member)).unwrap().in_flight(), expected);
    }
    // b finishes both calls: it is the least loaded and takes the next two.
    group.call_finished(&id("b"), CallOutcome::Success).unwrap();
    group
        .call_finished(&id("b"), CallOutcome::ToolError)
        .unwrap();
    let member = group.select(&[], &mut random).unwrap();
    assert_eq!(member, id("b"));
    group.call_started(&member).unwrap();
    let member = group.select(&[], &mut random).unwrap();
    assert_eq!(member, id("b"));
    group.call_started(&member).unwrap();
    // Now all carry 2 again; the tie goes on in turn after b.
    assert_eq!(picks(&mut group, 1), "c");
}

#[test]
fn least_connections_breaks_ties_in_turn_so_sequential_calls_spread() {
    let mut group = group(
        GroupStrategy::LeastConnections,
        1,
        &[("a", 1, 0), ("b", 1, 0), ("c", 1, 0)],
    );
    // Each call finishes before the next, so every member always has 0 in flight.
    let mut random = no_randomness();
    let mut chosen = Vec::new();
    for _ in 0..6 {
        let member = group.select(&[], &mut random).unwrap();
        group.call_started(&member).unwrap();
        group.call_finished(&member, CallOutcome::Success).unwrap();
        chosen.push(member.to_string());
    }
    assert_eq!(chosen.join(" "), "a b c a b c");
}

#[test]
fn least_connections_avoids_a_busy_member_unless_it_is_the_only_candidate() {
    let mut group = group(
        GroupStrategy::LeastConnections,
        1,
        &[("a", 1, 0), ("b", 1, 0)],
    );
    for _ in 0..3 {
        group.call_started(&id("a")).unwrap();
    }
    assert_eq!(picks(&mut group, 3), "b b b");
    // With b excluded (already tried by this call) the busy a is the only candidate.
    let mut random = no_randomness();
    assert_eq!(group.select(&[id("b")], &mut random), Some(id("a")));
}

// ---- random (weighted) ----

#[test]
fn random_maps_draws_onto_cumulative_weights_exactly() {
    let mut group = group(
        GroupStrategy::Random,
        1,
        &[("a", 2, 0), ("b", 1, 0), ("c", 1, 0)],
    );
    // Total weight 4: draws 0-1 are a, 2 is b, 3 is c; larger draws wrap modulo 4.
    let mut random = ScriptedRandom::new([0, 1, 2, 3, 4, 5, 6, 7, 11, 9]);
    assert_eq!(
        picks_with(&mut group, 10, &mut random),
        "a a b c a a b c c a"
    );
    assert_eq!(random.remaining(), 0);
}

#[test]
fn random_gives_each_member_its_weight_share_over_every_draw() {
    let mut group = group(GroupStrategy::Random, 1, &[("a", 3, 0), ("b", 1, 0)]);
    // One full sweep of the draw space (0..4) repeated 25 times: exactly 75 a and 25 b.
    let mut random = ScriptedRandom::new((0..100).map(|draw| draw % 4));
    let chosen = picks_with(&mut group, 100, &mut random);
    assert_eq!(chosen.matches('a').count(), 75);
    assert_eq!(chosen.matches('b').count(), 25);
}

#[test]
fn random_draws_only_among_candidates() {
    let mut group = group(
        GroupStrategy::Random,
        1,
        &[("a", 2, 0), ("b", 1, 0), ("c", 1, 0)],
    );
    group.member_health(&id("b"), false).unwrap();
    // Candidates a (2) and c (1) minus the excluded a: only c, total weight 1.
    let mut random = ScriptedRandom::new([7]);
    assert_eq!(group.select(&[id("a")], &mut random), Some(id("c")));
    // Without exclusion: total 3, draws 0-1 a, 2 c.
    let mut random = ScriptedRandom::new([0, 1, 2, 5]);
    assert_eq!(picks_with(&mut group, 4, &mut random), "a a c c");
}

// ---- priority ----

#[test]
fn priority_picks_the_lowest_number_and_falls_back_in_order() {
    let mut group = group(
        GroupStrategy::Priority,
        1,
        &[("a", 1, 1), ("b", 1, 0), ("c", 1, 2)],
    );
    assert_eq!(picks(&mut group, 4), "b b b b");
    let mut random = no_randomness();
    assert_eq!(group.select(&[id("b")], &mut random), Some(id("a")));
    assert_eq!(
        group.select(&[id("b"), id("a")], &mut random),
        Some(id("c"))
    );
    assert_eq!(
        group.select(&[id("b"), id("a"), id("c")], &mut random),
        None
    );
    group.member_health(&id("b"), false).unwrap();
    assert_eq!(picks(&mut group, 2), "a a");
    group.member_health(&id("a"), false).unwrap();
    assert_eq!(picks(&mut group, 2), "c c");
    group.member_health(&id("b"), true).unwrap();
    assert_eq!(picks(&mut group, 2), "b b");
}

#[test]
fn priority_shares_calls_in_turn_among_equal_numbers() {
    let mut group = group(
        GroupStrategy::Priority,
        1,
        &[("a", 1, 5), ("b", 1, 1), ("c", 1, 1)],
    );
    assert_eq!(picks(&mut group, 4), "b c b c");
}

// ---- selection in general ----

#[test]
fn no_member_in_rotation_selects_nothing_under_every_strategy() {
    for strategy in GroupStrategy::ALL {
        let mut empty = Group::new(id("g"), strategy, 1).unwrap();
        let mut random = no_randomness();
        assert_eq!(empty.select(&[], &mut random), None, "{strategy}");

        let mut group = group(strategy, 1, &[("a", 1, 0), ("b", 1, 0)]);
        group.member_health(&id("a"), false).unwrap();
        group
            .call_finished(&id("b"), CallOutcome::TransportFailure)
            .unwrap();
        assert_eq!(group.select(&[], &mut random), None, "{strategy}");
        assert_eq!(group.state(), GroupState::Unavailable);
    }
}

#[test]
fn excluded_members_are_never_selected_under_any_strategy() {
    for strategy in GroupStrategy::ALL {
        let mut group = group(strategy, 1, &[("a", 5, 0), ("b", 1, 1), ("c", 1, 2)]);
        let mut random = ScriptedRandom::new([0, 1, 2, 3, 4, 5]);
        for _ in 0..6 {
            let chosen = group.select(&[id("a"), id("b")], &mut random);
            assert_eq!(chosen, Some(id("c")), "{strategy}");
        }
    }
}

#[test]
fn select_does_not_count_calls_in_flight() {
    let mut group = group(GroupStrategy::RoundRobin, 1, &[("a", 1, 0)]);
    picks(&mut group, 3);
    assert_eq!(group.member(&id("a")).unwrap().in_flight(), 0);
}

// ---- retry ----

#[test]
fn a_transport_failure_is_retried_once_on_another_member() {
    let mut group = group(
        GroupStrategy::Priority,
        1,
        &[("a", 1, 0), ("b", 1, 1), ("c", 1, 2)],
    );
    let mut random = no_randomness();
    let mut plan = CallPlan::new();
    let first = plan.next_member(&mut group, &mut random).unwrap();
    assert_eq!(first, id("a"));
    group.call_started(&first).unwrap();
    let events = group
        .call_finished(&first, CallOutcome::TransportFailure)
        .unwrap();
    assert_eq!(events, [left("a", LeaveReason::TransportFailure)]);
    assert!(plan.should_retry(CallOutcome::TransportFailure));

    let second = plan.next_member(&mut group, &mut random).unwrap();
    assert_eq!(second, id("b"));
    group.call_started(&second).unwrap();
    group
        .call_finished(&second, CallOutcome::TransportFailure)
        .unwrap();
    // Two attempts made: no third, although c is still in rotation.
    assert!(!plan.should_retry(CallOutcome::TransportFailure));
    assert_eq!(plan.next_member(&mut group, &mut random), None);
    assert_eq!(plan.tried(), [id("a"), id("b")]);
    assert_eq!(MAX_ATTEMPTS_PER_CALL, 2);
}

#[test]
fn the_retry_excludes_the_first_member_even_while_it_is_in_rotation() {
    // With round robin over a single other member, the retry must not land on `a` again even
    // if the application has not reported the failure to the group.
    let mut group = group(GroupStrategy::RoundRobin, 1, &[("a", 1, 0), ("b", 1, 0)]);
    let mut random = no_randomness();
    let mut plan = CallPlan::new();
    assert_eq!(plan.next_member(&mut group, &mut random), Some(id("a")));
    assert_eq!(plan.next_member(&mut group, &mut random), Some(id("b")));

    let mut lonely = self::group(GroupStrategy::RoundRobin, 1, &[("a", 1, 0)]);
    let mut plan = CallPlan::new();
    assert_eq!(plan.next_member(&mut lonely, &mut random), Some(id("a")));
    assert_eq!(plan.next_member(&mut lonely, &mut random), None);
}

#[test]
fn tool_errors_and_successes_are_not_retried_and_keep_the_member_in_rotation() {
    let mut group = group(GroupStrategy::RoundRobin, 1, &[("a", 1, 0), ("b", 1, 0)]);
    let plan = {
        let mut plan = CallPlan::new();
        plan.next_member(&mut group, &mut no_randomness()).unwrap();
        plan
    };
    for outcome in [CallOutcome::Success, CallOutcome::ToolError] {
        assert!(!plan.should_retry(outcome));
        assert!(!outcome.is_retryable());
        group.call_started(&id("a")).unwrap();
        assert_eq!(group.call_finished(&id("a"), outcome).unwrap(), []);
        assert!(group.member(&id("a")).unwrap().in_rotation());
    }
    assert!(CallOutcome::TransportFailure.is_retryable());
}

// ---- rotation and state ----

#[test]
fn a_member_leaves_after_a_failed_health_check_and_returns_when_healthy() {
    let mut group = group(GroupStrategy::RoundRobin, 2, &[("a", 1, 0), ("b", 1, 0)]);
    assert_eq!(group.state(), GroupState::Healthy);

    let events = group.member_health(&id("a"), false).unwrap();
    assert_eq!(
        events,
        [
            left("a", LeaveReason::Unhealthy),
            state_changed(GroupState::Healthy, GroupState::Partial)
        ]
    );
    assert!(!group.member(&id("a")).unwrap().in_rotation());
    // Repeating the same verdict changes nothing and says so.
    assert_eq!(group.member_health(&id("a"), false).unwrap(), []);

    let events = group.member_health(&id("a"), true).unwrap();
    assert_eq!(
        events,
        [
            returned("a"),
            state_changed(GroupState::Partial, GroupState::Healthy)
        ]
    );
    assert_eq!(group.member_health(&id("a"), true).unwrap(), []);
}

#[test]
fn state_moves_through_healthy_partial_and_unavailable_with_min_healthy() {
    let mut group = group(
        GroupStrategy::RoundRobin,
        2,
        &[("a", 1, 0), ("b", 1, 0), ("c", 1, 0)],
    );
    assert_eq!(group.members_in_rotation(), 3);
    assert_eq!(group.state(), GroupState::Healthy);
    assert_eq!(group.member_health(&id("a"), false).unwrap().len(), 1);
    assert_eq!(group.state(), GroupState::Healthy, "2 in rotation, min 2");
    assert_eq!(
        group
            .call_finished(&id("b"), CallOutcome::TransportFailure)
            .unwrap(),
        [
            left("b", LeaveReason::TransportFailure),
            state_changed(GroupState::Healthy, GroupState::Partial)
        ]
    );
    assert_eq!(
        group.member_health(&id("c"), false).unwrap(),
        [
            left("c", LeaveReason::Unhealthy),
            state_changed(GroupState::Partial, GroupState::Unavailable)
        ]
    );
    assert_eq!(
        group.member_health(&id("b"), true).unwrap(),
        [
            returned("b"),
            state_changed(GroupState::Unavailable, GroupState::Partial)
        ]
    );
}

#[test]
fn a_new_group_is_unavailable_until_members_arrive() {
    let mut group = Group::new(id("g"), GroupStrategy::RoundRobin, 2).unwrap();
    assert_eq!(group.state(), GroupState::Unavailable);
    assert_eq!(
        group.add_member(MemberSpec::new(id("a"))).unwrap(),
        [state_changed(GroupState::Unavailable, GroupState::Partial)]
    );
    assert_eq!(
        group.add_member(MemberSpec::new(id("b"))).unwrap(),
        [state_changed(GroupState::Partial, GroupState::Healthy)]
    );
    assert_eq!(group.add_member(MemberSpec::new(id("c"))).unwrap(), []);
    let added = group.member(&id("c")).unwrap();
    assert!(added.in_rotation());
    assert_eq!(
        (added.weight(), added.priority(), added.in_flight()),
        (MemberSpec::DEFAULT_WEIGHT, MemberSpec::DEFAULT_PRIORITY, 0)
    );
    assert_eq!(group.remove_member(&id("c")).unwrap(), []);
    assert_eq!(
        group.remove_member(&id("a")).unwrap(),
        [state_changed(GroupState::Healthy, GroupState::Partial)]
    );
    let remaining: Vec<&ServerId> = group.members().iter().map(|m| m.id()).collect();
    assert_eq!(remaining, [&id("b")]);
}

#[test]
fn min_healthy_changes_report_the_state_they_cause() {
    let mut group = group(
        GroupStrategy::RoundRobin,
        1,
        &[("a", 1, 0), ("b", 1, 0), ("c", 1, 0)],
    );
    group.member_health(&id("c"), false).unwrap();
    assert_eq!(
        group.set_min_healthy(3).unwrap(),
        [state_changed(GroupState::Healthy, GroupState::Partial)]
    );
    assert_eq!(group.min_healthy(), 3);
    assert_eq!(
        group.set_min_healthy(2).unwrap(),
        [state_changed(GroupState::Partial, GroupState::Healthy)]
    );
    assert_eq!(group.set_min_healthy(1).unwrap(), []);
}

#[test]
fn min_healthy_may_be_lowered_while_above_the_member_count() {
    // Created before its members, as POST /api/groups does.
    let mut group = Group::new(id("g"), GroupStrategy::RoundRobin, 5).unwrap();
    group.add_member(MemberSpec::new(id("a"))).unwrap();
    assert_eq!(group.set_min_healthy(5).unwrap(), []);
    assert_eq!(
        group.set_min_healthy(4).unwrap(),
        [],
        "still partial with 1 of 4"
    );
    assert_eq!(group.state(), GroupState::Partial);
    assert!(group.set_min_healthy(5).is_err(), "raising above 1 member");
}

#[test]
fn rebalance_rereads_health_and_resets_the_round_robin_position() {
    let mut group = group(
        GroupStrategy::RoundRobin,
        3,
        &[("a", 1, 0), ("b", 1, 0), ("c", 1, 0)],
    );
    group
        .call_finished(&id("a"), CallOutcome::TransportFailure)
        .unwrap();
    group.member_health(&id("b"), false).unwrap();
    group.call_started(&id("c")).unwrap();
    assert_eq!(picks(&mut group, 1), "c");

    let events = group.rebalance(&[id("a"), id("b"), id("not-a-member")]);
    // Partial before (1 of 3) and after (2 of 3): no state change to report.
    assert_eq!(
        events,
        [
            returned("a"),
            returned("b"),
            left("c", LeaveReason::Unhealthy)
        ]
    );
    assert_eq!(group.state(), GroupState::Partial);
    // In-flight calls are still running.
    assert_eq!(group.member(&id("c")).unwrap().in_flight(), 1);
    // The position starts over at the first member.
    assert_eq!(picks(&mut group, 3), "a b a");

    let events = group.rebalance(&[id("a"), id("b"), id("c")]);
    assert_eq!(
        events,
        [
            returned("c"),
            state_changed(GroupState::Partial, GroupState::Healthy)
        ]
    );
    assert_eq!(picks(&mut group, 4), "a b c a");
}

#[test]
fn rebalance_restarts_the_smooth_weighted_sequence() {
    let mut group = group(
        GroupStrategy::WeightedRoundRobin,
        1,
        &[("a", 5, 0), ("b", 1, 0), ("c", 1, 0)],
    );
    assert_eq!(picks(&mut group, 4), "a a b a");
    assert_eq!(group.rebalance(&[id("a"), id("b"), id("c")]), []);
    assert_eq!(picks(&mut group, 7), "a a b a c a a");
}

#[test]
fn changing_the_strategy_starts_it_from_the_beginning() {
    let mut group = group(
        GroupStrategy::RoundRobin,
        1,
        &[("a", 1, 0), ("b", 1, 0), ("c", 1, 0)],
    );
    assert_eq!(picks(&mut group, 2), "a b");
    group.set_strategy(GroupStrategy::WeightedRoundRobin);
    assert_eq!(group.strategy(), GroupStrategy::WeightedRoundRobin);
    group.set_strategy(GroupStrategy::RoundRobin);
    assert_eq!(picks(&mut group, 2), "a b");
}

#[test]
fn in_flight_counts_never_go_below_zero() {
    let mut group = group(GroupStrategy::LeastConnections, 1, &[("a", 1, 0)]);
    group.call_finished(&id("a"), CallOutcome::Success).unwrap();
    assert_eq!(group.member(&id("a")).unwrap().in_flight(), 0);
}

// ---- errors ----

#[test]
fn adding_a_duplicate_member_is_a_conflict() {
    let mut group = group(GroupStrategy::RoundRobin, 1, &[("a", 1, 0)]);
    let error = group.add_member(MemberSpec::new(id("a"))).unwrap_err();
    assert_eq!(
        error,
        GroupError::MemberAlreadyExists {
            group: id("g"),
            member: id("a")
        }
    );
    assert_eq!(error.kind(), ErrorKind::Conflict);
    assert_eq!(group.members().len(), 1);
}

#[test]
fn unknown_members_are_not_found_everywhere() {
    let mut group = group(GroupStrategy::RoundRobin, 1, &[("a", 1, 0)]);
    let unknown = id("zz");
    let errors = [
        group.remove_member(&unknown).unwrap_err(),
        group.call_started(&unknown).unwrap_err(),
        group
            .call_finished(&unknown, CallOutcome::Success)
            .unwrap_err(),
        group.member_health(&unknown, true).unwrap_err(),
        group.update_member(&unknown, 1, 0).unwrap_err(),
    ];
    for error in errors {
        assert_eq!(
            error,
            GroupError::MemberNotFound {
                group: id("g"),
                member: id("zz")
            }
        );
        assert_eq!(error.kind(), ErrorKind::NotFound);
        assert!(
            error
                .to_string()
                .contains("`zz` is not a member of group `g`")
        );
    }
}

#[test]
fn a_weight_of_zero_is_invalid() {
    let mut group = group(GroupStrategy::RoundRobin, 1, &[("a", 1, 0)]);
    let error = group
        .add_member(MemberSpec::new(id("b")).with_weight(0))
        .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Invalid);
    assert!(error.to_string().contains("at least 1"), "{error}");
    assert!(group.member(&id("b")).is_none());

    let error = group.update_member(&id("a"), 0, 0).unwrap_err();
    assert_eq!(
        error,
        GroupError::InvalidWeight {
            member: id("a"),
            weight: 0
        }
    );
    assert_eq!(group.member(&id("a")).unwrap().weight(), 1);

    let error = Group::with_members(
        id("g"),
        GroupStrategy::Random,
        1,
        [MemberSpec::new(id("a")).with_weight(0)],
    )
    .unwrap_err();
    assert_eq!(error.kind(), ErrorKind::Invalid);
}

#[test]
fn a_group_cannot_contain_itself() {
    let mut group = Group::new(id("g"), GroupStrategy::RoundRobin, 1).unwrap();
    let error = group.add_member(MemberSpec::new(id("g"))).unwrap_err();
    assert_eq!(error, GroupError::GroupAsItsOwnMember(id("g")));
    assert_eq!(error.kind(), ErrorKind::Invalid);
}

#[test]
fn min_healthy_of_zero_is_invalid() {
    let error = Group::new(id("g"), GroupStrategy::RoundRobin, 0).unwrap_err();
    assert_eq!(error, GroupError::MinHealthyZero(id("g")));
    assert_eq!(error.kind(), ErrorKind::Invalid);
    assert!(error.to_string().contains("at least 1"), "{error}");

    let mut group = group(GroupStrategy::RoundRobin, 1, &[("a", 1, 0)]);
    assert_eq!(
        group.set_min_healthy(0).unwrap_err(),
        GroupError::MinHealthyZero(id("g"))
    );
    assert_eq!(group.min_healthy(), 1);
}

#[test]
fn raising_min_healthy_above_the_member_count_is_invalid_with_a_clear_message() {
    let mut group = group(GroupStrategy::RoundRobin, 1, &[("a", 1, 0), ("b", 1, 0)]);
    let error = group.set_min_healthy(3).unwrap_err();
    assert_eq!(
        error,
        GroupError::MinHealthyAboveMembers {
            group: id("g"),
            min_healthy: 3,
            members: 2
        }
    );
    assert_eq!(error.kind(), ErrorKind::Invalid);
    assert_eq!(
        error.to_string(),
        "min_healthy 3 is larger than the 2 member(s) of group `g`; add members first or choose \
         a min_healthy of at most 2"
    );
    assert_eq!(group.min_healthy(), 1);
    assert_eq!(group.set_min_healthy(2).unwrap(), []);
}

#[test]
fn error_messages_are_lowercase_without_a_trailing_period() {
    let errors = [
        GroupError::UnknownStrategy("x".into()),
        GroupError::MemberAlreadyExists {
            group: id("g"),
            member: id("a"),
        },
        GroupError::MemberNotFound {
            group: id("g"),
            member: id("a"),
        },
        GroupError::GroupAsItsOwnMember(id("g")),
        GroupError::InvalidWeight {
            member: id("a"),
            weight: 0,
        },
        GroupError::MinHealthyZero(id("g")),
        GroupError::MinHealthyAboveMembers {
            group: id("g"),
            min_healthy: 2,
            members: 1,
        },
    ];
    for error in errors {
        let message = error.to_string();
        let first = message.chars().next().unwrap();
        assert!(!first.is_uppercase(), "{message}");
        assert!(!message.ends_with('.'), "{message}");
    }
}

#[test]
fn leave_reasons_have_stable_names() {
    assert_eq!(LeaveReason::Unhealthy.as_str(), "unhealthy");
    assert_eq!(LeaveReason::TransportFailure.as_str(), "transport_failure");
}
