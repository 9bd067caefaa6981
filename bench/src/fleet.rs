//! The `fleet` scenario: what the PostgreSQL store and the Redis rate limiter cost against the
//! embedded defaults, in one run, on one machine, with one gateway binary.
//!
//! A throwaway PostgreSQL server and a throwaway Redis server run on loopback
//! (`mcpgw_testkit::postgres` and `mcpgw_testkit::redis_server`), and four gateways side by
//! side, each with the fixture server `fx` over stdio as in `data-plane`:
//! - `SQLite`: the default, every store in SQLite files under its data directory;
//! - `PostgreSQL`: `store: {url}` on a database of its own on that server;
//! - `local`: SQLite, rate limiting on in the gateway's own token buckets;
//! - `Redis`: the same policy with `backend: redis`, the buckets in that Redis server.
//!
//! The policy of the last two is 1,000,000 requests per second with a burst of 1,000,000, so
//! that no call is ever refused and what differs is the check alone; the first two run with
//! rate limiting off. All four share one fleet secret (`MCP_CLUSTER_SECRET`), which signs
//! session ids, so that the pairs differ in their store or their limiter and nothing else.
//! Before the rounds, 100 servers are created over REST on the SQLite and PostgreSQL gateways
//! (subprocess fixture definitions that declare their tools, so that none is ever started, not
//! even to learn its tools).
//!
//! Each round measures, one side of a pair right after the other, the first side alternating
//! from round to round, so that machine noise and the order of the two hit both alike:
//! 1. REST reads at c=1: `GET /api/mcp_servers` (101 servers) and `GET /api/mcp_servers/{id}`
//!    (the 100 in turn), each [`READS`] requests after a warm-up of [`READ_WARM_UP`];
//! 2. REST writes at c=1: [`CREATES`] `POST /api/mcp_servers` of new fixture definitions, then
//!    a `DELETE` of each, so that every round reads the same 101 servers;
//! 3. tool calls `fx__echo` through `/mcp` in both protocol eras: p50/p99 of [`CALLS`] calls at
//!    c=1 after [`CALL_WARM_UP`], then calls/s of 16 clients making [`C16_CALLS_EACH`] calls
//!    each, with the gateway's CPU per call meanwhile (its threads' `schedstat`, as `cpu` reads
//!    it) and the CPU the store's server spent per call (PostgreSQL's processes; for SQLite,
//!    none);
//! 4. the same calls through the `local` and `Redis` gateways, with Redis's own CPU per call,
//!    the scripts and commands it served per call (`INFO commandstats` and `INFO stats`; the
//!    scripts also prove that the limiter uses it);
//! 5. Redis's own round trip: [`PINGS`] `PING`s on one connection, for reference.
//!
//! After the rounds, with nothing else running, it counts the rows PostgreSQL wrote and read
//! (its statistics of each table, `pg_stat_user_tables`, which it publishes within 11 s)
//! while [`CALLS`] tool calls in each era went through the PostgreSQL gateway, and while it
//! served one more round of REST writes: what each asks of the database.
//!
//! It prints each round, then the medians over the rounds as tables: each side's figure, and
//! the ratio (PostgreSQL over SQLite, Redis over local) or the added latency taken within each
//! round, next to its target. A REST write that answers otherwise than a create's 201 or a
//! delete's 200 is left out of the latencies, printed at the end, and makes the run fail once
//! every figure is printed; so does a Redis gateway whose limiter does not use Redis.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use mcpgw_testkit::postgres::TempPostgres;
use mcpgw_testkit::redis_server::TempRedis;

use crate::mcp::{Era, McpClient};
use crate::{Gateway, cpu, sibling_binary, start_gateway_with_env, stats};

/// Rounds when the command line names none; fewer than [`MIN_ROUNDS`] are refused, since a
/// median of fewer says little on these machines.
const DEFAULT_ROUNDS: usize = 5;
const MIN_ROUNDS: usize = 3;
/// Servers created over REST before the rounds, which every round reads.
const LISTED: usize = 100;
/// Requests of each REST read per round and side, after the warm-up.
const READS: usize = 1000;
const READ_WARM_UP: usize = 100;
/// Servers created (and deleted) over REST per round and side.
const CREATES: usize = 300;
/// Tool calls at c=1 per round, side and era, after the warm-up.
const CALLS: usize = 2000;
const CALL_WARM_UP: usize = 200;
/// The c=16 phase: 16 clients making this many calls each.
const C16_CLIENTS: usize = 16;
const C16_CALLS_EACH: u64 = 1000;
/// `PING`s per round on one connection to Redis.
const PINGS: usize = 2000;
/// The rate limit of the `local` and `Redis` gateways, requests per second and burst alike:
/// high enough that no call of the scenario is refused.
const NEVER_REFUSING: &str = "1000000";
/// The fleet secret every gateway of the scenario is given.
const FLEET_SECRET: &str = "the fleet secret of the bench scenario, 32+ characters";
/// The tools the servers created over REST declare (those of the fixture server).
const FIXTURE_TOOLS: [&str; 5] = ["echo", "add", "fail", "sleep", "stderr"];
const ECHO: &str = r#"{"name":"fx__echo","arguments":{"text":"hello"}}"#;

/// One side of a comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Side {
    Sqlite,
    Postgres,
    Local,
    Redis,
    /// The second side over the first, taken within a round.
    Ratio,
    /// The second side minus the first, taken within a round.
    Added,
}

/// Every figure of every round, by figure and side, for the medians at the end.
#[derive(Default)]
struct Samples(BTreeMap<(String, Side), Vec<f64>>);

impl Samples {
    fn push(&mut self, figure: &str, side: Side, value: f64) {
        self.0
            .entry((figure.to_owned(), side))
            .or_default()
            .push(value);
    }

    /// One round's figure on both sides of a pair, with their ratio and difference.
    fn pair(&mut self, figure: &str, (first, second): (Side, Side), values: (f64, f64)) {
        self.push(figure, first, values.0);
        self.push(figure, second, values.1);
        if values.0 > 0.0 {
            self.push(figure, Side::Ratio, values.1 / values.0);
        }
        self.push(figure, Side::Added, values.1 - values.0);
    }

    /// The median over the rounds; `None` when the figure was never measured.
    fn median(&self, figure: &str, side: Side) -> Option<f64> {
        let mut values = self.0.get(&(figure.to_owned(), side))?.clone();
        (!values.is_empty()).then(|| cpu::median(&mut values))
    }
}

/// A gateway of the scenario, and which side of its pair it is.
struct Subject {
    side: Side,
    gateway: Gateway,
}

impl Subject {
    fn address(&self) -> &str {
        &self.gateway.address
    }

    fn mcp_url(&self) -> String {
        format!("http://{}/mcp", self.gateway.address)
    }

    fn pid(&self) -> u32 {
        self.gateway.child.id()
    }
}

