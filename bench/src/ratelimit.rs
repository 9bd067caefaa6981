//! The `ratelimit` scenario: what a rate-limit check costs and what the buckets weigh.
//!
//! Three parts: the cost of one `check` of the bundled token buckets in-process (a hot key,
//! 100,000 keys in turn, two threads), with the caller and key building the REST middleware does
//! around it; the memory of 100,000 buckets in-process; and the RSS of the real gateway after
//! 100,000 REST requests from distinct callers (distinct `X-Forwarded-For` through a trusted
//! proxy), with a policy whose buckets live for an hour.

use std::hint::black_box;
use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use mcpgw_authz::{RateLimitCaller, RateLimitKey, RateLimitPolicy, RateLimitScope, RateLimiter};
use mcpgw_ratelimit::TokenBuckets;

use crate::{sibling_binary, start_gateway_with_env};

const CALLERS: u32 = 100_000;
const ROUNDS: usize = 7;
/// rps 1 with a burst of 3,600: a bucket takes an hour to refill, so none is evicted during the
/// scenario and the memory is that of every caller seen in the last hour.
const HOUR_POLICY: RateLimitPolicy = RateLimitPolicy {
    requests_per_second: 1.0,
    burst: 3600,
};

pub fn run() -> anyhow::Result<()> {
    // Memory first: the buckets the timing runs make and drop stay with the allocator, which
    // would then serve these from memory already counted in the RSS before.
    bucket_memory()?;
    check_cost();
    gateway_memory()
}

/// The `n`th distinct client address, 10.0.0.0 upwards.
fn address(n: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + n))
}

/// The median over [`ROUNDS`] of nanoseconds per operation, `run` doing `per_round` of them.
fn median_ns(per_round: u64, mut run: impl FnMut()) -> f64 {
    let mut samples: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let started = Instant::now();
            run();
            started.elapsed().as_nanos() as f64 / per_round as f64
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[ROUNDS / 2]
}

fn check_cost() {
    // Tokens never run out, so every check takes the allowed path the REST middleware sees
    // for callers within their limit.
    let policy = RateLimitPolicy {
        requests_per_second: 1e9,
        burst: 1_000_000_000,
    };
    println!("# rate limit: ns per check, median of {ROUNDS} rounds (target < 1,000 ns)");

    let buckets = TokenBuckets::new(policy);
    let caller = RateLimitCaller::of(None, Some(address(1)));
    let hot = RateLimitKey {
        scope: RateLimitScope::Rest,
        caller: &caller,
        tool: None,
    };
    const HOT: u64 = 1_000_000;
    let ns = median_ns(HOT, || {
        for _ in 0..HOT {
            black_box(buckets.check(black_box(&hot)));
        }
    });
    println!("check, one hot key, 1 thread:              {ns:>7.0} ns");

    let callers: Vec<RateLimitCaller> = (0..CALLERS)
        .map(|n| RateLimitCaller::of(None, Some(address(n))))
        .collect();
    let buckets = TokenBuckets::new(policy);
    let first = Instant::now();
    for caller in &callers {
        black_box(buckets.check(&RateLimitKey {
            scope: RateLimitScope::Rest,
            caller,
            tool: None,
        }));
    }
    println!(
        "check, first sight of each of {CALLERS} keys:  {:>7.0} ns (one pass, bucket created)",
        first.elapsed().as_nanos() as f64 / f64::from(CALLERS)
    );
    let ns = median_ns(u64::from(CALLERS) * 3, || {
        for _ in 0..3 {
            for caller in &callers {
                black_box(buckets.check(&RateLimitKey {
                    scope: RateLimitScope::Rest,
                    caller,
                    tool: None,
                }));
            }
        }
    });
    println!("check, {CALLERS} keys in turn, 1 thread:    {ns:>7.0} ns");

    // Two threads, each on its own half of the keys (the machine has 2 cores).
    let per_thread = u64::from(CALLERS / 2) * 6;
    let mut wall = Vec::new();
    for _ in 0..ROUNDS {
        let started = Instant::now();
        std::thread::scope(|scope| {
            for half in callers.chunks(callers.len() / 2) {
                let buckets = &buckets;
                scope.spawn(move || {
                    for _ in 0..6 {
                        for caller in half {
                            black_box(buckets.check(&RateLimitKey {
                                scope: RateLimitScope::Rest,
                                caller,
                                tool: None,
                            }));
                        }
                    }
                });
            }
        });
        wall.push(started.elapsed().as_nanos() as f64 / per_thread as f64);
    }
    wall.sort_by(f64::total_cmp);
    let ns = wall[ROUNDS / 2];
    println!(
        "check, {CALLERS} keys, 2 threads:            {ns:>7.0} ns per check per thread ({:.1} M checks/s in all)",
        2000.0 / ns
    );

    // What the REST middleware adds around the check: the caller from the principal and the
    // address, and the key (which `check` builds again from it).
    const BUILD: u64 = 1_000_000;
    let ns = median_ns(BUILD, || {
        for n in 0..BUILD as u32 {
            black_box(RateLimitCaller::of(
                black_box(None),
                black_box(Some(address(n % CALLERS))),
            ));
        }
    });
    println!("RateLimitCaller::of (anonymous, by address): {ns:>6.0} ns");
    let ns = median_ns(BUILD, || {
        for n in 0..BUILD as u32 {
            black_box(RateLimitCaller::of(
                black_box(Some("user:alice")),
                black_box(Some(address(n % CALLERS))),
            ));
        }
    });
    println!("RateLimitCaller::of (a principal):           {ns:>6.0} ns");
    let mut buffer = String::new();
    let ns = median_ns(BUILD, || {
        for n in 0..BUILD as usize {
            let key = RateLimitKey {
                scope: RateLimitScope::Rest,
                caller: &callers[n % callers.len()],
                tool: None,
            };
            buffer.clear();
            key.write_bucket_key(&mut buffer);
            black_box(&buffer);
        }
    });
    println!("bucket key, reused buffer (in every check):  {ns:>6.0} ns");
    let ns = median_ns(BUILD, || {
        for n in 0..BUILD as u32 {
            let caller = RateLimitCaller::of(None, Some(address(n % CALLERS)));
            black_box(buckets.check(&RateLimitKey {
                scope: RateLimitScope::Rest,
                caller: &caller,
                tool: None,
            }));
        }
    });
    println!("caller + key + check, {CALLERS} keys, 1 thread: {ns:>5.0} ns");
}

