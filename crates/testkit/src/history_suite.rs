//! What every [`InvocationHistory`] promises, as tests that every implementation must pass.
//!
//! A history is fed by observing the event stream (it is an [`EventObserver`] too) and answers
//! pages of one server's tool invocations:
//!
//! - `page(server, limit, before)` answers that server's records with `event_id < before` (all
//!   of them when `before` is `None`), newest first, at most `limit`;
//! - `next_cursor` is set exactly when older records remain, and passing it as `before` gives
//!   the next page, so walking the cursors visits every record once;
//! - only tool invocations are records (completed, with or without a tool-level error, and
//!   failed), each with its fields as the event had them; other events, and other servers'
//!   invocations, never appear;
//! - a record whose event was observed before `page` was called is in the answer.
//!
//! An implementation runs the whole suite with one line in its tests:
//!
//! ```text
//! mcpgw_testkit::invocation_history_contract_suite!(make_my_history());
//! ```
//!
//! It needs room for the 200 events the cases observe; a history that keeps fewer per server
//! is tested with a larger setting.

use mcpgw_core::{EventObserver, InvocationHistory, InvocationRecord, PublishedEvent, ServerId};

use crate::event_log::{sample_completed, sample_failed, sample_stream, sample_time};

/// What the suite tests: a history that is fed by observing events.
pub trait ObservedHistory: InvocationHistory + EventObserver {}

impl<T: InvocationHistory + EventObserver + ?Sized> ObservedHistory for T {}

