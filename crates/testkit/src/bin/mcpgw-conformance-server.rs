//! The server side of the MCP conformance suite over stdio: see `mcpgw_testkit::conformance`
//! for what it serves. It must never write anything but MCP messages to stdout.

use std::process::ExitCode;

fn main() -> ExitCode {
    if let Some(argument) = std::env::args().nth(1) {
        eprintln!(
            "mcpgw-conformance-server: unexpected argument `{argument}`; it takes none and \
             serves MCP on stdin and stdout"
        );
        return ExitCode::from(2);
    }
    // One thread is plenty for a test server and keeps its start-up small.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("mcpgw-conformance-server: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(mcpgw_testkit::conformance::serve_stdio()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("mcpgw-conformance-server: {error}");
            ExitCode::FAILURE
        }
    }
}