pub fn run() -> anyhow::Result<()> {
    let rounds = rounds_from(std::env::args().nth(2).as_deref())?;
    let gateway_binary = sibling_binary("mcpgw")?;
    let fixture = sibling_binary("mcpgw-fixture-server")?;
    let work = tempfile::tempdir()?;

    let postgres = without_panicking("a PostgreSQL server", TempPostgres::start)?;
    let database_url = without_panicking("a PostgreSQL database", || postgres.fresh_database())?;
    let redis = without_panicking("a Redis server", TempRedis::start)?;
    let (_, redis_url) = redis.fresh_database();
    let postgres_server = ServerProcesses::find("postgres", postgres.port());
    let redis_server = ServerProcesses::find("redis-server", redis.port());

    let fixture_command = format!("[\"{}\"]", fixture.display());
    let servers = format!(
        "tool_timeout_s: 60\nmcp_servers:\n  fx:\n    mode: subprocess\n    command: {fixture_command}\n"
    );
    let limited = format!("rate_limit: {{rps: {NEVER_REFUSING}, burst: {NEVER_REFUSING}}}\n");
    let configs = [
        (Side::Sqlite, servers.clone(), false),
        (
            Side::Postgres,
            format!("store: {{url: \"{database_url}\"}}\n{servers}"),
            false,
        ),
        (Side::Local, format!("{limited}{servers}"), true),
        (
            Side::Redis,
            format!(
                "rate_limit:\n  rps: {NEVER_REFUSING}\n  burst: {NEVER_REFUSING}\n  backend: redis\n  redis: {{url: \"{redis_url}\"}}\n{servers}"
            ),
            true,
        ),
    ];
    let mut subjects = Vec::new();
    for (side, yaml, limits) in configs {
        let name = format!("{side:?}").to_lowercase();
        let config = work.path().join(format!("{name}.yaml"));
        std::fs::write(&config, yaml)?;
        // The harness turns rate limits off through the environment, which wins over the
        // file; the limited pair sets them back to the file's values the same way.
        let mut env = vec![("MCP_CLUSTER_SECRET", FLEET_SECRET)];
        if limits {
            env.push(("MCP_RATE_LIMIT_RPS", NEVER_REFUSING));
            env.push(("MCP_RATE_LIMIT_BURST", NEVER_REFUSING));
        }
        let gateway =
            start_gateway_with_env(&gateway_binary, &config, &work.path().join(&name), &env)
                .with_context(|| format!("the {} gateway", label(side)))?;
        subjects.push(Subject { side, gateway });
    }
    let [sqlite, postgres_gateway, local, redis_gateway] = &subjects[..] else {
        bail!("four gateways were to start");
    };

    for subject in [local, redis_gateway] {
        let limit = RestClient::connect(subject.address())?
            .send("GET", "/api/mcp_servers", None)?
            .rate_limit;
        if limit.as_deref() != Some(NEVER_REFUSING) {
            bail!(
                "the {} gateway should rate-limit with a burst of {NEVER_REFUSING}, but its REST answers carry X-RateLimit-Limit {limit:?}",
                label(subject.side)
            );
        }
    }

    let mut ids = Vec::with_capacity(LISTED);
    for subject in [sqlite, postgres_gateway] {
        let mut client = RestClient::connect(subject.address())?;
        ids.clear();
        for index in 0..LISTED {
            let id = format!("listed-{index:03}");
            client
                .expect(
                    "POST",
                    "/api/mcp_servers",
                    Some(&definition(&id, &fixture)),
                    201,
                )
                .with_context(|| format!("creating {id} on the {} gateway", label(subject.side)))?;
            ids.push(id);
        }
    }

    println!(
        "# fleet: PostgreSQL store vs the SQLite default, Redis rate limiter vs local buckets"
    );
    println!(
        "({rounds} rounds; the first side of each pair alternates; PostgreSQL and Redis on loopback, fsync off; {LISTED} servers created over REST + `fx`)"
    );
    if postgres_server.is_none() || redis_server.is_none() {
        println!(
            "(the processes of {} were not found: their CPU per call is not measured)",
            match (&postgres_server, &redis_server) {
                (None, None) => "PostgreSQL and Redis",
                (None, Some(_)) => "PostgreSQL",
                _ => "Redis",
            }
        );
    }

    let mut samples = Samples::default();
    let mut limiter_failure = None;
    let mut unexpected: BTreeMap<Side, Vec<String>> = BTreeMap::new();
    for round in 1..=rounds {
        let swap = round % 2 == 0;
        let store_pair = ordered([sqlite, postgres_gateway], swap);
        let limiter_pair = ordered([local, redis_gateway], swap);

        let mut reads = BTreeMap::new();
        for subject in store_pair {
            reads.insert(subject.side, rest_reads(subject.address(), &ids)?);
        }
        let mut writes = BTreeMap::new();
        for subject in store_pair {
            writes.insert(
                subject.side,
                rest_writes(subject.address(), &fixture, round)
                    .with_context(|| format!("REST writes on {}", label(subject.side)))?,
            );
        }
        let (a, b) = (&reads[&Side::Sqlite], &reads[&Side::Postgres]);
        let (c, d) = (&writes[&Side::Sqlite], &writes[&Side::Postgres]);
        let store_sides = (Side::Sqlite, Side::Postgres);
        samples.pair("list p50", store_sides, (a.list.0, b.list.0));
        samples.pair("list p99", store_sides, (a.list.1, b.list.1));
        samples.pair("get p50", store_sides, (a.get.0, b.get.0));
        samples.pair("get p99", store_sides, (a.get.1, b.get.1));
        samples.pair("create p50", store_sides, (c.create.0, d.create.0));
        samples.pair("create p99", store_sides, (c.create.1, d.create.1));
        samples.pair("delete p50", store_sides, (c.delete.0, d.delete.0));
        samples.pair("delete p99", store_sides, (c.delete.1, d.delete.1));
        println!(
            "round {round}: REST p50 SQLite | PostgreSQL: list {:.3} | {:.3} ms ({} | {} servers), get {:.3} | {:.3} ms, create {:.3} | {:.3} ms, delete {:.3} | {:.3} ms{}",
            a.list.0,
            b.list.0,
            a.listed,
            b.listed,
            a.get.0,
            b.get.0,
            c.create.0,
            d.create.0,
            c.delete.0,
            d.delete.0,
            if c.unexpected.is_empty() && d.unexpected.is_empty() {
                String::new()
            } else {
                format!(
                    "; unexpected answers {} | {}",
                    c.unexpected.len(),
                    d.unexpected.len()
                )
            }
        );
        for (side, figures) in [(Side::Sqlite, c), (Side::Postgres, d)] {
            unexpected
                .entry(side)
                .or_default()
                .extend(figures.unexpected.iter().cloned());
        }

        for era in Era::BOTH {
            let mut figures = BTreeMap::new();
            for subject in store_pair {
                let server = (subject.side == Side::Postgres)
                    .then_some(postgres_server.as_ref())
                    .flatten();
                figures.insert(subject.side, tool_calls(subject, era, server)?);
            }
            record_calls(
                &mut samples,
                round,
                era,
                store_sides,
                (&figures[&Side::Sqlite], &figures[&Side::Postgres]),
            );
        }

        // The Redis pair goes on as long as it can be measured; the store's figures are
        // printed whatever happens to it.
        if limiter_failure.is_none()
            && let Err(error) = limiter_round(
                &mut samples,
                round,
                limiter_pair,
                redis.port(),
                redis_server.as_ref(),
            )
        {
            println!("round {round}: the Redis comparison stops here: {error:#}");
            limiter_failure = Some(error);
        }
    }

    // What the PostgreSQL gateway asks of the database for tool calls and for REST writes,
    // each alone.
    let database = database_url.rsplit('/').next().unwrap_or_default();
    let (calls, call_rows) =
        rows_touched(&postgres, database, || calls_in_both_eras(postgres_gateway))?;
    let (rest_writes_made, rest_rows) = rows_touched(&postgres, database, || {
        let writes = rest_writes(postgres_gateway.address(), &fixture, rounds + 1)?;
        let made = 2 * CREATES - writes.unexpected.len();
        unexpected
            .entry(Side::Postgres)
            .or_default()
            .extend(writes.unexpected);
        Ok(made as u64)
    })?;

    print_store_table(&samples, rounds);
    print_rows_touched(
        &format!(
            "Rows PostgreSQL wrote and read during {calls} tool calls through the PostgreSQL gateway (c=1, both eras, nothing else running)"
        ),
        "call",
        calls,
        &call_rows,
    );
    print_rows_touched(
        &format!(
            "Rows PostgreSQL wrote and read during {rest_writes_made} REST writes ({CREATES} creates, then their deletes) through the PostgreSQL gateway, with {} servers registered",
            LISTED + 1
        ),
        "write",
        rest_writes_made,
        &rest_rows,
    );
    print_limiter_table(&samples, rounds);
    let writes = (rounds + 1) * 2 * CREATES;
    let mut failed = Vec::new();
    for (side, problems) in &unexpected {
        if problems.is_empty() {
            continue;
        }
        println!();
        println!(
            "## {} of the {writes} REST writes to the {} gateway answered otherwise than expected; the first of them:",
            problems.len(),
            label(*side)
        );
        for problem in problems.iter().take(5) {
            println!("- {problem}");
        }
        failed.push(format!("{} on {}", problems.len(), label(*side)));
    }
    match limiter_failure {
        Some(error) => Err(error.context("the Redis rate limiter could not be measured")),
        None if !failed.is_empty() => bail!(
            "REST writes answered otherwise than expected ({}): see above",
            failed.join(", ")
        ),
        None => Ok(()),
    }
}

