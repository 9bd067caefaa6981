//! A load-and-soak driver for the real gateway binary, shared by the benchmark harness
//! (`mcpgw-bench soak`) and the end-to-end soak test, so that both run the very same scenario.
//!
//! [`run`] starts the gateway on loopback (a temporary data directory, rate limiting off),
//! registers fixture servers over REST, starts some of them, and drives mixed traffic from a
//! bounded set of client threads for a fixed time: REST reads, MCP tool calls through `/mcp`,
//! WebSocket subscribers of `/api/ws/events`, and chaos (the fixture's `crash` tool on a random
//! running server, and stop/start over REST). It samples the gateway's memory, file descriptors
//! and descendant processes before and after, stops everything, and checks the resource bounds
//! of [`SoakReport::broken_bounds`]: no leaked or zombie processes, file descriptors back near
//! their baseline, bounded memory growth, a clean exit on SIGTERM that leaves no fixture behind.
//!
//! Every failed call is classified by kind and attributed: a failure on a server that the chaos
//! thread crashed or stopped while the call ran, less than 10 s before it, or before it and
//! without a successful call to that server started since, is expected; anything else is
//! counted as unexpected, so that a caller can tell injected failures from real ones.
//!
//! The driver uses blocking clients on plain threads (no async runtime of its own), talks only
//! to 127.0.0.1, and every loop is bounded by the run's deadline.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead as _, BufReader, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The protocol revision the MCP clients of the soak speak (the `initialize` era, with sessions).
const PROTOCOL: &str = "2025-11-25";

/// How many calls an MCP client makes on one session before it ends it and opens another, so
/// that session setup and teardown are part of the soak too.
const CALLS_PER_SESSION: u64 = 400;

/// A server crashed or stopped this recently is not picked again by the chaos thread: a call to
/// it could meet the restart backoff instead of a running process.
const CHAOS_COOLDOWN: Duration = Duration::from_secs(5);

/// A failure of a call begun this soon after its server was crashed or stopped is explained by
/// that, even when a call begun in between succeeded: a call can still be answered by the old
/// process in the moment between the crash request and the process's end, and the restart
/// backoff (1 s after one crash) follows that end.
const EXPLAINED_FOR: Duration = Duration::from_secs(10);

/// How long a stopped server stays stopped before the chaos thread starts it again.
const STOPPED_FOR: Duration = Duration::from_millis(300);

/// The fd bound: the count after every server stopped may exceed the count before any started
/// by this many (a lazily grown database connection or timer the runtime keeps).
pub const FD_SLACK: usize = 16;

/// The RSS bound's floor: growth under this is allowed whatever the relative growth.
pub const RSS_SLACK_KIB: u64 = 64 * 1024;

/// The RSS bound's relative part: growth up to this share of the warm RSS is allowed.
pub const RSS_SLACK_PERCENT: u64 = 25;

/// Longest wait for a single HTTP request of the driver.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// What to run: the binaries, the size of the registry and the traffic.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SoakOptions {
    /// The `mcpgw` binary to run.
    pub gateway_binary: PathBuf,
    /// The fixture server binary; the run uses a private copy, to recognise its own processes.
    pub fixture_binary: PathBuf,
    /// How long the measured traffic lasts.
    pub duration: Duration,
    /// Traffic before the first sample, so that allocator arenas and caches reach their size.
    pub warmup: Duration,
    /// How many fixture servers are started and receive tool calls.
    pub running: usize,
    /// How many fixture servers are registered (at least `running`).
    pub registered: usize,
    /// Threads making MCP tool calls.
    pub mcp_clients: usize,
    /// Threads making REST requests.
    pub rest_clients: usize,
    /// WebSocket subscribers of `/api/ws/events`.
    pub ws_subscribers: usize,
    /// How often the chaos thread crashes a running server.
    pub crash_every: Duration,
    /// How often the chaos thread stops a running server and starts it again.
    pub stop_start_every: Duration,
    /// Seed of the traffic's choices, so that a run can be repeated.
    pub seed: u64,
    /// Print progress lines to stderr while running.
    pub verbose: bool,
}

impl SoakOptions {
    /// A soak of `duration` with `running` of `registered` servers, with the default traffic:
    /// 8 MCP clients, 4 REST clients, 4 WebSocket subscribers, a crash every 3 s and a
    /// stop/start every 5 s, and a warm-up of a tenth of the duration (5 s to 60 s).
    pub fn new(
        gateway_binary: PathBuf,
        fixture_binary: PathBuf,
        duration: Duration,
        running: usize,
        registered: usize,
    ) -> Self {
        Self {
            gateway_binary,
            fixture_binary,
            duration,
            warmup: (duration / 10).clamp(Duration::from_secs(5), Duration::from_secs(60)),
            running,
            registered: registered.max(running),
            mcp_clients: 8,
            rest_clients: 4,
            ws_subscribers: 4,
            crash_every: Duration::from_secs(3),
            stop_start_every: Duration::from_secs(5),
            seed: 0x5eed_cafe,
            verbose: false,
        }
    }

    /// The same options with other client counts.
    pub fn clients(mut self, mcp: usize, rest: usize, ws: usize) -> Self {
        self.mcp_clients = mcp;
        self.rest_clients = rest;
        self.ws_subscribers = ws;
        self
    }

    /// The same options with another warm-up.
    pub fn warmup(mut self, warmup: Duration) -> Self {
        self.warmup = warmup;
        self
    }

    /// The same options with progress lines on stderr.
    pub fn verbose(mut self, verbose: bool) -> Self {
        self.verbose = verbose;
        self
    }
}

/// One look at the gateway process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sample {
    /// Time since the measured traffic began (zero before it).
    pub at: Duration,
    /// `VmRSS` in KiB.
    pub rss_kib: u64,
    /// Entries of `/proc/<pid>/fd`.
    pub fds: usize,
    /// Processes below the gateway, zombies included.
    pub descendants: usize,
    /// Of those, zombies (exited, not reaped).
    pub zombies: usize,
}

