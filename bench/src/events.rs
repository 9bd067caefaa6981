//! The `events` scenario: domain events fanned out to many WebSocket subscribers.
//!
//! The real HTTP adapter serves `/api/ws/events` in this process (its own runtime and actix
//! workers, the gateway's bus capacity and worker count), over a gateway whose only server is
//! never started. Each subscriber is a blocking client on its own thread that reads as fast as
//! it can. A publisher thread puts synthetic `ToolInvocationCompleted` events on the bus at a
//! paced rate, each carrying its publish instant in `duration_ms`, so that every subscriber
//! measures delivery latency without a shared table. Events are counted per subscriber: a
//! subscriber that keeps up must lose none.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use mcpgw_core::{DomainEvent, EventSink, ManagerSettings, ServerId, ServerManager, Timestamp};
use mcpgw_gateway::{EventBus, Gateway, GatewayInfo, TokioClock, TokioSpawner};
use mcpgw_http_actix::{ApiState, EVENTS_WS_PATH, EventStreams, HttpSettings};
use mcpgw_testkit::fakes::FakeLauncher;
use tungstenite::Message;

/// The bus capacity of the gateway binary (`bins/mcpgw/src/serve.rs`).
const BUS_CAPACITY: usize = EventBus::DEFAULT_CAPACITY;
/// Tool names that mark the phases of a round in the events' `tool` field.
const WARMUP: &str = "warmup";
const MEASURED: &str = "bench";
const END: &str = "end";
/// A subscriber that hears nothing for this long gives up.
const READ_TIMEOUT: Duration = Duration::from_secs(15);

pub fn run() -> anyhow::Result<()> {
    let argument = |index: usize, default: u64, name: &str| -> anyhow::Result<u64> {
        match std::env::args().nth(index) {
            Some(text) => text
                .parse()
                .with_context(|| format!("{name} must be a whole number")),
            None => Ok(default),
        }
    };
    let seconds = argument(2, 10, "SECONDS")?;
    let rate = argument(3, 5000, "RATE")?;
    let clients = usize::try_from(argument(4, 100, "CLIENTS")?)?;
    if seconds == 0 || rate == 0 || clients == 0 {
        bail!("SECONDS, RATE and CLIENTS must be at least 1");
    }

    let bus = Arc::new(EventBus::new(BUS_CAPACITY));
    let address = serve(bus.clone())?;
    println!(
        "# events: {clients} WebSocket subscribers of {EVENTS_WS_PATH}, {rate} events/s for {seconds} s"
    );
    println!(
        "(in-process HTTP adapter on {address}: {} workers, bus capacity {BUS_CAPACITY}; \
         one blocking client thread per subscriber, no filter)",
        HttpSettings::DEFAULT_WORKERS
    );
    let figures = round(address, &bus, clients, rate, seconds)?;
    figures.print();
    Ok(())
}

/// Starts the HTTP adapter on its own thread and runtime, as the binary composes it.
fn serve(bus: Arc<EventBus>) -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let address = listener.local_addr()?;
    let (started, is_started) = mpsc::channel::<anyhow::Result<()>>();
    std::thread::Builder::new()
        .name("gateway".to_owned())
        .spawn(move || {
            let outcome = (|| -> anyhow::Result<()> {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                let local = tokio::task::LocalSet::new();
                local.block_on(&runtime, async move {
                    let manager = ServerManager::new(
                        Arc::new(FakeLauncher::new()),
                        Arc::new(TokioClock::default()),
                        bus.clone(),
                        Arc::new(TokioSpawner::current()),
                        None,
                        ManagerSettings::default(),
                    );
                    let gateway = Gateway::new(
                        manager,
                        GatewayInfo {
                            version: "bench".to_owned(),
                            config_path: None,
                        },
                    );
                    let settings = HttpSettings::default();
                    let metrics = mcpgw_http_actix::install_metrics_recorder()
                        .map_err(|error| anyhow::anyhow!("metrics recorder: {error}"))?;
                    let state = ApiState::new(gateway, metrics, settings.clone())
                        .with_events(EventStreams::new(bus));
                    let server = mcpgw_http_actix::build_server(state, listener, &settings)?;
                    let _ = started.send(Ok(()));
                    server.await?;
                    anyhow::Ok(())
                })
            })();
            if let Err(error) = outcome {
                eprintln!("the in-process gateway failed: {error:#}");
            }
        })?;
    is_started
        .recv_timeout(Duration::from_secs(30))
        .context("the in-process gateway did not start")??;
    Ok(address)
}

