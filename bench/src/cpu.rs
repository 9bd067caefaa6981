//! `cpu [python]`: the gateway's own CPU time per tool call, by thread, at concurrency 1 and 16,
//! in both protocol eras.
//!
//! One gateway runs one upstream over stdio (`fx`, rate limits off): the Rust fixture server,
//! which costs almost nothing per call, or with `python` the official Python SDK's server
//! (`tests/python/sdk_server.py` in the test environment's Python). Each phase drives
//! `tools/call fx__echo` from this harness's minimal client, one client per thread (a session
//! each in the session era; independent requests in the stateless era), and reads the CPU time
//! of every gateway thread from `/proc/PID/task/*/schedstat` (nanoseconds on a CPU, more
//! precise than the tick counts of `/proc/PID/stat`) just before and just after.
//! The gateway's CPU per call is the difference over the calls made; the harness prints it in
//! total and by kind of thread (HTTP workers, the core runtime, the event-log writer, others),
//! for each of five rounds and as medians, with the times per call the gateway's threads were
//! put on a CPU (the third field of `schedstat`: every wake-up counts once). CPU per call is
//! steadier on a noisy machine than latency, because it does not count the time a thread waits
//! for a CPU.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::bare::Bare;
use crate::mcp::{Era, McpClient};
use crate::{ECHO_PARAMS, Upstream, start_gateway_with};

const ROUNDS: usize = 5;

/// The phases: (clients, calls each).
pub const PHASES: [(usize, u64); 2] = [(1, 5_000), (16, 1_250)];

/// The threads of the gateway by what they do, from their names.
fn kind_of_thread(name: &str) -> &'static str {
    if name.starts_with("actix-rt") || name.starts_with("actix-server") {
        "http"
    } else if name.starts_with("mcpgw-core") {
        "core"
    } else if name.starts_with("mcpgw-event-log") {
        "event-log"
    } else {
        "other"
    }
}

/// What the kernel counted of one thread so far (`/proc/PID/task/TID/schedstat`).
#[derive(Clone, Copy, Default)]
struct ThreadTimes {
    /// Nanoseconds on a CPU.
    nanos: u64,
    /// Times the thread was put on a CPU: each wake-up counts once.
    runs: u64,
}

/// [`ThreadTimes`] of each live thread of `pid`, with its name.
fn thread_cpu(pid: u32) -> anyhow::Result<BTreeMap<u32, (String, ThreadTimes)>> {
    let mut threads = BTreeMap::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let path = entry?.path();
        let Some(tid) = path
            .file_name()
            .and_then(|name| name.to_str())
            .and_then(|name| name.parse::<u32>().ok())
        else {
            continue;
        };
        // A thread may end between listing and reading: it no longer counts.
        let (Ok(name), Ok(schedstat)) = (
            std::fs::read_to_string(path.join("comm")),
            std::fs::read_to_string(path.join("schedstat")),
        ) else {
            continue;
        };
        // Time on a CPU, time waiting for one, times run.
        let fields: Vec<u64> = schedstat
            .split_whitespace()
            .map(|field| field.parse::<u64>())
            .collect::<Result<_, _>>()
            .context("schedstat holds a field that is not a number")?;
        let (Some(&nanos), Some(&runs)) = (fields.first(), fields.get(2)) else {
            anyhow::bail!("schedstat has fewer than three fields: {schedstat}");
        };
        threads.insert(tid, (name.trim().to_owned(), ThreadTimes { nanos, runs }));
    }
    Ok(threads)
}

/// Microseconds of CPU per call by kind of thread, and the `total`, between two readings; and
/// the wake-ups per call of all the gateway's threads.
fn per_call(
    before: &BTreeMap<u32, (String, ThreadTimes)>,
    after: &BTreeMap<u32, (String, ThreadTimes)>,
    calls: u64,
) -> BTreeMap<&'static str, f64> {
    let calls = calls.max(1) as f64;
    let mut kinds: BTreeMap<&'static str, f64> = BTreeMap::new();
    let mut runs = 0.0;
    for (tid, (name, times)) in after {
        let earlier = before.get(tid).map(|(_, times)| *times).unwrap_or_default();
        let spent = times.nanos.saturating_sub(earlier.nanos) as f64 / 1_000.0 / calls;
        *kinds.entry(kind_of_thread(name)).or_default() += spent;
        runs += times.runs.saturating_sub(earlier.runs) as f64 / calls;
    }
    let total = kinds.values().sum();
    kinds.insert("total", total);
    kinds.insert("wake-ups", runs);
    kinds
}

/// `clients` threads, each with its own client in `era`, making `calls_each` calls.
pub fn drive(
    url: &str,
    era: Era,
    clients: usize,
    calls_each: u64,
) -> anyhow::Result<(u64, Duration)> {
    let sessions = (0..clients)
        .map(|_| McpClient::connect_era(url, era))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let started = Instant::now();
    let workers: Vec<_> = sessions
        .into_iter()
        .map(|mut client| {
            std::thread::spawn(move || -> anyhow::Result<u64> {
                for _ in 0..calls_each {
                    client.request("tools/call", ECHO_PARAMS)?;
                }
                Ok(calls_each)
            })
        })
        .collect();
    let mut calls = 0;
    for worker in workers {
        calls += worker
            .join()
            .map_err(|_| anyhow::anyhow!("a client thread panicked"))??;
    }
    Ok((calls, started.elapsed()))
}

