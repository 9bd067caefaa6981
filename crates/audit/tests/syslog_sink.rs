//! The syslog sink against real sockets: a UDP socket, a TCP listener and a Unix datagram
//! socket bound in a temporary directory. The port's contract over each transport, the exact
//! RFC 5424 shape, octet-counting framing, reconnection, and errors for addresses that cannot
//! be reached.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use mcpgw_audit::{SyslogAddress, SyslogSettings, SyslogSink, format_message};
use mcpgw_core::audit::{AuditRecord, AuditSink as _, AuditSinkError};
use mcpgw_core::events::{DomainEvent, PublishedEvent};
use mcpgw_core::time::Timestamp;
use mcpgw_testkit::audit_sink_suite::{AuditDestination, sample_records};
use serde_json::Value;
use tokio::io::AsyncReadExt as _;

/// One RFC 5424 message taken apart.
#[derive(Debug)]
struct Parsed {
    priority: u16,
    version: String,
    timestamp: String,
    hostname: String,
    app_name: String,
    procid: String,
    msgid: String,
    structured_data: String,
    message: String,
}

/// Splits `text` into the header's fields, the structured data (its brackets kept, escapes
/// honoured) and the message; panics on anything that is not RFC 5424's shape.
fn parse(text: &str) -> Parsed {
    let rest = text.strip_prefix('<').expect("starts with <PRI>");
    let (priority, rest) = rest.split_once('>').expect("PRI closes");
    let mut fields = rest.splitn(7, ' ');
    let mut next = || fields.next().expect("a header field").to_owned();
    let (version, timestamp, hostname, app_name, procid, msgid) =
        (next(), next(), next(), next(), next(), next());
    let rest = fields.next().expect("structured data");
    assert!(
        rest.starts_with('['),
        "structured data starts with [: {rest}"
    );
    let mut in_quotes = false;
    let mut escaped = false;
    let mut end = None;
    for (at, c) in rest.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' if in_quotes => escaped = true,
            '"' => in_quotes = !in_quotes,
            // Elements may follow each other directly.
            ']' if !in_quotes && !rest[at + 1..].starts_with('[') => {
                end = Some(at + 1);
                break;
            }
            _ => {}
        }
    }
    let end = end.expect("the structured data closes");
    let message = rest[end..].strip_prefix(' ').expect("a space before MSG");
    Parsed {
        priority: priority.parse().expect("PRI is a number"),
        version,
        timestamp,
        hostname,
        app_name,
        procid,
        msgid,
        structured_data: rest[..end].to_owned(),
        message: message.to_owned(),
    }
}

/// What a receiver collected, as messages.
#[derive(Clone, Default)]
struct Inbox(Arc<Mutex<Vec<String>>>);

impl Inbox {
    fn push(&self, message: String) {
        self.0.lock().unwrap().push(message);
    }

