//! The benchmark harness of mcpgw: starts the real gateway binary and prints figures.
//!
//! `cargo run --release -p mcpgw-bench -- [scenario]` with a scenario of:
//! - `control-plane` (default): 1,000 registered servers; `GET /api/mcp_servers` latency and
//!   throughput at concurrency 1 and 16, idle RSS, and the time from exec to a ready probe.
//!
//! - `data-plane`: tool calls through the gateway's `/mcp` against the same calls made directly
//!   to the same upstream (the fixture server over Streamable HTTP) in the same run, in both
//!   protocol eras (2025-11-25 sessions, 2026-07-28 stateless requests): p50/p99 at concurrency
//!   1, calls/s at concurrency 16, and `tools/list` latency with 100 servers. With
//!   `MCPGW_BENCH_DATA_PLANE=pinned` every server's tools are pinned with `enforce`; with
//!   `=endpoint` the calls go through a curated endpoint (`/mcp/v/bench`) that selects the
//!   upstream's `echo`: what tool governance adds to a call. With `=traced` traces are on
//!   (OTLP/HTTP to a sink in this process that answers every export at once) and new traces
//!   are sampled at 1%: what tracing adds to a call.
//!
//! - `groups`: a group of 3 members that each serve one call at a time in 5 ms, against one
//!   such server outside the group called directly through the same gateway: calls/s at
//!   concurrency 16; and the p50/p99 at concurrency 1 of a group of 3 servers without delay
//!   against one such server outside it, which is the latency group routing adds.
//!
//! - `console`: the web console's pages with 1,000 servers and 5,000 tools: p50/p99 of each
//!   page at concurrency 1 (see `console.rs`).
//!
//! - `auth`: what API-key authentication and authorization add to `GET /api/mcp_servers` and
//!   to a tool call at concurrency 1, with one key and with 10,000 keys in the store.
//!
//! - `events [SECONDS] [RATE] [CLIENTS]`: the HTTP adapter in-process, CLIENTS (default 100)
//!   WebSocket subscribers of `/api/ws/events` and RATE (default 5,000) domain events per second
//!   for SECONDS (default 10): events received and lost per subscriber, delivery latency, CPU.
//!
//! - `ratelimit`: the cost of one rate-limit check, the memory of 100,000 callers' buckets, and
//!   the RSS of the real gateway after 100,000 distinct callers.
//!
//! - `docker`: the cold start of a docker-mode server (a tool call to a stopped server, until
//!   its first result) on the Engine API and through the podman CLI, against the same fixture
//!   server as a subprocess, in the same run. Needs scripts/setup-podman.sh and
//!   scripts/build-test-image.sh.
//!
//! - `load [SECONDS] [CLIENTS] [session|stateless]`: calls through the gateway from CLIENTS
//!   clients at once (default 16) for SECONDS (default 20), in the protocol era named (default
//!   `session`), printing the gateway's pid first, so that a profiler
//!   or `strace -c -f -p PID` can be attached to it (`perf record -g -p PID`).
//!
//! - `cpu [rust|python]`: the gateway's own CPU time per tool call, by thread (HTTP workers,
//!   core runtime, event-log writer), at concurrency 1 and 16, in both protocol eras, from
//!   `/proc/PID/task/*/schedstat`, behind the Rust fixture server (default) or the official
//!   Python SDK's server.
//!
//! - `floor`: every figure of the cost per call, memory and start-up in one run (the data
//!   plane and CPU per call in both eras, behind both upstreams; RSS after start; exec to
//!   ready), printed as a table next to its target.
//!
//! - `cpu-check [BASELINE]`: CI's regression check: counts the instructions the gateway runs
//!   per call behind the Rust fixture server under valgrind's callgrind, in both eras, and
//!   fails when one grows more than 20% over the figures committed in `bench/cpu-baseline.txt`
//!   (see `floor.rs`).
//!
//! - `fleet [ROUNDS]`: the PostgreSQL store against the SQLite default, and the Redis rate
//!   limiter against the local token buckets, in one run on throwaway PostgreSQL and Redis
//!   servers on loopback: REST create, list and read latencies, tool-call p50/p99 at c=1 and
//!   calls/s at c=16 in both eras with the CPU per call, Redis's round trip; medians over ROUNDS
//!   (default 5) alternating rounds, with the ratios (see `fleet.rs`).
//!
//! - `bare-responder`, `bare-relay`, `actix-responder`, `actix-relay`: the processes that `cpu`
//!   and `floor` measure as the floor of the machine and of the gateway's HTTP stack (see
//!   `bare.rs`); each serves until killed and prints its address on stderr.
//!
//! - `soak [SECONDS] [RUNNING] [REGISTERED]`: REGISTERED (default 1,000) fixture servers, RUNNING
//!   (default 200) of them started, and SECONDS (default 600) of mixed traffic (REST reads, tool
//!   calls through `/mcp`, WebSocket subscribers, injected crashes and stop/starts); RSS, fds and
//!   child processes before and after, calls served and errors by kind. The one scenario that
//!   asserts: it fails when a resource bound is broken (see `mcpgw_fixtures::soak`).
//!
//! Apart from `soak` and `cpu-check`, it measures and never asserts: targets live in the issues and the
//! figures go in the notes.
//! The machines are noisy, so every figure is a median over several rounds or a percentile over
//! many requests, and the harness says how many.

