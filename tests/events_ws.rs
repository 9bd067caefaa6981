//! End-to-end tests of the WebSocket stream of domain events, `/api/ws/events`: the real binary,
//! the testkit's fixture MCP server as real subprocesses, servers started and stopped over the
//! REST API, and blocking WebSocket clients.

mod support;

use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{RunningGateway, fixture_server_yaml, gateway};
use tungstenite::{Message, WebSocket};

const SOON: Duration = Duration::from_secs(30);

type Client = WebSocket<TcpStream>;

/// Two fixture servers, `demo` and `other`; the background tool probe is off so that only the
/// tests start servers.
fn two_servers() -> RunningGateway {
    gateway()
        .config(&format!(
            "probe_tools: false\nmcp_servers:\n{}{}",
            fixture_server_yaml("demo", &[]),
            fixture_server_yaml("other", &[])
        ))
        .start()
}

/// Opens the event stream with `query` (without the `?`).
fn connect(gw: &RunningGateway, query: &str) -> Client {
    let address = gw.base_url.trim_start_matches("http://");
    let stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(SOON)).unwrap();
    let url = format!("ws://{address}/api/ws/events?{query}");
    let (client, response) = tungstenite::client(url.as_str(), stream)
        .unwrap_or_else(|error| panic!("the handshake of {url} fails: {error}"));
    assert_eq!(response.status().as_u16(), 101);
    client
}

/// The next JSON text frame, skipping control frames; fails after `within`.
fn next_json(client: &mut Client, within: Duration) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "no frame within {within:?}");
        client.get_mut().set_read_timeout(Some(left)).unwrap();
        match client.read().expect("the stream stays open") {
            Message::Text(text) => {
                return serde_json::from_str(text.as_str())
                    .unwrap_or_else(|error| panic!("not JSON ({error}): {text}"));
            }
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {}
            other => panic!("unexpected frame {other:?}"),
        }
    }
}

fn send_json(client: &mut Client, value: &Value) {
    client.send(Message::text(value.to_string())).unwrap();
}

/// A short description of a lifecycle event: its type and, for state changes, the transition.
fn step(event: &Value) -> String {
    match event["event_type"].as_str().unwrap() {
        "McpServerStateChanged" => format!(
            "{}->{}",
            event["from"].as_str().unwrap(),
            event["to"].as_str().unwrap()
        ),
        other => other.to_owned(),
    }
}

fn event_id(event: &Value) -> u64 {
    event["event_id"]
        .as_str()
        .expect("event_id is a string")
        .parse()
        .unwrap()
}

/// Reads events until one satisfies `last`, returning all of them.
fn events_until(client: &mut Client, last: impl Fn(&Value) -> bool) -> Vec<Value> {
    let mut events = Vec::new();
    loop {
        let event = next_json(client, SOON);
        let done = last(&event);
        events.push(event);
        if done {
            return events;
        }
    }
}

#[test]
fn a_filtered_client_sees_the_start_and_stop_of_its_server_in_order_and_nothing_else() {
    let gw = two_servers();
    let mut client = connect(
        &gw,
        "event_types=McpServerStateChanged,McpServerStarted,McpServerStopped&mcp_server_ids=demo",
    );

    // `other` starts at the same time as `demo`: none of its events may reach this client.
    let started = std::thread::scope(|scope| {
        let other = scope.spawn(|| gw.post_empty("/api/mcp_servers/other/start"));
        let demo = gw.post_empty("/api/mcp_servers/demo/start");
        assert_eq!(other.join().unwrap().status, 200);
        demo
    });
    assert_eq!(started.status, 200, "{}", started.text);
    let start = events_until(&mut client, |event| {
        event["event_type"] == "McpServerStarted"
    });

    let stopped = gw.post_empty("/api/mcp_servers/demo/stop");
    assert_eq!(stopped.status, 200, "{}", stopped.text);
    let stop = events_until(&mut client, |event| {
        event["event_type"] == "McpServerStopped"
    });
    let other_stopped = gw.post_empty("/api/mcp_servers/other/stop");
    assert_eq!(other_stopped.status, 200);

    let all: Vec<&Value> = start.iter().chain(&stop).collect();
    for event in &all {
        assert_eq!(event["mcp_server_id"], "demo", "{event}");
        assert!(event["occurred_at"].is_string(), "{event}");
    }
    let ids: Vec<u64> = all.iter().map(|event| event_id(event)).collect();
    assert!(
        ids.windows(2).all(|pair| pair[0] < pair[1]),
        "event ids increase: {ids:?}"
    );
    let start_steps: Vec<String> = start.iter().map(step).collect();
    assert_eq!(
        start_steps,
        [
            "cold->initializing",
            "initializing->ready",
            "McpServerStarted"
        ],
        "{start:?}"
    );
    let stop_steps: Vec<String> = stop.iter().map(step).collect();
    assert_eq!(stop_steps, ["ready->cold", "McpServerStopped"], "{stop:?}");
    assert_eq!(start[2]["tool_count"].as_u64().map(|n| n > 0), Some(true));
}

