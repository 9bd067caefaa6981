//! The REST API, the MCP mount point, probes, metrics and docs, driven in process through `actix_web::test` over a
//! real `Gateway` whose MCP servers are the testkit's fakes.

mod auth;
mod config;
mod cors;
mod discovery;
mod endpoints;
mod errors;
mod groups;
mod guard;
mod history;
mod mcp;
mod platform;
mod server;
mod servers;
mod support;
mod system;
mod tool_names;
