//! Audit sinks: where the gateway's audit records go, as implementations of the
//! [`AuditSink`](mcpgw_core::audit::AuditSink) port.
//!
//! - [`JsonLinesFileSink`] appends one JSON object per line to a file (made with mode 0600),
//!   writes each batch through to the kernel, and opens the file again when it was moved or
//!   removed, which is how log rotation (`logrotate` without `copytruncate`) hands over.
//! - [`SyslogSink`] sends each record as an RFC 5424 message to a syslog daemon or collector,
//!   over UDP, TCP (octet-counting framing; a broken connection is made again) or a Unix
//!   datagram socket (the local daemon's `/dev/log`).
//!
//! Delivery is at least once: a batch that failed part way may be written again whole when the
//! caller retries it. Every failure is an [`AuditSinkError`](mcpgw_core::audit::AuditSinkError),
//! never a panic.

mod file;
mod syslog;

pub use file::JsonLinesFileSink;
pub use syslog::{SyslogAddress, SyslogSettings, SyslogSink, format_message};