#![allow(clippy::print_stdout)]

mod auth;
mod bare;
mod console;
mod cpu;
mod docker;
mod events;
mod fleet;
mod floor;
mod groups;
mod http;
mod mcp;
mod ratelimit;
mod soak;
mod stats;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

fn main() -> anyhow::Result<()> {
    let scenario = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "control-plane".to_owned());
    match scenario.as_str() {
        "control-plane" => control_plane(),
        "data-plane" => data_plane(),
        "groups" => groups::run(),
        "console" => console::run(),
        "auth" => auth::run(),
        "events" => events::run(),
        "ratelimit" => ratelimit::run(),
        "docker" => docker::run(),
        "load" => load(),
        "cpu" => cpu::run(),
        "floor" => floor::run(),
        "cpu-check" => floor::check(),
        "soak" => soak::run_scenario(),
        "fleet" => fleet::run(),
        other => match bare::Bare::of_scenario(other) {
            Some(bare) => bare::serve(bare),
            None => bail!(
                "unknown scenario `{other}`; the scenarios are: control-plane, data-plane, groups, console, auth, events, ratelimit, docker, load, cpu, floor, cpu-check, soak, fleet, bare-responder, bare-relay, actix-responder, actix-relay"
            ),
        },
    }
}

/// The release binaries sit beside this harness's own executable, or in the folder
/// `MCPGW_BENCH_BINARIES` names (CI's `cpu-check` drives release binaries with a debug build of
/// this harness: the figures it checks are the gateway's own CPU time, which the client's
/// build does not change).
fn sibling_binary(name: &str) -> anyhow::Result<PathBuf> {
    let path = match std::env::var_os("MCPGW_BENCH_BINARIES") {
        Some(folder) => PathBuf::from(folder).join(name),
        None => std::env::current_exe()?.with_file_name(name),
    };
    if !path.is_file() {
        bail!(
            "{} is missing; build it first: cargo build --release -p mcpgw -p mcpgw-fixtures",
            path.display()
        );
    }
    Ok(path)
}

