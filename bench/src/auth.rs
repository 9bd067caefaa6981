//! The `auth` scenario: what authentication and authorization add to a request.
//!
//! Four gateways run side by side on the same configuration and the same fixture server:
//! auth off; auth on with one API key in the store; auth on with 10,000 more keys in the store;
//! auth on with an OAuth issuer (`auth.oauth.issuers`, whose key set this harness serves) and a
//! bearer token this harness signed (RS256) for the gateway's resource. Rounds alternate
//! between them. For each, at concurrency 1: `GET /api/mcp_servers` and a `tools/call` of
//! `fx__echo` through `/mcp`. The added p50 is each auth-on figure minus the auth-off figure of
//! the same round; the harness prints the medians over the rounds, and what the bearer token
//! costs over the API key (the same token on every request, as MCP clients send it).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use mcpgw_authz::{AuthStore as _, NewApiKey, RoleBook};
use mcpgw_core::Clock as _;
use mcpgw_gateway::{OsSecrets, TokioClock};

use crate::{http, mcp, sibling_binary, start_gateway, stats};

const ROUNDS: usize = 5;
const REQUESTS: usize = 3000;
const WARM_UP: usize = 300;
const EXTRA_KEYS: usize = 10_000;
/// The resource the JWT gateway is configured with, and its tokens' audience.
const RESOURCE: &str = "http://bench.test/mcp";
/// The RSA key the harness signs tokens with (PKCS#1 DER), the oidc crate's test key.
const SIGNING_KEY: &[u8] = include_bytes!("../../crates/oidc/tests/keys/rsa-a.der");

/// Serves the issuer's discovery document and key set on a loopback port until the process
/// ends; answers the issuer URL.
fn serve_issuer() -> anyhow::Result<String> {
    use std::io::{BufRead as _, BufReader, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let issuer = format!("http://{}", listener.local_addr()?);
    let mut jwk = jsonwebtoken::jwk::Jwk::from_encoding_key(
        &jsonwebtoken::EncodingKey::from_rsa_der(SIGNING_KEY),
        jsonwebtoken::Algorithm::RS256,
    )?;
    jwk.common.key_id = Some("bench".to_owned());
    let keys = serde_json::json!({ "keys": [jwk] }).to_string();
    let discovery =
        serde_json::json!({"issuer": issuer, "jwks_uri": format!("{issuer}/keys")}).to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let Ok(clone) = stream.try_clone() else {
                continue;
            };
            let mut reader = BufReader::new(clone);
            let mut request_line = String::new();
            let _ = reader.read_line(&mut request_line);
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                    break;
                }
            }
            let body = match request_line.split_whitespace().nth(1) {
                Some("/keys") => keys.as_str(),
                Some("/.well-known/openid-configuration") => discovery.as_str(),
                _ => "",
            };
            let status = if body.is_empty() {
                "404 Not Found"
            } else {
                "200 OK"
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    Ok(issuer)
}

/// A token of `issuer` for the bench's principal, valid for an hour, allowed everything.
fn bench_token(issuer: &str) -> anyhow::Result<String> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
    header.kid = Some("bench".to_owned());
    let claims = serde_json::json!({
        "iss": issuer, "aud": RESOURCE, "sub": "bench", "scope": "mcp:admin",
        "iat": now, "exp": now + 3600,
    });
    Ok(jsonwebtoken::encode(
        &header,
        &claims,
        &jsonwebtoken::EncodingKey::from_rsa_der(SIGNING_KEY),
    )?)
}

/// Writes `extra` keys for other principals and one admin key into the store under `data_dir`;
/// answers the admin key.
fn seed_keys(data_dir: &Path, extra: usize) -> anyhow::Result<String> {
    std::fs::create_dir_all(data_dir)?;
    let store = mcpgw_store_sqlite::SqliteStore::open(&data_dir.join("mcpgw.db"))?;
    let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    let roles = RoleBook::new([]);
    let issue = |principal: &str, role: Option<&str>| -> anyhow::Result<_> {
        NewApiKey::parse(principal, "bench", role, None, &roles)
            .map_err(|error| anyhow::anyhow!("{error}"))?
            .issue(&OsSecrets, TokioClock::default().wall())
            .map_err(|error| anyhow::anyhow!("{error}"))
    };
    runtime.block_on(async {
        for index in 0..extra {
            let issued = issue(&format!("service:bench-{index}"), Some("viewer"))?;
            store
                .insert_key(&issued.record)
                .await
                .map_err(|error| anyhow::anyhow!("{error}"))?;
        }
        let admin = issue("user:bench", Some("admin"))?;
        store
            .insert_key(&admin.record)
            .await
            .map_err(|error| anyhow::anyhow!("{error}"))?;
        Ok(admin.raw_key.expose().to_owned())
    })
}

struct Figures {
    rest_p50: Duration,
    call_p50: Duration,
}