/// One round of the `local` and `Redis` gateways' tool calls in both eras, and of Redis's
/// `PING`; fails when the Redis gateway's limiter does not use Redis.
fn limiter_round(
    samples: &mut Samples,
    round: usize,
    pair: [&Subject; 2],
    redis_port: u16,
    redis_server: Option<&ServerProcesses>,
) -> anyhow::Result<()> {
    for era in Era::BOTH {
        let mut figures = BTreeMap::new();
        for subject in pair {
            let measured = if subject.side == Side::Redis {
                let before = redis_served(redis_port)?;
                let measured = tool_calls(subject, era, redis_server)?;
                let after = redis_served(redis_port)?;
                let calls = (CALL_WARM_UP + CALLS) as u64 + C16_CLIENTS as u64 * C16_CALLS_EACH;
                let scripts = after.scripts.saturating_sub(before.scripts);
                if scripts < calls / 2 {
                    bail!(
                        "the gateway with `rate_limit.backend: redis` ran {scripts} scripts in Redis for {calls} tool calls: its rate limiter does not keep its buckets in Redis"
                    );
                }
                // The INFO commands that read these, and the limiter's once-a-second PING,
                // count too: a few in some 18,000.
                let commands = after.commands.saturating_sub(before.commands);
                samples.push(
                    &format!("{} redis scripts", era.short()),
                    Side::Redis,
                    scripts as f64 / calls as f64,
                );
                samples.push(
                    &format!("{} redis commands", era.short()),
                    Side::Redis,
                    commands as f64 / calls as f64,
                );
                measured
            } else {
                tool_calls(subject, era, None)?
            };
            figures.insert(subject.side, measured);
        }
        record_calls(
            samples,
            round,
            era,
            (Side::Local, Side::Redis),
            (&figures[&Side::Local], &figures[&Side::Redis]),
        );
    }

    let ping = ping_p50(redis_port)?;
    samples.push("redis ping p50", Side::Redis, ping);
    println!("round {round}: Redis PING p50 {ping:.3} ms");
    Ok(())
}

/// The rounds the command line asks for: a whole number, at least [`MIN_ROUNDS`].
fn rounds_from(argument: Option<&str>) -> anyhow::Result<usize> {
    let Some(text) = argument else {
        return Ok(DEFAULT_ROUNDS);
    };
    let rounds: usize = text
        .trim()
        .parse()
        .with_context(|| format!("ROUNDS must be a whole number, got `{text}`"))?;
    if rounds < MIN_ROUNDS {
        bail!("ROUNDS must be at least {MIN_ROUNDS} (a median of fewer says little), got {rounds}");
    }
    Ok(rounds)
}

/// Runs `start`, whose failure panics with the reason (the test servers of the testkit do),
/// and answers that reason as an error instead, without the panic's report.
fn without_panicking<T>(what: &str, start: impl FnOnce() -> T) -> anyhow::Result<T> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(start));
    std::panic::set_hook(hook);
    outcome.map_err(|payload| {
        let reason = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| {
                payload
                    .downcast_ref::<&str>()
                    .map(|text| (*text).to_owned())
            })
            .unwrap_or_else(|| "no reason given".to_owned());
        anyhow::anyhow!("cannot start {what}: {reason}")
    })
}

fn label(side: Side) -> &'static str {
    match side {
        Side::Sqlite => "SQLite",
        Side::Postgres => "PostgreSQL",
        Side::Local => "local",
        Side::Redis => "Redis",
        Side::Ratio => "ratio",
        Side::Added => "added",
    }
}

/// The pair in its order, or the other way round.
fn ordered(pair: [&Subject; 2], swap: bool) -> [&Subject; 2] {
    if swap { [pair[1], pair[0]] } else { pair }
}

/// The body of `POST /api/mcp_servers` for a fixture server `id` that declares its tools, so
/// that it is never started.
fn definition(id: &str, fixture: &Path) -> String {
    let tools: Vec<_> = FIXTURE_TOOLS
        .iter()
        .map(|tool| {
            serde_json::json!({
                "name": tool,
                "description": format!("the fixture's {tool} tool"),
                "inputSchema": {"type": "object"},
            })
        })
        .collect();
    serde_json::json!({
        "mcp_server_id": id,
        "mode": "subprocess",
        "command": [fixture.display().to_string()],
        "description": format!("bench server {id}"),
        "tools": tools,
    })
    .to_string()
}

/// p50 and p99 in milliseconds.
fn p50_p99(samples: &mut [Duration]) -> (f64, f64) {
    (
        stats::millis(stats::percentile(samples, 0.5)),
        stats::millis(stats::percentile(samples, 0.99)),
    )
}

struct Reads {
    /// The servers the first list named.
    listed: usize,
    list: (f64, f64),
    get: (f64, f64),
}