/// How many failures of one kind there were, and how many the injected chaos explains.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ErrorCount {
    pub total: u64,
    /// Failures on a server that was crashed or stopped during the call, or before it without
    /// a successful call to it since.
    pub attributed: u64,
}

impl ErrorCount {
    /// Failures the chaos does not explain.
    pub fn unexpected(&self) -> u64 {
        self.total - self.attributed
    }
}

/// The figures of a soak run.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct SoakReport {
    pub duration: Duration,
    pub running: usize,
    pub registered: usize,
    /// After registering every server, before starting any.
    pub baseline: Sample,
    /// After the warm-up, every running server up, no traffic.
    pub start: Sample,
    /// After the traffic, every running server started again, no traffic.
    pub end: Sample,
    /// Taken during the measured traffic, about every tenth of it.
    pub timeline: Vec<Sample>,
    /// After stopping every server over REST.
    pub after_stop: Sample,
    /// Fixture processes of this run alive after the gateway exited.
    pub leftover_fixtures: Vec<u32>,
    /// How the gateway ended after SIGTERM.
    pub exit: String,
    pub exit_clean: bool,
    /// Successful calls by kind (`mcp tools/call`, `rest GET /api/system`, ...).
    pub served: BTreeMap<String, u64>,
    /// Failed calls by kind (`mcp jsonrpc -32603`, `rest GET /api/mcp_servers/{id} http 500`,
    /// `ws transport ...`).
    pub errors: BTreeMap<String, ErrorCount>,
    /// The first few unexpected failures, verbatim, to say what went wrong.
    pub unexpected_examples: Vec<String>,
    pub ws_events: u64,
    pub ws_connections: u64,
    pub crashes_injected: u64,
    /// Crash calls that failed, as a call to a process that exits without answering must.
    pub crashes_acknowledged: u64,
    /// Crashes the gateway counted (`McpServerCrashed` events published).
    pub crashes_seen_by_gateway: u64,
    pub stop_starts: u64,
    /// Lines the gateway logged at ERROR level.
    pub gateway_error_lines: u64,
}

impl SoakReport {
    /// The RSS growth allowed from `start` to `end`: max(64 MiB, 25 % of the warm RSS).
    ///
    /// A gateway that runs the same servers under the same traffic needs the same memory; what
    /// may still grow is bounded by design but fills slowly (allocator arenas and their
    /// fragmentation across worker threads, per-server log rings that fill with each restart's
    /// lines, the caches of SQLite). A leak of one allocation per call or per restart grows
    /// without bound and crosses this line in a long run.
    pub fn rss_bound_kib(&self) -> u64 {
        RSS_SLACK_KIB.max(self.start.rss_kib * RSS_SLACK_PERCENT / 100)
    }

    /// The RSS growth from the warm start to the end (zero when it shrank).
    pub fn rss_growth_kib(&self) -> u64 {
        self.end.rss_kib.saturating_sub(self.start.rss_kib)
    }

    /// Every failure the chaos does not explain.
    pub fn unexpected_errors(&self) -> u64 {
        self.errors.values().map(ErrorCount::unexpected).sum()
    }

    /// Calls served by kinds whose name starts with `prefix`.
    pub fn served_with_prefix(&self, prefix: &str) -> u64 {
        self.served
            .iter()
            .filter(|(kind, _)| kind.starts_with(prefix))
            .map(|(_, count)| count)
            .sum()
    }

    /// The resource bounds this run broke, each said in a sentence; empty when none.
    pub fn broken_bounds(&self) -> Vec<String> {
        let mut broken = Vec::new();
        if self.start.descendants != self.running || self.end.descendants != self.running {
            broken.push(format!(
                "descendant processes should equal the {} running servers: {} at the start, {} at the end",
                self.running, self.start.descendants, self.end.descendants
            ));
        }
        if self.start.zombies + self.end.zombies + self.after_stop.zombies > 0 {
            broken.push(format!(
                "zombie processes under the gateway: {} at the start, {} at the end, {} after stopping",
                self.start.zombies, self.end.zombies, self.after_stop.zombies
            ));
        }
        if self.after_stop.descendants != 0 {
            broken.push(format!(
                "{} processes remain under the gateway after every server was stopped",
                self.after_stop.descendants
            ));
        }
        if self.after_stop.fds > self.baseline.fds + FD_SLACK {
            broken.push(format!(
                "open fds after stopping every server: {}, more than the {} before starting any plus {FD_SLACK}",
                self.after_stop.fds, self.baseline.fds
            ));
        }
        if self.rss_growth_kib() > self.rss_bound_kib() {
            broken.push(format!(
                "RSS grew by {} KiB from the warm start ({} KiB) to the end ({} KiB), more than the {} KiB allowed",
                self.rss_growth_kib(),
                self.start.rss_kib,
                self.end.rss_kib,
                self.rss_bound_kib()
            ));
        }
        if !self.exit_clean {
            broken.push(format!(
                "the gateway did not exit cleanly on SIGTERM: {}",
                self.exit
            ));
        }
        if !self.leftover_fixtures.is_empty() {
            broken.push(format!(
                "fixture processes outlived the gateway: pids {:?}",
                self.leftover_fixtures
            ));
        }
        broken
    }

