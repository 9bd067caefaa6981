//! Test support for mcpgw and for anyone who writes an adapter for it.
//!
//! - Fakes of every port ([`clock::FakeClock`], [`fakes`]): in-memory, deterministic, with
//!   knobs to make them fail. The domain crates' tests run on these.
//! - Contract suites ([`repository_suite`], [`auth_store`], [`event_log`],
//!   [`discovery_store_suite`], [`tool_list_store_suite`], [`tool_pin_store_suite`],
//!   [`endpoint_repository_suite`], [`group_repository_suite`], [`rate_limiter_suite`],
//!   [`config_file_suite`], [`discovery_source_suite`], [`process_spawner_suite`],
//!   [`history_suite`], [`runtime_suites`], [`token_verifier_suite`], [`policy_decider_suite`],
//!   [`server_launcher_suite`], [`mcp_session_suite`] (and [`mcp_session_relay_suite`] for what
//!   a session's server sends its client mid-call), [`stdio_connector_suite`], [`event_suites`],
//!   [`mcp_frontend_suite`], [`user_store`], [`sign_in`], [`fleet_store_suite`],
//!   [`audit_sink_suite`]): one set of
//!   tests per port that every implementation, fake or real, must pass. A downstream adapter
//!   author runs the same suite.
//! - A tiny MCP server in memory ([`scripted_server`]) that speaks JSON-RPC over in-memory
//!   pipes, for what talks MCP over stdio, without any process.
//!
//! It is light on purpose: an adapter's tests that run a suite pull in nothing but the domain
//! crates and tokio. The real MCP servers and drivers of the end-to-end tests live in
//! `mcpgw-fixtures`. Nothing here is meant for production use.
//!
//! # Example
//!
//! An adapter's tests run a port's whole contract with one line, such as
//! `mcpgw_testkit::server_repository_contract_suite!(open_my_repository());`. Each case is also a
//! function, here run against the in-memory fake:
//!
//! ```rust
//! use mcpgw_core::ServerRepository as _;
//! use mcpgw_testkit::repository_suite::{self, InMemoryServerRepository, sample_docker_spec};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! repository_suite::saving_twice_is_an_upsert(&InMemoryServerRepository::new()).await;
//!
//! // The fake can be told to fail, for tests of what a caller does then.
//! let repository = InMemoryServerRepository::new();
//! repository.fail_next_save("disk full");
//! assert!(repository.save(&sample_docker_spec("box")).await.is_err());
//! assert!(repository.save(&sample_docker_spec("box")).await.is_ok());
//! # }
//! ```

pub mod audit_sink_suite;
pub mod auth_store;
pub mod clock;
pub mod config_file_suite;
pub mod discovery_fakes;
pub mod discovery_source_suite;
pub mod discovery_store_suite;
pub mod endpoint_repository_suite;
pub mod event_log;
pub mod event_suites;
pub mod fakes;
pub mod fleet_store_suite;
pub mod group_repository_suite;
pub mod history_suite;
pub mod mcp_frontend_suite;
pub mod mcp_session_relay_suite;
pub mod mcp_session_suite;
pub mod policy_decider_suite;
pub mod postgres;
pub mod process_spawner_suite;
pub mod rate_limiter_suite;
pub mod redis_server;
pub mod repository_suite;
pub mod runtime_suites;
pub mod scripted_server;
pub mod server_launcher_suite;
pub mod sign_in;
pub mod stdio_connector_suite;
pub mod token_verifier_suite;
pub mod tool_list_store_suite;
pub mod tool_pin_store_suite;
pub mod tracer_suite;
pub mod user_store;