fn rest_reads(address: &str, ids: &[String]) -> anyhow::Result<Reads> {
    let mut client = RestClient::connect(address)?;
    let answer = client.send("GET", "/api/mcp_servers", None)?;
    let listed = serde_json::from_slice::<serde_json::Value>(&answer.body)
        .ok()
        .and_then(|list| Some(list.get("mcp_servers")?.as_array()?.len()))
        .with_context(|| {
            format!(
                "GET /api/mcp_servers answered {} without a list of servers: {}",
                answer.status,
                String::from_utf8_lossy(&answer.body)
            )
        })?;
    let mut list = Vec::with_capacity(READS);
    for index in 0..READ_WARM_UP + READS {
        let took = client.expect("GET", "/api/mcp_servers", None, 200)?;
        if index >= READ_WARM_UP {
            list.push(took);
        }
    }
    let mut get = Vec::with_capacity(READS);
    for index in 0..READ_WARM_UP + READS {
        let path = format!("/api/mcp_servers/{}", ids[index % ids.len()]);
        let took = client.expect("GET", &path, None, 200)?;
        if index >= READ_WARM_UP {
            get.push(took);
        }
    }
    Ok(Reads {
        listed,
        list: p50_p99(&mut list),
        get: p50_p99(&mut get),
    })
}

struct Writes {
    create: (f64, f64),
    delete: (f64, f64),
    /// What answered otherwise than a create's 201 or a delete's 200, which is left out of
    /// the latencies.
    unexpected: Vec<String>,
}

/// [`CREATES`] servers created, then each deleted, at c=1.
fn rest_writes(address: &str, fixture: &Path, round: usize) -> anyhow::Result<Writes> {
    let mut client = RestClient::connect(address)?;
    let ids: Vec<String> = (0..CREATES)
        .map(|index| format!("churn-{round}-{index:03}"))
        .collect();
    let mut unexpected = Vec::new();
    let mut create = Vec::with_capacity(CREATES);
    for id in &ids {
        let body = definition(id, fixture);
        match client.timed("POST", "/api/mcp_servers", Some(&body), 201)? {
            Ok(took) => create.push(took),
            Err(problem) => unexpected.push(format!("{problem} (creating {id})")),
        }
    }
    let mut delete = Vec::with_capacity(CREATES);
    for id in &ids {
        match client.timed("DELETE", &format!("/api/mcp_servers/{id}"), None, 200)? {
            Ok(took) => delete.push(took),
            Err(problem) => unexpected.push(problem),
        }
    }
    Ok(Writes {
        create: p50_p99(&mut create),
        delete: p50_p99(&mut delete),
        unexpected,
    })
}

/// One round of tool calls through one gateway in one era.
struct Calls {
    p50: f64,
    p99: f64,
    per_second: f64,
    /// The gateway's CPU per call at c=16, µs.
    gateway_cpu: f64,
    /// The CPU per call of the store's or limiter's server at c=16, µs, when one is watched.
    server_cpu: Option<f64>,
}

fn tool_calls(
    subject: &Subject,
    era: Era,
    server: Option<&ServerProcesses>,
) -> anyhow::Result<Calls> {
    let url = subject.mcp_url();
    let mut client = McpClient::connect_era(&url, era)?;
    let mut latencies = Vec::with_capacity(CALLS);
    for index in 0..CALL_WARM_UP + CALLS {
        let sent = Instant::now();
        let answer = client.request("tools/call", ECHO)?;
        let took = sent.elapsed();
        if !answer.contains("hello") {
            bail!(
                "unexpected answer from the {} gateway: {answer}",
                label(subject.side)
            );
        }
        if index >= CALL_WARM_UP {
            latencies.push(took);
        }
    }
    let (p50, p99) = p50_p99(&mut latencies);
    let server_before = server.map(ServerProcesses::cpu_nanos);
    let (cpu, per_second) =
        cpu::measure_round(subject.pid(), &url, era, (C16_CLIENTS, C16_CALLS_EACH))?;
    let server_cpu = server.zip(server_before).map(|(server, before)| {
        server.cpu_nanos().saturating_sub(before) as f64
            / 1_000.0
            / (C16_CLIENTS as f64 * C16_CALLS_EACH as f64)
    });
    Ok(Calls {
        p50,
        p99,
        per_second,
        gateway_cpu: cpu.get("total").copied().unwrap_or_default(),
        server_cpu,
    })
}

fn record_calls(
    samples: &mut Samples,
    round: usize,
    era: Era,
    sides: (Side, Side),
    (first, second): (&Calls, &Calls),
) {
    let era_name = era.short();
    // The pair is part of the key: both pairs measure the same figures.
    let pair = label(sides.0);
    samples.pair(
        &format!("{pair}/{era_name} p50"),
        sides,
        (first.p50, second.p50),
    );
    samples.pair(
        &format!("{pair}/{era_name} p99"),
        sides,
        (first.p99, second.p99),
    );
    samples.pair(
        &format!("{pair}/{era_name} c16"),
        sides,
        (first.per_second, second.per_second),
    );
    samples.pair(
        &format!("{pair}/{era_name} cpu"),
        sides,
        (first.gateway_cpu, second.gateway_cpu),
    );
    if let Some(server_cpu) = second.server_cpu {
        samples.push(
            &format!("{pair}/{era_name} server cpu"),
            sides.1,
            server_cpu,
        );
    }
    println!(
        "round {round}: {era_name:<9} {} | {}: c=1 p50 {:.3} | {:.3} ms, p99 {:.3} | {:.3} ms; c=16 {:.0} | {:.0} calls/s, gateway CPU {:.1} | {:.1} µs/call{}",
        label(sides.0),
        label(sides.1),
        first.p50,
        second.p50,
        first.p99,
        second.p99,
        first.per_second,
        second.per_second,
        first.gateway_cpu,
        second.gateway_cpu,
        second
            .server_cpu
            .map(|cpu| format!(", {} CPU {cpu:.1} µs/call", label(sides.1)))
            .unwrap_or_default()
    );
}

/// How long PostgreSQL may keep a backend's table statistics before it publishes them: a
/// second after the last flush while busy, ten seconds once idle.
const STATS_FLUSH: Duration = Duration::from_secs(11);

/// Rows a table had written (inserted, updated or deleted) and read (by scans and index
/// fetches), as PostgreSQL's statistics count them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct TableRows {
    written: u64,
    read: u64,
}

/// What PostgreSQL did, by table, while `work` ran and nothing else did; `work` answers how
/// many operations it made. Tables that neither wrote nor read a row are left out.
fn rows_touched(
    postgres: &TempPostgres,
    database: &str,
    work: impl FnOnce() -> anyhow::Result<u64>,
) -> anyhow::Result<(u64, BTreeMap<String, TableRows>)> {
    std::thread::sleep(STATS_FLUSH);
    let before = table_rows(postgres, database)?;
    let operations = work()?;
    std::thread::sleep(STATS_FLUSH);
    let after = table_rows(postgres, database)?;
    let rows = after
        .into_iter()
        .filter_map(|(table, now)| {
            let then = before.get(&table).copied().unwrap_or_default();
            let grown = TableRows {
                written: now.written.saturating_sub(then.written),
                read: now.read.saturating_sub(then.read),
            };
            (grown != TableRows::default()).then_some((table, grown))
        })
        .collect();
    Ok((operations, rows))
}

/// [`CALLS`] tool calls in each era through `subject` at c=1; answers how many.
fn calls_in_both_eras(subject: &Subject) -> anyhow::Result<u64> {
    let mut calls = 0;
    for era in Era::BOTH {
        let mut client = McpClient::connect_era(&subject.mcp_url(), era)?;
        for _ in 0..CALLS {
            client.request("tools/call", ECHO)?;
            calls += 1;
        }
    }
    Ok(calls)
}