    /// The figures as a plain-text table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let mib = |kib: u64| kib as f64 / 1024.0;
        let _ = writeln!(
            out,
            "# soak: {} s of traffic, {} running of {} registered servers",
            self.duration.as_secs(),
            self.running,
            self.registered
        );
        let _ = writeln!(
            out,
            "{:<34} {:>10} {:>6} {:>12} {:>8}",
            "sample", "RSS MiB", "fds", "descendants", "zombies"
        );
        let row = |out: &mut String, name: &str, sample: &Sample| {
            let _ = writeln!(
                out,
                "{:<34} {:>10.1} {:>6} {:>12} {:>8}",
                name,
                mib(sample.rss_kib),
                sample.fds,
                sample.descendants,
                sample.zombies
            );
        };
        row(&mut out, "registered, none started", &self.baseline);
        row(&mut out, "warm start (all running, idle)", &self.start);
        for sample in &self.timeline {
            row(
                &mut out,
                &format!("  under load at {:>4} s", sample.at.as_secs()),
                sample,
            );
        }
        row(&mut out, "end (all running, idle)", &self.end);
        row(&mut out, "after stopping every server", &self.after_stop);
        let _ = writeln!(
            out,
            "RSS growth start -> end: {:.1} MiB (bound {:.1} MiB = max(64 MiB, 25 %))",
            mib(self.rss_growth_kib()),
            mib(self.rss_bound_kib())
        );
        let _ = writeln!(
            out,
            "fds after stop vs before start: {} vs {} (bound +{FD_SLACK})",
            self.after_stop.fds, self.baseline.fds
        );
        let _ = writeln!(
            out,
            "SIGTERM: {}; fixture processes left: {}",
            self.exit,
            self.leftover_fixtures.len()
        );
        let seconds = self.duration.as_secs_f64().max(1e-9);
        let _ = writeln!(out, "{:<52} {:>10} {:>8}", "calls served", "count", "per s");
        for (kind, count) in &self.served {
            let _ = writeln!(
                out,
                "{:<52} {:>10} {:>8.1}",
                kind,
                count,
                *count as f64 / seconds
            );
        }
        let _ = writeln!(
            out,
            "{:<52} {:>10} {:>10} {:>10}",
            "errors by kind", "total", "injected", "unexpected"
        );
        if self.errors.is_empty() {
            let _ = writeln!(out, "(none)");
        }
        for (kind, count) in &self.errors {
            let _ = writeln!(
                out,
                "{:<52} {:>10} {:>10} {:>10}",
                kind,
                count.total,
                count.attributed,
                count.unexpected()
            );
        }
        let _ = writeln!(
            out,
            "crashes injected {}, failed as expected {}, counted by the gateway {}; stop/starts {}",
            self.crashes_injected,
            self.crashes_acknowledged,
            self.crashes_seen_by_gateway,
            self.stop_starts
        );
        let _ = writeln!(
            out,
            "WebSocket events received {} over {} connections; gateway ERROR log lines {}",
            self.ws_events, self.ws_connections, self.gateway_error_lines
        );
        for example in &self.unexpected_examples {
            let _ = writeln!(out, "unexpected: {example}");
        }
        out
    }
}

/// Why a soak run failed.
#[derive(Debug)]
pub enum SoakError {
    /// The run could not be set up or driven (the gateway did not start, a registration
    /// failed, ...).
    Setup(String),
    /// The run completed and broke resource bounds; the report says by how much.
    Bounds {
        report: Box<SoakReport>,
        broken: Vec<String>,
    },
}

impl std::fmt::Display for SoakError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Setup(message) => write!(f, "the soak could not run: {message}"),
            Self::Bounds { report, broken } => {
                write!(
                    f,
                    "the soak broke {} bound(s):\n- {}\n{}",
                    broken.len(),
                    broken.join("\n- "),
                    report.table()
                )
            }
        }
    }
}

impl std::error::Error for SoakError {}

fn setup<T>(result: Result<T, impl std::fmt::Display>, what: &str) -> Result<T, SoakError> {
    result.map_err(|error| SoakError::Setup(format!("{what}: {error}")))
}

/// Runs the soak, prints its table on stdout, and answers the figures; an error when the run
/// could not proceed or broke a bound of [`SoakReport::broken_bounds`].
pub fn run(options: &SoakOptions) -> Result<SoakReport, SoakError> {
    let report = drive(options)?;
    let _ = std::io::stdout()
        .lock()
        .write_all(report.table().as_bytes());
    let broken = report.broken_bounds();
    if broken.is_empty() {
        Ok(report)
    } else {
        Err(SoakError::Bounds {
            report: Box::new(report),
            broken,
        })
    }
}

fn drive(options: &SoakOptions) -> Result<SoakReport, SoakError> {
    if options.running == 0 {
        return Err(SoakError::Setup(
            "running must be at least 1; pass a positive number of running servers".to_owned(),
        ));
    }
    let work = setup(tempfile::tempdir(), "cannot make a temporary directory")?;
    // A private copy of the fixture: its path tells this run's processes from any other's.
    let fixture = work.path().join("soak-fixture-server");
    setup(
        std::fs::copy(&options.fixture_binary, &fixture),
        &format!("cannot copy {}", options.fixture_binary.display()),
    )?;
    let config = work.path().join("gateway.yaml");
    // Probing is off: every server declares its tools, and only the driver starts servers.
    setup(
        std::fs::write(&config, "probe_tools: false\n"),
        "cannot write the configuration",
    )?;
    let mut gateway = Gateway::start(
        &options.gateway_binary,
        &config,
        &work.path().join("data"),
        options.verbose,
    )?;
    let result = drive_gateway(options, &mut gateway, &fixture);
    // Whatever happened, nothing of this run may outlive it.
    gateway.kill();
    kill_fixtures(&fixture);
    result
}

