//! The `groups` scenario: what a group of three members buys in throughput, and what routing
//! through a group costs in latency, both measured against a direct call to one server like
//! the members, through the same gateway in the same run.
//!
//! The gateway routes a member's tools only through its groups (members are neither listed nor
//! callable on their own), so the direct call goes to a server that is configured exactly like
//! the members but belongs to no group. One gateway serves:
//! - `pool` over `m1`..`m3`, and `solo` beside it: every one of them waits 5 ms per call and
//!   serves one call at a time (`--delay-ms 5 --serial`), so `solo` tops out near 200 calls/s
//!   and the group's throughput at concurrency 16 shows how well it spreads the calls;
//! - `fast` over `f1`..`f3`, and `fast-solo` beside it: plain servers without a delay, so that a
//!   call at concurrency 1 costs little more than the gateway's own work and the group's
//!   routing shows in the latency.
//!
//! Each member carries its id in the environment variable `BENCH_MEMBER`, so the fixture's `env`
//! tool called through a group says which member answered: the harness prints how a few dozen
//! calls spread before it measures.

use std::collections::BTreeMap;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::{http, mcp, sibling_binary, start_gateway, stats};

const ROUNDS: usize = 5;
/// Calls each of the 16 clients makes per throughput measurement.
const CALLS_PER_CLIENT_C16: usize = 40;
const CONCURRENCY: usize = 16;
/// Calls per latency measurement at concurrency 1, after a warm-up.
const LATENCY_CALLS: usize = 3000;
const LATENCY_WARM_UP_CALLS: usize = 200;
/// Calls through each group whose answering member is counted before the measurements.
const DISTRIBUTION_CALLS: usize = 30;
const MEMBER_DELAY_MS: u64 = 5;
/// How long the members may take to become callable (probing and lazy starts).
const READY_TIMEOUT: Duration = Duration::from_secs(60);

const SLOW_GROUP: &str = "pool";
const SLOW_MEMBERS: [&str; 3] = ["m1", "m2", "m3"];
/// Configured like a member of [`SLOW_GROUP`], in no group: the direct call.
const SLOW_SOLO: &str = "solo";
const FAST_GROUP: &str = "fast";
const FAST_MEMBERS: [&str; 3] = ["f1", "f2", "f3"];
/// Configured like a member of [`FAST_GROUP`], in no group: the direct call.
const FAST_SOLO: &str = "fast-solo";