/// [`TableRows`] of each table of `database` so far.
fn table_rows(
    postgres: &TempPostgres,
    database: &str,
) -> anyhow::Result<BTreeMap<String, TableRows>> {
    let text = without_panicking("psql", || {
        postgres.psql(
            database,
            "SELECT relname, n_tup_ins + n_tup_upd + n_tup_del, \
             seq_tup_read + COALESCE(idx_tup_fetch, 0) FROM pg_stat_user_tables",
        )
    })?;
    parse_table_rows(&text)
}

/// The `table|written|read` lines of `psql -A -t`.
fn parse_table_rows(text: &str) -> anyhow::Result<BTreeMap<String, TableRows>> {
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let fields: Vec<&str> = line.split('|').collect();
            let [table, written, read] = fields[..] else {
                bail!("psql printed `{line}`, not `table|written|read`");
            };
            let count = |text: &str| {
                text.trim()
                    .parse::<u64>()
                    .with_context(|| format!("psql printed a count `{text}`"))
            };
            Ok((
                table.to_owned(),
                TableRows {
                    written: count(written)?,
                    read: count(read)?,
                },
            ))
        })
        .collect()
}

fn print_rows_touched(
    title: &str,
    unit: &str,
    operations: u64,
    rows: &BTreeMap<String, TableRows>,
) {
    let per = |count: u64| count as f64 / operations.max(1) as f64;
    println!();
    println!("## {title}");
    println!("| table | rows written | per {unit} | rows read | per {unit} |");
    println!("|---|---|---|---|---|");
    if rows.is_empty() {
        println!("| (none) | 0 | 0 | 0 | 0 |");
    }
    for (table, counted) in rows {
        println!(
            "| {table} | {} | {:.4} | {} | {:.4} |",
            counted.written,
            per(counted.written),
            counted.read,
            per(counted.read)
        );
    }
}

/// A figure's median, formatted with `decimals`, or `—` when it was not measured.
fn shown(samples: &Samples, figure: &str, side: Side, decimals: usize) -> String {
    samples
        .median(figure, side)
        .map_or_else(|| "—".to_owned(), |value| format!("{value:.decimals$}"))
}

fn ratio(samples: &Samples, figure: &str) -> String {
    samples
        .median(figure, Side::Ratio)
        .map_or_else(|| "—".to_owned(), |value| format!("{value:.3}"))
}

fn print_store_table(samples: &Samples, rounds: usize) {
    println!();
    println!(
        "## PostgreSQL store vs SQLite: medians over {rounds} rounds (ratios taken within each round)"
    );
    println!("| figure | SQLite | PostgreSQL | PostgreSQL / SQLite | target |");
    println!("|---|---|---|---|---|");
    let rows: [(&str, String, usize, &str); 8] = [
        (
            "create p50",
            format!("`POST /api/mcp_servers` p50, ms ({CREATES} at c=1)"),
            3,
            "PostgreSQL < 5 ms",
        ),
        (
            "create p99",
            "`POST /api/mcp_servers` p99, ms".to_owned(),
            3,
            "",
        ),
        (
            "delete p50",
            "`DELETE /api/mcp_servers/{id}` p50, ms".to_owned(),
            3,
            "",
        ),
        (
            "delete p99",
            "`DELETE /api/mcp_servers/{id}` p99, ms".to_owned(),
            3,
            "",
        ),
        (
            "list p50",
            format!(
                "`GET /api/mcp_servers` ({} servers) p50, ms ({READS} at c=1)",
                LISTED + 1
            ),
            3,
            "as fast as SQLite",
        ),
        (
            "list p99",
            "`GET /api/mcp_servers` p99, ms".to_owned(),
            3,
            "",
        ),
        (
            "get p50",
            format!("`GET /api/mcp_servers/{{id}}` p50, ms ({READS} at c=1)"),
            3,
            "as fast as SQLite",
        ),
        (
            "get p99",
            "`GET /api/mcp_servers/{id}` p99, ms".to_owned(),
            3,
            "",
        ),
    ];
    for (figure, name, decimals, target) in rows {
        println!(
            "| {name} | {} | {} | {} | {target} |",
            shown(samples, figure, Side::Sqlite, decimals),
            shown(samples, figure, Side::Postgres, decimals),
            ratio(samples, figure),
        );
    }
    for era in Era::BOTH {
        let short = era.short();
        println!(
            "| tools/call {short} c=1 p50, ms ({CALLS} calls) | {} | {} | {} | PostgreSQL within 5% |",
            shown(samples, &format!("SQLite/{short} p50"), Side::Sqlite, 3),
            shown(samples, &format!("SQLite/{short} p50"), Side::Postgres, 3),
            ratio(samples, &format!("SQLite/{short} p50")),
        );
        println!(
            "| tools/call {short} c=1 p99, ms | {} | {} | {} | |",
            shown(samples, &format!("SQLite/{short} p99"), Side::Sqlite, 3),
            shown(samples, &format!("SQLite/{short} p99"), Side::Postgres, 3),
            ratio(samples, &format!("SQLite/{short} p99")),
        );
        println!(
            "| tools/call {short} c=16, calls/s | {} | {} | {} | |",
            shown(samples, &format!("SQLite/{short} c16"), Side::Sqlite, 0),
            shown(samples, &format!("SQLite/{short} c16"), Side::Postgres, 0),
            ratio(samples, &format!("SQLite/{short} c16")),
        );
        println!(
            "| gateway CPU per call, {short} c=16, µs | {} | {} | {} | |",
            shown(samples, &format!("SQLite/{short} cpu"), Side::Sqlite, 1),
            shown(samples, &format!("SQLite/{short} cpu"), Side::Postgres, 1),
            ratio(samples, &format!("SQLite/{short} cpu")),
        );
        println!(
            "| PostgreSQL's own CPU per call, {short} c=16, µs | — | {} | | |",
            shown(
                samples,
                &format!("SQLite/{short} server cpu"),
                Side::Postgres,
                1
            ),
        );
    }
}

fn print_limiter_table(samples: &Samples, rounds: usize) {
    println!();
    println!(
        "## Redis rate limiter vs local buckets (rps {NEVER_REFUSING}, burst {NEVER_REFUSING}): medians over {rounds} rounds"
    );
    println!("| figure | local | Redis | Redis / local | added (Redis − local) | target |");
    println!("|---|---|---|---|---|---|");
    for era in Era::BOTH {
        let short = era.short();
        for (figure, name, decimals, target) in [
            (
                "p50",
                format!("tools/call {short} c=1 p50, ms ({CALLS} calls)"),
                3,
                "added < 0.2 ms",
            ),
            ("p99", format!("tools/call {short} c=1 p99, ms"), 3, ""),
            ("c16", format!("tools/call {short} c=16, calls/s"), 0, ""),
            (
                "cpu",
                format!("gateway CPU per call, {short} c=16, µs"),
                1,
                "",
            ),
        ] {
            let key = format!("local/{short} {figure}");
            println!(
                "| {name} | {} | {} | {} | {} | {target} |",
                shown(samples, &key, Side::Local, decimals),
                shown(samples, &key, Side::Redis, decimals),
                ratio(samples, &key),
                shown(samples, &key, Side::Added, decimals),
            );
        }
        println!(
            "| Redis's own CPU per call, {short} c=16, µs | — | {} | | | |",
            shown(
                samples,
                &format!("local/{short} server cpu"),
                Side::Redis,
                1
            ),
        );
        println!(
            "| Redis scripts (`EVALSHA`) per call, {short} | — | {} | | | |",
            shown(samples, &format!("{short} redis scripts"), Side::Redis, 2),
        );
        println!(
            "| Redis commands per call, {short} (the scripts' own included) | — | {} | | | |",
            shown(samples, &format!("{short} redis commands"), Side::Redis, 2),
        );
    }
    println!(
        "| Redis `PING` round trip p50, ms ({PINGS} on one connection) | — | {} | | | for reference |",
        shown(samples, "redis ping p50", Side::Redis, 3),
    );
}

