//! Building a [`FilesystemSource`] from a source's definition.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use mcpgw_discovery::{
    DiscoverySource, DiscoverySourceFactory, REMOVAL_GRACE_KEY, SourceDefinition,
};
use serde_json::Value;

use crate::FilesystemSource;
use crate::source::{DEFAULT_WATCH_INTERVAL, MAX_WATCH_INTERVAL, MIN_WATCH_INTERVAL};

/// The `source_type` this crate builds.
pub const SOURCE_TYPE: &str = "filesystem";

const PATH_KEY: &str = "path";
const WATCH_INTERVAL_KEY: &str = "watch_interval_ms";
/// Sorted, as they are listed in messages.
const VALID_KEYS: [&str; 3] = [PATH_KEY, REMOVAL_GRACE_KEY, WATCH_INTERVAL_KEY];

/// Builds `filesystem` sources. Their `config`:
/// - `path` (required): the absolute path of the directory of definitions. It need not exist
///   yet: until it does, scans answer an error that says so.
/// - `watch_interval_ms` (100 to 3600000, default 1000): how often the directory is polled
///   for changes.
/// - `removal_grace_s`: common to every source type (see [`REMOVAL_GRACE_KEY`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct FilesystemSourceFactory;

impl FilesystemSourceFactory {
    pub fn new() -> Self {
        Self
    }

    /// The source that `definition` describes, or why its `config` is not valid (naming the
    /// key). Reads nothing from the filesystem.
    pub fn source_from(&self, definition: &SourceDefinition) -> Result<FilesystemSource, String> {
        if definition.source_type != SOURCE_TYPE {
            return Err(format!(
                "source `{}` has type `{}`; this factory builds `{SOURCE_TYPE}` sources only",
                definition.source_id, definition.source_type
            ));
        }
        let config = &definition.config;
        let mut unknown: Vec<&str> = config
            .keys()
            .map(String::as_str)
            .filter(|key| !VALID_KEYS.contains(key))
            .collect();
        unknown.sort_unstable();
        if !unknown.is_empty() {
            let named: Vec<String> = unknown.iter().map(|key| format!("config.{key}")).collect();
            let verb = if unknown.len() == 1 {
                "is not a setting"
            } else {
                "are not settings"
            };
            return Err(format!(
                "{} {verb} of a {SOURCE_TYPE} source; valid keys are {}",
                named.join(", "),
                VALID_KEYS.join(", ")
            ));
        }
        definition.validate_common()?;

        let directory = match config.get(PATH_KEY) {
            None | Some(Value::Null) => {
                return Err(format!(
                    "config.{PATH_KEY} is required: the absolute path of the directory of YAML \
                     server definitions to watch"
                ));
            }
            Some(Value::String(path)) if !path.trim().is_empty() => Path::new(path),
            Some(other) => {
                return Err(format!(
                    "config.{PATH_KEY} must be the absolute path of a directory as a string, \
                     not {other}"
                ));
            }
        };
        if !directory.is_absolute() {
            return Err(format!(
                "config.{PATH_KEY} `{}` is relative; give the directory's absolute path (a \
                 relative one would depend on the gateway's working directory)",
                directory.display()
            ));
        }

        let watch_interval = match config.get(WATCH_INTERVAL_KEY) {
            None | Some(Value::Null) => DEFAULT_WATCH_INTERVAL,
            Some(value) => value
                .as_u64()
                .map(Duration::from_millis)
                .filter(|interval| (MIN_WATCH_INTERVAL..=MAX_WATCH_INTERVAL).contains(interval))
                .ok_or_else(|| {
                    format!(
                        "config.{WATCH_INTERVAL_KEY} must be a whole number of milliseconds from \
                         {} to {}, not {value}",
                        MIN_WATCH_INTERVAL.as_millis(),
                        MAX_WATCH_INTERVAL.as_millis()
                    )
                })?,
        };
        Ok(FilesystemSource::new(directory, watch_interval))
    }
}

impl DiscoverySourceFactory for FilesystemSourceFactory {
    fn source_types(&self) -> Vec<&'static str> {
        vec![SOURCE_TYPE]
    }

    fn build(&self, definition: &SourceDefinition) -> Result<Arc<dyn DiscoverySource>, String> {
        Ok(Arc::new(self.source_from(definition)?))
    }
}
