//! [`SyslogSink`]: audit records as RFC 5424 syslog messages.
//!
//! One message per record:
//!
//! ```text
//! <PRI>1 TIMESTAMP HOSTNAME APP-NAME PROCID MSGID [mcpgw@32473 event_id="42" severity="notice"] MSG
//! ```
//!
//! PRI is the facility's code times eight plus the record's severity (warning 4, notice 5,
//! informational 6); TIMESTAMP the event's time (RFC 3339, UTC, microseconds); MSGID the event
//! type; the structured-data element carries the event id, the severity and the replica when
//! known; MSG is the record's JSON (plain UTF-8, no byte order mark). The SD-ID `mcpgw@32473`
//! uses the private enterprise number set aside for examples and documentation, since the
//! project has none of its own.

use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use mcpgw_core::audit::{AuditRecord, AuditSeverity, AuditSink, AuditSinkError};
use tokio::io::AsyncWriteExt as _;
use tokio::net::{TcpStream, UdpSocket, UnixDatagram};

/// The structured-data element's id.
const SD_ID: &str = "mcpgw@32473";
/// The longest MSGID RFC 5424 allows.
const MSGID_MAX: usize = 32;

/// Where messages go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyslogAddress {
    /// `udp://host:port`: one datagram per message.
    Udp(String),
    /// `tcp://host:port`: a stream of messages, each framed by its length in octets.
    Tcp(String),
    /// `unix:///path`: one datagram per message to a Unix datagram socket.
    Unix(PathBuf),
}

impl SyslogAddress {
    /// Reads `udp://host:port`, `tcp://host:port` (an IPv6 host in brackets) or
    /// `unix:///absolute/path`; anything else is an [`AuditSinkError::Invalid`] saying why.
    pub fn parse(address: &str) -> Result<Self, AuditSinkError> {
        let invalid = |why: &str| {
            AuditSinkError::Invalid(format!(
                "`{address}` is not a syslog address: {why}; write udp://host:port, \
                 tcp://host:port or unix:///path"
            ))
        };
        let (scheme, rest) = address
            .split_once("://")
            .ok_or_else(|| invalid("it has no scheme"))?;
        match scheme {
            "udp" | "tcp" => {
                let (host, port) = rest
                    .rsplit_once(':')
                    .ok_or_else(|| invalid("it has no port"))?;
                let bare = host
                    .strip_prefix('[')
                    .and_then(|inner| inner.strip_suffix(']'))
                    .unwrap_or(host);
                if bare.is_empty() || bare.contains(['/', ' ', '[', ']']) {
                    return Err(invalid("it has no valid host"));
                }
                match port.parse::<u16>() {
                    Ok(port) if port > 0 => {}
                    _ => return Err(invalid("its port is not 1 to 65535")),
                }
                let target = rest.to_owned();
                Ok(if scheme == "udp" {
                    SyslogAddress::Udp(target)
                } else {
                    SyslogAddress::Tcp(target)
                })
            }
            "unix" if rest.starts_with('/') && rest.len() > 1 => {
                Ok(SyslogAddress::Unix(PathBuf::from(rest)))
            }
            "unix" => Err(invalid("the socket path is not absolute")),
            _ => Err(invalid("the transport is not udp, tcp or unix")),
        }
    }
}

impl std::fmt::Display for SyslogAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SyslogAddress::Udp(target) => write!(f, "udp://{target}"),
            SyslogAddress::Tcp(target) => write!(f, "tcp://{target}"),
            SyslogAddress::Unix(path) => write!(f, "unix://{}", path.display()),
        }
    }
}

/// What a [`SyslogSink`] sends where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyslogSettings {
    pub address: SyslogAddress,
    /// The facility's code, 0 (`kern`) to 23 (`local7`); 10 (`authpriv`) by default.
    pub facility: u8,
    /// APP-NAME: 1 to 48 printable ASCII characters.
    pub app_name: String,
    /// HOSTNAME; the machine's name when `None`.
    pub hostname: Option<String>,
    /// How long connecting and sending may take.
    pub timeout: Duration,
}

impl SyslogSettings {
    pub const DEFAULT_FACILITY: u8 = 10;
    pub const DEFAULT_APP_NAME: &'static str = "mcpgw";
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

    /// The defaults, sending to `address`.
    pub fn new(address: SyslogAddress) -> Self {
        Self {
            address,
            facility: Self::DEFAULT_FACILITY,
            app_name: Self::DEFAULT_APP_NAME.to_owned(),
            hostname: None,
            timeout: Self::DEFAULT_TIMEOUT,
        }
    }
}