struct Gateway {
    child: Child,
    address: String,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_gateway(binary: &Path, config: &Path, data_dir: &Path) -> anyhow::Result<Gateway> {
    start_gateway_with_env(binary, config, data_dir, &[])
}

/// [`start_gateway`] with more environment variables (`MCP_RATE_LIMIT_RPS`, ...).
fn start_gateway_with_env(
    binary: &Path,
    config: &Path,
    data_dir: &Path,
    env: &[(&str, &str)],
) -> anyhow::Result<Gateway> {
    start_gateway_in(Command::new(binary), config, data_dir, env)
}

/// Starts the gateway with `command`: the gateway binary, or a tool that runs it (valgrind)
/// with the binary as its last argument so far.
fn start_gateway_in(
    mut command: Command,
    config: &Path,
    data_dir: &Path,
    env: &[(&str, &str)],
) -> anyhow::Result<Gateway> {
    let mut child = command
        .args(["--http", "--port", "0", "--config"])
        .arg(config)
        .arg("--data-dir")
        .arg(data_dir)
        .env("MCP_LOG", "warn")
        // The scenarios measure throughput, which rate limits would cap; the rate-limit
        // scenario turns them on through `env`.
        .env("MCP_RATE_LIMIT_RPS", "0")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot start the gateway")?;
    let stderr = child.stderr.take().context("no stderr")?;
    let mut lines = BufReader::new(stderr).lines();
    // What the gateway said before it listened, to show why when it exits instead.
    let mut said = Vec::new();
    let address = loop {
        let Some(line) = lines.next() else {
            bail!(
                "the gateway exited before listening; its stderr:\n{}",
                said.join("\n")
            )
        };
        let line = line?;
        if let Some(address) = line.strip_prefix("listening on http://") {
            break address.trim().to_owned();
        }
        said.push(line);
    };
    // Keep draining stderr so the gateway never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Ok(Gateway { child, address })
}

/// A gateway whose one server, `fx`, is the fixture server over stdio; `work` holds its
/// configuration file and data directory.
fn start_gateway_with_fixture(work: &Path) -> anyhow::Result<Gateway> {
    start_gateway_with(work, Upstream::RustFixture)
}

/// The upstream MCP server of the CPU and floor scenarios, over stdio.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Upstream {
    /// The Rust fixture server: almost no cost per call, so the gateway's own cost shows.
    RustFixture,
    /// The official Python SDK's server (`tests/python/sdk_server.py`), in the Python of the
    /// test environment (`.venv-test`, made by scripts/install-test-deps.sh) or the one
    /// `MCPGW_BENCH_PYTHON` names.
    PythonSdk,
}

impl Upstream {
    pub fn label(self) -> &'static str {
        match self {
            Upstream::RustFixture => "the Rust fixture server",
            Upstream::PythonSdk => "the Python SDK's server",
        }
    }

    /// The command that starts it, as a YAML flow sequence.
    fn command(self) -> anyhow::Result<String> {
        let quoted = |path: &Path| format!("\"{}\"", path.display());
        match self {
            Upstream::RustFixture => Ok(format!(
                "[{}]",
                quoted(&sibling_binary("mcpgw-fixture-server")?)
            )),
            Upstream::PythonSdk => {
                let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
                let python = std::env::var_os("MCPGW_BENCH_PYTHON")
                    .map_or_else(|| root.join(".venv-test/bin/python"), PathBuf::from);
                let script = root.join("tests/python/sdk_server.py");
                if !python.is_file() {
                    bail!(
                        "{} is missing: run scripts/install-test-deps.sh, or name a Python with the MCP SDK in MCPGW_BENCH_PYTHON",
                        python.display()
                    );
                }
                Ok(format!(
                    "[{}, {}, \"stdio\"]",
                    quoted(&python),
                    quoted(&script)
                ))
            }
        }
    }
}

/// A gateway whose one server, `fx`, is `upstream` over stdio; `work` holds its configuration
/// file and data directory.
fn start_gateway_with(work: &Path, upstream: Upstream) -> anyhow::Result<Gateway> {
    let config = upstream_config(work, upstream)?;
    start_gateway(&sibling_binary("mcpgw")?, &config, &work.join("data"))
}

/// Writes, in `work`, a configuration whose one server, `fx`, is `upstream` over stdio.
fn upstream_config(work: &Path, upstream: Upstream) -> anyhow::Result<PathBuf> {
    let config = work.join("gateway.yaml");
    std::fs::write(
        &config,
        format!(
            "mcp_servers:\n  fx:\n    mode: subprocess\n    command: {}\n",
            upstream.command()?
        ),
    )?;
    Ok(config)
}

fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    status_kib(pid, &["VmRSS:"]).map(|values| values[0])
}

/// The resident memory of `pid` in its two parts, in KiB: anonymous (heap, stacks, the pages
/// the process wrote) and file-backed (mostly the binary's code). The second depends on how the
/// binary's pages sit in the page cache as much as on the code that ran: a binary just written
/// (built, or copied) is cached in large folios, and a fault maps more of it than after it was
/// read back from disk.
fn rss_parts_kib(pid: u32) -> anyhow::Result<(u64, u64)> {
    status_kib(pid, &["RssAnon:", "RssFile:"]).map(|values| (values[0], values[1]))
}

