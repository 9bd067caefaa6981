//! Serves the bundled gateway with the `in_process` mode registered, on 127.0.0.1:8080, with
//! the configuration file named by the first argument (this example's `gateway.yaml` by
//! default), until Ctrl-C.

use mcpgw_server::{GatewayBuilder, Listen, StartError};

fn main() -> Result<(), StartError> {
    let file = std::env::args()
        .nth(1)
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/gateway.yaml").to_owned());
    let environment = mcpgw_server::process_environment();
    let runtime = mcpgw_server::core_runtime(&environment)?;
    let builder = mcpgw_example_in_process::register(
        GatewayBuilder::new(Default::default())
            .data_dir("./data")
            .environment(environment),
    )
    // After the mode is registered, so that the file may use it.
    .read_config_file(file)?;
    let running = runtime.block_on(builder.build())?;
    let served = Listen::new("127.0.0.1", 8080, false)
        .bind()
        .and_then(|listener| running.serve_http(listener));
    runtime.block_on(running.shutdown());
    served
}