fn status_kib(pid: &str, field: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|line| line.starts_with(field))
        .with_context(|| format!("no {field} in /proc/{pid}/status"))?;
    Ok(line
        .split_whitespace()
        .nth(1)
        .with_context(|| format!("bad {field}"))?
        .parse()?)
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn bucket_memory() -> anyhow::Result<()> {
    println!(
        "# rate limit: memory of {CALLERS} buckets in-process (rps 1, burst 3600: none idle for an hour)"
    );
    let before = status_kib("self", "VmRSS:")?;
    let buckets = TokenBuckets::new(HOUR_POLICY);
    for n in 0..CALLERS {
        let caller = RateLimitCaller::of(None, Some(address(n)));
        buckets.check(&RateLimitKey {
            scope: RateLimitScope::Rest,
            caller: &caller,
            tool: None,
        });
    }
    let after = status_kib("self", "VmRSS:")?;
    let grown = after.saturating_sub(before);
    println!(
        "RSS {:.1} MiB -> {:.1} MiB: +{:.1} MiB for {} buckets, {:.0} bytes per bucket",
        mib(before),
        mib(after),
        mib(grown),
        buckets.tracked(),
        grown as f64 * 1024.0 / f64::from(CALLERS)
    );
    drop(buckets);
    Ok(())
}

/// One answer's status and the headers this scenario looks at.
struct Answer {
    status: u16,
    limit: Option<String>,
}

/// A keep-alive connection that sends `GET path` with a given `X-Forwarded-For`.
struct Connection {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    host: String,
    body: Vec<u8>,
}

impl Connection {
    fn open(address: &str) -> anyhow::Result<Self> {
        let stream = TcpStream::connect(address)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        Ok(Self {
            writer: stream.try_clone()?,
            reader: BufReader::new(stream),
            host: address.to_owned(),
            body: Vec::new(),
        })
    }

