//! `floor`: every figure of the gateway's cost per call, memory and start-up in one run, next to
//! its target; and `cpu-check [BASELINE]`, the regression check CI runs on the gateway's CPU
//! per call.
//!
//! `floor` prints, in this order:
//! - the data plane of both protocol eras (as `data-plane` measures it): the p50 latency the
//!   gateway adds at concurrency 1 over calling the fixture server directly, the gateway's own
//!   p50 and p99 at concurrency 1, and its calls/s at concurrency 16 as a share of direct;
//! - the gateway's CPU per call (as `cpu` measures it) at concurrency 1 and 16, in both eras,
//!   behind the Rust fixture server and behind the official Python SDK's server (the latter
//!   needs the test environment's Python; without it those lines say why they are missing);
//! - the floor of this machine: the CPU per request of a bare HTTP responder and of a bare relay
//!   over a pipe, in blocking I/O and on actix-web, at concurrency 1 and 16 (see `bare.rs`);
//! - the RSS of a gateway after start with no server, with one server running, and with 1,000
//!   registered; and the time from exec to `/health/ready` with 1,000 registered.
//!
//! `cpu-check` is CI's regression check on the gateway's cost per call. It runs a release build
//! of the gateway under valgrind's callgrind, behind the Rust fixture server, and counts the
//! instructions the gateway runs (all its threads) per `tools/call` in both eras at concurrency
//! 1 and 16; it fails when one of them is more than [`ALLOWED_GROWTH`] over the figure in
//! BASELINE (default: `bench/cpu-baseline.txt` of the source tree). Instructions, not CPU time:
//! on these virtual machines the CPU time of the same build moves by a third from one run to
//! the next with what the neighbours do (the host's steal and cache pressure count as the
//! guest's CPU time), while the count of instructions is the same within a few percent.
//! `MCPGW_BENCH_BINARIES` names the folder of the release binaries when this harness is not
//! beside them (CI drives them with the harness's debug build). `MCPGW_BENCH_CALLGRIND_DIR`
//! keeps callgrind's dumps in that folder, to see where the instructions go.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};

use crate::cpu::{self, PHASES};
use crate::mcp::{Era, McpClient};
use crate::{
    DATA_PLANE_ROUNDS, ECHO_PARAMS, Upstream, data_plane_rounds, exec_to_ready,
    registered_servers_config, rss_kib, sibling_binary, start_fixture_http, start_gateway,
    start_gateway_with, stats,
};

/// How much a CPU figure may grow over the baseline before `cpu-check` fails: 20%.
pub const ALLOWED_GROWTH: f64 = 1.2;

const CPU_ROUNDS: usize = 5;

/// One line of the table: what, the figure as text, the target as text.
struct Row {
    figure: String,
    measured: String,
    target: &'static str,
}

fn row(figure: impl Into<String>, measured: impl Into<String>, target: &'static str) -> Row {
    Row {
        figure: figure.into(),
        measured: measured.into(),
        target,
    }
}