    fn messages(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    async fn wait_for(&self, expected: usize) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let messages = self.messages();
            if messages.len() >= expected || Instant::now() > deadline {
                return messages;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

#[async_trait]
impl AuditDestination for Inbox {
    async fn received(&self, expected: usize) -> Vec<Value> {
        self.wait_for(expected)
            .await
            .iter()
            .map(|message| {
                serde_json::from_str(&parse(message).message).expect("MSG is the record's JSON")
            })
            .collect()
    }
}

/// A UDP receiver on loopback: its address and what it received.
async fn udp_receiver() -> (String, Inbox) {
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let address = format!("udp://{}", socket.local_addr().unwrap());
    let inbox = Inbox::default();
    let collected = inbox.clone();
    tokio::spawn(async move {
        let mut buffer = vec![0_u8; 65_536];
        while let Ok(read) = socket.recv(&mut buffer).await {
            collected.push(String::from_utf8(buffer[..read].to_vec()).unwrap());
        }
    });
    (address, inbox)
}

/// Reads octet-counted frames from one connection into `inbox`; also keeps the raw bytes.
async fn read_frames(mut stream: tokio::net::TcpStream, inbox: Inbox, raw: Inbox) {
    let mut pending = Vec::new();
    let mut buffer = vec![0_u8; 65_536];
    loop {
        let read = match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => read,
        };
        raw.push(String::from_utf8_lossy(&buffer[..read]).into_owned());
        pending.extend_from_slice(&buffer[..read]);
        while let Some(space) = pending.iter().position(|b| *b == b' ') {
            let length: usize = std::str::from_utf8(&pending[..space])
                .unwrap()
                .parse()
                .expect("a frame starts with its length");
            if pending.len() < space + 1 + length {
                break;
            }
            let frame = pending[space + 1..space + 1 + length].to_vec();
            pending.drain(..space + 1 + length);
            inbox.push(String::from_utf8(frame).expect("a frame is UTF-8"));
        }
    }
}

/// A TCP receiver on loopback: its address, the messages, the raw bytes and the number of
/// connections accepted.
struct TcpReceiver {
    address: String,
    inbox: Inbox,
    raw: Inbox,
    connections: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

async fn tcp_receiver() -> TcpReceiver {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("tcp://{}", listener.local_addr().unwrap());
    let inbox = Inbox::default();
    let raw = Inbox::default();
    let connections = Arc::new(Mutex::new(Vec::new()));
    {
        let (inbox, raw, connections) = (inbox.clone(), raw.clone(), connections.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let reader = tokio::spawn(read_frames(stream, inbox.clone(), raw.clone()));
                connections.lock().unwrap().push(reader);
            }
        });
    }
    TcpReceiver {
        address,
        inbox,
        raw,
        connections,
    }
}

/// A Unix datagram socket bound in a temporary directory, as the local daemon's `/dev/log` is.
async fn unix_receiver() -> (tempfile::TempDir, String, Inbox) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.sock");
    let socket = tokio::net::UnixDatagram::bind(&path).unwrap();
    let inbox = Inbox::default();
    let collected = inbox.clone();
    tokio::spawn(async move {
        let mut buffer = vec![0_u8; 65_536];
        while let Ok(read) = socket.recv(&mut buffer).await {
            collected.push(String::from_utf8(buffer[..read].to_vec()).unwrap());
        }
    });
    (dir, format!("unix://{}", path.display()), inbox)
}

fn sink_for(address: &str) -> SyslogSink {
    SyslogSink::new(SyslogSettings::new(SyslogAddress::parse(address).unwrap())).unwrap()
}

mod over_udp {
    use super::*;

    async fn pair() -> (SyslogSink, Inbox) {
        let (address, inbox) = udp_receiver().await;
        (sink_for(&address), inbox)
    }

    mcpgw_testkit::audit_sink_contract_suite!(pair().await);
}

mod over_tcp {
    use super::*;

    async fn pair() -> (SyslogSink, Inbox) {
        let receiver = tcp_receiver().await;
        (sink_for(&receiver.address), receiver.inbox)
    }

    mcpgw_testkit::audit_sink_contract_suite!(pair().await);
}

mod over_a_unix_socket {
    use super::*;

    /// The inbox with the directory of its socket, removed when the case ends.
    struct UnixInbox {
        _dir: tempfile::TempDir,
        inbox: Inbox,
    }

    #[async_trait]
    impl AuditDestination for UnixInbox {
        async fn received(&self, expected: usize) -> Vec<Value> {
            self.inbox.received(expected).await
        }
    }

    async fn pair() -> (SyslogSink, UnixInbox) {
        let (dir, address, inbox) = unix_receiver().await;
        (sink_for(&address), UnixInbox { _dir: dir, inbox })
    }

    mcpgw_testkit::audit_sink_contract_suite!(pair().await);
}