/// Expands to one `#[tokio::test]` per case of the [`InvocationHistory`] contract, each on a
/// fresh history made by evaluating `$make_history` (which may `.await`). The invoking crate
/// needs `tokio` with `macros`, `rt` and `rt-multi-thread` among its dev-dependencies. Invoke it
/// in a module of its own: the tests are named after the cases.
#[macro_export]
macro_rules! invocation_history_contract_suite {
    ($make_history:expr $(,)?) => {
        $crate::__invocation_history_contract_case!($make_history, a_new_history_is_empty);
        $crate::__invocation_history_contract_case!(
            $make_history,
            pages_are_the_newest_records_first_within_the_limit
        );
        $crate::__invocation_history_contract_case!(
            $make_history,
            walking_the_cursors_visits_every_record_once
        );
        $crate::__invocation_history_contract_case!(
            $make_history,
            before_leaves_out_that_id_and_every_newer_one
        );
        $crate::__invocation_history_contract_case!(
            $make_history,
            only_the_servers_own_invocations_are_its_records
        );
        $crate::__invocation_history_contract_case!(
            $make_history,
            records_carry_the_fields_of_their_events
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __invocation_history_contract_case {
    ($make_history:expr, $case:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $case() {
            let history = $make_history;
            $crate::history_suite::$case(&history).await;
        }
    };
}

fn server(raw: &str) -> ServerId {
    ServerId::parse(raw).unwrap_or_else(|error| panic!("test id `{raw}` is invalid: {error}"))
}

fn observe_all(history: &dyn ObservedHistory, events: &[PublishedEvent]) {
    for event in events {
        history.observe(event);
    }
}

/// The ids of `server`'s invocations in `events`, newest first.
fn invocation_ids(events: &[PublishedEvent], server: &str) -> Vec<u64> {
    let mut ids: Vec<u64> = events
        .iter()
        .filter_map(InvocationRecord::from_event)
        .filter(|record| record.mcp_server_id.as_str() == server)
        .map(|record| record.event_id)
        .collect();
    ids.reverse();
    ids
}

fn ids(records: &[InvocationRecord]) -> Vec<u64> {
    records.iter().map(|record| record.event_id).collect()
}

pub async fn a_new_history_is_empty(history: &dyn ObservedHistory) {
    let page = history.page(&server("math"), 10, None).await.unwrap();
    assert!(page.entries.is_empty());
    assert_eq!(page.next_cursor, None);
}

pub async fn pages_are_the_newest_records_first_within_the_limit(history: &dyn ObservedHistory) {
    let events = sample_stream(1, 200);
    observe_all(history, &events);
    let expected = invocation_ids(&events, "math");
    for limit in [1, 5, 30] {
        let page = history.page(&server("math"), limit, None).await.unwrap();
        assert_eq!(ids(&page.entries), expected[..limit], "limit {limit}");
        assert!(
            page.next_cursor.is_some(),
            "older records remain after {limit}"
        );
    }
    let everything = history.page(&server("math"), 10_000, None).await.unwrap();
    assert_eq!(ids(&everything.entries), expected);
    assert_eq!(everything.next_cursor, None, "nothing older remains");
}

pub async fn walking_the_cursors_visits_every_record_once(history: &dyn ObservedHistory) {
    let events = sample_stream(1, 200);
    observe_all(history, &events);
    let mut visited = Vec::new();
    let mut before = None;
    let mut pages = 0;
    loop {
        let page = history.page(&server("math"), 7, before).await.unwrap();
        assert!(page.entries.len() <= 7);
        visited.extend(ids(&page.entries));
        pages += 1;
        assert!(pages < 100, "the cursor never reached the end");
        match page.next_cursor {
            Some(cursor) => before = Some(cursor),
            None => break,
        }
    }
    assert_eq!(visited, invocation_ids(&events, "math"));
}

pub async fn before_leaves_out_that_id_and_every_newer_one(history: &dyn ObservedHistory) {
    let events = sample_stream(1, 200);
    observe_all(history, &events);
    let all = invocation_ids(&events, "math");
    for before in [0, 1, 2, 3, 50, 100, 199, 200, 201, u64::MAX] {
        let page = history
            .page(&server("math"), 10_000, Some(before))
            .await
            .unwrap();
        let expected: Vec<u64> = all.iter().copied().filter(|id| *id < before).collect();
        assert_eq!(ids(&page.entries), expected, "before {before}");
        assert_eq!(page.next_cursor, None, "before {before}: everything fit");
    }
}

pub async fn only_the_servers_own_invocations_are_its_records(history: &dyn ObservedHistory) {
    let events = sample_stream(1, 200);
    observe_all(history, &events);
    let text = history.page(&server("text"), 10_000, None).await.unwrap();
    assert_eq!(ids(&text.entries), invocation_ids(&events, "text"));
    assert!(
        text.entries
            .iter()
            .all(|record| record.mcp_server_id.as_str() == "text")
    );
    // The stream's state changes are about `math`; they are events, not invocations.
    let math = history.page(&server("math"), 10_000, None).await.unwrap();
    assert_eq!(ids(&math.entries), invocation_ids(&events, "math"));
    let nobody = history.page(&server("nobody"), 10, None).await.unwrap();
    assert!(nobody.entries.is_empty());
    assert_eq!(nobody.next_cursor, None);
}

pub async fn records_carry_the_fields_of_their_events(history: &dyn ObservedHistory) {
    let completed = sample_completed(6, "math", 6);
    let failed = sample_failed(7, "math", 7);
    history.observe(&completed);
    history.observe(&failed);
    let page = history.page(&server("math"), 10, None).await.unwrap();
    let [newest, oldest] = page.entries.as_slice() else {
        panic!("expected two records, got {:?}", page.entries);
    };
    assert_eq!(Some(newest.clone()), InvocationRecord::from_event(&failed));
    assert_eq!(
        Some(oldest.clone()),
        InvocationRecord::from_event(&completed)
    );
    assert!(!newest.success);
    assert_eq!(newest.error_kind.as_deref(), Some("timeout"));
    assert_eq!(newest.occurred_at, sample_time(7));
    assert!(oldest.success);
    assert!(
        oldest.is_error,
        "a tool-level error is a successful invocation"
    );
}

#[cfg(test)]
mod in_memory {
    crate::invocation_history_contract_suite!(mcpgw_core::InMemoryInvocationHistory::new(10_000));
}
