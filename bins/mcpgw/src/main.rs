//! `mcpgw`: the bundled mcpgw server.
//!
//! This is the composition root and nothing more: it parses the command line, reads the
//! configuration file, opens the store, builds the adapters, hands them to the application
//! layer as ports, and runs the HTTP server until a signal arrives. Behaviour belongs in the
//! crates; a decision made here is a wiring decision.

mod cli;
mod keys;
mod serve;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    limit_allocator_arenas();
    let cli = cli::Cli::parse();
    init_tracing();
    match cli::run(cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("mcpgw: {error:#}");
            ExitCode::from(1)
        }
    }
}

/// glibc's allocator gives each thread that allocates an arena of its own (up to eight per
/// core), and an arena keeps the memory it once held. The gateway's threads (HTTP workers, the
/// core runtime, the event-log writer, ...) mostly wait; two arenas serve them, and small
/// allocations go through each thread's cache without taking an arena's lock at all. An
/// operator can still choose otherwise with `MALLOC_ARENA_MAX`.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn limit_allocator_arenas() {
    if std::env::var_os("MALLOC_ARENA_MAX").is_some() {
        return;
    }
    // SAFETY: `mallopt` only sets a parameter of the allocator. It is called first thing in
    // `main`, before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn limit_allocator_arenas() {}

fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("MCP_LOG")
        .or_else(|_| EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| EnvFilter::new("info,rmcp=warn"));
    let colours = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colours)
        // Reporting a failed write to stderr on stderr would panic once stderr is closed.
        .log_internal_errors(false)
        .with_writer(std::io::stderr)
        .init();
}
