//! Discovers MCP servers from a directory of YAML server definitions: the `filesystem`
//! discovery source.
//!
//! [`FilesystemSource`] lists the `*.yaml` and `*.yml` files of one directory (not its
//! subdirectories), reads each into candidates with [`mcpgw_discovery::files`], and notices
//! changes by polling a cheap fingerprint of the directory (names, sizes, modification times),
//! so that a written, removed or modified file is rescanned within a poll interval without
//! waiting for the periodic scan. [`FilesystemSourceFactory`] builds it from a source's
//! `config` (`path`, `watch_interval_ms`, `removal_grace_s`).
//!
//! This adapter only reads: it must never write, rename or delete a file, never follow
//! subdirectories, never expand `${VAR}` references in what it reads (a dropped-in file must
//! not read the gateway's environment), never validate a definition (the registry does, with
//! the configuration file's rules), and never block the async runtime (file access runs on
//! the blocking pool).
//!
//! # Example
//!
//! A file with one definition is a candidate named after the file (a real directory under a
//! temporary one):
//!
//! ```rust
//! use std::time::Duration;
//!
//! use mcpgw_discovery::DiscoverySource as _;
//! use mcpgw_discovery_files::FilesystemSource;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let directory = tempfile::tempdir()?;
//! std::fs::write(
//!     directory.path().join("time.yaml"),
//!     "mode: subprocess\ncommand: [uvx, mcp-server-time]\n",
//! )?;
//!
//! let source = FilesystemSource::new(directory.path(), Duration::from_secs(1));
//! let found = source.scan().await?;
//! assert_eq!(found.len(), 1);
//! assert_eq!(found[0].name, "time");
//! let definition = found[0].definition.as_ref().expect("a readable definition");
//! assert_eq!(definition["mode"], "subprocess");
//! # Ok(())
//! # }
//! ```

mod factory;
mod source;

pub use factory::{FilesystemSourceFactory, SOURCE_TYPE};
pub use source::{
    DEFAULT_WATCH_INTERVAL, FilesystemSource, MAX_FILE_SIZE, MAX_WATCH_INTERVAL,
    MIN_WATCH_INTERVAL, SCAN_TIMEOUT,
};
