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
//!
//! # Example
//!
//! One scan of a source: a valid candidate waits for approval, a broken one is quarantined. The
//! caller carries out an approval (it registers the server) and then confirms it.
//!
//! ```rust
//! use mcpgw_core::{ServerId, Timestamp};
//! use mcpgw_discovery::{
//!     DiscoveredCandidate, DiscoveryMode, DiscoveryRegistry, SourceDefinition, SourceOrigin,
//! };
//! use serde_json::{Map, Value, json};
//!
//! let source = SourceDefinition {
//!     source_id: "dock".into(),
//!     source_type: "docker".into(),
//!     mode: DiscoveryMode::Additive,
//!     enabled: true,
//!     config: Map::new(),
//!     origin: SourceOrigin::Config,
//! };
//! let candidate = |name: &str, definition: Value| DiscoveredCandidate {
//!     name: name.into(),
//!     location: format!("container {name}"),
//!     definition: Ok(definition.as_object().cloned().expect("an object")),
//! };
//! let now = Timestamp::from_unix_micros(1_700_000_000_000_000);
//! let nothing_taken = |_: &ServerId| false;
//!
//! let mut registry = DiscoveryRegistry::new();
//! let outcome = registry.apply_scan(
//!     &source,
//!     vec![
//!         candidate("web", json!({"mode": "docker", "image": "mcp/web:1"})),
//!         candidate("broken", json!({"mode": "docker"})), // no image
//!     ],
//!     now,
//!     &nothing_taken,
//! );
//! assert_eq!(outcome.newly_pending, ["web"]);
//! assert_eq!(registry.quarantined()[0].name, "broken");
//!
//! let approval = registry.approval("web")?;
//! // ... register `approval.spec` with the server manager, then:
//! registry.confirm_approval(&approval);
//! assert!(registry.is_approved(&approval.spec.id));
//! assert!(registry.pending().is_empty());
//! # Ok::<(), mcpgw_discovery::DiscoveryError>(())
//! ```

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