#[test]
fn a_subscribe_message_replaces_the_filter_and_bad_messages_get_an_error_frame() {
    let gw = two_servers();
    let mut client = connect(&gw, "event_types=McpServerStarted&mcp_server_ids=demo");

    // Not JSON, a message of an unknown type, an unknown event type, an invalid id, a binary
    // frame: each gets an error frame, and the connection stays usable.
    for bad in [
        "not json".to_owned(),
        json!({"type": "unsubscribe"}).to_string(),
        json!({"type": "subscribe", "event_types": ["NoSuchEvent"]}).to_string(),
        json!({"type": "subscribe", "mcp_server_ids": ["bad id!"]}).to_string(),
    ] {
        client.send(Message::text(bad.clone())).unwrap();
        let answer = next_json(&mut client, SOON);
        assert_eq!(answer["type"], "error", "{bad} -> {answer}");
        assert!(!answer["message"].as_str().unwrap().is_empty());
    }
    client.send(Message::binary(vec![1_u8, 2, 3])).unwrap();
    assert_eq!(next_json(&mut client, SOON)["type"], "error");

    send_json(
        &mut client,
        &json!({"type": "subscribe", "event_types": ["McpServerStopped"], "mcp_server_ids": ["other"]}),
    );
    assert_eq!(
        next_json(&mut client, SOON),
        json!({"type": "subscribed", "event_types": ["McpServerStopped"], "mcp_server_ids": ["other"]})
    );

    // The failed subscriptions above left the old filter alone until this one; now `demo`'s
    // start (the old filter) is no longer sent, and `other`'s stop is.
    for path in [
        "/api/mcp_servers/demo/start",
        "/api/mcp_servers/other/start",
        "/api/mcp_servers/other/stop",
    ] {
        assert_eq!(gw.post_empty(path).status, 200, "{path}");
    }
    let first = next_json(&mut client, SOON);
    assert_eq!(first["event_type"], "McpServerStopped", "{first}");
    assert_eq!(first["mcp_server_id"], "other", "{first}");
}

#[test]
fn a_bad_filter_in_the_query_is_refused_before_the_upgrade() {
    let gw = two_servers();
    let message = gw
        .get("/api/ws/events?event_types=McpServerStarted,NoSuchEvent")
        .assert_error(422, "ValidationError");
    assert!(message.contains("NoSuchEvent"), "{message}");
    assert!(
        message.contains("McpServerStateChanged"),
        "lists the known types: {message}"
    );
    gw.get("/api/ws/events?mcp_server_ids=demo,bad%20id")
        .assert_error(422, "ValidationError");
    // A valid filter without a WebSocket handshake, with the credential parameter accepted.
    gw.get("/api/ws/events?event_types=McpServerStarted&api_key=secret")
        .assert_error(400, "BadRequestError");
    gw.post_empty("/api/ws/events")
        .assert_error(405, "MethodNotAllowedError");
}

#[test]
fn fifty_readers_get_every_event_promptly_while_one_client_never_reads() {
    const READERS: usize = 50;
    const CYCLES: usize = 20;
    let gw = two_servers();
    // Subscribed to everything and never read.
    let stalled = connect(&gw, "");
    let mut readers: Vec<Client> = (0..READERS)
        .map(|_| {
            connect(
                &gw,
                "event_types=McpServerStarted,McpServerStopped&mcp_server_ids=demo",
            )
        })
        .collect();

    let began = Instant::now();
    for _ in 0..CYCLES {
        assert_eq!(gw.post_empty("/api/mcp_servers/demo/start").status, 200);
        assert_eq!(gw.post_empty("/api/mcp_servers/demo/stop").status, 200);
    }
    let burst_done = Instant::now();

    let expected: Vec<&str> = ["McpServerStarted", "McpServerStopped"]
        .into_iter()
        .cycle()
        .take(2 * CYCLES)
        .collect();
    let expected = &expected;
    std::thread::scope(|scope| {
        for reader in &mut readers {
            scope.spawn(move || {
                let mut ids = Vec::new();
                let mut types = Vec::new();
                for _ in 0..expected.len() {
                    let event = next_json(reader, Duration::from_secs(10));
                    ids.push(event_id(&event));
                    types.push(event["event_type"].as_str().unwrap().to_owned());
                }
                assert_eq!(&types, expected);
                assert!(ids.windows(2).all(|pair| pair[0] < pair[1]), "{ids:?}");
            });
        }
    });
    assert!(
        burst_done.elapsed() < Duration::from_secs(5),
        "the readers got the burst {:?} after it ended (it took {:?})",
        burst_done.elapsed(),
        burst_done - began
    );
    assert_eq!(gw.get("/api/mcp_servers").status, 200);
    assert_eq!(gw.get("/health/live").status, 200);
    drop(stalled);
}

#[test]
fn a_shutdown_closes_the_streams_with_going_away() {
    let mut gw = two_servers();
    let mut client = connect(&gw, "");
    let status = gw.signal_and_wait(libc::SIGTERM, Duration::from_secs(20));
    assert!(status.success(), "{status:?}");
    client.get_mut().set_read_timeout(Some(SOON)).unwrap();
    loop {
        match client.read() {
            Ok(Message::Close(Some(frame))) => {
                assert_eq!(u16::from(frame.code), 1001, "{frame:?}");
                break;
            }
            Ok(Message::Close(None)) => panic!("closed without a reason"),
            Ok(_) => {}
            Err(error) => panic!("the stream ended without a close frame: {error}"),
        }
    }
}