/// The values of the `names` lines of `/proc/PID/status`, in KiB, in the order asked.
fn status_kib(pid: u32, names: &[&str]) -> anyhow::Result<Vec<u64>> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    names
        .iter()
        .map(|name| {
            let line = status
                .lines()
                .find(|line| line.starts_with(name))
                .with_context(|| format!("no {name}"))?;
            Ok(line
                .split_whitespace()
                .nth(1)
                .with_context(|| format!("bad {name}"))?
                .parse()?)
        })
        .collect()
}

/// The time from exec to `/health/ready` answering 200, for each of `starts` fresh starts of
/// the gateway on `config` (each with a data directory of its own under `work`).
fn exec_to_ready(
    gateway_binary: &Path,
    config: &Path,
    work: &Path,
    starts: usize,
) -> anyhow::Result<Vec<Duration>> {
    let mut ready_times = Vec::new();
    for round in 0..starts {
        let data_dir = work.join(format!("data-ready-{round}"));
        let started = Instant::now();
        let gateway = start_gateway(gateway_binary, config, &data_dir)?;
        loop {
            if let Ok(mut client) = http::Client::connect(&gateway.address)
                && client
                    .get("/health/ready")
                    .map(|(status, _)| status == 200)
                    .unwrap_or(false)
            {
                break;
            }
            if started.elapsed() > Duration::from_secs(30) {
                bail!("the gateway did not become ready within 30 s");
            }
        }
        ready_times.push(started.elapsed());
    }
    Ok(ready_times)
}

/// A configuration of `servers` registered fixture servers, none started (probing is off).
fn registered_servers_config(fixture: &Path, servers: usize) -> String {
    let mut yaml = String::from("probe_tools: false\nmcp_servers:\n");
    for index in 0..servers {
        yaml.push_str(&format!(
            "  server-{index:04}:\n    mode: subprocess\n    command: [\"{}\"]\n    description: bench server {index}\n",
            fixture.display()
        ));
    }
    yaml
}

fn control_plane() -> anyhow::Result<()> {
    const SERVERS: usize = 1000;
    let gateway_binary = sibling_binary("mcpgw")?;
    let fixture = sibling_binary("mcpgw-fixture-server")?;
    let work = tempfile::tempdir()?;
    let config = work.path().join("gateway.yaml");
    // Probing is off: the figures are those of a gateway with 1,000 servers registered, none
    // started.
    let yaml = registered_servers_config(&fixture, SERVERS);
    std::fs::write(&config, yaml)?;

    println!("# control plane: {SERVERS} registered servers (none started)");

    // Time from exec to a ready probe, median of several fresh starts.
    let mut ready_times = exec_to_ready(&gateway_binary, &config, work.path(), 7)?;
    println!(
        "exec -> /health/ready 200: median {:.1} ms (min {:.1} ms, {} starts)",
        stats::millis(stats::median(&mut ready_times)),
        stats::millis(*ready_times.iter().min().unwrap_or(&Duration::ZERO)),
        ready_times.len()
    );

    let data_dir = work.path().join("data");
    let gateway = start_gateway(&gateway_binary, &config, &data_dir)?;
    {
        let mut client = http::Client::connect(&gateway.address)?;
        let (status, body) = client.get("/api/mcp_servers")?;
        if status != 200 {
            bail!("GET /api/mcp_servers answered {status}");
        }
        println!("GET /api/mcp_servers body: {} bytes", body.len());
    }
    std::thread::sleep(Duration::from_millis(500));
    let idle_rss = rss_kib(gateway.child.id())?;
    let (anonymous, file_backed) = rss_parts_kib(gateway.child.id())?;
    println!(
        "RSS idle after start: {:.1} MiB (anonymous {:.1} MiB, file-backed {:.1} MiB)",
        idle_rss as f64 / 1024.0,
        anonymous as f64 / 1024.0,
        file_backed as f64 / 1024.0
    );

    for concurrency in [1usize, 16] {
        let requests_per_client = if concurrency == 1 { 3000 } else { 600 };
        // Warm-up.
        stats::run_load(&gateway.address, "/api/mcp_servers", concurrency, 100)?;
        let result = stats::run_load(
            &gateway.address,
            "/api/mcp_servers",
            concurrency,
            requests_per_client,
        )?;
        println!(
            "GET /api/mcp_servers c={concurrency:>2}: {:>8.0} req/s  p50 {:>7.3} ms  p99 {:>7.3} ms  ({} requests)",
            result.requests_per_second,
            stats::millis(result.p50),
            stats::millis(result.p99),
            result.count
        );
    }
    let loaded_rss = rss_kib(gateway.child.id())?;
    println!("RSS after load: {:.1} MiB", loaded_rss as f64 / 1024.0);
    Ok(())
}