fn drive_gateway(
    options: &SoakOptions,
    gateway: &mut Gateway,
    fixture: &Path,
) -> Result<SoakReport, SoakError> {
    let control = Rest::new(&gateway.address, 0);
    wait_ready(&control)?;
    let ids: Vec<String> = (0..options.registered)
        .map(|index| format!("soak-{index:04}"))
        .collect();
    let running_ids = ids[..options.running].to_vec();
    let fixture_command = fixture.display().to_string();
    progress(options, &format!("registering {} servers", ids.len()));
    parallel_each(&ids, 4, &gateway.address, |rest, id| {
        let body = json!({
            "mcp_server_id": id,
            "mode": "subprocess",
            "command": [fixture_command],
            "description": "soak fixture",
            // Reaping would change which servers run; the soak controls that itself.
            "idle_ttl_s": 86400,
            "tools": [
                {"name": "echo", "description": "echo", "inputSchema": {"type": "object"}},
                {"name": "add", "description": "add", "inputSchema": {"type": "object"}},
                {"name": "crash", "description": "crash", "inputSchema": {"type": "object"}},
            ],
        });
        let (status, text) = rest.send("POST", "/api/mcp_servers", Some(&body))?;
        if status != 201 {
            return Err(format!("registering {id} answered {status}: {text}"));
        }
        Ok(())
    })?;
    settle();
    let pid = gateway.pid;
    let mut report = SoakReport {
        duration: options.duration,
        running: options.running,
        registered: options.registered,
        baseline: sample(pid, Duration::ZERO)?,
        ..SoakReport::default()
    };

    progress(options, &format!("starting {} servers", running_ids.len()));
    start_all(&running_ids, &gateway.address)?;
    wait_descendants(pid, options.running, Duration::from_secs(30))?;

    let stats = Stats::new(options.running);
    progress(
        options,
        &format!("warming up for {} s", options.warmup.as_secs()),
    );
    // The warm-up has no chaos: every server runs when the start sample is taken.
    drive_traffic(
        options,
        pid,
        &gateway.address,
        &running_ids,
        &ids,
        &stats,
        false,
    )?;
    start_all(&running_ids, &gateway.address)?;
    wait_descendants(pid, options.running, Duration::from_secs(30))?;
    settle();
    report.start = sample(pid, Duration::ZERO)?;

    // Counted from here on: the warm-up's figures are discarded.
    let stats = Stats::new(options.running);
    progress(
        options,
        &format!("driving traffic for {} s", options.duration.as_secs()),
    );
    report.timeline = drive_traffic(
        options,
        pid,
        &gateway.address,
        &running_ids,
        &ids,
        &stats,
        true,
    )?;

    // Crashed and stopped servers run again, so that the end looks like the start.
    start_all(&running_ids, &gateway.address)?;
    wait_descendants(pid, options.running, Duration::from_secs(30))?;
    settle();
    report.end = sample(pid, options.duration)?;
    report.crashes_seen_by_gateway = crashes_counted(&control);

    progress(options, "stopping every server");
    parallel_each(&running_ids, 4, &gateway.address, |rest, id| {
        let (status, text) = rest.send("POST", &format!("/api/mcp_servers/{id}/stop"), None)?;
        if status != 200 {
            return Err(format!("stopping {id} answered {status}: {text}"));
        }
        Ok(())
    })?;
    // Give the gateway time to reap the last processes, bounded; the check follows.
    let _ = wait_descendants(pid, 0, Duration::from_secs(15));
    settle();
    report.after_stop = sample(pid, options.duration)?;

    // A few servers run while the gateway is told to stop: it must end them too.
    let last_running = &running_ids[..running_ids.len().min(5)];
    start_all(last_running, &gateway.address)?;
    progress(options, "stopping the gateway with SIGTERM");
    let (exit, clean) = gateway.terminate(Duration::from_secs(20));
    report.exit = exit;
    report.exit_clean = clean;
    // The processes of a stopped group can take a moment to be gone from /proc.
    let deadline = Instant::now() + Duration::from_secs(5);
    report.leftover_fixtures = loop {
        let left = fixture_processes(fixture);
        if left.is_empty() || Instant::now() >= deadline {
            break left;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    report.gateway_error_lines = gateway.error_lines.load(Ordering::Relaxed);

    stats.into_report(&mut report);
    Ok(report)
}

fn progress(options: &SoakOptions, line: &str) {
    if options.verbose {
        eprintln!("soak: {line}");
    }
}

/// Lets closed connections and finished processes be reaped before a sample.
fn settle() {
    std::thread::sleep(Duration::from_millis(500));
}

// ----- the gateway process ---------------------------------------------------------------

struct Gateway {
    child: Child,
    pid: u32,
    address: String,
    error_lines: Arc<AtomicU64>,
}

impl Gateway {
    fn start(
        binary: &Path,
        config: &Path,
        data_dir: &Path,
        verbose: bool,
    ) -> Result<Self, SoakError> {
        let mut child = setup(
            Command::new(binary)
                .args(["--http", "--host", "127.0.0.1", "--port", "0", "--config"])
                .arg(config)
                .arg("--data-dir")
                .arg(data_dir)
                .env("MCP_LOG", "warn")
                // The soak measures the gateway at full speed; limits would reject its calls.
                .env("MCP_RATE_LIMIT_RPS", "0")
                .env_remove("MCP_CONFIG")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn(),
            &format!("cannot start {}", binary.display()),
        )?;
        let pid = child.id();
        let Some(stderr) = child.stderr.take() else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(SoakError::Setup("the gateway has no stderr".to_owned()));
        };
        let error_lines = Arc::new(AtomicU64::new(0));
        let (sender, receiver) = std::sync::mpsc::channel();
        {
            let error_lines = Arc::clone(&error_lines);
            std::thread::spawn(move || {
                let mut said = Vec::new();
                let mut sender = Some(sender);
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    if line.contains("ERROR") {
                        error_lines.fetch_add(1, Ordering::Relaxed);
                        if verbose {
                            eprintln!("gateway: {line}");
                        }
                    }
                    if let Some(address) = line.strip_prefix("listening on http://")
                        && let Some(sender) = sender.take()
                    {
                        let _ = sender.send(Ok(address.trim().to_owned()));
                    } else if sender.is_some() {
                        said.push(line);
                    }
                }
                if let Some(sender) = sender {
                    let _ = sender.send(Err(said.join("\n")));
                }
            });
        }
        match receiver.recv_timeout(Duration::from_secs(30)) {
            Ok(Ok(address)) => Ok(Self {
                child,
                pid,
                address,
                error_lines,
            }),
            Ok(Err(said)) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(SoakError::Setup(format!(
                    "the gateway exited before listening; its stderr:\n{said}"
                )))
            }
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(SoakError::Setup(
                    "the gateway did not print its address within 30 s".to_owned(),
                ))
            }
        }
    }

    /// Sends SIGTERM and waits for the exit; answers how it ended and whether that was clean.
    fn terminate(&mut self, within: Duration) -> (String, bool) {
        // `kill(1)` rather than a signal binding keeps this crate free of unsafe code.
        let sent = Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status();
        if !sent.is_ok_and(|status| status.success()) {
            return ("SIGTERM could not be sent".to_owned(), false);
        }
        let started = Instant::now();
        while started.elapsed() < within {
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    let text = format!(
                        "exited with {status} after {} ms",
                        started.elapsed().as_millis()
                    );
                    return (text, status.success());
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(error) => return (format!("cannot wait for the gateway: {error}"), false),
            }
        }
        (
            format!("still running {} s after SIGTERM", within.as_secs()),
            false,
        )
    }

    fn kill(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

// ----- /proc ------------------------------------------------------------------------------

fn sample(pid: u32, at: Duration) -> Result<Sample, SoakError> {
    let status = setup(
        std::fs::read_to_string(format!("/proc/{pid}/status")),
        "cannot read the gateway's /proc status (has it exited?)",
    )?;
    let rss_kib = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|value| value.parse().ok())
        .ok_or_else(|| SoakError::Setup("no VmRSS in /proc status".to_owned()))?;
    let fds = setup(
        std::fs::read_dir(format!("/proc/{pid}/fd")),
        "cannot list the gateway's fds",
    )?
    .count();
    let below = descendants(pid);
    Ok(Sample {
        at,
        rss_kib,
        fds,
        descendants: below.len(),
        zombies: below.iter().filter(|(_, state)| *state == 'Z').count(),
    })
}

