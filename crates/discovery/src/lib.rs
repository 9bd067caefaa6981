//! Discovery of MCP servers from sources (a container engine, a directory of definitions), with
//! pending approval, rejection and quarantine.
//!
//! A [`DiscoverySource`] reports what it sees as [`DiscoveredCandidate`]s: a proposed server id
//! and a server definition in the configuration file's shape. The [`DiscoveryRegistry`]
//! decides what each candidate becomes: validated with exactly the rules of the configuration
//! file, it waits as pending until an operator approves it (it then becomes a server of origin
//! `discovery`) or rejects it (remembered, across restarts through a [`DiscoveryStore`], until
//! its definition changes); a candidate that fails validation is quarantined with the reason.
//! An approved server whose definition changes waits for approval again, and an
//! `authoritative` source withdraws the servers it no longer sees once a grace period has
//! passed; an `additive` source never removes anything.
//!
//! [`labels`] turns a container's `mcp.gateway.*` labels into a candidate, and [`files`] a YAML
//! file of definitions into candidates, so that source adapters only list containers and read
//! files.
//!
//! This is a domain crate: it must never talk to a container engine, read a file or look at a
//! clock itself. Sources and stores are ports that adapters implement; time comes in as
//! arguments.

mod error;
pub mod files;
pub mod labels;
mod registry;
mod source;
mod store;
#[cfg(test)]
mod tests;

pub use error::DiscoveryError;
pub use registry::{Approval, DiscoveryRegistry, PendingServer, QuarantinedServer, ScanOutcome};
pub use source::{
    DEFAULT_REMOVAL_GRACE, DiscoveredCandidate, DiscoverySource, DiscoverySourceFactory,
    REMOVAL_GRACE_KEY, SourceDefinition, SourceError, SourceOrigin, masked_config,
};
pub use store::{DiscoveryStore, DiscoveryStoreError, Rejection};

pub use mcpgw_config::DiscoveryMode;