fn measure(address: &str, header: Option<&str>) -> anyhow::Result<Figures> {
    let mut client = http::Client::connect(address)?;
    if let Some(line) = header {
        client = client.with_header(line);
    }
    let mut rest = Vec::with_capacity(REQUESTS);
    for index in 0..WARM_UP + REQUESTS {
        let sent = Instant::now();
        let (status, _) = client.get("/api/mcp_servers")?;
        if status != 200 {
            bail!("GET /api/mcp_servers answered {status}");
        }
        if index >= WARM_UP {
            rest.push(sent.elapsed());
        }
    }
    let url = format!("http://{address}/mcp");
    let mut mcp = mcp::McpClient::connect_with_header(&url, header)?;
    let params = r#"{"name":"fx__echo","arguments":{"text":"hello"}}"#;
    let mut calls = Vec::with_capacity(REQUESTS);
    for index in 0..WARM_UP + REQUESTS {
        let sent = Instant::now();
        let answer = mcp.request("tools/call", params)?;
        if !answer.contains("hello") {
            bail!("unexpected answer: {answer}");
        }
        if index >= WARM_UP {
            calls.push(sent.elapsed());
        }
    }
    Ok(Figures {
        rest_p50: stats::median(&mut rest),
        call_p50: stats::median(&mut calls),
    })
}

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

fn added(on: Duration, off: Duration) -> f64 {
    micros(on) - micros(off)
}

pub fn run() -> anyhow::Result<()> {
    let gateway_binary = sibling_binary("mcpgw")?;
    let fixture = sibling_binary("mcpgw-fixture-server")?;
    let work = tempfile::tempdir()?;
    let servers = format!(
        "mcp_servers:\n  fx:\n    mode: subprocess\n    command: [\"{}\"]\n",
        fixture.display()
    );
    let off_config = work.path().join("off.yaml");
    std::fs::write(&off_config, &servers)?;
    let on_config = work.path().join("on.yaml");
    std::fs::write(&on_config, format!("auth:\n  enabled: true\n{servers}"))?;
    let issuer = serve_issuer()?;
    let jwt_config = work.path().join("jwt.yaml");
    std::fs::write(
        &jwt_config,
        format!(
            "auth:\n  enabled: true\n  oauth:\n    resource: \"{RESOURCE}\"\n    issuers:\n      - issuer: \"{issuer}\"\n  role_assignments:\n    - {{principal: \"user:bench\", role: admin}}\n{servers}"
        ),
    )?;

    let one_key_dir = work.path().join("one-key");
    let one_key = seed_keys(&one_key_dir, 0)?;
    let many_keys_dir = work.path().join("many-keys");
    let started = Instant::now();
    let many_keys = seed_keys(&many_keys_dir, EXTRA_KEYS)?;
    println!(
        "# auth: API-key authentication and authorization added to a request, c=1, p50 over {REQUESTS} requests"
    );
    println!(
        "({EXTRA_KEYS} extra keys written in {:.1} s)",
        started.elapsed().as_secs_f64()
    );

    let off = start_gateway(&gateway_binary, &off_config, &work.path().join("off"))?;
    let on = start_gateway(&gateway_binary, &on_config, &one_key_dir)?;
    let many = start_gateway(&gateway_binary, &on_config, &many_keys_dir)?;
    let jwt = start_gateway(&gateway_binary, &jwt_config, &work.path().join("jwt"))?;
    let one_header = format!("X-API-Key: {one_key}");
    let many_header = format!("X-API-Key: {many_keys}");
    let jwt_header = format!("Authorization: Bearer {}", bench_token(&issuer)?);

    let mut rest_added = Vec::new();
    let mut call_added = Vec::new();
    let mut rest_added_many = Vec::new();
    let mut call_added_many = Vec::new();
    let mut rest_jwt_over_key = Vec::new();
    let mut call_jwt_over_key = Vec::new();
    for round in 1..=ROUNDS {
        let baseline = measure(&off.address, None).context("auth off")?;
        let with_key = measure(&on.address, Some(&one_header)).context("auth on")?;
        let with_many = measure(&many.address, Some(&many_header)).context("auth on, 10k keys")?;
        let with_jwt = measure(&jwt.address, Some(&jwt_header)).context("auth on, jwt")?;
        println!(
            "round {round}: GET /api/mcp_servers p50 off {:.1} µs, on {:.1} µs, on+10k keys {:.1} µs, jwt {:.1} µs | tools/call p50 off {:.1} µs, on {:.1} µs, on+10k keys {:.1} µs, jwt {:.1} µs",
            micros(baseline.rest_p50),
            micros(with_key.rest_p50),
            micros(with_many.rest_p50),
            micros(with_jwt.rest_p50),
            micros(baseline.call_p50),
            micros(with_key.call_p50),
            micros(with_many.call_p50),
            micros(with_jwt.call_p50),
        );
        rest_jwt_over_key.push(added(with_jwt.rest_p50, with_key.rest_p50));
        call_jwt_over_key.push(added(with_jwt.call_p50, with_key.call_p50));
        rest_added.push(added(with_key.rest_p50, baseline.rest_p50));
        call_added.push(added(with_key.call_p50, baseline.call_p50));
        rest_added_many.push(added(with_many.rest_p50, baseline.rest_p50));
        call_added_many.push(added(with_many.call_p50, baseline.call_p50));
    }
    let median = |values: &mut Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    println!(
        "median added p50 (target < 20 µs): GET /api/mcp_servers {:+.1} µs (10k keys {:+.1} µs); tools/call {:+.1} µs (10k keys {:+.1} µs)",
        median(&mut rest_added),
        median(&mut rest_added_many),
        median(&mut call_added),
        median(&mut call_added_many),
    );
    println!(
        "median bearer token (RS256 JWT) over API key (target < 20 µs): GET /api/mcp_servers {:+.1} µs; tools/call {:+.1} µs",
        median(&mut rest_jwt_over_key),
        median(&mut call_jwt_over_key),
    );
    Ok(())
}