pub fn run() -> anyhow::Result<()> {
    let gateway_binary = sibling_binary("mcpgw")?;
    let fixture = sibling_binary("mcpgw-fixture-server")?;
    let mut rows = Vec::new();

    println!("# floor: the gateway's cost per call, memory and start-up, against the targets");
    println!(
        "## data plane (fixture server; {DATA_PLANE_ROUNDS} rounds alternating with direct calls)"
    );
    {
        let work = tempfile::tempdir()?;
        let (mut direct, direct_url) = start_fixture_http(&fixture)?;
        let gateway = start_gateway_with(work.path(), Upstream::RustFixture)?;
        let gateway_url = format!("http://{}/mcp", gateway.address);
        for era in Era::BOTH {
            let figures = data_plane_rounds(&direct_url, &gateway_url, era, false)?;
            println!(
                "{}: added p50 {:.3} ms; gateway p50 {:.3} ms, p99 {:.3} ms; c=16 {:.0}% of direct",
                era.short(),
                stats::millis(figures.added_p50),
                stats::millis(figures.gateway_p50),
                stats::millis(figures.gateway_p99),
                100.0 * figures.throughput_ratio
            );
            rows.push(row(
                format!("added p50 at c=1 over direct, {}", era.short()),
                format!("{:.3} ms", stats::millis(figures.added_p50)),
                "under 0.05 ms",
            ));
            rows.push(row(
                format!("p99 at c=1 through the gateway, {}", era.short()),
                format!("{:.3} ms", stats::millis(figures.gateway_p99)),
                "under 0.5 ms",
            ));
            rows.push(row(
                format!("c=16 throughput, share of direct, {}", era.short()),
                format!("{:.0}%", 100.0 * figures.throughput_ratio),
                "at least 90%",
            ));
        }
        let _ = direct.kill();
        let _ = direct.wait();
    }

    println!("## the floor of this machine ({CPU_ROUNDS} rounds, medians)");
    for ((bare, clients), micros) in cpu::bare_floor(CPU_ROUNDS)? {
        println!("{} c={clients}: {micros:.1} µs per request", bare.label());
        rows.push(row(
            format!("CPU per request of {} at c={clients}", bare.label()),
            format!("{micros:.1} µs"),
            "none: the floor",
        ));
    }

    for upstream in [Upstream::RustFixture, Upstream::PythonSdk] {
        println!(
            "## CPU per call behind {} ({CPU_ROUNDS} rounds, medians)",
            upstream.label()
        );
        let figures = match cpu_figures(upstream) {
            Ok(figures) => figures,
            Err(error) => {
                println!("not measured: {error:#}");
                continue;
            }
        };
        for ((era, clients), rounds) in &figures {
            let mut values = rounds.clone();
            let median = cpu::median(&mut values);
            println!(
                "{} c={clients}: median {median:.1} µs, lowest {:.1} µs",
                era.short(),
                lowest(rounds)
            );
            let target = match (*era, *clients) {
                (_, 1) => "under 60 µs",
                (Era::Session, _) => "under 30 µs",
                (Era::Stateless, _) => "the session era's",
            };
            let upstream_name = match upstream {
                Upstream::RustFixture => "Rust",
                Upstream::PythonSdk => "Python",
            };
            rows.push(row(
                format!(
                    "gateway CPU per call at c={clients}, {}, {upstream_name} upstream",
                    era.short()
                ),
                format!("{median:.1} µs"),
                target,
            ));
        }
    }

    println!("## memory and start-up");
    let work = tempfile::tempdir()?;
    let empty = work.path().join("empty.yaml");
    std::fs::write(&empty, "mcp_servers: {}\n")?;
    let idle = start_gateway(&gateway_binary, &empty, &work.path().join("data-empty"))?;
    let idle_rss = settled_rss(idle.child.id())?;
    drop(idle);
    let one = tempfile::tempdir()?;
    let running = start_gateway_with(one.path(), Upstream::RustFixture)?;
    McpClient::connect(&format!("http://{}/mcp", running.address))?
        .request("tools/call", ECHO_PARAMS)?;
    let running_rss = settled_rss(running.child.id())?;
    drop(running);
    let registered = work.path().join("registered.yaml");
    std::fs::write(&registered, registered_servers_config(&fixture, 1000))?;
    let many = start_gateway(&gateway_binary, &registered, &work.path().join("data-many"))?;
    let many_rss = settled_rss(many.child.id())?;
    drop(many);
    let mut ready = exec_to_ready(&gateway_binary, &registered, work.path(), 7)?;
    let ready = stats::median(&mut ready);
    println!(
        "RSS after start: no server {} MiB, one server running {} MiB, 1,000 registered {} MiB; exec -> ready with 1,000 registered {:.1} ms (median of 7)",
        mib(idle_rss),
        mib(running_rss),
        mib(many_rss),
        stats::millis(ready)
    );
    rows.push(row(
        "RSS after start, no server",
        format!("{} MiB", mib(idle_rss)),
        "under 15 MiB",
    ));
    rows.push(row(
        "RSS after start, one server running",
        format!("{} MiB", mib(running_rss)),
        "under 15 MiB",
    ));
    rows.push(row(
        "RSS after start, 1,000 registered",
        format!("{} MiB", mib(many_rss)),
        "under 20 MiB",
    ));
    rows.push(row(
        "exec to /health/ready = 200, 1,000 registered",
        format!("{:.1} ms", stats::millis(ready)),
        "under 25 ms",
    ));

    println!();
    println!("| figure | measured | target |");
    println!("|---|---|---|");
    for row in rows {
        println!("| {} | {} | {} |", row.figure, row.measured, row.target);
    }
    Ok(())
}