/// The header fields every message shares.
#[derive(Debug, Clone)]
struct Header {
    facility: u8,
    hostname: String,
    app_name: String,
    procid: String,
}

/// Sends records to a syslog daemon or collector (see the module documentation). Connects on
/// the first write, and again after a failure.
pub struct SyslogSink {
    name: String,
    address: SyslogAddress,
    header: Header,
    timeout: Duration,
    /// Taken out while a write uses it and put back only once the write succeeded, so a write
    /// that failed or was cancelled half way never leaves a connection in the middle of a
    /// message for the next one.
    connection: tokio::sync::Mutex<Option<Connection>>,
}

enum Connection {
    Udp(UdpSocket),
    Tcp(TcpStream),
    Unix(UnixDatagram),
}

impl std::fmt::Debug for SyslogSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyslogSink")
            .field("name", &self.name)
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

impl SyslogSink {
    /// A sink named `syslog` with `settings`; nothing is contacted yet. A facility above 23 or
    /// header fields that syslog cannot carry are an [`AuditSinkError::Invalid`].
    pub fn new(settings: SyslogSettings) -> Result<Self, AuditSinkError> {
        if settings.facility > 23 {
            return Err(AuditSinkError::Invalid(format!(
                "syslog facility {} does not exist; facilities are 0 (kern) to 23 (local7)",
                settings.facility
            )));
        }
        let app_name = header_field(&settings.app_name, 48, "app_name")?;
        let hostname = match &settings.hostname {
            Some(hostname) => header_field(hostname, 255, "hostname")?,
            None => machine_name(),
        };
        Ok(Self {
            name: "syslog".to_owned(),
            address: settings.address,
            header: Header {
                facility: settings.facility,
                hostname,
                app_name,
                procid: std::process::id().to_string(),
            },
            timeout: settings.timeout,
            connection: tokio::sync::Mutex::new(None),
        })
    }

    /// The same sink under another name (in metrics and logs).
    #[must_use]
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The message this sink sends for `record`.
    pub fn message(&self, record: &AuditRecord) -> String {
        render(&self.header, record)
    }

    async fn connect(&self) -> Result<Connection, AuditSinkError> {
        let unavailable = |what: &str, error: &dyn std::fmt::Display| {
            AuditSinkError::Unavailable(format!(
                "cannot {what} the syslog receiver at {}: {error}",
                self.address
            ))
        };
        let connecting = async {
            match &self.address {
                SyslogAddress::Udp(target) => {
                    let peer = tokio::net::lookup_host(target.as_str())
                        .await
                        .map_err(|error| unavailable("resolve", &error))?
                        .next()
                        .ok_or_else(|| unavailable("resolve", &"the name has no address"))?;
                    let local = if peer.is_ipv4() {
                        "0.0.0.0:0"
                    } else {
                        "[::]:0"
                    };
                    let socket = UdpSocket::bind(local)
                        .await
                        .map_err(|error| unavailable("open a socket for", &error))?;
                    socket
                        .connect(peer)
                        .await
                        .map_err(|error| unavailable("reach", &error))?;
                    Ok(Connection::Udp(socket))
                }
                SyslogAddress::Tcp(target) => TcpStream::connect(target.as_str())
                    .await
                    .map(Connection::Tcp)
                    .map_err(|error| unavailable("connect to", &error)),
                SyslogAddress::Unix(path) => {
                    let socket = UnixDatagram::unbound()
                        .map_err(|error| unavailable("open a socket for", &error))?;
                    socket
                        .connect(path)
                        .map_err(|error| unavailable("reach", &error))?;
                    Ok(Connection::Unix(socket))
                }
            }
        };
        tokio::time::timeout(self.timeout, connecting)
            .await
            .map_err(|_| unavailable("reach", &format!("no answer within {:?}", self.timeout)))?
    }

