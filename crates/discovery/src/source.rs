//! Sources: where candidates come from, and the port that reads them.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use mcpgw_config::DiscoveryMode;
use serde_json::{Map, Value};

/// Where a source was declared; it decides who may change it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceOrigin {
    /// The configuration file's `discovery.sources`: changed by editing the file (enable,
    /// disable and scan work over the API; update and delete answer a conflict).
    Config,
    /// Registered over the API; kept in the [`crate::DiscoveryStore`].
    Api,
}

impl SourceOrigin {
    pub fn as_str(self) -> &'static str {
        match self {
            SourceOrigin::Config => "config",
            SourceOrigin::Api => "api",
        }
    }
}

/// A source as the operator defined it.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceDefinition {
    /// The `id:` of the YAML, else `{type}-{index}`; for the API, the given id or
    /// `{type}-{n}` with the first free `n`.
    pub source_id: String,
    /// `docker` or `filesystem` in the bundled server; an embedder may add others.
    pub source_type: String,
    pub mode: DiscoveryMode,
    pub enabled: bool,
    /// Settings of the source's type (`socket_path`, `path`), plus the common
    /// [`REMOVAL_GRACE_KEY`].
    pub config: Map<String, Value>,
    pub origin: SourceOrigin,
}

/// The `config` key, common to every source type, that sets how long an `authoritative`
/// source waits before it withdraws a server it no longer sees (seconds, an integer).
pub const REMOVAL_GRACE_KEY: &str = "removal_grace_s";

/// The grace period when [`REMOVAL_GRACE_KEY`] is absent: long enough that a container being
/// restarted or re-created is not taken for gone.
pub const DEFAULT_REMOVAL_GRACE: Duration = Duration::from_secs(60);

impl SourceDefinition {
    /// How long this source waits before it withdraws a server it no longer sees. Call
    /// [`SourceDefinition::validate_common`] first: an invalid value reads as the default.
    pub fn removal_grace(&self) -> Duration {
        self.config
            .get(REMOVAL_GRACE_KEY)
            .and_then(Value::as_u64)
            .map_or(DEFAULT_REMOVAL_GRACE, Duration::from_secs)
    }

    /// Checks what every source type shares: the id's syntax and [`REMOVAL_GRACE_KEY`].
    pub fn validate_common(&self) -> Result<(), String> {
        let id_is_valid = !self.source_id.is_empty()
            && self.source_id.len() <= 64
            && self
                .source_id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !id_is_valid {
            return Err(format!(
                "source id `{}` is not valid; use 1 to 64 letters, digits, `_` or `-`",
                self.source_id
            ));
        }
        if let Some(grace) = self.config.get(REMOVAL_GRACE_KEY)
            && grace.as_u64().is_none_or(|seconds| seconds > 86_400)
        {
            return Err(format!(
                "config.{REMOVAL_GRACE_KEY} must be a whole number of seconds from 0 to 86400, \
                 not {grace}"
            ));
        }
        Ok(())
    }
}

/// What a source's settings look like to someone reading them back: the values of
/// secret-looking keys (tokens, passwords, keys, credentials, headers), also in nested
/// objects, replaced by `"***"`, by the same rules as the configuration's sanitized view.
pub fn masked_config(config: &Map<String, Value>) -> Map<String, Value> {
    mcpgw_config::sanitized_source_settings(config)
}

/// One thing a source found, before validation.
#[derive(Debug, Clone, PartialEq)]
pub struct DiscoveredCandidate {
    /// The proposed server id: the `mcp.gateway.name` label (else the container's name), or
    /// the key in a definitions file. Not yet checked.
    pub name: String,
    /// Where it was found, for messages: `container 3f2a9c1b (name)`, `file /etc/mcp/a.yaml`.
    pub location: String,
    /// The server definition in the configuration file's shape (`{"mode": "docker",
    /// "image": ...}`), or why the source could not make one (a broken label).
    pub definition: Result<Map<String, Value>, String>,
}

/// Why a source could not be read at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SourceError(pub String);

/// A place servers are discovered in.
///
/// Contract for implementors:
/// - `scan` answers everything the source sees now, one candidate per server; it never
///   validates definitions (the registry does, with the configuration file's rules) but turns
///   what it cannot read into a candidate whose `definition` is the reason.
/// - `scan` answers `Err` only when the source as a whole could not be read (its engine is
///   unreachable, its directory is missing); the registry then keeps what it knew.
/// - `scan` returns within a bounded time (a few seconds), whatever the engine does.
/// - `changed` completes when the source may have changed since the last scan (a file was
///   written, a container started); sources that cannot tell never complete it, and are
///   scanned on the periodic schedule alone.
#[async_trait]
pub trait DiscoverySource: Send + Sync {
    async fn scan(&self) -> Result<Vec<DiscoveredCandidate>, SourceError>;

    async fn changed(&self) {
        futures::future::pending::<()>().await;
    }
}

/// Builds sources of the types it knows from their definitions.
pub trait DiscoverySourceFactory: Send + Sync {
    /// The `source_type`s this factory builds.
    fn source_types(&self) -> Vec<&'static str>;

    /// A source for `definition`, or why its `config` is not valid for its type (a message an
    /// operator can act on, naming the key).
    fn build(&self, definition: &SourceDefinition) -> Result<Arc<dyn DiscoverySource>, String>;
}
