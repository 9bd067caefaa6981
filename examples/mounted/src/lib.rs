//! An actix-web application of one's own with the whole mcpgw gateway mounted next to its
//! routes: the REST API, `/mcp`, authentication and the browser checks come with it.
//!
//! [`build_gateway`] builds the gateway with `mcpgw_server::GatewayBuilder` (every default
//! adapter, its data in a directory of the application's choosing), and [`application`] is the
//! application: its own `/hello` first, then the gateway's service, which answers every other
//! path. `src/main.rs` serves it; `tests/mounted.rs` drives it.

use actix_web::dev::{ServiceFactory, ServiceRequest, ServiceResponse};
use actix_web::{App, HttpResponse, web};
use mcpgw_server::config::GatewayConfig;
use mcpgw_server::http::ApiState;
use mcpgw_server::{GatewayBuilder, RunningGateway, StartError};

/// The application's own answer, which knows nothing of the gateway.
async fn hello() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/plain")
        .body("hello from the application")
}

/// The gateway this application embeds: `config`, its state under `data_dir`.
pub async fn build_gateway(
    config: GatewayConfig,
    data_dir: &std::path::Path,
) -> Result<RunningGateway, StartError> {
    GatewayBuilder::new(config).data_dir(data_dir).build().await
}

/// The application: its own route, then the gateway with all its checks. `state` comes from
/// [`RunningGateway::http_state`] with the address the application listens on (the `Host`
/// names the gateway admits).
pub fn application(
    state: ApiState,
) -> App<
    impl ServiceFactory<
        ServiceRequest,
        Config = (),
        Response = ServiceResponse<impl actix_web::body::MessageBody>,
        Error = actix_web::Error,
        InitError = (),
    >,
> {
    App::new()
        // The application's routes come first: the gateway answers every path they do not.
        .route("/hello", web::get().to(hello))
        .service(mcpgw_server::http::service(state))
}