/// Every process below `pid`, with its state letter (`Z` for a zombie).
fn descendants(pid: u32) -> Vec<(u32, char)> {
    crate::processes::descendants(pid)
        .into_iter()
        .map(|entry| (entry.pid, entry.state))
        .collect()
}

/// Live processes whose executable is `binary`.
fn fixture_processes(binary: &Path) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let exe = std::fs::read_link(entry.path().join("exe")).ok()?;
            (exe == binary).then_some(pid)
        })
        .collect()
}

fn kill_fixtures(binary: &Path) {
    for pid in fixture_processes(binary) {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
}

fn wait_descendants(pid: u32, expected: usize, within: Duration) -> Result<(), SoakError> {
    let deadline = Instant::now() + within;
    loop {
        let count = descendants(pid).len();
        if count == expected {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(SoakError::Setup(format!(
                "expected {expected} processes under the gateway, found {count} after {} s",
                within.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

// ----- HTTP -------------------------------------------------------------------------------

/// A blocking REST client of the gateway.
struct Rest {
    agent: ureq::Agent,
    base: String,
}

impl Rest {
    /// `idle_connections` 0 closes every connection after its request, so that a sample of the
    /// gateway's fds never counts a connection the driver keeps open.
    fn new(address: &str, idle_connections: usize) -> Self {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(REQUEST_TIMEOUT))
            .max_idle_connections(idle_connections)
            .max_idle_connections_per_host(idle_connections)
            .build()
            .new_agent();
        Self {
            agent,
            base: format!("http://{address}"),
        }
    }

    /// One request; answers the status and the body, or the transport failure as text.
    fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(u16, String), String> {
        let url = format!("{}{path}", self.base);
        let result = match (method, body) {
            ("GET", _) => self.agent.get(&url).call(),
            ("POST", Some(body)) => self
                .agent
                .post(&url)
                .header("content-type", "application/json")
                .send(body.to_string()),
            ("POST", None) => self.agent.post(&url).send_empty(),
            ("DELETE", _) => self.agent.delete(&url).call(),
            _ => return Err(format!("the driver has no {method} request")),
        };
        match result {
            Ok(mut response) => {
                let status = response.status().as_u16();
                let text = response
                    .body_mut()
                    .with_config()
                    .limit(64 * 1024 * 1024)
                    .read_to_string()
                    .map_err(|error| transport_kind(&error))?;
                Ok((status, text))
            }
            Err(error) => Err(transport_kind(&error)),
        }
    }
}

/// A short, stable name of a transport failure, for counting by kind.
fn transport_kind(error: &ureq::Error) -> String {
    match error {
        ureq::Error::Io(io) => format!("transport io {:?}", io.kind()),
        ureq::Error::Timeout(_) => "transport timeout".to_owned(),
        ureq::Error::ConnectionFailed => "transport connection failed".to_owned(),
        other => {
            let text = format!("{other:?}");
            let name = text.split(['(', ' ', '{']).next().unwrap_or("other");
            format!("transport {name}")
        }
    }
}

fn wait_ready(rest: &Rest) -> Result<(), SoakError> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if matches!(rest.send("GET", "/health/ready", None), Ok((200, _))) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(SoakError::Setup(
                "the gateway did not become ready within 30 s".to_owned(),
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `work` on every item from `threads` threads, each with its own REST client; the
/// first failure is the answer.
fn parallel_each(
    items: &[String],
    threads: usize,
    address: &str,
    work: impl Fn(&Rest, &str) -> Result<(), String> + Sync,
) -> Result<(), SoakError> {
    let next = AtomicU64::new(0);
    let failure: Mutex<Option<String>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                let rest = Rest::new(address, 0);
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed) as usize;
                    let Some(item) = items.get(index) else { break };
                    if let Err(error) = work(&rest, item) {
                        lock(&failure).get_or_insert(error);
                        break;
                    }
                }
            });
        }
    });
    match failure.into_inner().unwrap_or_else(PoisonError::into_inner) {
        Some(error) => Err(SoakError::Setup(error)),
        None => Ok(()),
    }
}

fn start_all(ids: &[String], address: &str) -> Result<(), SoakError> {
    parallel_each(ids, 4, address, |rest, id| {
        let (status, text) = rest.send("POST", &format!("/api/mcp_servers/{id}/start"), None)?;
        if status != 200 {
            return Err(format!("starting {id} answered {status}: {text}"));
        }
        Ok(())
    })
}

/// `McpServerCrashed` events the gateway published, from `/metrics`.
fn crashes_counted(rest: &Rest) -> u64 {
    let Ok((200, text)) = rest.send("GET", "/metrics", None) else {
        return 0;
    };
    text.lines()
        .filter(|line| {
            line.starts_with("mcpgw_events_published_total")
                && line.contains("event_type=\"McpServerCrashed\"")
        })
        .filter_map(|line| line.split_whitespace().last()?.parse::<f64>().ok())
        .map(|value| value as u64)
        .sum()
}

/// A minimal MCP client over Streamable HTTP, `initialize` era, with a session.
struct McpClient {
    agent: ureq::Agent,
    url: String,
    session: Option<String>,
    next_id: u64,
    calls_on_session: u64,
}

/// How an MCP request ended.
enum McpOutcome {
    Result(Value),
    /// A JSON-RPC error, an HTTP error status or a transport failure, named by kind.
    Failed {
        kind: String,
        detail: String,
    },
}

impl McpClient {
    fn new(address: &str) -> Self {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(REQUEST_TIMEOUT))
            .build()
            .new_agent();
        Self {
            agent,
            url: format!("http://{address}/mcp"),
            session: None,
            next_id: 1,
            calls_on_session: 0,
        }
    }

    /// Opens a session when there is none, and renews it every [`CALLS_PER_SESSION`] calls.
    fn ensure_session(&mut self) -> Result<(), McpOutcome> {
        if self.session.is_some() && self.calls_on_session < CALLS_PER_SESSION {
            return Ok(());
        }
        self.end_session();
        let params = json!({
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "mcpgw-soak", "version": "0"},
        });
        match self.request("initialize", &params) {
            McpOutcome::Result(_) => {}
            failed @ McpOutcome::Failed { .. } => return Err(failed),
        }
        if self.session.is_none() {
            return Err(McpOutcome::Failed {
                kind: "mcp no session id".to_owned(),
                detail: "initialize answered without Mcp-Session-Id".to_owned(),
            });
        }
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        match self.post(&initialized) {
            Ok((status, _, _)) if (200..300).contains(&status) => {}
            Ok((status, _, text)) => {
                return Err(McpOutcome::Failed {
                    kind: format!("mcp http {status}"),
                    detail: text,
                });
            }
            Err(kind) => {
                return Err(McpOutcome::Failed {
                    detail: kind.clone(),
                    kind: format!("mcp {kind}"),
                });
            }
        }
        self.calls_on_session = 0;
        Ok(())
    }

    /// Ends the session as a well-behaved client does (`DELETE /mcp`).
    fn end_session(&mut self) {
        if let Some(session) = self.session.take() {
            let _ = self
                .agent
                .delete(&self.url)
                .header("mcp-session-id", &session)
                .header("mcp-protocol-version", PROTOCOL)
                .call();
        }
    }

    fn call_tool(&mut self, name: &str, arguments: Value) -> McpOutcome {
        if let Err(failed) = self.ensure_session() {
            return failed;
        }
        self.calls_on_session += 1;
        self.request("tools/call", &json!({"name": name, "arguments": arguments}))
    }

    fn request(&mut self, method: &str, params: &Value) -> McpOutcome {
        let id = self.next_id;
        self.next_id += 1;
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let (status, content_type, text) = match self.post(&body) {
            Ok(answer) => answer,
            Err(kind) => {
                // The connection may be broken: the next call starts a new session.
                self.session = None;
                return McpOutcome::Failed {
                    detail: kind.clone(),
                    kind: format!("mcp {kind}"),
                };
            }
        };
        if !(200..300).contains(&status) {
            if status == 404 {
                // The session is gone; the next call opens another.
                self.session = None;
            }
            return McpOutcome::Failed {
                kind: format!("mcp http {status}"),
                detail: text,
            };
        }
        let message = if content_type.starts_with("text/event-stream") {
            text.lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
                .find(|message| message.get("id").is_some())
        } else {
            serde_json::from_str::<Value>(&text).ok()
        };
        let Some(message) = message else {
            return McpOutcome::Failed {
                kind: "mcp unreadable answer".to_owned(),
                detail: text,
            };
        };
        if let Some(error) = message.get("error") {
            return McpOutcome::Failed {
                kind: format!("mcp jsonrpc {}", error["code"]),
                detail: error.to_string(),
            };
        }
        McpOutcome::Result(message["result"].clone())
    }

    fn post(&mut self, body: &Value) -> Result<(u16, String, String), String> {
        let mut request = self
            .agent
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if let Some(session) = &self.session {
            request = request
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", PROTOCOL);
        }
        let mut response = request
            .send(body.to_string())
            .map_err(|error| transport_kind(&error))?;
        let status = response.status().as_u16();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned)
        };
        if let Some(session) = header("mcp-session-id") {
            self.session = Some(session);
        }
        let content_type = header("content-type").unwrap_or_default();
        let text = response
            .body_mut()
            .read_to_string()
            .map_err(|error| transport_kind(&error))?;
        Ok((status, content_type, text))
    }
}

