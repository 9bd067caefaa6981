//! What every [`AuditSink`] promises, as tests that every sink must pass.
//!
//! A sink writes to something outside the gateway (a file, a syslog receiver), so the suite
//! reads back what arrived through an [`AuditDestination`] that the adapter's tests write once
//! over that place. The adapter crate runs the whole suite with one line in its tests:
//!
//! ```text
//! mcpgw_testkit::audit_sink_contract_suite!(my_sink_and_destination().await);
//! ```
//!
//! where the expression answers a `(sink, destination)` pair, fresh for every case. Each case is
//! also a public `async fn` taking `(&dyn AuditSink, &dyn AuditDestination)`.
//!
//! The cases check what the port's documentation promises: a batch arrives whole and in order,
//! batches keep their order, an empty batch delivers nothing, a flush succeeds and loses
//! nothing, any text in a record arrives intact, and the name is stable and not empty.

use async_trait::async_trait;
use mcpgw_core::audit::{AuditRecord, AuditSink};
use mcpgw_core::events::{DomainEvent, PublishedEvent};
use mcpgw_core::time::Timestamp;
use serde_json::Value;

/// The place a sink under test writes to, read back by the test.
#[async_trait]
pub trait AuditDestination: Send + Sync {
    /// Every record that arrived so far, in order, each as the JSON object the sink carried.
    /// Waits (a few seconds at most) until at least `expected` have arrived, for destinations
    /// that receive asynchronously; then answers what is there, even if fewer.
    async fn received(&self, expected: usize) -> Vec<Value>;
}

/// `count` records of key revocations with ids from `first_id` on, each naming its key
/// `{prefix}{n}`.
pub fn sample_records(prefix: &str, first_id: u64, count: usize) -> Vec<AuditRecord> {
    (0..count)
        .map(|n| {
            let id = first_id + n as u64;
            AuditRecord::from_published(
                &PublishedEvent {
                    event_id: id,
                    occurred_at: Timestamp::from_unix_micros(1_772_357_400_000_000 + id as i64),
                    event: DomainEvent::ApiKeyRevoked {
                        key_id: format!("{prefix}{n}"),
                    },
                },
                Some("replica-a"),
            )
        })
        .collect()
}

fn as_json(records: &[AuditRecord]) -> Vec<Value> {
    records
        .iter()
        .map(|record| serde_json::to_value(record).expect("a record is JSON"))
        .collect()
}

pub async fn a_batch_arrives_whole_and_in_order(
    sink: &dyn AuditSink,
    destination: &dyn AuditDestination,
) {
    let records = sample_records("k", 1, 20);
    sink.write(&records).await.expect("the batch is written");
    assert_eq!(destination.received(20).await, as_json(&records));
}

pub async fn batches_keep_their_order(sink: &dyn AuditSink, destination: &dyn AuditDestination) {
    let first = sample_records("a", 1, 3);
    let second = sample_records("b", 4, 1);
    let third = sample_records("c", 5, 5);
    for batch in [&first, &second, &third] {
        sink.write(batch).await.expect("each batch is written");
    }
    let expected: Vec<Value> = [first, second, third]
        .iter()
        .flat_map(|batch| as_json(batch))
        .collect();
    assert_eq!(destination.received(expected.len()).await, expected);
}

pub async fn an_empty_batch_delivers_nothing(
    sink: &dyn AuditSink,
    destination: &dyn AuditDestination,
) {
    sink.write(&[]).await.expect("an empty batch succeeds");
    let records = sample_records("k", 9, 1);
    sink.write(&records).await.expect("the batch is written");
    assert_eq!(
        destination.received(1).await,
        as_json(&records),
        "the empty batch left nothing behind"
    );
}

pub async fn a_flush_succeeds_and_loses_nothing(
    sink: &dyn AuditSink,
    destination: &dyn AuditDestination,
) {
    sink.flush()
        .await
        .expect("a flush before any write succeeds");
    let records = sample_records("k", 1, 5);
    sink.write(&records).await.expect("the batch is written");
    sink.flush().await.expect("the flush succeeds");
    assert_eq!(destination.received(5).await, as_json(&records));
}

/// Quotes, backslashes, brackets, line breaks and text beyond ASCII in a record's values are
/// carried as they are.
pub async fn any_text_arrives_intact(sink: &dyn AuditSink, destination: &dyn AuditDestination) {
    let awkward = "quote \" backslash \\ bracket ] line\nbreak tab\t snowman \u{2603}";
    let record = AuditRecord::from_published(
        &PublishedEvent {
            event_id: 3,
            occurred_at: Timestamp::from_unix_micros(0),
            event: DomainEvent::AuthenticationFailed {
                credential: "api_key",
                reason: awkward.into(),
                client: Some("[::1]".into()),
            },
        },
        Some("replica \"b\" ]"),
    );
    let records = vec![record];
    sink.write(&records).await.expect("the record is written");
    assert_eq!(destination.received(1).await, as_json(&records));
}

pub async fn the_name_is_stable_and_not_empty(
    sink: &dyn AuditSink,
    destination: &dyn AuditDestination,
) {
    let name = sink.name().to_owned();
    assert!(!name.is_empty());
    sink.write(&sample_records("k", 1, 1))
        .await
        .expect("the batch is written");
    assert_eq!(destination.received(1).await.len(), 1);
    assert_eq!(sink.name(), name, "the name does not change with use");
}

/// Expands to one `#[tokio::test]` per case of the [`AuditSink`] contract, each running against
/// a fresh pair made by evaluating `$make_pair` (an expression, which may `.await`, of a tuple
/// `(sink, destination)` whose types implement [`AuditSink`] and [`AuditDestination`]).
///
/// The invoking crate needs `tokio` with the `macros` and `rt-multi-thread` features among its
/// dev-dependencies. To run the suite against two sinks in one crate, invoke it in two modules.
#[macro_export]
macro_rules! audit_sink_contract_suite {
    ($make_pair:expr $(,)?) => {
        $crate::__audit_sink_contract_case!($make_pair, a_batch_arrives_whole_and_in_order);
        $crate::__audit_sink_contract_case!($make_pair, batches_keep_their_order);
        $crate::__audit_sink_contract_case!($make_pair, an_empty_batch_delivers_nothing);
        $crate::__audit_sink_contract_case!($make_pair, a_flush_succeeds_and_loses_nothing);
        $crate::__audit_sink_contract_case!($make_pair, any_text_arrives_intact);
        $crate::__audit_sink_contract_case!($make_pair, the_name_is_stable_and_not_empty);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __audit_sink_contract_case {
    ($make_pair:expr, $case:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $case() {
            let (sink, destination) = $make_pair;
            $crate::audit_sink_suite::$case(&sink, &destination).await;
        }
    };
}