/// A minimal HTTP/1.1 keep-alive client for the REST calls of any method.
struct RestClient {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    host: String,
}

struct Answer {
    status: u16,
    body: Vec<u8>,
    /// The `X-RateLimit-Limit` header, when the answer has one.
    rate_limit: Option<String>,
}

impl RestClient {
    fn connect(address: &str) -> anyhow::Result<Self> {
        let stream =
            TcpStream::connect(address).with_context(|| format!("cannot connect to {address}"))?;
        stream.set_nodelay(true)?;
        Ok(Self {
            writer: stream.try_clone()?,
            reader: BufReader::new(stream),
            host: address.to_owned(),
        })
    }

    /// Sends one request and answers how long it took, failing unless it answered `status`.
    fn expect(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&str>,
        status: u16,
    ) -> anyhow::Result<Duration> {
        self.timed(method, path, body, status)?
            .map_err(|problem| anyhow::anyhow!(problem))
    }

    /// Sends one request and answers how long it took when it answered `status`, else what
    /// it answered; fails only when no answer could be read.
    fn timed(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&str>,
        status: u16,
    ) -> anyhow::Result<Result<Duration, String>> {
        let sent = Instant::now();
        let answer = self.send(method, path, body)?;
        let took = sent.elapsed();
        if answer.status != status {
            return Ok(Err(format!(
                "{method} {path} answered {} (expected {status}): {}",
                answer.status,
                String::from_utf8_lossy(&answer.body)
            )));
        }
        Ok(Ok(took))
    }

    fn send(&mut self, method: &str, path: &str, body: Option<&str>) -> anyhow::Result<Answer> {
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nAccept: application/json\r\n",
            self.host
        );
        if let Some(body) = body {
            head.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                body.len()
            ));
        }
        head.push_str("\r\n");
        self.writer.write_all(head.as_bytes())?;
        if let Some(body) = body {
            self.writer.write_all(body.as_bytes())?;
        }
        self.writer.flush()?;

        let mut status_line = String::new();
        if self.reader.read_line(&mut status_line)? == 0 {
            bail!("the connection closed");
        }
        let status: u16 = status_line
            .split_whitespace()
            .nth(1)
            .context("no status")?
            .parse()
            .with_context(|| format!("bad status line `{}`", status_line.trim_end()))?;
        let mut content_length = None;
        let mut chunked = false;
        let mut rate_limit = None;
        loop {
            let mut header = String::new();
            self.reader.read_line(&mut header)?;
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            let (name, value) = header
                .split_once(':')
                .with_context(|| format!("bad header `{header}`"))?;
            let value = value.trim();
            match name.to_ascii_lowercase().as_str() {
                "content-length" => {
                    content_length = Some(value.parse::<usize>().context("bad Content-Length")?);
                }
                "transfer-encoding" if value.contains("chunked") => chunked = true,
                "x-ratelimit-limit" => rate_limit = Some(value.to_owned()),
                _ => {}
            }
        }
        let mut body = Vec::new();
        if chunked {
            loop {
                let mut size_line = String::new();
                self.reader.read_line(&mut size_line)?;
                let size = usize::from_str_radix(size_line.trim(), 16)
                    .with_context(|| format!("bad chunk size `{}`", size_line.trim()))?;
                let mut chunk = vec![0; size + 2];
                self.reader.read_exact(&mut chunk)?;
                if size == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..size]);
            }
        } else if let Some(length) = content_length {
            body.resize(length, 0);
            self.reader.read_exact(&mut body)?;
        }
        Ok(Answer {
            status,
            body,
            rate_limit,
        })
    }
}

/// A connection to Redis that sends inline commands and reads their replies.
struct RedisConnection {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl RedisConnection {
    fn connect(port: u16) -> anyhow::Result<Self> {
        let stream = TcpStream::connect(("127.0.0.1", port))
            .with_context(|| format!("cannot connect to Redis on port {port}"))?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        Ok(Self {
            writer: stream.try_clone()?,
            reader: BufReader::new(stream),
        })
    }

    /// Sends `command` (words without spaces) and answers the reply: a status's or an
    /// integer's text, or a bulk string's content. An error reply is an error.
    fn command(&mut self, command: &str) -> anyhow::Result<String> {
        self.writer.write_all(format!("{command}\r\n").as_bytes())?;
        self.writer.flush()?;
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            bail!("Redis closed the connection");
        }
        let line = line.trim_end();
        let (kind, rest) = line.split_at(line.len().min(1));
        match kind {
            "+" | ":" => Ok(rest.to_owned()),
            "-" => bail!("Redis answered `{command}` with an error: {rest}"),
            "$" => {
                let length: usize = rest
                    .parse()
                    .with_context(|| format!("Redis sent a bulk length `{rest}`"))?;
                let mut bytes = vec![0; length + 2];
                self.reader.read_exact(&mut bytes)?;
                bytes.truncate(length);
                Ok(String::from_utf8_lossy(&bytes).into_owned())
            }
            _ => bail!("Redis answered `{command}` with an unexpected reply `{line}`"),
        }
    }
}

/// What a Redis server has served so far.
struct RedisServed {
    /// Commands of every kind, those that scripts run included (`total_commands_processed`).
    commands: u64,
    /// Scripts run: `EVALSHA` and `EVAL` (the limiter's one per check).
    scripts: u64,
}

/// What the Redis server on `port` has served so far, from `INFO stats` and `INFO
/// commandstats`.
fn redis_served(port: u16) -> anyhow::Result<RedisServed> {
    let mut connection = RedisConnection::connect(port)?;
    let stats = connection.command("INFO stats")?;
    let commands = stats
        .lines()
        .find_map(|line| line.strip_prefix("total_commands_processed:"))
        .context("Redis's INFO stats has no total_commands_processed")?
        .trim()
        .parse()
        .context("Redis's total_commands_processed is not a number")?;
    let commandstats = connection.command("INFO commandstats")?;
    Ok(RedisServed {
        commands,
        scripts: script_calls(&commandstats)?,
    })
}

