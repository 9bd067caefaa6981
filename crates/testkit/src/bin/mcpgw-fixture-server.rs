//! The fixture MCP server over stdio, or Streamable HTTP with `--http PORT`: see
//! `mcpgw_testkit::fixture` for its tools and options. It must never write anything but MCP
//! messages to stdout.

use std::process::ExitCode;

use mcpgw_testkit::fixture::{FixtureOptions, serve_http, serve_stdio};

fn main() -> ExitCode {
    let options = match FixtureOptions::parse_args(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("mcpgw-fixture-server: {message}");
            return ExitCode::from(2);
        }
    };
    // One thread is plenty for a fixture and keeps its start-up and footprint small.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("mcpgw-fixture-server: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let served = if options.http_port.is_some() {
        runtime.block_on(serve_http(options))
    } else {
        runtime.block_on(serve_stdio(options))
    };
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("mcpgw-fixture-server: {error}");
            ExitCode::FAILURE
        }
    }
}
