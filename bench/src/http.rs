//! A minimal HTTP/1.1 keep-alive client, so that the client's own cost stays small and constant
//! next to what is measured.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

use anyhow::{Context, bail};

pub struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    host: String,
    /// One more header line sent with every request (`X-API-Key: ...`), without the CRLF.
    extra_header: Option<String>,
}

impl Client {
    pub fn connect(address: &str) -> anyhow::Result<Self> {
        let stream = TcpStream::connect(address)?;
        stream.set_nodelay(true)?;
        Ok(Self {
            writer: stream.try_clone()?,
            reader: BufReader::new(stream),
            host: address.to_owned(),
            extra_header: None,
        })
    }

    /// Sends `line` (`Name: value`) with every request.
    #[must_use]
    pub fn with_header(mut self, line: &str) -> Self {
        self.extra_header = Some(line.to_owned());
        self
    }

    pub fn get(&mut self, path: &str) -> anyhow::Result<(u16, Vec<u8>)> {
        let extra = self
            .extra_header
            .as_deref()
            .map(|line| format!("{line}\r\n"))
            .unwrap_or_default();
        write!(
            self.writer,
            "GET {path} HTTP/1.1\r\nHost: {}\r\nAccept: */*\r\n{extra}\r\n",
            self.host
        )?;
        self.writer.flush()?;
        let mut status_line = String::new();
        if self.reader.read_line(&mut status_line)? == 0 {
            bail!("the connection closed");
        }
        let status: u16 = status_line
            .split_whitespace()
            .nth(1)
            .context("no status")?
            .parse()
            .context("bad status")?;
        let mut content_length = None;
        let mut chunked = false;
        loop {
            let mut header = String::new();
            self.reader.read_line(&mut header)?;
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            let lower = header.to_ascii_lowercase();
            if let Some(value) = lower.strip_prefix("content-length:") {
                content_length = Some(value.trim().parse::<usize>()?);
            } else if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
                chunked = true;
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
        Ok((status, body))
    }
}