/// The RSS of a gateway once its start-up settled (half a second after it listens).
fn settled_rss(pid: u32) -> anyhow::Result<u64> {
    std::thread::sleep(Duration::from_millis(500));
    rss_kib(pid)
}

fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

fn lowest(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::INFINITY, f64::min)
}

/// The gateway's total CPU µs per call of each round, by era and concurrency, behind
/// `upstream`.
fn cpu_figures(upstream: Upstream) -> anyhow::Result<BTreeMap<(Era, usize), Vec<f64>>> {
    let work = tempfile::tempdir()?;
    let gateway = start_gateway_with(work.path(), upstream)?;
    let pid = gateway.child.id();
    let url = format!("http://{}/mcp", gateway.address);
    // The upstream starts with the first call; the warm-up also settles the clients' paths.
    for era in Era::BOTH {
        cpu::drive(&url, era, 4, 200)?;
    }
    let mut figures = BTreeMap::new();
    for era in Era::BOTH {
        for phase in PHASES {
            let mut rounds = Vec::with_capacity(CPU_ROUNDS);
            for _ in 0..CPU_ROUNDS {
                let (costs, _) = cpu::measure_round(pid, &url, era, phase)?;
                rounds.push(costs.get("total").copied().unwrap_or(0.0));
            }
            figures.insert((era, phase.0), rounds);
        }
    }
    Ok(figures)
}

/// The committed figures: `era c=N: µs` lines (`session c=1: 120.5`); `#` starts a comment.
fn read_baseline(path: &Path) -> anyhow::Result<BTreeMap<String, f64>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the baseline {}", path.display()))?;
    let mut figures = BTreeMap::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        let (key, value) = line.rsplit_once(':').with_context(|| {
            format!(
                "{}:{}: expected `era c=N: µs`, got `{line}`",
                path.display(),
                number + 1
            )
        })?;
        let value = value.trim();
        let value: f64 = value.parse().with_context(|| {
            format!(
                "{}:{}: `{value}` is not a number",
                path.display(),
                number + 1
            )
        })?;
        figures.insert(key.trim().to_owned(), value);
    }
    Ok(figures)
}

fn key(era: Era, clients: usize) -> String {
    format!("{} c={clients}", era.short())
}

/// The calls of each phase of `cpu-check`: (clients, calls each). Under callgrind the gateway
/// runs some 50 times slower, and instruction counts need no more calls to settle.
const COUNTED_PHASES: [(usize, u64); 2] = [(1, 300), (16, 40)];

/// A gateway running under callgrind, the fixture server over stdio as its one server.
struct Counted {
    gateway: crate::Gateway,
    out_file: PathBuf,
    dumps: usize,
    _work: tempfile::TempDir,
}