pub fn run() -> anyhow::Result<()> {
    let gateway_binary = sibling_binary("mcpgw")?;
    let fixture = sibling_binary("mcpgw-fixture-server")?;
    let work = tempfile::tempdir()?;
    let config = work.path().join("gateway.yaml");
    std::fs::write(&config, config_yaml(&fixture.display().to_string()))?;
    let gateway = start_gateway(&gateway_binary, &config, &work.path().join("data"))?;
    let url = format!("http://{}/mcp", gateway.address);

    println!(
        "# groups: `{SLOW_GROUP}` = 3 members with --delay-ms {MEMBER_DELAY_MS} --serial \
         (round_robin) vs `{SLOW_SOLO}`, one such server in no group; `{FAST_GROUP}` = 3 \
         members without delay (round_robin) vs `{FAST_SOLO}`, one such server in no group"
    );
    let slow_group_tool = format!("{SLOW_GROUP}__echo");
    let slow_solo_tool = format!("{SLOW_SOLO}__echo");
    let fast_group_tool = format!("{FAST_GROUP}__echo");
    let fast_solo_tool = format!("{FAST_SOLO}__echo");

    let mut client = mcp::McpClient::connect(&url)?;
    for tool in [
        &slow_group_tool,
        &slow_solo_tool,
        &fast_group_tool,
        &fast_solo_tool,
    ] {
        wait_until_callable(&mut client, tool)?;
    }
    for (group, members) in [(SLOW_GROUP, SLOW_MEMBERS), (FAST_GROUP, FAST_MEMBERS)] {
        let spread = answering_members(&mut client, group, &members)?;
        let shown: Vec<String> = spread
            .iter()
            .map(|(member, calls)| format!("{member} {calls}"))
            .collect();
        println!(
            "{group}: {DISTRIBUTION_CALLS} calls answered by {}",
            shown.join(", ")
        );
    }
    drop(client);

    println!(
        "(throughput: {CONCURRENCY} clients x {CALLS_PER_CLIENT_C16} calls; latency: \
         {LATENCY_CALLS} calls at c=1 after {LATENCY_WARM_UP_CALLS} warm-up calls; \
         {ROUNDS} rounds alternating which side goes first)"
    );
    let mut ratios = Vec::new();
    let mut solo_rates = Vec::new();
    let mut group_rates = Vec::new();
    let mut added_p50_micros = Vec::new();
    let mut solo_p50s = Vec::new();
    let mut group_p50s = Vec::new();
    let mut solo_p99s = Vec::new();
    let mut group_p99s = Vec::new();
    for round in 1..=ROUNDS {
        // Alternating the order keeps a drift in machine load from favouring one side.
        let group_first = round % 2 == 0;
        let (solo_rate, group_rate) = if group_first {
            let group_rate = calls_per_second(&url, &slow_group_tool)?;
            (calls_per_second(&url, &slow_solo_tool)?, group_rate)
        } else {
            let solo_rate = calls_per_second(&url, &slow_solo_tool)?;
            (solo_rate, calls_per_second(&url, &slow_group_tool)?)
        };
        let (solo_latency, group_latency) = if group_first {
            let group_latency = latencies(&url, &fast_group_tool)?;
            (latencies(&url, &fast_solo_tool)?, group_latency)
        } else {
            let solo_latency = latencies(&url, &fast_solo_tool)?;
            (solo_latency, latencies(&url, &fast_group_tool)?)
        };
        let ratio = group_rate / solo_rate;
        let added_p50 = micros(group_latency.p50) - micros(solo_latency.p50);
        println!(
            "round {round}: c=16 {slow_solo_tool} {solo_rate:.0}/s, {slow_group_tool} \
             {group_rate:.0}/s, ratio {ratio:.2}x | c=1 {fast_solo_tool} p50 {:.1} µs p99 \
             {:.1} µs, {fast_group_tool} p50 {:.1} µs p99 {:.1} µs, added p50 {added_p50:+.1} µs",
            micros(solo_latency.p50),
            micros(solo_latency.p99),
            micros(group_latency.p50),
            micros(group_latency.p99),
        );
        ratios.push(ratio);
        solo_rates.push(solo_rate);
        group_rates.push(group_rate);
        added_p50_micros.push(added_p50);
        solo_p50s.push(solo_latency.p50);
        group_p50s.push(group_latency.p50);
        solo_p99s.push(solo_latency.p99);
        group_p99s.push(group_latency.p99);
    }
    println!(
        "median over {ROUNDS} rounds: c=16 {slow_solo_tool} {:.0}/s, {slow_group_tool} \
         {:.0}/s, ratio {:.2}x (target >= 2.5x)",
        median_f64(&mut solo_rates),
        median_f64(&mut group_rates),
        median_f64(&mut ratios)
    );
    println!(
        "median over {ROUNDS} rounds: c=1 {fast_solo_tool} p50 {:.1} µs p99 {:.1} µs, \
         {fast_group_tool} p50 {:.1} µs p99 {:.1} µs, added p50 {:+.1} µs (target < 50 µs)",
        micros(stats::median(&mut solo_p50s)),
        micros(stats::median(&mut solo_p99s)),
        micros(stats::median(&mut group_p50s)),
        micros(stats::median(&mut group_p99s)),
        median_f64(&mut added_p50_micros)
    );
    print_group_state(&gateway.address, SLOW_GROUP);
    print_group_state(&gateway.address, FAST_GROUP);
    Ok(())
}

/// The gateway's configuration: six members, two servers beside them, two groups, no rate limit (the figures are the
/// gateway's and the members', not a limiter's).
fn config_yaml(fixture: &str) -> String {
    let mut yaml = String::from("tool_timeout_s: 60\nrate_limit: {rps: 0}\nmcp_servers:\n");
    let delay = MEMBER_DELAY_MS.to_string();
    for member in SLOW_MEMBERS.into_iter().chain([SLOW_SOLO]) {
        yaml.push_str(&server_yaml(
            member,
            fixture,
            &["--delay-ms", &delay, "--serial"],
        ));
    }
    for member in FAST_MEMBERS.into_iter().chain([FAST_SOLO]) {
        yaml.push_str(&server_yaml(member, fixture, &[]));
    }
    yaml.push_str(&group_yaml(SLOW_GROUP, &SLOW_MEMBERS));
    yaml.push_str(&group_yaml(FAST_GROUP, &FAST_MEMBERS));
    yaml
}

fn server_yaml(id: &str, fixture: &str, args: &[&str]) -> String {
    let mut command = vec![format!("\"{fixture}\"")];
    command.extend(args.iter().map(|arg| format!("\"{arg}\"")));
    format!(
        "  {id}:\n    mode: subprocess\n    command: [{}]\n    env: {{BENCH_MEMBER: {id}}}\n",
        command.join(", ")
    )
}

fn group_yaml(id: &str, members: &[&str]) -> String {
    let members: Vec<String> = members
        .iter()
        .map(|member| format!("{{id: {member}, weight: 1}}"))
        .collect();
    format!(
        "  {id}:\n    mode: group\n    strategy: round_robin\n    min_healthy: 1\n    members: [{}]\n",
        members.join(", ")
    )
}