    fn get(&mut self, path: &str, forwarded_for: IpAddr) -> anyhow::Result<Answer> {
        write!(
            self.writer,
            "GET {path} HTTP/1.1\r\nHost: {}\r\nX-Forwarded-For: {forwarded_for}\r\n\r\n",
            self.host
        )?;
        self.writer.flush()?;
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            bail!("the connection closed");
        }
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .context("no status")?
            .parse()
            .context("bad status")?;
        let mut length = 0;
        let mut limit = None;
        loop {
            line.clear();
            self.reader.read_line(&mut line)?;
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            let Some((name, value)) = header.split_once(':') else {
                continue;
            };
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse()?;
            } else if name.eq_ignore_ascii_case("x-ratelimit-limit") {
                limit = Some(value.trim().to_owned());
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                bail!("chunked answers are not expected from {path}");
            }
        }
        self.body.resize(length, 0);
        std::io::Read::read_exact(&mut self.reader, &mut self.body)?;
        Ok(Answer { status, limit })
    }
}

fn gateway_memory() -> anyhow::Result<()> {
    const CONNECTIONS: u32 = 4;
    println!(
        "# rate limit: RSS of the gateway after {CALLERS} distinct callers \
         (MCP_RATE_LIMIT_RPS=1, MCP_RATE_LIMIT_BURST=3600; target < 100 MiB)"
    );
    let gateway_binary = sibling_binary("mcpgw")?;
    let work = tempfile::tempdir()?;
    let config = work.path().join("gateway.yaml");
    std::fs::write(
        &config,
        "probe_tools: false\nauth:\n  trusted_proxies: [\"127.0.0.1\"]\nmcp_servers: {}\n",
    )?;
    let gateway = start_gateway_with_env(
        &gateway_binary,
        &config,
        &work.path().join("data"),
        &[
            ("MCP_RATE_LIMIT_RPS", "1"),
            ("MCP_RATE_LIMIT_BURST", "3600"),
        ],
    )?;
    let pid = gateway.child.id().to_string();

    // Warm-up from one caller, so that "before" is a gateway that has served requests.
    let mut warm = Connection::open(&gateway.address)?;
    let mut limit = None;
    for _ in 0..1000 {
        let answer = warm.get("/api/mcp_servers", address(CALLERS + 1))?;
        if answer.status != 200 {
            bail!("GET /api/mcp_servers answered {}", answer.status);
        }
        limit = answer.limit;
    }
    drop(warm);
    std::thread::sleep(Duration::from_millis(300));
    let before = status_kib(&pid, "VmRSS:")?;
    match &limit {
        Some(limit) => println!("X-RateLimit-Limit: {limit}"),
        None => println!(
            "no X-RateLimit-Limit header: this gateway does not limit REST requests, so the \
             figures below are without buckets"
        ),
    }

    let started = Instant::now();
    let workers: Vec<_> = (0..CONNECTIONS)
        .map(|worker| {
            let address_text = gateway.address.clone();
            std::thread::spawn(move || -> anyhow::Result<(u64, u64)> {
                let mut connection = Connection::open(&address_text)?;
                let (mut ok, mut limited) = (0, 0);
                for n in (worker..CALLERS).step_by(CONNECTIONS as usize) {
                    match connection.get("/api/mcp_servers", address(n))?.status {
                        200 => ok += 1,
                        429 => limited += 1,
                        other => bail!("GET /api/mcp_servers answered {other}"),
                    }
                }
                Ok((ok, limited))
            })
        })
        .collect();
    let (mut ok, mut limited) = (0, 0);
    for worker in workers {
        let (one_ok, one_limited) = worker
            .join()
            .map_err(|_| anyhow::anyhow!("a load worker panicked"))??;
        ok += one_ok;
        limited += one_limited;
    }
    let elapsed = started.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(300));
    let after = status_kib(&pid, "VmRSS:")?;
    let peak = status_kib(&pid, "VmHWM:")?;
    println!(
        "{CALLERS} requests from distinct X-Forwarded-For over {CONNECTIONS} connections in \
         {elapsed:.1} s ({:.0} req/s): {ok} answered 200, {limited} answered 429",
        f64::from(CALLERS) / elapsed
    );
    println!(
        "gateway RSS {:.1} MiB -> {:.1} MiB (+{:.1} MiB, {:.0} bytes per caller); VmHWM {:.1} MiB",
        mib(before),
        mib(after),
        mib(after.saturating_sub(before)),
        after.saturating_sub(before) as f64 * 1024.0 / f64::from(CALLERS),
        mib(peak)
    );
    Ok(())
}