/// The calls of `EVALSHA` and `EVAL` in the text of `INFO commandstats`, whose lines read
/// `cmdstat_evalsha:calls=12,usec=34,...`; a command never called has no line.
fn script_calls(commandstats: &str) -> anyhow::Result<u64> {
    commandstats
        .lines()
        .filter_map(|line| {
            let line = line.trim_end();
            line.strip_prefix("cmdstat_evalsha:")
                .or_else(|| line.strip_prefix("cmdstat_eval:"))
        })
        .map(|fields| {
            let calls = fields
                .split(',')
                .find_map(|field| field.strip_prefix("calls="))
                .with_context(|| format!("no calls= in Redis's command stats `{fields}`"))?;
            calls
                .parse::<u64>()
                .with_context(|| format!("Redis counts `{calls}` calls"))
        })
        .sum()
}

/// The p50 of [`PINGS`] `PING`s on one connection, ms.
fn ping_p50(port: u16) -> anyhow::Result<f64> {
    let mut connection = RedisConnection::connect(port)?;
    for _ in 0..100 {
        connection.command("PING")?;
    }
    let mut latencies = Vec::with_capacity(PINGS);
    for _ in 0..PINGS {
        let sent = Instant::now();
        let answer = connection.command("PING")?;
        latencies.push(sent.elapsed());
        if answer != "PONG" {
            bail!("Redis answered PING with `{answer}`");
        }
    }
    Ok(stats::millis(stats::median(&mut latencies)))
}

/// The processes of a database server this harness started: the one named `name` that listens
/// on `port`, and its descendants (PostgreSQL's backends, one per connection).
struct ServerProcesses {
    root: u32,
}

impl ServerProcesses {
    /// Finds the server by its name and the port on its command line; `None` when no such
    /// process is seen.
    fn find(name: &str, port: u16) -> Option<Self> {
        let port = port.to_string();
        let root = processes().into_iter().find_map(|pid| {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
            if comm.trim() != name {
                return None;
            }
            // PostgreSQL keeps `-p PORT` in its command line; Redis rewrites its own to
            // `redis-server 127.0.0.1:PORT`.
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline);
            let words: Vec<&str> = cmdline.split(['\0', ' ']).collect();
            let listens = words
                .windows(2)
                .any(|pair| matches!(pair[0], "-p" | "--port") && pair[1] == port)
                || words
                    .iter()
                    .any(|word| word.rsplit_once(':').is_some_and(|(_, tail)| tail == port));
            listens.then_some(pid)
        })?;
        Some(Self { root })
    }

    /// Nanoseconds on a CPU of every thread of the server and its descendants so far.
    fn cpu_nanos(&self) -> u64 {
        let mut children: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for pid in processes() {
            if let Some(parent) = parent_of(pid) {
                children.entry(parent).or_default().push(pid);
            }
        }
        let mut total = 0;
        let mut pending = vec![self.root];
        while let Some(pid) = pending.pop() {
            total += process_cpu_nanos(pid);
            pending.extend(children.remove(&pid).unwrap_or_default());
        }
        total
    }
}

/// The ids of every process now.
fn processes() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .collect()
}

