//! Serves the bundled gateway on 127.0.0.1:8080 with its servers kept in `./servers.json`
//! (everything else under `./data`), until Ctrl-C.

use std::sync::Arc;

use mcpgw_example_json_store::JsonFileRepository;
use mcpgw_server::{GatewayBuilder, Listen, StartError};

fn main() -> Result<(), StartError> {
    let environment = mcpgw_server::process_environment();
    let runtime = mcpgw_server::core_runtime(&environment)?;
    let running = runtime.block_on(
        GatewayBuilder::new(Default::default())
            .data_dir("./data")
            .with_server_repository(Arc::new(JsonFileRepository::new("servers.json")))
            .build(),
    )?;
    let served = Listen::new("127.0.0.1", 8080, false)
        .bind()
        .and_then(|listener| running.serve_http(listener));
    runtime.block_on(running.shutdown());
    served
}
