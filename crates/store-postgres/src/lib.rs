//! PostgreSQL storage for mcpgw: the adapter that implements the store ports on one PostgreSQL
//! database, so that several gateway replicas share one state.
//!
//! One [`PostgresStore`] is a pool of connections to one database holding every table the
//! gateway persists: the servers and groups created at run time, the tool lists servers listed
//! ([`PostgresToolListStore`]), the tool pin ledger ([`PostgresToolPinStore`]), the curated
//! endpoints created at run time ([`PostgresEndpointRepository`]), API keys, custom roles, role
//! assignments and tool access policies, local users, discovery's sources and rejections, and
//! the event log. The schema changes only by appending numbered migrations (`migrations/`),
//! applied at connect under an advisory lock so that replicas starting together never race.
//!
//! Reads that sit on a request's path are answered from memory (API keys, as the SQLite store
//! does), so a request never waits on the database. This crate must never depend on another
//! adapter crate nor hold domain rules: it stores and returns what the domain hands it, and its
//! callers see only [`StoreError`] (or the port's error), never SQL.

mod auth;
mod changes;
mod definitions;
mod discovery;
mod endpoints;
mod error;
mod events;
mod fleet;
mod groups;
mod listen;
mod schema;
mod servers;
mod sql;
mod store;
mod tool_lists;
mod tool_pins;
mod users;

pub use changes::{CHANNEL, Topic, parse_payload};
pub use discovery::PostgresDiscoveryStore;
pub use endpoints::PostgresEndpointRepository;
pub use error::StoreError;
pub use events::{PostgresEventLog, StoredEvent};
pub use listen::{Change, ChangeListener};
pub use store::{PostgresSettings, PostgresStore};
pub use tool_lists::PostgresToolListStore;
pub use tool_pins::PostgresToolPinStore;