impl Drop for McpClient {
    fn drop(&mut self) {
        self.end_session();
    }
}

// ----- the traffic -------------------------------------------------------------------------

/// A small deterministic generator (xorshift64*), so the driver needs no random crate.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound.max(1) as u64) as usize
    }
}

/// When a running server was last disturbed by the chaos, and when the last successful call to
/// it began.
#[derive(Default, Clone, Copy)]
struct Track {
    disturbed_at: Option<Instant>,
    last_success_started: Option<Instant>,
}

struct Stats {
    tracks: Mutex<Vec<Track>>,
    served: Mutex<BTreeMap<String, u64>>,
    errors: Mutex<BTreeMap<String, ErrorCount>>,
    unexpected_examples: Mutex<Vec<String>>,
    ws_events: AtomicU64,
    ws_connections: AtomicU64,
    crashes_injected: AtomicU64,
    crashes_acknowledged: AtomicU64,
    stop_starts: AtomicU64,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Stats {
    fn new(running: usize) -> Self {
        Self {
            tracks: Mutex::new(vec![Track::default(); running]),
            served: Mutex::new(BTreeMap::new()),
            errors: Mutex::new(BTreeMap::new()),
            unexpected_examples: Mutex::new(Vec::new()),
            ws_events: AtomicU64::new(0),
            ws_connections: AtomicU64::new(0),
            crashes_injected: AtomicU64::new(0),
            crashes_acknowledged: AtomicU64::new(0),
            stop_starts: AtomicU64::new(0),
        }
    }

    fn served(&self, kind: &str) {
        *lock(&self.served).entry(kind.to_owned()).or_default() += 1;
    }

    fn disturb(&self, server: usize) {
        lock(&self.tracks)[server].disturbed_at = Some(Instant::now());
    }

    /// Whether the chaos left `server` alone for at least `quiet`.
    fn undisturbed_for(&self, server: usize, quiet: Duration) -> bool {
        lock(&self.tracks)[server]
            .disturbed_at
            .is_none_or(|at| at.elapsed() >= quiet)
    }

    fn call_succeeded(&self, server: usize, started: Instant) {
        let mut tracks = lock(&self.tracks);
        let track = &mut tracks[server];
        if track.last_success_started.is_none_or(|at| at < started) {
            track.last_success_started = Some(started);
        }
    }

    /// Whether a failure of a call to `server` that began at `started` is explained by the
    /// chaos: the server was disturbed during the call, shortly before it ([`EXPLAINED_FOR`]),
    /// or before it and has served no call begun after that since.
    fn explained(&self, server: usize, started: Instant) -> bool {
        let track = lock(&self.tracks)[server];
        track.disturbed_at.is_some_and(|disturbed| {
            disturbed >= started
                || started.duration_since(disturbed) <= EXPLAINED_FOR
                || track.last_success_started.is_none_or(|ok| ok < disturbed)
        })
    }

    fn failed(&self, kind: &str, attributed: bool, detail: &str) {
        {
            let mut errors = lock(&self.errors);
            let count = errors.entry(kind.to_owned()).or_default();
            count.total += 1;
            if attributed {
                count.attributed += 1;
            }
        }
        if !attributed {
            let mut examples = lock(&self.unexpected_examples);
            if examples.len() < 10 {
                let mut detail = detail.to_owned();
                detail.truncate(300);
                examples.push(format!("{kind}: {detail}"));
            }
        }
    }

    fn into_report(self, report: &mut SoakReport) {
        report.served = self
            .served
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        report.errors = self
            .errors
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        report.unexpected_examples = self
            .unexpected_examples
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        report.ws_events = self.ws_events.into_inner();
        report.ws_connections = self.ws_connections.into_inner();
        report.crashes_injected = self.crashes_injected.into_inner();
        report.crashes_acknowledged = self.crashes_acknowledged.into_inner();
        report.stop_starts = self.stop_starts.into_inner();
    }
}

/// Runs every client thread until the deadline (the warm-up's or the run's), with the chaos
/// thread when `chaos`; answers the samples taken meanwhile.
fn drive_traffic(
    options: &SoakOptions,
    pid: u32,
    address: &str,
    running: &[String],
    registered: &[String],
    stats: &Stats,
    chaos: bool,
) -> Result<Vec<Sample>, SoakError> {
    let length = if chaos {
        options.duration
    } else {
        options.warmup
    };
    let began = Instant::now();
    let deadline = began + length;
    let stop = AtomicBool::new(false);
    let pid_samples = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for index in 0..options.mcp_clients {
            let seed = options.seed ^ (index as u64 + 1).wrapping_mul(0x9e37_79b9);
            scope.spawn(move || mcp_worker(address, running, stats, deadline, seed));
        }
        for index in 0..options.rest_clients {
            let seed = options.seed ^ (index as u64 + 101).wrapping_mul(0x9e37_79b9);
            scope.spawn(move || rest_worker(address, running, registered, stats, deadline, seed));
        }
        for _ in 0..options.ws_subscribers {
            scope.spawn(move || ws_subscriber(address, stats, deadline));
        }
        if chaos {
            let seed = options.seed ^ 0xc4a0_5eed;
            scope.spawn(move || chaos_worker(options, address, running, stats, deadline, seed));
            {
                let pid_samples = &pid_samples;
                let stop = &stop;
                scope.spawn(move || {
                    let every = (length / 10).max(Duration::from_secs(1));
                    let mut next = began + every;
                    while next < deadline && !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(next.saturating_duration_since(Instant::now()));
                        if let Ok(sample) = sample(pid, began.elapsed()) {
                            lock(pid_samples).push(sample);
                        }
                        if options.verbose {
                            eprintln!(
                                "soak: {} s: {} calls served, {} errors",
                                began.elapsed().as_secs(),
                                lock(&stats.served).values().sum::<u64>(),
                                lock(&stats.errors)
                                    .values()
                                    .map(|count| count.total)
                                    .sum::<u64>()
                            );
                        }
                        next += every;
                    }
                });
            }
        }
        // Scoped threads end at the deadline by themselves; this only stops the sampler early
        // should the others finish first.
        std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
        stop.store(true, Ordering::Relaxed);
    });
    Ok(pid_samples
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner))
}

