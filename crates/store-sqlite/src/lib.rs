//! SQLite storage for mcpgw: the adapter that implements the store ports on one database file.
//!
//! One [`SqliteStore`] is one database file holding every table the gateway persists: the
//! servers created at run time ([`mcpgw_core::ServerRepository`]) and the groups created at run
//! time ([`mcpgw_groups::GroupRepository`]) today, and API keys, roles, policies and the event
//! log as they arrive. The schema changes only by appending to the ordered
//! list of migrations in `schema.rs`; they run at open, inside one transaction, and
//! `PRAGMA user_version` records how many have run.
//!
//! Every SQLite call blocks, so each one runs inside `tokio::task::spawn_blocking` while holding
//! the one connection's mutex; none runs on an async executor thread. This crate must never
//! depend on another adapter crate nor hold domain rules: it stores and returns what the domain
//! hands it, and its callers see only [`StoreError`] (or the port's error), never SQL.

mod error;
mod groups;
mod schema;
mod servers;
mod store;

pub use error::StoreError;
pub use store::SqliteStore;