/// What one subscriber saw.
#[derive(Default)]
struct Seen {
    received: u64,
    /// The sum of `missed` over the `lagged` frames.
    missed: u64,
    /// Publish-to-receipt, in microseconds.
    latencies: Vec<u32>,
    saw_end: bool,
}

struct Figures {
    clients: usize,
    published: u64,
    publish_seconds: f64,
    seen: Vec<Seen>,
    failures: Vec<String>,
    cpu_gateway: f64,
    cpu_clients: f64,
    cpu_publisher: f64,
    wall_seconds: f64,
}

fn round(
    address: SocketAddr,
    bus: &Arc<EventBus>,
    clients: usize,
    rate: u64,
    seconds: u64,
) -> anyhow::Result<Figures> {
    let epoch = Instant::now();
    let subscribed = Arc::new(AtomicUsize::new(0));
    // Subscribers report, then wait here until the CPU times are read: a thread that has
    // exited takes its CPU time with it.
    let release = Arc::new(Barrier::new(clients + 1));
    let (report, reports) = mpsc::channel::<anyhow::Result<Seen>>();
    for index in 0..clients {
        let subscribed = subscribed.clone();
        let release = release.clone();
        let report = report.clone();
        std::thread::Builder::new()
            .name(format!("ws-client-{index}"))
            .stack_size(256 * 1024)
            .spawn(move || {
                let _ = report.send(subscribe_and_read(address, epoch, &subscribed));
                release.wait();
            })?;
    }
    drop(report);

    // Until a subscriber has had an event, its connection may not be subscribed yet.
    let deadline = Instant::now() + Duration::from_secs(60);
    while subscribed.load(Ordering::SeqCst) < clients {
        if Instant::now() > deadline {
            bail!(
                "only {} of {clients} subscribers got an event within 60 s",
                subscribed.load(Ordering::SeqCst)
            );
        }
        publish(bus, epoch, WARMUP);
        std::thread::sleep(Duration::from_millis(20));
    }
    // The warm-up events still in flight drain before the measured window.
    std::thread::sleep(Duration::from_millis(200));

    let cpu_before = cpu_by_role()?;
    let wall = Instant::now();
    let publisher_bus = bus.clone();
    let publisher = std::thread::Builder::new()
        .name("publisher".to_owned())
        .spawn(move || paced(&publisher_bus, epoch, rate, seconds))?;
    let (published, publish_seconds) = publisher
        .join()
        .map_err(|_| anyhow::anyhow!("the publisher panicked"))?;
    publish(bus, epoch, END);

    let mut seen = Vec::with_capacity(clients);
    let mut failures = Vec::new();
    for _ in 0..clients {
        match reports.recv_timeout(READ_TIMEOUT + Duration::from_secs(30)) {
            Ok(Ok(one)) => seen.push(one),
            Ok(Err(error)) => failures.push(format!("{error:#}")),
            Err(_) => {
                failures.push("a subscriber never reported".to_owned());
                break;
            }
        }
    }
    let wall_seconds = wall.elapsed().as_secs_f64();
    let cpu_after = cpu_by_role()?;
    release.wait();
    Ok(Figures {
        clients,
        published,
        publish_seconds,
        seen,
        failures,
        cpu_gateway: cpu_after.gateway - cpu_before.gateway,
        cpu_clients: cpu_after.clients - cpu_before.clients,
        cpu_publisher: cpu_after.publisher - cpu_before.publisher,
        wall_seconds,
    })
}

fn publish(bus: &EventBus, epoch: Instant, tool: &str) {
    let since_epoch = epoch.elapsed();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let id = ServerId::parse("bench").unwrap_or_else(|_| unreachable!("`bench` is a valid id"));
    bus.publish(
        Timestamp::from_unix_micros(i64::try_from(now.as_micros()).unwrap_or(i64::MAX)),
        DomainEvent::ToolInvocationCompleted {
            mcp_server_id: id,
            tool: tool.to_owned(),
            // The publish instant, in milliseconds since the round's epoch.
            duration_ms: since_epoch.as_secs_f64() * 1000.0,
            is_error: false,
            principal: None,
            trace_id: None,
            span_id: None,
        },
    );
}