fn mcp_worker(address: &str, running: &[String], stats: &Stats, deadline: Instant, seed: u64) {
    let mut rng = Rng::new(seed);
    let mut client = McpClient::new(address);
    while Instant::now() < deadline {
        let server = rng.below(running.len());
        let id = &running[server];
        let (name, arguments, check) = if rng.below(2) == 0 {
            let text = format!("soak {}", rng.next() % 1_000_000);
            (
                format!("{id}__echo"),
                json!({"text": text}),
                Value::from(text),
            )
        } else {
            let (a, b) = (rng.below(1000) as i64, rng.below(1000) as i64);
            (
                format!("{id}__add"),
                json!({"a": a, "b": b}),
                Value::from((a + b).to_string()),
            )
        };
        let started = Instant::now();
        match client.call_tool(&name, arguments) {
            McpOutcome::Result(result) => {
                let text = &result["content"][0]["text"];
                if result["isError"] == true {
                    let explained = stats.explained(server, started);
                    stats.failed("mcp tool isError", explained, &result.to_string());
                } else if *text != check {
                    stats.failed("mcp wrong answer", false, &result.to_string());
                } else {
                    stats.call_succeeded(server, started);
                    stats.served("mcp tools/call");
                }
            }
            McpOutcome::Failed { kind, detail } => {
                let explained = stats.explained(server, started);
                stats.failed(&kind, explained, &format!("{name}: {detail}"));
            }
        }
    }
}