fn load() -> anyhow::Result<()> {
    let seconds: u64 = match std::env::args().nth(2) {
        Some(text) => text.parse().context("SECONDS must be a whole number")?,
        None => 20,
    };
    let clients: usize = match std::env::args().nth(3) {
        Some(text) => text.parse().context("CLIENTS must be a whole number")?,
        None => 16,
    };
    let era = match std::env::args().nth(4).as_deref() {
        None | Some("session") => mcp::Era::Session,
        Some("stateless") => mcp::Era::Stateless,
        Some(other) => bail!("unknown era `{other}`: session or stateless"),
    };
    let work = tempfile::tempdir()?;
    let gateway = start_gateway_with_fixture(work.path())?;
    let url = format!("http://{}/mcp", gateway.address);
    // One call first, so that the upstream is running before the profiler attaches.
    mcp::McpClient::connect_era(&url, era)?.request("tools/call", ECHO_PARAMS)?;
    println!("gateway pid {}", gateway.child.id());
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let workers: Vec<_> = (0..clients.max(1))
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || -> anyhow::Result<u64> {
                let mut client = mcp::McpClient::connect_era(&url, era)?;
                let mut calls = 0;
                while Instant::now() < deadline {
                    client.request("tools/call", ECHO_PARAMS)?;
                    calls += 1;
                }
                Ok(calls)
            })
        })
        .collect();
    let mut calls = 0;
    for worker in workers {
        calls += worker
            .join()
            .map_err(|_| anyhow::anyhow!("a load worker panicked"))??;
    }
    println!(
        "{calls} calls in {seconds} s: {:.0} calls/s",
        calls as f64 / seconds as f64
    );
    Ok(())
}

const ECHO_PARAMS: &str = r#"{"name":"fx__echo","arguments":{"text":"hello"}}"#;

/// Starts the fixture server in HTTP mode and returns it with its MCP URL.
fn start_fixture_http(fixture: &Path) -> anyhow::Result<(Child, String)> {
    let mut command = Command::new(fixture);
    command.args(["--http", "0"]);
    start_listening(command, "the fixture server", "fixture listening on ")
}

