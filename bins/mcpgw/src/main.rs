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
