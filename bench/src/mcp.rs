//! A minimal MCP Streamable HTTP client over one keep-alive connection, so that what is
//! measured is the server, not a heavy client. It speaks either era of the protocol: 2025-11-25
//! with `initialize` and a session, or 2026-07-28, where every request stands alone and carries
//! the era's headers and `_meta`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

use anyhow::{Context, bail};

/// The protocol era a client speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Era {
    /// 2025-11-25: `initialize`, then requests on the session it opened.
    Session,
    /// 2026-07-28: no handshake; each request names the era in its headers and `_meta`.
    Stateless,
}

impl Era {
    pub const BOTH: [Era; 2] = [Era::Session, Era::Stateless];

    pub fn label(self) -> &'static str {
        match self {
            Era::Session => "session era (2025-11-25)",
            Era::Stateless => "stateless era (2026-07-28)",
        }
    }

    pub fn short(self) -> &'static str {
        match self {
            Era::Session => "session",
            Era::Stateless => "stateless",
        }
    }
}

/// The `_meta` every 2026-07-28 request carries.
const STATELESS_META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"mcpgw-bench","version":"0"}}"#;

pub struct McpClient {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    host: String,
    path: String,
    session: Option<String>,
    next_id: u64,
    /// One more header line sent with every request (`X-API-Key: ...`), without the CRLF.
    extra_header: Option<String>,
    era: Era,
}

/// Splits `http://host:port/path` into its address and path.
pub fn split_url(url: &str) -> anyhow::Result<(String, String)> {
    let rest = url.strip_prefix("http://").context("only http:// URLs")?;
    let (address, path) = rest.split_once('/').unwrap_or((rest, ""));
    Ok((address.to_owned(), format!("/{path}")))
}

impl McpClient {
    /// Connects and runs the `initialize` handshake.
    pub fn connect(url: &str) -> anyhow::Result<Self> {
        Self::connect_with_header(url, None)
    }

    /// Connects with `header` (`Name: value`) on every request, and runs the handshake.
    pub fn connect_with_header(url: &str, header: Option<&str>) -> anyhow::Result<Self> {
        Self::connect_in(url, header, Era::Session)
    }

    /// Connects in `era`: runs the handshake of the session era; the stateless era has none.
    pub fn connect_era(url: &str, era: Era) -> anyhow::Result<Self> {
        Self::connect_in(url, None, era)
    }

    fn connect_in(url: &str, header: Option<&str>, era: Era) -> anyhow::Result<Self> {
        let (address, path) = split_url(url)?;
        let stream = TcpStream::connect(&address)?;
        stream.set_nodelay(true)?;
        let mut client = Self {
            writer: stream.try_clone()?,
            reader: BufReader::new(stream),
            host: address,
            path,
            session: None,
            next_id: 1,
            extra_header: header.map(str::to_owned),
            era,
        };
        if era == Era::Stateless {
            return Ok(client);
        }
        let initialize = r#"{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"mcpgw-bench","version":"0"}}"#;
        client.request("initialize", initialize)?;
        client.post(
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            None,
        )?;
        Ok(client)
    }

    /// Sends a request and returns the JSON-RPC response text.
    pub fn request(&mut self, method: &str, params: &str) -> anyhow::Result<String> {
        let id = self.next_id;
        self.next_id += 1;
        let response = match self.era {
            Era::Session => {
                let body = format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#
                );
                self.post(&body, None)?
            }
            Era::Stateless => {
                // The params object gains the era's `_meta` as its first member.
                let rest = params
                    .trim_start()
                    .strip_prefix('{')
                    .context("params must be a JSON object")?;
                let separator = if rest.trim_start().starts_with('}') {
                    ""
                } else {
                    ","
                };
                let body = format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{{STATELESS_META}{separator}{rest}}}"#
                );
                self.post(&body, Some((method, params)))?
            }
        };
        if response.contains(r#""error""#) && !response.contains(r#""result""#) {
            bail!("{method} failed: {response}");
        }
        Ok(response)
    }

    /// POSTs `body`; `stateless` holds the method and params of a 2026-07-28 request, whose
    /// headers name them.
    fn post(&mut self, body: &str, stateless: Option<(&str, &str)>) -> anyhow::Result<String> {
        let mut head = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
            self.path,
            self.host,
            body.len()
        );
        if let Some(line) = &self.extra_header {
            head.push_str(line);
            head.push_str("\r\n");
        }
        if let Some(session) = &self.session {
            head.push_str(&format!(
                "Mcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-11-25\r\n"
            ));
        }
        if let Some((method, params)) = stateless {
            head.push_str(&format!(
                "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: {method}\r\n"
            ));
            if let Some(name) = name_of(params) {
                head.push_str(&format!("Mcp-Name: {name}\r\n"));
            }
        }
        head.push_str("\r\n");
        self.writer.write_all(head.as_bytes())?;
        self.writer.write_all(body.as_bytes())?;
        self.writer.flush()?;

        let mut status_line = String::new();
        if self.reader.read_line(&mut status_line)? == 0 {
            bail!("the connection closed");
        }
        let status: u16 = status_line
            .split_whitespace()
            .nth(1)
            .context("no status")?
            .parse()?;
        let mut content_length = None;
        let mut chunked = false;
        loop {
            let mut header = String::new();
            self.reader.read_line(&mut header)?;
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            let (name, value) = header.split_once(':').context("bad header")?;
            let value = value.trim();
            match name.to_ascii_lowercase().as_str() {
                "content-length" => content_length = Some(value.parse::<usize>()?),
                "transfer-encoding" if value.contains("chunked") => chunked = true,
                "mcp-session-id" => self.session = Some(value.to_owned()),
                _ => {}
            }
        }
        let mut body = Vec::new();
        if chunked {
            loop {
                let mut size_line = String::new();
                self.reader.read_line(&mut size_line)?;
                let size = usize::from_str_radix(size_line.trim(), 16)?;
                let mut chunk = vec![0; size + 2];
                self.reader.read_exact(&mut chunk)?;
                if size == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..size]);
            }
        } else if let Some(length) = content_length {
            body.resize(length, 0);
            self.reader.read_exact(&mut body)?;
        }
        if !(200..300).contains(&status) {
            bail!("POST answered {status}: {}", String::from_utf8_lossy(&body));
        }
        let text = String::from_utf8(body)?;
        // An SSE answer carries the response in a `data:` line.
        let json = text
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .map(str::trim)
            .find(|data| data.starts_with('{'))
            .map(str::to_owned)
            .unwrap_or(text);
        Ok(json)
    }
}

/// The `name` member of a request's params (a tool or prompt), for the `Mcp-Name` header.
fn name_of(params: &str) -> Option<String> {
    let start = params.find(r#""name":""#)? + r#""name":""#.len();
    let end = params[start..].find('"')? + start;
    Some(params[start..end].to_owned())
}