fn denial(event_id: u64, replica: Option<&str>) -> AuditRecord {
    AuditRecord::from_published(
        &PublishedEvent {
            event_id,
            // 2026-03-01T09:30:00.000042 UTC
            occurred_at: Timestamp::from_unix_micros(1_772_357_400_000_042),
            event: DomainEvent::AuthorizationDenied {
                principal: "user:bob".into(),
                permission: "tools:call".into(),
                reason: "a tool policy denies user:bob".into(),
            },
        },
        replica,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_has_exactly_the_rfc_5424_shape() {
    let (address, inbox) = udp_receiver().await;
    let settings = SyslogSettings {
        hostname: Some("gw-1.example.com".into()),
        app_name: "mcpgw".into(),
        ..SyslogSettings::new(SyslogAddress::parse(&address).unwrap())
    };
    let sink = SyslogSink::new(settings).unwrap();
    let record = denial(42, Some("gw-a"));
    sink.write(std::slice::from_ref(&record)).await.unwrap();
    let received = inbox.wait_for(1).await;
    let pid = std::process::id();
    // authpriv (10) * 8 + warning (4) = 84.
    let expected = format!(
        "<84>1 2026-03-01T09:30:00.000042Z gw-1.example.com mcpgw {pid} AuthorizationDenied \
         [mcpgw@32473 event_id=\"42\" severity=\"warning\" replica=\"gw-a\"] {}",
        record.to_json_line()
    );
    assert_eq!(received, std::slice::from_ref(&expected));
    assert_eq!(sink.message(&record), expected);
    let parsed = parse(&received[0]);
    assert_eq!(parsed.priority, 84);
    assert_eq!(parsed.version, "1");
    assert_eq!(parsed.timestamp, "2026-03-01T09:30:00.000042Z");
    assert_eq!(parsed.hostname, "gw-1.example.com");
    assert_eq!(parsed.app_name, "mcpgw");
    assert_eq!(parsed.procid, pid.to_string());
    assert_eq!(parsed.msgid, "AuthorizationDenied");
    assert_eq!(
        parsed.structured_data,
        "[mcpgw@32473 event_id=\"42\" severity=\"warning\" replica=\"gw-a\"]"
    );
    let message: Value = serde_json::from_str(&parsed.message).unwrap();
    assert_eq!(message["event"]["principal"], "user:bob");

    // Another facility and severity, no replica, the machine's own name; the free function
    // renders the same shape.
    let revoked = &sample_records("k", 7, 1)[0];
    let local0 = format_message(16, "host", "app", 12, revoked);
    assert!(
        local0.starts_with(&format!(
            "<133>1 {} host app 12 ApiKeyRevoked [mcpgw@32473 event_id=\"7\" severity=\"notice\" \
             replica=\"replica-a\"] {{",
            revoked.occurred_at
        )),
        "{local0}"
    );
    let mut anonymous = revoked.clone();
    anonymous.replica = None;
    let text = format_message(10, "host", "app", 12, &anonymous);
    assert!(
        text.contains("[mcpgw@32473 event_id=\"7\" severity=\"notice\"] {"),
        "{text}"
    );
    let own = sink_for(&address).message(&anonymous);
    let hostname = parse(&own).hostname;
    assert!(
        !hostname.is_empty() && !hostname.contains(' '),
        "{hostname}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn structured_data_values_are_escaped() {
    let record = denial(1, Some("a\"b\\c]d"));
    let text = format_message(10, "h", "a", 1, &record);
    assert!(
        text.contains("replica=\"a\\\"b\\\\c\\]d\"]"),
        "quote, backslash and bracket escaped: {text}"
    );
    let parsed = parse(&text);
    let message: Value = serde_json::from_str(&parsed.message).unwrap();
    assert_eq!(message["replica"], "a\"b\\c]d");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_frames_each_message_with_its_length_in_octets() {
    let receiver = tcp_receiver().await;
    let sink = sink_for(&receiver.address);
    // Text beyond ASCII: the length counts octets, not characters.
    let mut record = denial(5, None);
    record.event.insert("reason".into(), "\u{2603} snow".into());
    let records = vec![record.clone(), denial(6, None)];
    sink.write(&records).await.unwrap();
    let messages = receiver.inbox.wait_for(2).await;
    assert_eq!(messages.len(), 2);
    let raw = receiver.raw.messages().concat();
    let first = sink.message(&records[0]);
    let second = sink.message(&records[1]);
    assert_eq!(
        raw,
        format!("{} {first}{} {second}", first.len(), second.len()),
        "LEN SP MSG, one after the other"
    );
    assert_ne!(
        first.len(),
        first.chars().count(),
        "the sample has multi-byte text"
    );
    assert_eq!(
        receiver.connections.lock().unwrap().len(),
        1,
        "one connection"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_tcp_connection_is_made_again() {
    let receiver = tcp_receiver().await;
    let sink = sink_for(&receiver.address);
    sink.write(&sample_records("a", 1, 1)).await.unwrap();
    assert_eq!(receiver.inbox.wait_for(1).await.len(), 1);
    // Bad input: the receiver drops the connection. A record written into a connection the
    // receiver has closed may be lost (plain TCP cannot tell); the sink notices the broken
    // connection at the latest on the next write and connects again.
    let first = receiver.connections.lock().unwrap().remove(0);
    first.abort();
    let _ = first.await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut n = 0;
    loop {
        n += 1;
        // An error is allowed (the write that found the broken connection may fail), a panic
        // is not; the next write connects again.
        let _ = sink.write(&sample_records("b", 10 + n, 1)).await;
        if receiver.connections.lock().unwrap().len() == 1 && receiver.inbox.messages().len() >= 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no new connection delivered a record"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(n <= 5, "reconnected only after {n} writes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_receivers_are_errors() {
    // Bad input: a TCP port nobody listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let sink = sink_for(&format!("tcp://127.0.0.1:{port}"));
    let error = sink.write(&sample_records("k", 1, 1)).await.unwrap_err();
    assert!(error.is_retryable(), "{error:?}");
    assert!(error.to_string().contains(&port.to_string()), "{error}");
    // And again: no state is left behind that turns the next try into a panic.
    assert!(sink.write(&sample_records("k", 2, 1)).await.is_err());

    // Bad input: a host name that cannot be resolved.
    let sink = sink_for("udp://no-such-host.invalid:514");
    let error = sink.write(&sample_records("k", 1, 1)).await.unwrap_err();
    assert!(
        error.to_string().contains("no-such-host.invalid"),
        "{error}"
    );

    // Bad input: a Unix socket path where nothing listens.
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none.sock");
    let sink = sink_for(&format!("unix://{}", missing.display()));
    let error = sink.write(&sample_records("k", 1, 1)).await.unwrap_err();
    assert!(error.to_string().contains("none.sock"), "{error}");

    // Bad input: a UDP port nobody listens on. The refusal comes back for a later datagram of
    // the same socket, so a few writes must meet it.
    let closed = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let sink = sink_for(&format!("udp://127.0.0.1:{port}"));
    let mut refused = false;
    for n in 0..10 {
        if sink.write(&sample_records("k", n, 2)).await.is_err() {
            refused = true;
            break;
        }
    }
    assert!(refused, "a closed UDP port was never reported");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_takes_nothing_makes_writes_time_out() {
    // Bad input: a TCP receiver that accepts one connection, never reads from it, and then
    // stops listening, so that no new connection can take over; the timeout is tiny.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = format!("tcp://{}", listener.local_addr().unwrap());
    let accepted = std::thread::spawn(move || listener.accept().map(|(stream, _)| stream));
    let sink = SyslogSink::new(SyslogSettings {
        timeout: Duration::from_millis(200),
        ..SyslogSettings::new(SyslogAddress::parse(&address).unwrap())
    })
    .unwrap();
    sink.write(&sample_records("k", 1, 1)).await.unwrap();
    // The listener is gone once the connection is accepted; the connection stays open.
    let _held = accepted.join().unwrap().unwrap();
    let big = sample_records("k", 1, 5000);
    let started = Instant::now();
    // The kernel lets a receive buffer grow to tens of MiB on its own: keep writing until it
    // is full.
    let mut error = None;
    for _ in 0..200 {
        if let Err(failed) = sink.write(&big).await {
            error = Some(failed);
            break;
        }
    }
    let error = error.expect("the socket buffers never filled");
    assert!(error.is_retryable(), "{error:?}");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    // The next write finds nobody listening: an error at once, not a wait.
    let again = Instant::now();
    assert!(sink.write(&sample_records("k", 2, 1)).await.is_err());
    assert!(
        again.elapsed() < Duration::from_secs(2),
        "{:?}",
        again.elapsed()
    );
}

#[test]
fn addresses_and_settings_that_cannot_work_are_invalid() {
    // Bad input: no scheme, no port, port 0, an unknown transport, a relative socket path, an
    // empty host.
    for address in [
        "127.0.0.1:514",
        "udp://localhost",
        "tcp://localhost:0",
        "http://localhost:514",
        "unix://dev/log",
        "udp://:514",
    ] {
        let error = SyslogAddress::parse(address).unwrap_err();
        assert!(matches!(error, AuditSinkError::Invalid(_)), "{address}");
        assert!(error.to_string().contains(address), "{error}");
    }
    assert_eq!(
        SyslogAddress::parse("tcp://[::1]:6514").unwrap(),
        SyslogAddress::Tcp("[::1]:6514".into())
    );
    assert_eq!(
        SyslogAddress::parse("unix:///dev/log").unwrap(),
        SyslogAddress::Unix("/dev/log".into())
    );
    // Bad input: a facility beyond local7, an app name with a space, an empty host name.
    let address = SyslogAddress::parse("udp://127.0.0.1:514").unwrap();
    for settings in [
        SyslogSettings {
            facility: 24,
            ..SyslogSettings::new(address.clone())
        },
        SyslogSettings {
            app_name: "my app".into(),
            ..SyslogSettings::new(address.clone())
        },
        SyslogSettings {
            hostname: Some(String::new()),
            ..SyslogSettings::new(address.clone())
        },
    ] {
        let error = SyslogSink::new(settings).unwrap_err();
        assert!(matches!(error, AuditSinkError::Invalid(_)), "{error:?}");
    }
}
