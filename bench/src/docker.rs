//! The `docker` scenario: the cold start of a docker-mode server, from the tool call that
//! finds it stopped to the tool's first result, against the cold start of the same fixture
//! server run as a subprocess, through the same gateway in the same run.
//!
//! One gateway serves three copies of the fixture MCP server:
//! - `local`: the fixture binary as a subprocess (the baseline);
//! - `boxed`: the test image `localhost/mcpgw-fixture:test` on the Docker Engine API (podman's,
//!   at `DOCKER_HOST`, default `unix:///tmp/podman.sock`);
//! - `boxed-cli`: the same image through the `podman` command-line client.
//!
//! Each round stops all three (`POST /api/mcp_servers/{id}/stop`, which removes the
//! containers), then times one `echo` call per server, in an order that rotates between rounds
//! so that a drift in machine load favours none of them. The image is built by
//! `scripts/build-test-image.sh`; the engine is set up by `scripts/setup-podman.sh`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use anyhow::bail;

use crate::{mcp, sibling_binary, start_gateway_with_env, stats};

const ROUNDS: usize = 9;
const IMAGE: &str = "localhost/mcpgw-fixture:test";
const SERVERS: [&str; 3] = ["local", "boxed", "boxed-cli"];

pub fn run() -> anyhow::Result<()> {
    let gateway_binary = sibling_binary("mcpgw")?;
    let fixture = sibling_binary("mcpgw-fixture-server")?;
    let docker_host = std::env::var("DOCKER_HOST")
        .ok()
        .filter(|host| !host.is_empty())
        .unwrap_or_else(|| "unix:///tmp/podman.sock".to_owned());
    let socket = docker_host.trim_start_matches("unix://");
    if !std::path::Path::new(socket).exists() {
        bail!(
            "no container engine socket at {socket}; run scripts/setup-podman.sh (or set \
             DOCKER_HOST) first"
        );
    }
    let work = tempfile::tempdir()?;
    let config = work.path().join("gateway.yaml");
    std::fs::write(&config, config_yaml(&fixture.display().to_string()))?;
    let gateway = start_gateway_with_env(
        &gateway_binary,
        &config,
        &work.path().join("data"),
        &[("DOCKER_HOST", docker_host.as_str())],
    )?;
    let url = format!("http://{}/mcp", gateway.address);

    println!(
        "# docker: cold start (stopped server -> first tool result) of the fixture server as a \
         subprocess (`local`), as a container on the Engine API at {docker_host} (`boxed`), and \
         through the podman CLI (`boxed-cli`); image {IMAGE}; {ROUNDS} rounds, rotating order"
    );
    let mut client = mcp::McpClient::connect(&url)?;
    // One warm-up start each, so that the image's layers and the binaries are in the page cache
    // for every round alike.
    // The gateway learns each server's tools by starting it once in the background; until
    // then the tools are unknown.
    for server in SERVERS {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match call_echo(&mut client, server) {
                Ok(()) => break,
                Err(error) if Instant::now() > deadline => {
                    return Err(error.context(format!("`{server}` never became callable")));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); SERVERS.len()];
    for round in 0..ROUNDS {
        for server in SERVERS {
            stop(&gateway.address, server)?;
        }
        for offset in 0..SERVERS.len() {
            let index = (round + offset) % SERVERS.len();
            let started = Instant::now();
            call_echo(&mut client, SERVERS[index])?;
            samples[index].push(started.elapsed());
        }
    }
    for server in SERVERS {
        stop(&gateway.address, server)?;
    }

    let local_median = stats::median(&mut samples[0].clone());
    for (server, runs) in SERVERS.iter().zip(samples.iter_mut()) {
        let median = stats::median(runs);
        let fastest = runs.iter().min().copied().unwrap_or_default();
        let slowest = runs.iter().max().copied().unwrap_or_default();
        println!(
            "{server:>10}: cold start median {:8.1} ms (min {:.1}, max {:.1}); {:5.1}x the \
             subprocess",
            stats::millis(median),
            stats::millis(fastest),
            stats::millis(slowest),
            stats::millis(median) / stats::millis(local_median),
        );
    }
    Ok(())
}

fn config_yaml(fixture: &str) -> String {
    // Long idle and health intervals: only the stops of the harness end a server.
    format!(
        "mcp_servers:
  local:
    mode: subprocess
    command: [\"{fixture}\"]
    idle_ttl_s: 86400
    health_check_interval_s: 3600
  boxed:
    mode: docker
    image: {IMAGE}
    idle_ttl_s: 86400
    health_check_interval_s: 3600
  boxed-cli:
    mode: docker
    image: {IMAGE}
    runtime: podman
    idle_ttl_s: 86400
    health_check_interval_s: 3600
"
    )
}

fn call_echo(client: &mut mcp::McpClient, server: &str) -> anyhow::Result<()> {
    let params = format!(r#"{{"name":"{server}__echo","arguments":{{"text":"cold"}}}}"#);
    let answer = client.request("tools/call", &params)?;
    if !answer.contains("cold") || answer.contains(r#""isError":true"#) {
        bail!("{server}__echo answered {answer}");
    }
    Ok(())
}

/// `POST /api/mcp_servers/{server}/stop` on its own connection; fails unless it answers 200.
fn stop(address: &str, server: &str) -> anyhow::Result<()> {
    let mut stream = TcpStream::connect(address)?;
    write!(
        stream,
        "POST /api/mcp_servers/{server}/stop HTTP/1.1\r\nHost: {address}\r\nContent-Length: \
         0\r\nConnection: close\r\n\r\n"
    )?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    if !answer.starts_with("HTTP/1.1 200") {
        bail!(
            "stopping `{server}` answered: {}",
            answer.lines().next().unwrap_or("")
        );
    }
    Ok(())
}