fn rest_worker(
    address: &str,
    running: &[String],
    registered: &[String],
    stats: &Stats,
    deadline: Instant,
    seed: u64,
) {
    let mut rng = Rng::new(seed);
    let rest = Rest::new(address, 4);
    while Instant::now() < deadline {
        let any = &registered[rng.below(registered.len())];
        let run = &running[rng.below(running.len())];
        let (route, path) = match rng.below(20) {
            // The full list is the heaviest request (every registered server): seldom.
            0 => ("GET /api/mcp_servers", "/api/mcp_servers".to_owned()),
            1..=4 => (
                "GET /api/mcp_servers/{id}",
                format!("/api/mcp_servers/{any}"),
            ),
            5..=7 => (
                "GET /api/mcp_servers/{id}/logs",
                format!("/api/mcp_servers/{run}/logs?lines=50"),
            ),
            8..=10 => (
                "GET /api/mcp_servers/{id}/tools",
                format!("/api/mcp_servers/{any}/tools"),
            ),
            11..=13 => (
                "GET /api/mcp_servers/{id}/health",
                format!("/api/mcp_servers/{run}/health"),
            ),
            14 | 15 => ("GET /health/ready", "/health/ready".to_owned()),
            16 => ("GET /health/live", "/health/live".to_owned()),
            _ => ("GET /api/system", "/api/system".to_owned()),
        };
        match rest.send("GET", &path, None) {
            Ok((200, _)) => stats.served(&format!("rest {route}")),
            Ok((status, text)) => {
                stats.failed(&format!("rest {route} http {status}"), false, &text);
            }
            Err(kind) => stats.failed(&format!("rest {kind}"), false, &path),
        }
    }
}

fn ws_subscriber(address: &str, stats: &Stats, deadline: Instant) {
    let url = format!("ws://{address}/api/ws/events");
    while Instant::now() < deadline {
        let connected = TcpStream::connect(address)
            .map_err(|error| format!("connect: {error}"))
            .and_then(|stream| {
                stream
                    .set_read_timeout(Some(Duration::from_millis(250)))
                    .map_err(|error| format!("read timeout: {error}"))?;
                tungstenite::client(url.as_str(), stream)
                    .map(|(socket, _)| socket)
                    .map_err(|error| format!("handshake: {error}"))
            });
        let mut socket = match connected {
            Ok(socket) => socket,
            Err(detail) => {
                stats.failed("ws transport connect", false, &detail);
                // A refused connection is retried, but not in a tight loop.
                std::thread::sleep(Duration::from_millis(200));
                continue;
            }
        };
        stats.ws_connections.fetch_add(1, Ordering::Relaxed);
        while Instant::now() < deadline {
            match socket.read() {
                Ok(tungstenite::Message::Text(_)) => {
                    stats.ws_events.fetch_add(1, Ordering::Relaxed);
                }
                Ok(_) => {}
                Err(tungstenite::Error::Io(error))
                    if matches!(
                        error.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(error) => {
                    stats.failed("ws transport read", false, &error.to_string());
                    break;
                }
            }
        }
        let _ = socket.close(None);
        let _ = socket.flush();
    }
}

fn chaos_worker(
    options: &SoakOptions,
    address: &str,
    running: &[String],
    stats: &Stats,
    deadline: Instant,
    seed: u64,
) {
    let mut rng = Rng::new(seed);
    let rest = Rest::new(address, 0);
    let mut client = McpClient::new(address);
    let mut next_crash = Instant::now() + options.crash_every;
    let mut next_stop = Instant::now() + options.stop_start_every;
    loop {
        let next = next_crash.min(next_stop);
        if next >= deadline {
            break;
        }
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        // A server the chaos left alone for a while, so that each disturbance is one of a
        // running process; a few tries, then this round is skipped.
        let Some(server) = (0..8)
            .map(|_| rng.below(running.len()))
            .find(|server| stats.undisturbed_for(*server, CHAOS_COOLDOWN))
        else {
            next_crash = next_crash.max(Instant::now()) + options.crash_every;
            continue;
        };
        let id = &running[server];
        if next_crash <= next_stop {
            next_crash += options.crash_every;
            stats.disturb(server);
            stats.crashes_injected.fetch_add(1, Ordering::Relaxed);
            match client.call_tool(&format!("{id}__crash"), json!({"code": 1})) {
                McpOutcome::Failed { .. } => {
                    stats.crashes_acknowledged.fetch_add(1, Ordering::Relaxed);
                }
                McpOutcome::Result(result) if result["isError"] == true => {
                    stats.crashes_acknowledged.fetch_add(1, Ordering::Relaxed);
                }
                McpOutcome::Result(result) => {
                    stats.failed("mcp crash answered", false, &result.to_string());
                }
            }
        } else {
            next_stop += options.stop_start_every;
            stats.disturb(server);
            stats.stop_starts.fetch_add(1, Ordering::Relaxed);
            for (action, pause) in [("stop", STOPPED_FOR), ("start", Duration::ZERO)] {
                let route = format!("rest POST /api/mcp_servers/{{id}}/{action}");
                match rest.send("POST", &format!("/api/mcp_servers/{id}/{action}"), None) {
                    Ok((200, _)) => stats.served(&route),
                    Ok((status, text)) => {
                        stats.failed(&format!("{route} http {status}"), false, &text)
                    }
                    Err(kind) => stats.failed(&format!("rest {kind}"), false, &route),
                }
                std::thread::sleep(pause);
            }
        }
    }
}