impl Counted {
    fn start() -> anyhow::Result<Self> {
        let work = tempfile::tempdir()?;
        let config = crate::upstream_config(work.path(), Upstream::RustFixture)?;
        // With MCPGW_BENCH_CALLGRIND_DIR the dumps are kept there for `callgrind_annotate`:
        // callgrind.out.1 to .4 hold the phases in the order `cpu-check` prints them.
        let out_file = match std::env::var_os("MCPGW_BENCH_CALLGRIND_DIR") {
            Some(dir) => {
                let dir = PathBuf::from(dir);
                std::fs::create_dir_all(&dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
                dir.join("callgrind.out")
            }
            None => work.path().join("callgrind.out"),
        };
        let mut command = std::process::Command::new("valgrind");
        command
            .arg("--tool=callgrind")
            .arg(format!("--callgrind-out-file={}", out_file.display()))
            // Valgrind's own messages stay out of the gateway's stderr, which is read for the
            // address it listens on.
            .arg(format!(
                "--log-file={}",
                work.path().join("valgrind.log").display()
            ))
            .arg(sibling_binary("mcpgw")?);
        let gateway = crate::start_gateway_in(command, &config, &work.path().join("data"), &[])
            .context("cannot start the gateway under valgrind (scripts/install-test-deps.sh installs it)")?;
        Ok(Self {
            gateway,
            out_file,
            dumps: 0,
            _work: work,
        })
    }

    fn control(&self, action: &str) -> anyhow::Result<()> {
        let output = std::process::Command::new("callgrind_control")
            .arg(action)
            .arg(self.gateway.child.id().to_string())
            .output()
            .context("cannot run callgrind_control")?;
        if !output.status.success() {
            bail!(
                "callgrind_control {action} failed: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(())
    }

    /// The instructions the gateway ran (all its threads) since the counters were zeroed.
    fn instructions_since_zero(&mut self) -> anyhow::Result<u64> {
        self.control("-d")?;
        self.dumps += 1;
        let dump = PathBuf::from(format!("{}.{}", self.out_file.display(), self.dumps));
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(text) = std::fs::read_to_string(&dump)
                && let Some(total) = text
                    .lines()
                    .find_map(|line| line.strip_prefix("totals:"))
                    .or_else(|| text.lines().find_map(|line| line.strip_prefix("summary:")))
            {
                return total
                    .split_whitespace()
                    .next()
                    .context("an empty totals line")?
                    .parse()
                    .context("the totals line is not a count");
            }
            if std::time::Instant::now() > deadline {
                bail!("callgrind wrote no dump at {}", dump.display());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Thousands of instructions the gateway runs per call, by era and concurrency, counted by
/// callgrind over each phase of [`COUNTED_PHASES`].
fn instruction_figures() -> anyhow::Result<BTreeMap<(Era, usize), f64>> {
    let mut counted = Counted::start()?;
    let url = format!("http://{}/mcp", counted.gateway.address);
    for era in Era::BOTH {
        cpu::drive(&url, era, 4, 25)?;
    }
    let mut figures = BTreeMap::new();
    for era in Era::BOTH {
        for (clients, calls_each) in COUNTED_PHASES {
            counted.control("-z")?;
            let (calls, _) = cpu::drive(&url, era, clients, calls_each)?;
            let instructions = counted.instructions_since_zero()?;
            figures.insert(
                (era, clients),
                instructions as f64 / calls.max(1) as f64 / 1_000.0,
            );
        }
    }
    Ok(figures)
}

pub fn check() -> anyhow::Result<()> {
    let baseline_path = std::env::args().nth(2).map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("cpu-baseline.txt"),
        PathBuf::from,
    );
    let baseline = read_baseline(&baseline_path)?;
    println!(
        "# cpu-check: thousands of instructions the gateway runs per tools/call behind the Rust fixture server, counted by callgrind, against {} (+{:.0}% allowed)",
        baseline_path.display(),
        (ALLOWED_GROWTH - 1.0) * 100.0
    );
    let measured = instruction_figures()?;
    let mut failed = Vec::new();
    for ((era, clients), figure) in &measured {
        let name = key(*era, *clients);
        let Some(&committed) = baseline.get(&name) else {
            bail!("the baseline has no figure for `{name}`");
        };
        let over = *figure > committed * ALLOWED_GROWTH;
        println!(
            "{name}: {figure:.1}k instructions per call, baseline {committed:.1}k ({:+.1}%): {}",
            (figure / committed - 1.0) * 100.0,
            if over { "over the bound" } else { "ok" }
        );
        if over {
            failed.push(format!(
                "{name}: {figure:.1}k instructions per call against {committed:.1}k committed"
            ));
        }
    }
    if !failed.is_empty() {
        bail!(
            "the gateway's cost per call grew by more than {:.0}%: {}. If the growth is wanted, \
             measure with `mcpgw-bench cpu-check` and commit the new figures in {}",
            (ALLOWED_GROWTH - 1.0) * 100.0,
            failed.join("; "),
            baseline_path.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn baselines_read_with_comments_and_refuse_bad_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("baseline.txt");
        std::fs::write(
            &path,
            "# measured\nsession c=1: 120.5\n\nstateless c=16: 60 # note\n",
        )
        .unwrap();
        let figures = read_baseline(&path).unwrap();
        assert_eq!(figures.get("session c=1"), Some(&120.5));
        assert_eq!(figures.get("stateless c=16"), Some(&60.0));
        assert_eq!(figures.len(), 2);

        std::fs::write(&path, "session c=1 120\n").unwrap();
        let error = read_baseline(&path).unwrap_err().to_string();
        assert!(error.contains(":1: expected"), "{error}");
        std::fs::write(&path, "session c=1: fast\n").unwrap();
        let error = read_baseline(&path).unwrap_err().to_string();
        assert!(error.contains("`fast` is not a number"), "{error}");
    }

    #[test]
    fn the_lowest_round_counts() {
        assert_eq!(lowest(&[3.0, 1.5, 2.0]), 1.5);
    }
}