    async fn send(
        &self,
        connection: &mut Connection,
        messages: &[String],
    ) -> Result<(), AuditSinkError> {
        let failed = |error: std::io::Error| {
            let kind = if error.raw_os_error() == Some(90) {
                // EMSGSIZE: no retry makes the message smaller.
                AuditSinkError::Invalid
            } else {
                AuditSinkError::Unavailable
            };
            kind(format!(
                "cannot send to the syslog receiver at {}: {error}",
                self.address
            ))
        };
        let sending = async {
            match connection {
                Connection::Udp(socket) => {
                    for message in messages {
                        socket.send(message.as_bytes()).await.map_err(failed)?;
                    }
                }
                Connection::Unix(socket) => {
                    for message in messages {
                        socket.send(message.as_bytes()).await.map_err(failed)?;
                    }
                }
                Connection::Tcp(stream) => {
                    let mut framed = Vec::new();
                    for message in messages {
                        framed.extend_from_slice(message.len().to_string().as_bytes());
                        framed.push(b' ');
                        framed.extend_from_slice(message.as_bytes());
                    }
                    stream.write_all(&framed).await.map_err(failed)?;
                    stream.flush().await.map_err(failed)?;
                }
            }
            Ok(())
        };
        tokio::time::timeout(self.timeout, sending)
            .await
            .map_err(|_| {
                AuditSinkError::Unavailable(format!(
                    "the syslog receiver at {} took no more within {:?}",
                    self.address, self.timeout
                ))
            })?
    }
}

#[async_trait]
impl AuditSink for SyslogSink {
    fn name(&self) -> &str {
        &self.name
    }

    async fn write(&self, records: &[AuditRecord]) -> Result<(), AuditSinkError> {
        if records.is_empty() {
            return Ok(());
        }
        let messages: Vec<String> = records.iter().map(|record| self.message(record)).collect();
        let mut slot = self.connection.lock().await;
        // A kept connection may have died since its last use: one fresh try follows its
        // failure. A fresh connection that fails is the answer.
        let reused = slot.take();
        let was_reused = reused.is_some();
        let mut connection = match reused {
            Some(connection) => connection,
            None => self.connect().await?,
        };
        match self.send(&mut connection, &messages).await {
            Ok(()) => {
                *slot = Some(connection);
                Ok(())
            }
            Err(error) if was_reused && error.is_retryable() => {
                drop(connection);
                let mut fresh = self.connect().await?;
                self.send(&mut fresh, &messages).await?;
                *slot = Some(fresh);
                Ok(())
            }
            Err(error) => Err(error),
        }
    }
}

/// The RFC 5424 message of `record` with these header fields: `facility` (0..=23),
/// `hostname` and `app_name` as given (printable ASCII), `procid` the process id.
pub fn format_message(
    facility: u8,
    hostname: &str,
    app_name: &str,
    procid: u32,
    record: &AuditRecord,
) -> String {
    render(
        &Header {
            facility: facility.min(23),
            hostname: printable(hostname, 255),
            app_name: printable(app_name, 48),
            procid: procid.to_string(),
        },
        record,
    )
}

fn render(header: &Header, record: &AuditRecord) -> String {
    let severity: u8 = match record.severity {
        AuditSeverity::Warning => 4,
        AuditSeverity::Notice => 5,
        _ => 6,
    };
    let priority = u16::from(header.facility) * 8 + u16::from(severity);
    let msgid = printable(&record.event_type, MSGID_MAX);
    let mut data = format!(
        "[{SD_ID} event_id=\"{}\" severity=\"{}\"",
        record.event_id, record.severity
    );
    if let Some(replica) = &record.replica {
        data.push_str(&format!(" replica=\"{}\"", param_value(replica)));
    }
    data.push(']');
    format!(
        "<{priority}>1 {} {} {} {} {msgid} {data} {}",
        record.occurred_at,
        header.hostname,
        header.app_name,
        header.procid,
        record.to_json_line()
    )
}

/// An SD-PARAM value with `"`, `\` and `]` escaped.
fn param_value(value: &str) -> String {
    let mut escaped = String::with_capacity(value.len());
    for c in value.chars() {
        if matches!(c, '"' | '\\' | ']') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

/// `value` as a header field: printable ASCII only (others become `_`), at most `longest`
/// characters, `-` (the nil value) when empty.
fn printable(value: &str, longest: usize) -> String {
    let kept: String = value
        .chars()
        .take(longest)
        .map(|c| if c.is_ascii_graphic() { c } else { '_' })
        .collect();
    if kept.is_empty() {
        "-".to_owned()
    } else {
        kept
    }
}

fn header_field(value: &str, longest: usize, key: &str) -> Result<String, AuditSinkError> {
    if value.is_empty() || value.len() > longest || !value.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(AuditSinkError::Invalid(format!(
            "syslog {key} `{value}` cannot be sent: use 1 to {longest} printable ASCII characters \
             without spaces"
        )));
    }
    Ok(value.to_owned())
}

/// The machine's name as the kernel reports it, `-` when it cannot be read.
fn machine_name() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .unwrap_or_default();
    printable(name.trim(), 255)
}