/// The parent of `pid`, from `/proc/PID/stat` (the field after the state, which follows the
/// parenthesised name).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Nanoseconds on a CPU of every thread of `pid`; 0 for a process gone meanwhile.
fn process_cpu_nanos(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|schedstat| schedstat.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

#[cfg(test)]
mod tests {
    use std::io::{Read as _, Write as _};
    use std::net::TcpListener;

    use super::*;

    /// What a canned server reads before it replies.
    #[derive(Clone, Copy)]
    enum Request {
        /// An HTTP request: its head, then as many bytes of body as its `Content-Length` says.
        Http,
        /// One line, as an inline Redis command is.
        Line,
    }

    /// A one-connection server on loopback that reads one `request` and writes `reply` back;
    /// answers its address.
    fn canned_server(reply: &'static [u8], request: Request) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = value.trim().parse().unwrap();
                }
                if matches!(request, Request::Line) || line.trim().is_empty() {
                    break;
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            (&stream).write_all(reply).unwrap();
        });
        address
    }

    #[test]
    fn rounds_default_to_five_and_bad_counts_are_refused_with_the_reason() {
        assert_eq!(rounds_from(None).unwrap(), DEFAULT_ROUNDS);
        assert_eq!(rounds_from(Some("7")).unwrap(), 7);
        assert_eq!(rounds_from(Some(" 3 ")).unwrap(), 3);
        // Bad input: words, signs, fractions, nothing, and too few rounds for a median.
        for text in ["three", "-4", "4.5", ""] {
            let error = rounds_from(Some(text)).unwrap_err().to_string();
            assert!(error.contains("whole number"), "{text}: {error}");
        }
        let error = rounds_from(Some("2")).unwrap_err().to_string();
        assert!(error.contains("at least 3"), "{error}");
    }

    #[test]
    fn a_pair_keeps_each_side_and_the_ratio_and_difference_of_each_round() {
        let mut samples = Samples::default();
        let sides = (Side::Sqlite, Side::Postgres);
        samples.pair("p50", sides, (1.0, 1.5));
        samples.pair("p50", sides, (2.0, 2.0));
        samples.pair("p50", sides, (4.0, 2.0));
        assert_eq!(samples.median("p50", Side::Sqlite), Some(2.0));
        assert_eq!(samples.median("p50", Side::Postgres), Some(2.0));
        // Within each round: 1.5, 1.0 and 0.5; the ratio of the medians would be 1.0 too, but
        // the differences show that the rounds are paired: 0.5, 0.0 and -2.0.
        assert_eq!(samples.median("p50", Side::Ratio), Some(1.0));
        assert_eq!(samples.median("p50", Side::Added), Some(0.0));
        // Bad input: a first side of zero has no ratio, and a figure never measured no median.
        samples.pair("zero", sides, (0.0, 1.0));
        assert_eq!(samples.median("zero", Side::Ratio), None);
        assert_eq!(samples.median("zero", Side::Added), Some(1.0));
        assert_eq!(samples.median("never", Side::Sqlite), None);
        assert_eq!(shown(&samples, "never", Side::Sqlite, 3), "—");
        assert_eq!(shown(&samples, "p50", Side::Sqlite, 3), "2.000");
    }

    #[test]
    fn the_pair_order_alternates() {
        let (mut first, mut second) = (
            std::process::Command::new("true"),
            std::process::Command::new("true"),
        );
        let gateway = |command: &mut std::process::Command| Gateway {
            child: command.spawn().unwrap(),
            address: String::new(),
        };
        let one = Subject {
            side: Side::Sqlite,
            gateway: gateway(&mut first),
        };
        let two = Subject {
            side: Side::Postgres,
            gateway: gateway(&mut second),
        };
        let sides = |pair: [&Subject; 2]| pair.map(|subject| subject.side);
        assert_eq!(
            sides(ordered([&one, &two], false)),
            [Side::Sqlite, Side::Postgres]
        );
        assert_eq!(
            sides(ordered([&one, &two], true)),
            [Side::Postgres, Side::Sqlite]
        );
    }

    #[test]
    fn a_definition_declares_the_fixture_tools_so_the_server_is_never_started() {
        let body: serde_json::Value =
            serde_json::from_str(&definition("churn-1-007", Path::new("/bin/fixture \"x\"")))
                .unwrap();
        assert_eq!(body["mcp_server_id"], "churn-1-007");
        assert_eq!(body["mode"], "subprocess");
        // A path with a quote in it stays one well-formed JSON string.
        assert_eq!(body["command"][0], "/bin/fixture \"x\"");
        let tools: Vec<_> = body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|tool| tool["name"].as_str().unwrap())
            .collect();
        assert_eq!(tools, FIXTURE_TOOLS);
    }

    #[test]
    fn the_rest_client_reads_sized_and_chunked_answers_and_the_rate_limit() {
        let sized = canned_server(
            b"HTTP/1.1 201 Created\r\ncontent-length: 5\r\nX-RateLimit-Limit: 1000000\r\n\r\nhello",
            Request::Http,
        );
        let answer = RestClient::connect(&sized)
            .unwrap()
            .send("POST", "/api/mcp_servers", Some("{}"))
            .unwrap();
        assert_eq!(answer.status, 201);
        assert_eq!(answer.body, b"hello");
        assert_eq!(answer.rate_limit.as_deref(), Some("1000000"));

        let chunked = canned_server(
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
            Request::Http,
        );
        let answer = RestClient::connect(&chunked)
            .unwrap()
            .send("GET", "/api/mcp_servers", None)
            .unwrap();
        assert_eq!(answer.body, b"abcde");
        assert_eq!(answer.rate_limit, None);
    }

    #[test]
    fn the_rest_client_refuses_a_wrong_status_and_malformed_answers_with_the_reason() {
        // Bad input: an answer of another status than expected, with its body in the error.
        let conflict = canned_server(
            b"HTTP/1.1 409 Conflict\r\ncontent-length: 5\r\n\r\ntaken",
            Request::Http,
        );
        let error = RestClient::connect(&conflict)
            .unwrap()
            .expect("POST", "/api/mcp_servers", Some("{}"), 201)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("answered 409 (expected 201)") && error.contains("taken"),
            "{error}"
        );
        // Bad input: a status line without a number, a header without a colon, a chunk size
        // that is not hexadecimal, and a connection closed before any answer.
        for (reply, expected) in [
            (&b"HTTP/1.1 OK\r\n\r\n"[..], "bad status line"),
            (
                &b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n"[..],
                "bad header",
            ),
            (
                &b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n"[..],
                "bad chunk size",
            ),
            (&b""[..], "the connection closed"),
        ] {
            let reply: &'static [u8] = reply;
            let address = canned_server(reply, Request::Http);
            let error = match RestClient::connect(&address)
                .unwrap()
                .send("GET", "/", None)
            {
                Ok(_) => panic!("{expected}: answered"),
                Err(error) => error.to_string(),
            };
            assert!(error.contains(expected), "{expected}: {error}");
        }
    }

    #[test]
    fn the_redis_connection_reads_each_kind_of_reply_and_refuses_errors() {
        let port = |address: String| address.rsplit_once(':').unwrap().1.parse::<u16>().unwrap();
        let replies: [(&'static [u8], Result<&str, &str>); 5] = [
            (b"+PONG\r\n", Ok("PONG")),
            (b":42\r\n", Ok("42")),
            (b"$11\r\na:1\r\nb:2\r\nc\r\n", Ok("a:1\r\nb:2\r\nc")),
            // Bad input: an error reply, and a reply of an unknown kind.
            (
                b"-ERR unknown command\r\n",
                Err("with an error: ERR unknown command"),
            ),
            (b"?what\r\n", Err("unexpected reply `?what`")),
        ];
        for (reply, expected) in replies {
            let address = canned_server(reply, Request::Line);
            let answer = RedisConnection::connect(port(address))
                .unwrap()
                .command("PING")
                .map_err(|error| error.to_string());
            match (answer, expected) {
                (Ok(text), Ok(wanted)) => assert_eq!(text, wanted),
                (Err(error), Err(wanted)) => assert!(error.contains(wanted), "{error}"),
                (other, wanted) => panic!("{reply:?}: {other:?}, expected {wanted:?}"),
            }
        }
    }

    #[test]
    fn the_scripts_run_are_read_from_the_command_stats() {
        let stats = "# Commandstats\r\ncmdstat_ping:calls=9,usec=3,usec_per_call=0.33\r\n\
                     cmdstat_evalsha:calls=18200,usec=1,rejected_calls=0\r\n\
                     cmdstat_eval:calls=1,usec=40\r\ncmdstat_info:calls=4,usec=8\r\n";
        assert_eq!(script_calls(stats).unwrap(), 18201);
        // A server that never ran a script has no line for it.
        assert_eq!(
            script_calls("# Commandstats\r\ncmdstat_ping:calls=2\r\n").unwrap(),
            0
        );
        // Bad input: a line without its count, and a count that is not a number.
        let error = script_calls("cmdstat_evalsha:usec=3")
            .unwrap_err()
            .to_string();
        assert!(error.contains("no calls="), "{error}");
        let error = script_calls("cmdstat_eval:calls=many,usec=3")
            .unwrap_err()
            .to_string();
        assert!(error.contains("`many`"), "{error}");
    }

    #[test]
    fn the_rows_touched_are_read_from_psql_by_table() {
        let rows = parse_table_rows("mcp_servers|300|90000\nevents|18200|0\n\n").unwrap();
        assert_eq!(
            rows.get("mcp_servers"),
            Some(&TableRows {
                written: 300,
                read: 90000
            })
        );
        assert_eq!(rows.get("events").map(|rows| rows.written), Some(18200));
        assert_eq!(rows.len(), 2);
        assert!(parse_table_rows("").unwrap().is_empty());
        // Bad input: too few fields, too many, and a count that is not a number.
        for (line, expected) in [
            ("mcp_servers|300", "not `table|written|read`"),
            ("a|1|2|3", "not `table|written|read`"),
            ("mcp_servers|lots|0", "`lots`"),
            ("mcp_servers|1|-2", "`-2`"),
        ] {
            let error = parse_table_rows(line).unwrap_err().to_string();
            assert!(error.contains(expected), "{line}: {error}");
        }
    }

    #[test]
    fn a_server_is_found_by_name_and_port_and_its_descendants_cpu_counted() {
        let port = 60_000 + (std::process::id() % 5_000) as u16;
        // A shell whose command line names the port as `-p PORT`, idle, with a child that is
        // busy for as long as the shell lives: only the child's CPU makes the count grow.
        let mut shell = std::process::Command::new("sh")
            .args([
                "-c",
                "sh -c 'while kill -0 $PPID 2>/dev/null; do :; done' & wait",
                "sh",
                "-p",
            ])
            .arg(port.to_string())
            .spawn()
            .unwrap();
        // The child is `sh` once it has exec'd, which takes a moment after the spawn.
        let deadline = Instant::now() + Duration::from_secs(10);
        let server = loop {
            if let Some(server) = ServerProcesses::find("sh", port) {
                break server;
            }
            assert!(Instant::now() < deadline, "the shell is not found");
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(server.root, shell.id());
        assert_eq!(parent_of(shell.id()), Some(std::process::id()));
        let first = server.cpu_nanos();
        std::thread::sleep(Duration::from_millis(300));
        let second = server.cpu_nanos();
        assert!(
            second > first,
            "the busy child's CPU counts: {first} then {second}"
        );
        // Bad input: another name on the same port, and the same name on another port.
        assert!(ServerProcesses::find("no-such-server", port).is_none());
        assert!(ServerProcesses::find("sh", port.wrapping_add(1)).is_none());
        let _ = shell.kill();
        let _ = shell.wait();
    }
}