fn echo_params(tool: &str) -> String {
    format!(r#"{{"name":"{tool}","arguments":{{"text":"hello"}}}}"#)
}

/// An echo answer that is a success and carries the text sent.
fn check_echo(tool: &str, answer: &str) -> anyhow::Result<()> {
    if !answer.contains("hello") || answer.contains(r#""isError":true"#) {
        bail!("unexpected answer from {tool}: {answer}");
    }
    Ok(())
}

/// Calls `tool` until it answers (the gateway learns the members' tools in the background and
/// starts members lazily), for at most [`READY_TIMEOUT`].
fn wait_until_callable(client: &mut mcp::McpClient, tool: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + READY_TIMEOUT;
    let params = echo_params(tool);
    loop {
        let failure = match client.request("tools/call", &params) {
            Ok(answer) if check_echo(tool, &answer).is_ok() => return Ok(()),
            Ok(answer) => anyhow::anyhow!("answered {answer}"),
            Err(error) => error,
        };
        if Instant::now() > deadline {
            return Err(failure.context(format!(
                "{tool} did not answer within {} s",
                READY_TIMEOUT.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Which member answered each of [`DISTRIBUTION_CALLS`] calls through `group`, by the member's
/// `BENCH_MEMBER` read back by the fixture's `env` tool.
fn answering_members(
    client: &mut mcp::McpClient,
    group: &str,
    members: &[&str],
) -> anyhow::Result<BTreeMap<String, usize>> {
    let params = format!(r#"{{"name":"{group}__env","arguments":{{"name":"BENCH_MEMBER"}}}}"#);
    let mut spread: BTreeMap<String, usize> = members
        .iter()
        .map(|member| ((*member).to_owned(), 0))
        .collect();
    for _ in 0..DISTRIBUTION_CALLS {
        let answer = client.request("tools/call", &params)?;
        let member = members
            .iter()
            .find(|member| answer.contains(&format!("\"{member}\"")))
            .with_context(|| format!("no member of {group} named in the answer: {answer}"))?;
        *spread.entry((*member).to_owned()).or_default() += 1;
    }
    Ok(spread)
}

/// Calls/s of `tool` at concurrency 16, each client on its own session; the clock starts once
/// every client has connected.
fn calls_per_second(url: &str, tool: &str) -> anyhow::Result<f64> {
    let start_line = Arc::new(Barrier::new(CONCURRENCY + 1));
    let workers: Vec<_> = (0..CONCURRENCY)
        .map(|_| {
            let url = url.to_owned();
            let tool = tool.to_owned();
            let start_line = Arc::clone(&start_line);
            std::thread::spawn(move || -> anyhow::Result<()> {
                let connected = mcp::McpClient::connect(&url);
                // Wait at the line even after a failure, so the other threads are released.
                start_line.wait();
                let mut client = connected?;
                let params = echo_params(&tool);
                for _ in 0..CALLS_PER_CLIENT_C16 {
                    let answer = client.request("tools/call", &params)?;
                    check_echo(&tool, &answer)?;
                }
                Ok(())
            })
        })
        .collect();
    start_line.wait();
    let started = Instant::now();
    for worker in workers {
        worker
            .join()
            .map_err(|_| anyhow::anyhow!("a load worker panicked"))??;
    }
    Ok((CONCURRENCY * CALLS_PER_CLIENT_C16) as f64 / started.elapsed().as_secs_f64())
}

struct Latency {
    p50: Duration,
    p99: Duration,
}

/// p50 and p99 of `tool` at concurrency 1 over [`LATENCY_CALLS`] calls.
fn latencies(url: &str, tool: &str) -> anyhow::Result<Latency> {
    let params = echo_params(tool);
    let mut client = mcp::McpClient::connect(url)?;
    for _ in 0..LATENCY_WARM_UP_CALLS {
        client.request("tools/call", &params)?;
    }
    let mut samples = Vec::with_capacity(LATENCY_CALLS);
    for _ in 0..LATENCY_CALLS {
        let sent = Instant::now();
        let answer = client.request("tools/call", &params)?;
        samples.push(sent.elapsed());
        check_echo(tool, &answer)?;
    }
    Ok(Latency {
        p50: stats::percentile(&mut samples, 0.5),
        p99: stats::percentile(&mut samples, 0.99),
    })
}

/// The group's details as the REST API shows them after the run (members' state and rotation).
fn print_group_state(address: &str, group: &str) {
    let path = format!("/api/groups/{group}");
    match http::Client::connect(address).and_then(|mut client| client.get(&path)) {
        Ok((200, body)) => println!("GET {path}: {}", String::from_utf8_lossy(&body)),
        Ok((status, body)) => println!(
            "GET {path} answered {status}: {}",
            String::from_utf8_lossy(&body)
        ),
        Err(error) => println!("GET {path} failed: {error:#}"),
    }
}

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

fn median_f64(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
