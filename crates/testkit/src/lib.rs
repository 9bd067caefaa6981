//! Test support for mcpgw and for anyone who writes an adapter for it.
//!
//! - Fakes of every port ([`clock::FakeClock`], [`fakes`]): in-memory, deterministic, with
//!   knobs to make them fail. The domain crates' tests run on these.
//! - Contract suites ([`repository_suite`], [`auth_store`], [`event_log`],
//!   [`discovery_store_suite`], [`tool_list_store_suite`]): one set of tests per port that every
//!   implementation, fake or real, must pass. A downstream adapter author runs the same suite.
//! - A fixture MCP server (the `mcpgw-fixture-server` binary, built from [`fixture`]): tools
//!   that echo, add, fail, sleep, crash and write to stderr on demand, for end-to-end tests and
//!   the README's demo.
//! - The server side of the official MCP conformance suite (the `mcpgw-conformance-server`
//!   binary, built from [`conformance`]), which the gateway fronts in the conformance test.
//! - A load-and-soak driver of the real gateway binary ([`soak`]), shared by the benchmark
//!   harness and the end-to-end soak test.
//!
//! Nothing here is meant for production use.
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

pub mod auth_store;
mod binaries;
pub mod clock;
pub mod conformance;
pub mod discovery_fakes;
pub mod discovery_store_suite;
pub mod event_log;
pub mod fakes;
pub mod fixture;
pub mod group_repository_suite;
pub mod processes;
pub mod repository_suite;
pub mod soak;
pub mod tool_list_store_suite;
