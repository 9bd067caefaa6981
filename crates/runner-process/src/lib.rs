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

mod exit_status;
mod process_control;
mod process_group;
mod runner;
mod spawner_thread;
mod stderr_capture;

pub use runner::{ProcessRunner, ProcessRunnerSettings};
