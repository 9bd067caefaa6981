//! The benchmark harness of mcpgw: starts the real gateway binary and prints figures.
//!
//! `cargo run --release -p mcpgw-bench -- [scenario]` with a scenario of:
//! - `control-plane` (default): 1,000 registered servers; `GET /api/mcp_servers` latency and
//!   throughput at concurrency 1 and 16, idle RSS, and the time from exec to a ready probe.
//!
//! It measures, it never asserts: targets live in the issues and the figures go in the notes.
//! The machines are noisy, so every figure is a median over several rounds or a percentile over
//! many requests, and the harness says how many.

#![allow(clippy::print_stdout)]

mod http;
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
        other => bail!("unknown scenario `{other}`; the scenarios are: control-plane"),
    }
}

/// The release binaries sit beside this harness's own executable.
fn sibling_binary(name: &str) -> anyhow::Result<PathBuf> {
    let current = std::env::current_exe()?;
    let path = current.with_file_name(name);
    if !path.is_file() {
        bail!(
            "{} is missing; build it first: cargo build --release -p mcp-gateway -p mcpgw-testkit",
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
    let mut child = Command::new(binary)
        .args(["--http", "--port", "0", "--config"])
        .arg(config)
        .arg("--data-dir")
        .arg(data_dir)
        .env("MCP_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot start the gateway")?;
    let stderr = child.stderr.take().context("no stderr")?;
    let mut lines = BufReader::new(stderr).lines();
    let address = loop {
        let Some(line) = lines.next() else {
            bail!("the gateway exited before listening")
        };
        if let Some(address) = line?.strip_prefix("listening on http://") {
            break address.trim().to_owned();
        }
    };
    // Keep draining stderr so the gateway never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Ok(Gateway { child, address })
}

fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|line| line.starts_with("VmRSS:"))
        .context("no VmRSS")?;
    Ok(line
        .split_whitespace()
        .nth(1)
        .context("bad VmRSS")?
        .parse()?)
}

fn control_plane() -> anyhow::Result<()> {
    const SERVERS: usize = 1000;
    let gateway_binary = sibling_binary("mcp-gateway")?;
    let fixture = sibling_binary("mcpgw-fixture-server")?;
    let work = tempfile::tempdir()?;
    let config = work.path().join("gateway.yaml");
    let mut yaml = String::from("mcp_servers:\n");
    for index in 0..SERVERS {
        yaml.push_str(&format!(
            "  server-{index:04}:\n    mode: subprocess\n    command: [\"{}\"]\n    description: bench server {index}\n",
            fixture.display()
        ));
    }
    std::fs::write(&config, yaml)?;

    println!("# control plane: {SERVERS} registered servers (none started)");

    // Time from exec to a ready probe, median of several fresh starts.
    let mut ready_times = Vec::new();
    for round in 0..7 {
        let data_dir = work.path().join(format!("data-ready-{round}"));
        let started = Instant::now();
        let mut child = Command::new(&gateway_binary)
            .args(["--http", "--port", "0", "--config"])
            .arg(&config)
            .arg("--data-dir")
            .arg(&data_dir)
            .env("MCP_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let stderr = child.stderr.take().context("no stderr")?;
        let mut lines = BufReader::new(stderr).lines();
        let address = loop {
            let Some(line) = lines.next() else {
                bail!("the gateway exited before listening")
            };
            if let Some(address) = line?.strip_prefix("listening on http://") {
                break address.trim().to_owned();
            }
        };
        loop {
            if let Ok(mut client) = http::Client::connect(&address)
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
        let _ = child.kill();
        let _ = child.wait();
    }
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
    println!("RSS idle after start: {:.1} MiB", idle_rss as f64 / 1024.0);

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
