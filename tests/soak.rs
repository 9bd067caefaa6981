//! The short form of the load-and-soak run (`mcpgw-bench soak` is the long one): the real
//! gateway binary with 200 registered fixture servers, 40 of them running, under 40 s of mixed
//! REST, MCP and WebSocket traffic with injected crashes and stop/starts. It proves the
//! resource bounds of `mcpgw_fixtures::soak` (no leaked or zombie processes, fds back near their
//! baseline, bounded RSS growth, a clean exit on SIGTERM with no fixture left) and that every
//! failed call is one the injected chaos explains.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use mcpgw_fixtures::soak::{SoakOptions, SoakReport, run};

/// The failures a crash or a stop of an upstream may cause: the gateway answers a call whose
/// server died under it, or is restarting after a crash, with JSON-RPC -32603 (server
/// unavailable). Anything else, a 5xx of the REST API or a broken connection, is a defect.
const CHAOS_ERROR_KINDS: &[&str] = &["mcp jsonrpc -32603"];

fn short_soak() -> SoakReport {
    let options = SoakOptions::new(
        PathBuf::from(env!("CARGO_BIN_EXE_mcpgw")),
        mcpgw_fixtures::fixture::fixture_server_binary(),
        Duration::from_secs(40),
        40,
        200,
    )
    // Few clients: the machine runs other test binaries at the same time.
    .clients(3, 2, 2)
    .warmup(Duration::from_secs(5));
    match run(&options) {
        Ok(report) => report,
        Err(error) => panic!("{error}"),
    }
}

#[test]
fn a_short_soak_leaks_nothing_and_fails_only_where_chaos_was_injected() {
    let started = Instant::now();
    let report = short_soak();
    let table = report.table();

    // The resource bounds held (`run` fails otherwise); the samples say so in figures too.
    assert_eq!(report.start.descendants, 40, "{table}");
    assert_eq!(report.end.descendants, 40, "{table}");
    assert_eq!(report.after_stop.descendants, 0, "{table}");
    assert!(report.leftover_fixtures.is_empty(), "{table}");
    assert!(report.exit_clean, "{table}");

    // Traffic of every kind flowed.
    assert!(report.served_with_prefix("mcp tools/call") > 500, "{table}");
    for route in [
        "rest GET /api/mcp_servers/{id}",
        "rest GET /api/mcp_servers/{id}/logs",
        "rest GET /api/mcp_servers/{id}/tools",
        "rest GET /api/mcp_servers/{id}/health",
        "rest GET /api/system",
        "rest POST /api/mcp_servers/{id}/stop",
        "rest POST /api/mcp_servers/{id}/start",
    ] {
        assert!(report.served_with_prefix(route) > 0, "{route}: {table}");
    }
    assert!(report.ws_events > 0, "{table}");

    // Every injected crash happened, failed its own call, and is the gateway's only crash.
    assert!(report.crashes_injected >= 5, "{table}");
    assert_eq!(
        report.crashes_acknowledged, report.crashes_injected,
        "{table}"
    );
    assert_eq!(
        report.crashes_seen_by_gateway, report.crashes_injected,
        "{table}"
    );
    assert!(report.stop_starts >= 3, "{table}");

    // Failures are only of the kinds chaos causes, and each is explained by a crash or a stop.
    for (kind, count) in &report.errors {
        assert!(
            CHAOS_ERROR_KINDS.contains(&kind.as_str()),
            "unexpected failure kind `{kind}` ({} times): {table}",
            count.total
        );
    }
    assert_eq!(report.unexpected_errors(), 0, "{table}");

    assert!(
        started.elapsed() < Duration::from_secs(90),
        "the short soak took {:?}",
        started.elapsed()
    );
}
