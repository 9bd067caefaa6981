//! SQLite storage for mcpgw: the adapter that implements the store ports on one database file.
//!
//! One [`SqliteStore`] is one database file holding every table the gateway persists: the
//! servers created at run time ([`mcpgw_core::ServerRepository`]) and the groups created at run
//! time ([`mcpgw_groups::GroupRepository`]), API keys, custom roles, role assignments and tool
//! access policies ([`mcpgw_authz::AuthStore`]), local users ([`mcpgw_authz::UserStore`]), and
//! discovery's sources and rejections
//! ([`mcpgw_discovery::DiscoveryStore`], through [`SqliteDiscoveryStore`]), the tool lists
//! servers listed ([`mcpgw_core::ToolListStore`], through [`SqliteToolListStore`]), the tool
//! pin ledger ([`mcpgw_core::ToolPinStore`], through [`SqliteToolPinStore`]), and the curated
//! endpoints created at run time ([`mcpgw_core::EndpointRepository`], through
//! [`SqliteEndpointRepository`]). The event log ([`SqliteEventLog`]) has a file of its own, for
//! the reasons its module gives. The schema changes only by appending to the ordered list of
//! migrations in `schema.rs`; they run at open, inside one transaction, and
//! `PRAGMA user_version` records how many have run.
//!
//! Every SQLite call blocks, so each one runs inside `tokio::task::spawn_blocking` while holding
//! the one connection's mutex; none runs on an async executor thread. This crate must never
//! depend on another adapter crate nor hold domain rules: it stores and returns what the domain
//! hands it, and its callers see only [`StoreError`] (or the port's error), never SQL.
//!
//! API keys are the exception to "every call goes to SQLite": the store keeps every key record
//! in memory, indexed by the SHA-256 of the key, loaded at open and updated by its own writes
//! while they hold the connection, so that a request's key lookup is a hash-map read that never
//! waits on the database, and a revocation is seen by the next lookup. Keys written by another
//! process on the same file (`mcpgw auth create-key` while a gateway runs) are seen after
//! [`SqliteStore::reload_api_keys`] or the next open. The database never holds a raw key.
//!
//! # Example
//!
//! ```rust
//! use mcpgw_core::{ServerId, ServerRepository as _, ServerSpec};
//! use mcpgw_store_sqlite::SqliteStore;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let directory = tempfile::tempdir()?;
//! let path = directory.path().join("mcpgw.sqlite3");
//! let math = ServerSpec::subprocess(ServerId::parse("math")?, vec!["math-server".into()]);
//! {
//!     let store = SqliteStore::open(&path)?; // creates the file and runs the migrations
//!     store.save(&math).await?;
//! }
//! let reopened = SqliteStore::open(&path)?;
//! assert_eq!(reopened.load_all().await?, [math]);
//! # Ok(())
//! # }
//! ```

mod auth;
mod definitions;
mod discovery;
mod endpoints;
mod error;
mod events;
mod groups;
mod schema;
mod servers;
mod store;
mod tool_lists;
mod tool_pins;
mod users;

pub use discovery::SqliteDiscoveryStore;
pub use endpoints::SqliteEndpointRepository;
pub use error::StoreError;
pub use events::{DEFAULT_QUEUE_CAPACITY, ENQUEUE_PATIENCE, SqliteEventLog};
pub use store::SqliteStore;
pub use tool_lists::SqliteToolListStore;
pub use tool_pins::SqliteToolPinStore;
