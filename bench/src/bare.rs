//! `bare-responder`: the least an HTTP server can spend on a request, as the floor the gateway's
//! CPU per call is read against.
//!
//! It is a separate process with one thread per connection, in blocking I/O: it reads a request's
//! head and body and writes one fixed JSON-RPC result in one `write`, parsing nothing but the
//! `Content-Length`. No event loop, no JSON, no allocation per request beyond the head's lines.
//! What it costs per request at concurrency 1 is what this machine's kernel charges for receiving
//! a request, waking a thread and sending an answer; the gateway pays that once for its client
//! and once more for its upstream's pipe, on top of its own work.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};

use anyhow::{Context, bail};

/// A result every client of the harness accepts, for `initialize` and `tools/call` alike.
const BODY: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello"}],"isError":false}}"#;

/// Serves until killed (the `bare-responder` scenario).
pub fn serve() -> anyhow::Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    eprintln!(
        "bare responder listening on http://{}/mcp",
        listener.local_addr()?
    );
    serve_on(listener)
}

fn serve_on(listener: TcpListener) -> anyhow::Result<()> {
    let answer = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: bare\r\nContent-Length: {}\r\n\r\n{BODY}",
        BODY.len()
    );
    let answer: &'static [u8] = Box::leak(answer.into_bytes().into_boxed_slice());
    for stream in listener.incoming() {
        let stream = stream?;
        std::thread::spawn(move || {
            // Whatever ends the connection, the thread stays (parked, costing nothing) so that
            // its CPU time can still be read from /proc when the harness's clients are gone.
            let _ = answer_requests(stream, answer);
            loop {
                std::thread::park();
            }
        });
    }
    Ok(())
}

fn answer_requests(stream: TcpStream, answer: &[u8]) -> anyhow::Result<()> {
    stream.set_nodelay(true)?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    let mut body = Vec::new();
    loop {
        let mut length = 0;
        loop {
            line.clear();
            if reader.read_line(&mut line)? == 0 {
                return Ok(());
            }
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().context("a bad Content-Length")?;
            }
        }
        body.resize(length, 0);
        reader.read_exact(&mut body)?;
        writer.write_all(answer)?;
    }
}

/// Starts a bare responder (this harness's own executable, in a process of its own) and returns
/// it with its URL.
pub fn start() -> anyhow::Result<(Child, String)> {
    let mut child = Command::new(std::env::current_exe()?)
        .arg("bare-responder")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot start the bare responder")?;
    let stderr = child.stderr.take().context("no stderr")?;
    let mut lines = BufReader::new(stderr).lines();
    let Some(line) = lines.next() else {
        let _ = child.kill();
        bail!("the bare responder exited before listening");
    };
    let line = line?;
    let Some(url) = line.strip_prefix("bare responder listening on ") else {
        let _ = child.kill();
        bail!("the bare responder said `{line}` instead of its address");
    };
    Ok((child, url.trim().to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::{Era, McpClient};

    #[test]
    fn answers_requests_of_both_eras_on_one_connection_each() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        std::thread::spawn(move || serve_on(listener));
        for era in Era::BOTH {
            let mut client = McpClient::connect_era(&url, era).unwrap();
            for _ in 0..3 {
                let answer = client.request("tools/call", crate::ECHO_PARAMS).unwrap();
                assert_eq!(answer, BODY);
            }
        }
    }

    #[test]
    fn a_bad_content_length_ends_the_connection_with_an_error() {
        let (client, server) = {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            (client, listener.accept().unwrap().0)
        };
        let mut client = client;
        client
            .write_all(b"POST /mcp HTTP/1.1\r\nContent-Length: many\r\n\r\n")
            .unwrap();
        let error = answer_requests(server, b"unused").unwrap_err().to_string();
        assert!(error.contains("Content-Length"), "{error}");
    }
}
