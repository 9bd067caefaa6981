//! Test support for mcpgw and for anyone who writes an adapter for it.
//!
//! - Fakes of every port ([`clock::FakeClock`], [`fakes`]): in-memory, deterministic, with
//!   knobs to make them fail. The domain crates' tests run on these.
//! - Contract suites ([`repository_suite`], [`auth_store`], [`event_log`],
//!   [`discovery_store_suite`], [`tool_list_store_suite`], [`group_repository_suite`],
//!   [`rate_limiter_suite`], [`config_file_suite`], [`discovery_source_suite`],
//!   [`process_spawner_suite`]): one set of tests per port that every implementation, fake or
//!   real, must pass. A downstream adapter author runs the same suite.
//!
//! It is light on purpose: an adapter's tests that run a suite pull in nothing but the domain
//! crates and tokio. The real MCP servers and drivers of the end-to-end tests live in
//! `mcpgw-fixtures`. Nothing here is meant for production use.

pub mod auth_store;
pub mod clock;
pub mod config_file_suite;
pub mod discovery_fakes;
pub mod discovery_source_suite;
pub mod discovery_store_suite;
pub mod event_log;
pub mod fakes;
pub mod group_repository_suite;
pub mod process_spawner_suite;
pub mod rate_limiter_suite;
pub mod repository_suite;
pub mod tool_list_store_suite;