/// Publishes `rate` events per second for `seconds`, catching up in small batches after each
/// short sleep; answers how many and over how long.
fn paced(bus: &EventBus, epoch: Instant, rate: u64, seconds: u64) -> (u64, f64) {
    let total = rate * seconds;
    let started = Instant::now();
    let mut published = 0;
    while published < total {
        let due = ((started.elapsed().as_secs_f64() * rate as f64) as u64).min(total);
        while published < due {
            publish(bus, epoch, MEASURED);
            published += 1;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    (published, started.elapsed().as_secs_f64())
}

fn subscribe_and_read(
    address: SocketAddr,
    epoch: Instant,
    subscribed: &AtomicUsize,
) -> anyhow::Result<Seen> {
    let stream = TcpStream::connect(address)?;
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    let url = format!("ws://{address}{EVENTS_WS_PATH}");
    // tungstenite zeroes the free part of its read buffer before each read: the default
    // 128 KiB would make that memset most of the client's cost at these frame sizes.
    let config = tungstenite::protocol::WebSocketConfig::default().read_buffer_size(16 * 1024);
    let (mut client, _) =
        tungstenite::client::client_with_config(url.as_str(), stream, Some(config))
            .map_err(|error| anyhow::anyhow!("the handshake failed: {error}"))?;
    let mut seen = Seen {
        latencies: Vec::with_capacity(64 * 1024),
        ..Seen::default()
    };
    let mut counted_as_subscribed = false;
    loop {
        let message = match client.read() {
            Ok(message) => message,
            Err(tungstenite::Error::Io(error))
                if matches!(
                    error.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                // No end event within the timeout: report what arrived.
                return Ok(seen);
            }
            Err(error) => bail!("the stream failed: {error}"),
        };
        let text = match message {
            Message::Text(text) => text,
            Message::Close(frame) => bail!("the server closed the stream: {frame:?}"),
            _ => continue,
        };
        let text = text.as_str();
        let received_ms = epoch.elapsed().as_secs_f64() * 1000.0;
        if text.starts_with(r#"{"type":"lagged""#) {
            if let Some(missed) = field(text, r#""missed":"#) {
                seen.missed += missed.parse::<u64>().unwrap_or(0);
            }
            continue;
        }
        let (tool, after_tool) = tool_of(text);
        match tool {
            Some(MEASURED) => {
                seen.received += 1;
                if let Some(sent_ms) = after_tool
                    .strip_prefix(r#"","duration_ms":"#)
                    .and_then(|rest| rest.split_once(','))
                    .and_then(|(value, _)| value.parse::<f64>().ok())
                    .or_else(|| {
                        field(text, r#""duration_ms":"#).and_then(|value| value.parse().ok())
                    })
                {
                    let micros = ((received_ms - sent_ms) * 1000.0).max(0.0);
                    seen.latencies.push(micros.min(f64::from(u32::MAX)) as u32);
                }
            }
            Some(WARMUP) if !counted_as_subscribed => {
                counted_as_subscribed = true;
                subscribed.fetch_add(1, Ordering::SeqCst);
            }
            Some(END) => {
                seen.saw_end = true;
                return Ok(seen);
            }
            _ => {}
        }
    }
}

/// The `tool` of an event frame and the text after it. The frames of this scenario start with
/// the same fields in the same order, so the prefix is tried before a search.
fn tool_of(text: &str) -> (Option<&str>, &str) {
    const PREFIX: &str =
        r#"{"event_type":"ToolInvocationCompleted","mcp_server_id":"bench","tool":""#;
    let rest = match text.strip_prefix(PREFIX) {
        Some(rest) => rest,
        None => match text.find(r#""tool":""#) {
            Some(start) => &text[start + r#""tool":""#.len()..],
            None => return (None, text),
        },
    };
    match rest.find('"') {
        Some(end) => (Some(&rest[..end]), &rest[end..]),
        None => (None, text),
    }
}

/// The raw value after `key` up to the next `,` or `}` (a number).
fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let start = text.find(key)? + key.len();
    let rest = &text[start..];
    let end = rest.find([',', '}'])?;
    Some(&rest[..end])
}

struct Cpu {
    gateway: f64,
    clients: f64,
    publisher: f64,
}

/// CPU seconds (user + system) of this process's live threads, by role: the subscribers'
/// threads, the publisher's, and the rest, which is the gateway (its runtime thread, the actix
/// acceptor and workers, and this idle main thread).
fn cpu_by_role() -> anyhow::Result<Cpu> {
    // USER_HZ is 100 on every Linux this runs on.
    const TICKS_PER_SECOND: f64 = 100.0;
    let mut cpu = Cpu {
        gateway: 0.0,
        clients: 0.0,
        publisher: 0.0,
    };
    for task in std::fs::read_dir("/proc/self/task")? {
        let path = task?.path();
        let Ok(stat) = std::fs::read_to_string(path.join("stat")) else {
            // The thread exited meanwhile.
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = &stat[open + 1..close];
        // Fields after the name start at the third (state); utime and stime are 14 and 15.
        let fields: Vec<&str> = stat[close + 2..].split_whitespace().collect();
        let ticks: f64 = [11, 12]
            .iter()
            .filter_map(|index| fields.get(*index)?.parse::<f64>().ok())
            .sum();
        let seconds = ticks / TICKS_PER_SECOND;
        if name.starts_with("ws-client") {
            cpu.clients += seconds;
        } else if name == "publisher" {
            cpu.publisher += seconds;
        } else {
            cpu.gateway += seconds;
        }
    }
    Ok(cpu)
}

impl Figures {
    fn print(self) {
        let Figures {
            clients,
            published,
            publish_seconds,
            mut seen,
            failures,
            cpu_gateway,
            cpu_clients,
            cpu_publisher,
            wall_seconds,
        } = self;
        println!(
            "published {published} events in {publish_seconds:.2} s ({:.0} events/s)",
            published as f64 / publish_seconds
        );
        for failure in &failures {
            println!("subscriber failed: {failure}");
        }
        if seen.is_empty() {
            println!("no subscriber reported");
            return;
        }
        seen.sort_by_key(|one| one.received);
        let received = |one: &Seen| one.received;
        let min = received(&seen[0]);
        let median = received(&seen[seen.len() / 2]);
        let max = received(&seen[seen.len() - 1]);
        println!(
            "received per subscriber ({} of {clients} reported): min {min}  median {median}  max {max}",
            seen.len()
        );
        let losing: Vec<u64> = seen
            .iter()
            .map(|one| published.saturating_sub(one.received))
            .filter(|lost| *lost > 0)
            .collect();
        let lost_total: u64 = losing.iter().sum();
        let missed_total: u64 = seen.iter().map(|one| one.missed).sum();
        println!(
            "lost (published - received): {} subscribers lost events, {lost_total} in all \
             (max {} for one); `lagged` frames reported {missed_total} missed; {} subscribers \
             saw the end event",
            losing.len(),
            losing.iter().max().copied().unwrap_or(0),
            seen.iter().filter(|one| one.saw_end).count()
        );
        let mut latencies: Vec<u32> = seen
            .iter_mut()
            .flat_map(|one| std::mem::take(&mut one.latencies))
            .collect();
        latencies.sort_unstable();
        let at = |quantile: f64| -> f64 {
            if latencies.is_empty() {
                return 0.0;
            }
            let rank = ((latencies.len() - 1) as f64 * quantile).round() as usize;
            f64::from(latencies[rank]) / 1000.0
        };
        println!(
            "delivery latency (publish -> read by the client), {} deliveries: p50 {:.3} ms  \
             p99 {:.3} ms  p99.9 {:.3} ms  max {:.3} ms",
            latencies.len(),
            at(0.5),
            at(0.99),
            at(0.999),
            at(1.0)
        );
        let deliveries: u64 = seen.iter().map(|one| one.received).sum();
        println!(
            "CPU over the {wall_seconds:.1} s window: gateway {cpu_gateway:.2} s ({:.0}% of one \
             core, {:.2} µs per delivered frame), subscribers {cpu_clients:.2} s ({:.0}%), \
             publisher {cpu_publisher:.2} s",
            100.0 * cpu_gateway / wall_seconds,
            1e6 * cpu_gateway / deliveries.max(1) as f64,
            100.0 * cpu_clients / wall_seconds
        );
    }
}