/// Starts `command` (`what`, for errors) and waits for the stderr line that starts with
/// `prefix` and goes on with the URL it listens on; the rest of its stderr is read and dropped.
fn start_listening(
    mut command: Command,
    what: &str,
    prefix: &str,
) -> anyhow::Result<(Child, String)> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start {what}"))?;
    let stderr = child.stderr.take().context("no stderr")?;
    let mut lines = BufReader::new(stderr).lines();
    let url = loop {
        let line = match lines.next() {
            Some(Ok(line)) => line,
            Some(Err(error)) => {
                let _ = child.kill();
                return Err(error).with_context(|| format!("cannot read the stderr of {what}"));
            }
            None => {
                let _ = child.kill();
                bail!("{what} exited before listening");
            }
        };
        if let Some(url) = line.strip_prefix(prefix) {
            break url.trim().to_owned();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    Ok((child, url))
}

struct CallFigures {
    p50: Duration,
    p99: Duration,
    calls_per_second_c16: f64,
}

/// p50 and p99 of 2,000 calls of `tool` back to back on one client, then calls/s of 16
/// clients making 1,000 calls each, all in `era`.
fn measure_calls(url: &str, tool: &str, era: mcp::Era) -> anyhow::Result<CallFigures> {
    let params = format!(r#"{{"name":"{tool}","arguments":{{"text":"hello"}}}}"#);
    let mut client = mcp::McpClient::connect_era(url, era)?;
    for _ in 0..200 {
        client.request("tools/call", &params)?;
    }
    let mut latencies = Vec::with_capacity(2000);
    for _ in 0..2000 {
        let sent = Instant::now();
        let answer = client.request("tools/call", &params)?;
        latencies.push(sent.elapsed());
        if !answer.contains("hello") {
            bail!("unexpected answer: {answer}");
        }
    }
    let p50 = stats::percentile(&mut latencies, 0.5);
    let p99 = stats::percentile(&mut latencies, 0.99);

    let per_client = 1000;
    let started = Instant::now();
    let workers: Vec<_> = (0..16)
        .map(|_| {
            let url = url.to_owned();
            let params = params.clone();
            std::thread::spawn(move || -> anyhow::Result<()> {
                let mut client = mcp::McpClient::connect_era(&url, era)?;
                for _ in 0..per_client {
                    client.request("tools/call", &params)?;
                }
                Ok(())
            })
        })
        .collect();
    for worker in workers {
        worker
            .join()
            .map_err(|_| anyhow::anyhow!("a load worker panicked"))??;
    }
    let calls_per_second_c16 = (16 * per_client) as f64 / started.elapsed().as_secs_f64();
    Ok(CallFigures {
        p50,
        p99,
        calls_per_second_c16,
    })
}

/// Rounds of [`data_plane_rounds`]: alternating the two paths, so that machine noise hits both
/// alike.
const DATA_PLANE_ROUNDS: usize = 5;

/// The medians over the rounds of one era's data-plane figures.
struct DataPlaneFigures {
    added_p50: Duration,
    gateway_p50: Duration,
    gateway_p99: Duration,
    /// Calls/s at c=16 through the gateway over calls/s directly, each ratio taken within its
    /// round.
    throughput_ratio: f64,
}

/// [`DATA_PLANE_ROUNDS`] rounds of [`measure_calls`] directly and through the gateway in `era`
/// (`fx__echo` through the gateway, `echo` directly), printing each round when `verbose`.
fn data_plane_rounds(
    direct_url: &str,
    gateway_url: &str,
    era: mcp::Era,
    verbose: bool,
) -> anyhow::Result<DataPlaneFigures> {
    let mut added = Vec::new();
    let mut p50s = Vec::new();
    let mut p99s = Vec::new();
    let mut ratios = Vec::new();
    for round in 1..=DATA_PLANE_ROUNDS {
        let direct_figures = measure_calls(direct_url, "echo", era)?;
        let gateway_figures = measure_calls(gateway_url, "fx__echo", era)?;
        let added_p50 = gateway_figures.p50.saturating_sub(direct_figures.p50);
        let ratio = gateway_figures.calls_per_second_c16 / direct_figures.calls_per_second_c16;
        if verbose {
            println!(
                "round {round}: direct c=1 p50 {:.3} ms p99 {:.3} ms, c=16 {:.0}/s | gateway c=1 p50 {:.3} ms p99 {:.3} ms, c=16 {:.0}/s | added p50 {:.3} ms, ratio {:.0}%",
                stats::millis(direct_figures.p50),
                stats::millis(direct_figures.p99),
                direct_figures.calls_per_second_c16,
                stats::millis(gateway_figures.p50),
                stats::millis(gateway_figures.p99),
                gateway_figures.calls_per_second_c16,
                stats::millis(added_p50),
                100.0 * ratio
            );
        }
        added.push(added_p50);
        p50s.push(gateway_figures.p50);
        p99s.push(gateway_figures.p99);
        ratios.push(ratio);
    }
    Ok(DataPlaneFigures {
        added_p50: stats::median(&mut added),
        gateway_p50: stats::median(&mut p50s),
        gateway_p99: stats::median(&mut p99s),
        throughput_ratio: cpu::median(&mut ratios),
    })
}

/// An OTLP/HTTP endpoint that answers every export `200` with an empty body at once, for the
/// traced data-plane variant: what is measured is the gateway's side of tracing, not a
/// collector's. Answers its address.
fn start_otlp_sink() -> anyhow::Result<std::net::SocketAddr> {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let address = listener.local_addr()?;
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let Ok(writer) = stream.try_clone() else {
                    return;
                };
                let mut writer = writer;
                let mut reader = BufReader::new(stream);
                loop {
                    let mut length = 0usize;
                    let mut line = String::new();
                    // The head, up to the empty line; then the body, by its length.
                    loop {
                        line.clear();
                        match reader.read_line(&mut line) {
                            Ok(0) | Err(_) => return,
                            Ok(_) => {}
                        }
                        let trimmed = line.trim_end();
                        if trimmed.is_empty() {
                            break;
                        }
                        if let Some((name, value)) = trimmed.split_once(':')
                            && name.eq_ignore_ascii_case("content-length")
                        {
                            length = value.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let answer = "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\n\
                                  content-length: 0\r\n\r\n";
                    if writer.write_all(answer.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    Ok(address)
}

fn data_plane() -> anyhow::Result<()> {
    const LISTED_SERVERS: usize = 100;
    let gateway_binary = sibling_binary("mcpgw")?;
    let fixture = sibling_binary("mcpgw-fixture-server")?;
    let work = tempfile::tempdir()?;
    let (mut direct, direct_url) = start_fixture_http(&fixture)?;

    let config = work.path().join("gateway.yaml");
    let variant = std::env::var("MCPGW_BENCH_DATA_PLANE").unwrap_or_default();
    let (governance, path) = match variant.as_str() {
        "" => (String::new(), "/mcp"),
        "pinned" => ("tool_pinning: enforce\n".to_owned(), "/mcp"),
        "endpoint" => (
            "endpoints:\n  bench:\n    tools:\n      - {server: fx, tool: echo}\n".to_owned(),
            "/mcp/v/bench",
        ),
        "traced" => (
            format!(
                "telemetry:\n  traces:\n    enabled: true\n    endpoint: \"http://{}\"\n    \
                 sampler: parentbased_traceidratio\n    sampler_arg: 0.01\n",
                start_otlp_sink()?
            ),
            "/mcp",
        ),
        other => anyhow::bail!(
            "MCPGW_BENCH_DATA_PLANE={other}: use `pinned`, `endpoint`, `traced`, or leave it unset"
        ),
    };
    let mut yaml = format!(
        "tool_timeout_s: 60\n{governance}mcp_servers:\n  fx:\n    mode: subprocess\n    command: [\"{}\"]\n",
        fixture.display()
    );
    for index in 0..LISTED_SERVERS {
        yaml.push_str(&format!(
            "  listed-{index:03}:\n    mode: subprocess\n    command: [\"{}\"]\n    tools:\n",
            fixture.display()
        ));
        for tool in ["echo", "add", "fail", "sleep", "stderr"] {
            yaml.push_str(&format!(
                "      - {{name: {tool}, description: the fixture's {tool} tool, inputSchema: {{type: object}}}}\n"
            ));
        }
    }
    std::fs::write(&config, yaml)?;
    let gateway = start_gateway(&gateway_binary, &config, &work.path().join("data"))?;
    let gateway_url = format!("http://{}{path}", gateway.address);

    println!(
        "# data plane: tools/call `echo` through the gateway vs directly to the same upstream{}",
        if variant.is_empty() {
            String::new()
        } else {
            format!(" ({variant})")
        }
    );
    println!(
        "(direct: the fixture server over Streamable HTTP; gateway: /mcp -> the fixture over stdio)"
    );
    for era in mcp::Era::BOTH {
        println!("## {}", era.label());
        let figures = data_plane_rounds(&direct_url, &gateway_url, era, true)?;
        println!(
            "median over {} rounds: added p50 latency {:.3} ms (gateway p50 {:.3} ms, p99 {:.3} ms); throughput at c=16 {:.0}% of direct",
            DATA_PLANE_ROUNDS,
            stats::millis(figures.added_p50),
            stats::millis(figures.gateway_p50),
            stats::millis(figures.gateway_p99),
            100.0 * figures.throughput_ratio
        );
    }
    let _ = direct.kill();
    let _ = direct.wait();

    let mut client = mcp::McpClient::connect(&gateway_url)?;
    let listed = client.request("tools/list", "{}")?;
    let count = listed.matches(r#""inputSchema""#).count();
    let mut latencies = Vec::new();
    for _ in 0..1000 {
        let sent = Instant::now();
        client.request("tools/list", "{}")?;
        latencies.push(sent.elapsed());
    }
    println!(
        "tools/list with {} servers registered ({count} tools): p50 {:.3} ms  p99 {:.3} ms",
        LISTED_SERVERS + 1,
        stats::millis(stats::percentile(&mut latencies, 0.5)),
        stats::millis(stats::percentile(&mut latencies, 0.99))
    );
    Ok(())
}
