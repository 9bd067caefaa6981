//! The OTLP audit sink against the audit sink contract, exporting over OTLP/HTTP to a receiver
//! in this test that decodes each export with OpenTelemetry's own protobuf messages and turns
//! every log record back into the audit record it carries.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use mcpgw_config::OtlpProtocol;
use mcpgw_otel::{LogSettings, OtlpLogSink};
use mcpgw_testkit::audit_sink_suite::AuditDestination;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use prost::Message as _;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

/// The audit records a receiver got, in order.
#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<Value>>>);

#[async_trait]
impl AuditDestination for Received {
    async fn received(&self, expected: usize) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let records = self.0.lock().unwrap().clone();
            if records.len() >= expected || Instant::now() >= deadline {
                return records;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn text_of(value: Option<&opentelemetry_proto::tonic::common::v1::AnyValue>) -> Option<String> {
    match value?.value.as_ref()? {
        Any::StringValue(text) => Some(text.clone()),
        _ => None,
    }
}

fn attribute(record: &LogRecord, key: &str) -> Option<String> {
    record
        .attributes
        .iter()
        .find(|attribute| attribute.key == key)
        .and_then(|attribute| text_of(attribute.value.as_ref()))
}

/// The audit record a log record carries, in the record's JSON form.
fn audit_record(log: &LogRecord) -> Value {
    let event: Value = serde_json::from_str(&text_of(log.body.as_ref()).expect("a text body"))
        .expect("the body is the event's JSON");
    let severity = match log.severity_text.as_str() {
        "INFO" => "info",
        "NOTICE" => "notice",
        "WARN" => "warning",
        other => panic!("unexpected severity {other}"),
    };
    assert_eq!(
        log.event_name, event["event_type"],
        "the event name is the type"
    );
    json!({
        "event_type": attribute(log, "event.name").expect("event.name"),
        "event_id": attribute(log, "mcpgw.event_id").expect("the event id"),
        "occurred_at": rfc3339(log.time_unix_nano),
        "severity": severity,
        "replica": attribute(log, "mcpgw.replica"),
        "event": event,
    })
}

/// A log record's time as audit records write it: `2026-03-01T09:30:00.123456Z`.
fn rfc3339(nanos: u64) -> String {
    let micros = nanos / 1_000;
    let seconds = i64::try_from(micros / 1_000_000).unwrap();
    let (days, second_of_day) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    // The proleptic Gregorian date of a count of days since 1970-01-01.
    let shifted = days + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        second_of_day / 3_600,
        second_of_day % 3_600 / 60,
        second_of_day % 60,
        micros % 1_000_000
    )
}

/// Serves OTLP/HTTP log exports on a free port, keeping what arrives.
async fn start_receiver() -> (String, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let received = Received::default();
    let keeping = received.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let keeping = keeping.clone();
            tokio::spawn(async move {
                let (read, mut write) = stream.into_split();
                let mut reader = BufReader::new(read);
                loop {
                    let mut length = 0usize;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
                            return;
                        }
                        let line = line.trim_end();
                        if line.is_empty() {
                            break;
                        }
                        if let Some((name, value)) = line.split_once(':')
                            && name.eq_ignore_ascii_case("content-length")
                        {
                            length = value.trim().parse().unwrap();
                        }
                    }
                    let mut body = vec![0; length];
                    reader.read_exact(&mut body).await.unwrap();
                    let request = ExportLogsServiceRequest::decode(body.as_slice())
                        .expect("an OTLP logs export");
                    {
                        let mut records = keeping.0.lock().unwrap();
                        for resource in &request.resource_logs {
                            for scope in &resource.scope_logs {
                                records.extend(scope.log_records.iter().map(audit_record));
                            }
                        }
                    }
                    let answer = "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\n\
                                  content-length: 0\r\n\r\n";
                    if write.write_all(answer.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (format!("http://{address}/v1/logs"), received)
}

async fn pair() -> (OtlpLogSink, Received) {
    let (endpoint, received) = start_receiver().await;
    let sink = OtlpLogSink::new(&LogSettings {
        endpoint,
        protocol: OtlpProtocol::HttpProtobuf,
        headers: Default::default(),
        timeout: Duration::from_secs(5),
        service_name: "mcpgw".into(),
    })
    .expect("the sink is made");
    (sink, received)
}

mcpgw_testkit::audit_sink_contract_suite!(pair().await);

#[tokio::test]
async fn an_unreachable_collector_is_an_error_the_exporter_retries() {
    // Bad input tried: a collector address nothing listens on.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    let sink = OtlpLogSink::new(&LogSettings {
        endpoint: format!("http://{address}/v1/logs"),
        protocol: OtlpProtocol::HttpProtobuf,
        headers: Default::default(),
        timeout: Duration::from_secs(2),
        service_name: "mcpgw".into(),
    })
    .expect("the sink is made");
    let error = mcpgw_core::audit::AuditSink::write(
        &sink,
        &mcpgw_testkit::audit_sink_suite::sample_records("k", 1, 1),
    )
    .await
    .expect_err("nothing took the records");
    assert!(
        matches!(error, mcpgw_core::audit::AuditSinkError::Unavailable(_)),
        "{error}"
    );
}