/// One round: the gateway's CPU per call by kind of thread, and the calls/s.
pub fn measure_round(
    pid: u32,
    url: &str,
    era: Era,
    (clients, calls_each): (usize, u64),
) -> anyhow::Result<(BTreeMap<&'static str, f64>, f64)> {
    let before = thread_cpu(pid)?;
    let (calls, took) = drive(url, era, clients, calls_each)?;
    let after = thread_cpu(pid)?;
    Ok((
        per_call(&before, &after, calls),
        calls as f64 / took.as_secs_f64(),
    ))
}

pub fn run() -> anyhow::Result<()> {
    let upstream = match std::env::args().nth(2).as_deref() {
        None | Some("rust") => Upstream::RustFixture,
        Some("python") => Upstream::PythonSdk,
        Some(other) => anyhow::bail!("unknown upstream `{other}`; the upstreams are: rust, python"),
    };
    let work = tempfile::tempdir()?;
    let gateway = start_gateway_with(work.path(), upstream)?;
    let pid = gateway.child.id();
    let url = format!("http://{}/mcp", gateway.address);
    println!("# cpu: the gateway's CPU time per tools/call, from /proc/{pid}/task/*/schedstat");
    println!(
        "(upstream: {} over stdio, rate limits off; {ROUNDS} rounds per phase)",
        upstream.label()
    );
    for ((bare, clients), micros) in bare_floor(ROUNDS)? {
        println!(
            "the floor at c={clients}: {} spends {micros:.1} µs per request",
            bare.label()
        );
    }
    // The upstream starts with the first call; the warm-up also settles the sessions' readers.
    drive(&url, Era::Session, 4, 200)?;
    drive(&url, Era::Stateless, 4, 200)?;

    for era in Era::BOTH {
        println!("## {}", era.label());
        for phase in PHASES {
            let clients = phase.0;
            let mut rounds: Vec<BTreeMap<&'static str, f64>> = Vec::new();
            let mut rates = Vec::new();
            for round in 1..=ROUNDS {
                let (costs, rate) = measure_round(pid, &url, era, phase)?;
                println!(
                    "c={clients} round {round}: {rate:.0} calls/s; µs per call: {}",
                    describe(&costs)
                );
                rates.push(rate);
                rounds.push(costs);
            }
            let mut medians = BTreeMap::new();
            for kind in KINDS {
                let mut values: Vec<f64> = rounds
                    .iter()
                    .map(|costs| costs.get(kind).copied().unwrap_or(0.0))
                    .collect();
                medians.insert(kind, median(&mut values));
            }
            println!(
                "c={clients} median: {:.0} calls/s; µs per call: {}",
                median(&mut rates),
                describe(&medians)
            );
        }
    }
    Ok(())
}

/// The CPU per request of each shape of [`crate::bare::Bare`] at each concurrency of [`PHASES`],
/// medians of `rounds` rounds: the floor of this machine, which the gateway's figures are read
/// against.
pub fn bare_floor(rounds: usize) -> anyhow::Result<BTreeMap<(Bare, usize), f64>> {
    let mut figures = BTreeMap::new();
    for bare in Bare::ALL {
        let (mut child, url) = crate::bare::start(bare)?;
        let measured = (|| {
            drive(&url, Era::Stateless, 4, 200)?;
            for phase in PHASES {
                let mut totals = Vec::with_capacity(rounds);
                for _ in 0..rounds {
                    let (costs, _) = measure_round(child.id(), &url, Era::Stateless, phase)?;
                    totals.push(costs.get("total").copied().unwrap_or(0.0));
                }
                figures.insert((bare, phase.0), median(&mut totals));
            }
            anyhow::Ok(())
        })();
        let _ = child.kill();
        let _ = child.wait();
        measured?;
    }
    Ok(figures)
}

/// The figures [`per_call`] gives, in the order they are printed.
const KINDS: [&str; 6] = ["total", "http", "core", "event-log", "other", "wake-ups"];

fn describe(costs: &BTreeMap<&'static str, f64>) -> String {
    KINDS
        .iter()
        .map(|kind| {
            let value = costs.get(kind).copied().unwrap_or(0.0);
            if *kind == "wake-ups" {
                format!("; {value:.1} thread wake-ups per call")
            } else {
                format!(
                    "{}{kind} {value:.1}",
                    if *kind == "total" { "" } else { ", " }
                )
            }
        })
        .collect()
}

/// The middle value (the mean of the two middle ones for an even count); 0 for none.
pub fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    if values.len() % 2 == 1 {
        values[middle]
    } else {
        (values[middle - 1] + values[middle]) / 2.0
    }
}
