//! Runs MCP servers as local processes: the [`ProcessSpawner`](mcpgw_core::ProcessSpawner) for
//! `mode: subprocess` servers.
//!
//! [`ProcessRunner`] starts `command[0]` with the rest of `command` as arguments, hands back the
//! child's stdin and stdout as the byte streams an MCP connector talks over, and copies every
//! line the child writes to stderr into the server's [`LogBuffer`](mcpgw_core::LogBuffer), in
//! bounded memory whatever the child writes. Each child leads its own process group, so stopping
//! a server (SIGTERM, then SIGKILL once the grace period is over) ends everything it started,
//! and processes a server leaves behind when it exits are killed too. A child also dies when the
//! gateway is killed outright (Linux parent-death signal), and every child is reaped.
//!
//! This crate must never speak MCP (that is the connector's job), never decide when a server
//! starts or stops (that is the domain's), and never signal a process group after its leader
//! has been reaped, because the group id may then belong to an unrelated process. It is Unix
//! only; the parent-death signal needs Linux.
//!
//! # Example
//!
//! Not run as a test: it starts a process. The log buffer comes from the caller, which owns
//! the server's clock.
//!
//! ```rust,no_run
//! use std::collections::BTreeMap;
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use mcpgw_core::{LaunchSpec, LogBuffer, ProcessSpawner as _, ServerId};
//! use mcpgw_runner_process::{ProcessRunner, ProcessRunnerSettings};
//!
//! async fn start_and_stop(logs: Arc<LogBuffer>) -> Result<(), Box<dyn std::error::Error>> {
//!     let runner = ProcessRunner::new(ProcessRunnerSettings::default());
//!     let launch = LaunchSpec::Subprocess {
//!         command: vec!["uvx".into(), "mcp-server-time".into()],
//!         env: BTreeMap::new(),
//!         cwd: None,
//!     };
//!     let process = runner.spawn(&ServerId::parse("time")?, &launch, logs).await?;
//!     // `process.streams` are its stdin and stdout, for an MCP connector; its stderr goes to
//!     // `logs`, line by line.
//!     process.control.terminate(Duration::from_secs(3)).await; // SIGTERM, SIGKILL after 3 s
//!     let status = process.control.exited().await;
//!     assert!(status.code.is_some() || status.signal.is_some());
//!     Ok(())
//! }
//! ```

mod exit_status;
mod process_control;
mod process_group;
mod runner;
mod spawner_thread;
mod stderr_capture;

pub use runner::{ProcessRunner, ProcessRunnerSettings};
