//! Serves the example application on 127.0.0.1:8080, with the gateway's data under `./data`,
//! until Ctrl-C; then the gateway stops every server it runs.

use std::net::SocketAddr;

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let address: SocketAddr = ([127, 0, 0, 1], 8080).into();
    let gateway = mcpgw_example_mounted::build_gateway(Default::default(), "./data".as_ref())
        .await
        .map_err(std::io::Error::other)?;
    let state = gateway.http_state(address).map_err(std::io::Error::other)?;
    gateway.gateway().mark_startup_complete();
    actix_web::HttpServer::new(move || mcpgw_example_mounted::application(state.clone()))
        .bind(address)?
        .run()
        .await?;
    gateway.shutdown().await;
    Ok(())
}
