//! Discovery of MCP servers from sources (a container engine, a directory of definitions), with
//! pending approval, rejection and quarantine.
//!
//! This crate will decide what a discovered candidate becomes: pending, quarantined with a
//! reason, approved into a server, or remembered as rejected. It is a domain crate: it must
//! never talk to a container engine or a file system itself; sources are ports that adapters
//! implement.
