//! A minimal MCP Streamable HTTP client (protocol 2025-11-25, with a session) over the
//! keep-alive HTTP client, so that what is measured is the server, not a heavy client.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

use anyhow::{Context, bail};

pub struct McpClient {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    host: String,
    path: String,
    session: Option<String>,
    next_id: u64,
    /// One more header line sent with every request (`X-API-Key: ...`), without the CRLF.
    extra_header: Option<String>,
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
        };
        let initialize = r#"{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"mcpgw-bench","version":"0"}}"#;
        client.request("initialize", initialize)?;
        client.post(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)?;
        Ok(client)
    }

    /// Sends a request and returns the JSON-RPC response text.
    pub fn request(&mut self, method: &str, params: &str) -> anyhow::Result<String> {
        let id = self.next_id;
        self.next_id += 1;
        let body =
            format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#);
        let response = self.post(&body)?;
        if response.contains(r#""error""#) && !response.contains(r#""result""#) {
            bail!("{method} failed: {response}");
        }
        Ok(response)
    }

    fn post(&mut self, body: &str) -> anyhow::Result<String> {
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
