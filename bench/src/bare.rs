//! The floor the gateway's CPU per call is read against: the least a process can spend on a
//! request on this machine, in two shapes.
//!
//! - `bare-responder` answers each request itself.
//! - `bare-relay` passes each request on over a pipe, as the gateway does to a stdio server: it
//!   writes one line to a child process (`cat`, which writes the line back) and waits for the
//!   line before it answers. The child's CPU is not the relay's, as the upstream's is not the
//!   gateway's.
//!
//! Both are separate processes with one thread per connection, in blocking I/O: they read a
//! request's head and body and write one fixed JSON-RPC result in one `write`, parsing nothing
//! but the `Content-Length`. No event loop, no JSON, no allocation per request beyond the head's
//! lines. What the responder costs per request at concurrency 1 is what this machine's kernel
//! charges for receiving a request, waking a thread and sending an answer; what the relay costs
//! is that plus one round trip over a pipe, the least any gateway in front of a stdio server
//! pays.
//!
//! Two more shapes do the same on the gateway's own HTTP stack, to tell what the stack costs
//! from what the gateway does on it:
//! - `actix-responder`: actix-web with the gateway's default number of workers, one route
//!   (`POST /mcp`) that answers the fixed result;
//! - `actix-relay`: the same route, which first sends one line to a `cat` child through tokio's
//!   pipes and awaits it back. Each worker keeps its idle children and starts another when all
//!   are busy, so concurrent requests each have a child of their own, as the blocking relay's
//!   connections do.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use std::cell::RefCell;
use std::rc::Rc;

use actix_web::{App, HttpResponse, HttpServer, web};
use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

/// A result every client of the harness accepts, for `initialize` and `tools/call` alike.
const BODY: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello"}],"isError":false}}"#;

/// The shapes of the floor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Bare {
    Responder,
    Relay,
    ActixResponder,
    ActixRelay,
}

impl Bare {
    pub const ALL: [Bare; 4] = [
        Bare::Responder,
        Bare::Relay,
        Bare::ActixResponder,
        Bare::ActixRelay,
    ];

    /// The scenario that serves it.
    pub fn scenario(self) -> &'static str {
        match self {
            Bare::Responder => "bare-responder",
            Bare::Relay => "bare-relay",
            Bare::ActixResponder => "actix-responder",
            Bare::ActixRelay => "actix-relay",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Bare::Responder => "a bare HTTP responder",
            Bare::Relay => "a bare relay over a pipe",
            Bare::ActixResponder => "an actix-web responder",
            Bare::ActixRelay => "an actix-web relay over a pipe",
        }
    }

    /// The shape a scenario names.
    pub fn of_scenario(scenario: &str) -> Option<Bare> {
        Bare::ALL
            .into_iter()
            .find(|bare| bare.scenario() == scenario)
    }
}

/// Serves until killed (the scenarios of [`Bare`]).
pub fn serve(bare: Bare) -> anyhow::Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    eprintln!(
        "{} listening on http://{}/mcp",
        bare.scenario(),
        listener.local_addr()?
    );
    match bare {
        Bare::Responder | Bare::Relay => serve_on(listener, bare),
        Bare::ActixResponder => serve_actix(listener, false),
        Bare::ActixRelay => serve_actix(listener, true),
    }
}

/// A `cat` child driven through tokio's pipes, for [`Bare::ActixRelay`].
struct AsyncPipe {
    _child: tokio::process::Child,
    to: tokio::process::ChildStdin,
    from: tokio::io::BufReader<tokio::process::ChildStdout>,
    line: String,
}

impl AsyncPipe {
    fn start() -> anyhow::Result<Self> {
        let mut child = tokio::process::Command::new("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("cannot start cat")?;
        let to = child.stdin.take().context("no stdin")?;
        let from = tokio::io::BufReader::new(child.stdout.take().context("no stdout")?);
        Ok(Self {
            _child: child,
            to,
            from,
            line: String::new(),
        })
    }

    async fn round_trip(&mut self) -> anyhow::Result<()> {
        self.to
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n")
            .await?;
        self.line.clear();
        if self.from.read_line(&mut self.line).await? == 0 {
            bail!("cat ended");
        }
        Ok(())
    }
}

/// A worker's idle `cat` children; `None` for the responder, which has none.
type Pipes = Option<Rc<RefCell<Vec<AsyncPipe>>>>;

async fn actix_answer(pipes: web::Data<Pipes>, _body: web::Bytes) -> HttpResponse {
    if let Some(pipes) = pipes.get_ref() {
        let idle = pipes.borrow_mut().pop();
        let relayed = match idle {
            Some(pipe) => Ok(pipe),
            None => AsyncPipe::start(),
        };
        let relayed = match relayed {
            Ok(mut pipe) => pipe.round_trip().await.map(|()| pipe),
            Err(error) => Err(error),
        };
        match relayed {
            Ok(pipe) => pipes.borrow_mut().push(pipe),
            Err(error) => {
                return HttpResponse::BadGateway()
                    .content_type("text/plain")
                    .body(format!("{error:#}"));
            }
        }
    }
    HttpResponse::Ok()
        .content_type("application/json")
        .insert_header(("Mcp-Session-Id", "bare"))
        .body(BODY)
}

/// Serves `POST /mcp` on actix-web until killed, with the gateway's default number of workers;
/// with `relay`, each request makes a round trip through a `cat` child first.
fn serve_actix(listener: TcpListener, relay: bool) -> anyhow::Result<()> {
    actix_web::rt::System::new().block_on(async move {
        HttpServer::new(move || {
            let pipes: Pipes = relay.then(|| Rc::new(RefCell::new(Vec::new())));
            App::new()
                .app_data(web::Data::new(pipes))
                .route("/mcp", web::post().to(actix_answer))
        })
        .workers(mcpgw_http_actix::HttpSettings::DEFAULT_WORKERS)
        .listen(listener)?
        .run()
        .await
    })?;
    Ok(())
}

/// The name of the blocking shapes' connection threads.
const CONNECTION_THREAD: &str = "bare-connection";

/// A relay's upstream: a `cat` child.
struct Pipe {
    _child: Child,
    to: ChildStdin,
    from: BufReader<ChildStdout>,
    line: String,
}

impl Pipe {
    fn start() -> anyhow::Result<Self> {
        let mut child = Command::new("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("cannot start cat")?;
        let to = child.stdin.take().context("no stdin")?;
        let from = BufReader::new(child.stdout.take().context("no stdout")?);
        Ok(Self {
            _child: child,
            to,
            from,
            line: String::new(),
        })
    }

    fn round_trip(&mut self) -> anyhow::Result<()> {
        self.to
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n")?;
        self.line.clear();
        if self.from.read_line(&mut self.line)? == 0 {
            bail!("cat ended");
        }
        Ok(())
    }
}

fn serve_on(listener: TcpListener, bare: Bare) -> anyhow::Result<()> {
    let answer = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: bare\r\nContent-Length: {}\r\n\r\n{BODY}",
        BODY.len()
    );
    let answer: &'static [u8] = Box::leak(answer.into_bytes().into_boxed_slice());
    for stream in listener.incoming() {
        let stream = stream?;
        std::thread::Builder::new()
            .name(CONNECTION_THREAD.to_owned())
            .spawn(move || {
                // Whatever ends the connection, the thread stays (parked, costing nothing) so that
                // its CPU time can still be read from /proc when the harness's clients are gone.
                let pipe = match bare {
                    Bare::Relay => Pipe::start().map(Some),
                    _ => Ok(None),
                };
                if let Ok(pipe) = pipe {
                    let _ = answer_requests(stream, answer, pipe);
                }
                loop {
                    std::thread::park();
                }
            })?;
    }
    Ok(())
}

fn answer_requests(stream: TcpStream, answer: &[u8], mut pipe: Option<Pipe>) -> anyhow::Result<()> {
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
        if let Some(pipe) = &mut pipe {
            pipe.round_trip()?;
        }
        writer.write_all(answer)?;
    }
}

/// Starts `bare` (this harness's own executable, in a process of its own) and returns it with its
/// URL.
pub fn start(bare: Bare) -> anyhow::Result<(Child, String)> {
    let mut command = Command::new(std::env::current_exe()?);
    command.arg(bare.scenario());
    crate::start_listening(
        command,
        bare.label(),
        &format!("{} listening on ", bare.scenario()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::{Era, McpClient};

    #[test]
    fn the_relay_passes_each_request_through_its_child() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        std::thread::spawn(move || serve_on(listener, Bare::Relay));
        let mut client = McpClient::connect_era(&url, Era::Stateless).unwrap();
        for _ in 0..3 {
            let answer = client.request("tools/call", crate::ECHO_PARAMS).unwrap();
            assert_eq!(answer, BODY);
        }
        // The relay's connection thread has a `cat` of its own, fed one line per request.
        let cats = cats_of_threads(CONNECTION_THREAD);
        assert_eq!(cats.len(), 1, "{cats:?}");
        let read = std::fs::read_to_string(format!("/proc/{}/io", cats[0])).unwrap();
        let lines_read: u64 = read
            .lines()
            .find_map(|line| line.strip_prefix("syscr: "))
            .unwrap()
            .parse()
            .unwrap();
        assert!(lines_read >= 3, "cat read {lines_read} times");
    }

    #[test]
    fn answers_requests_of_both_eras_on_one_connection_each() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        std::thread::spawn(move || serve_on(listener, Bare::Responder));
        for era in Era::BOTH {
            let mut client = McpClient::connect_era(&url, era).unwrap();
            for _ in 0..3 {
                let answer = client.request("tools/call", crate::ECHO_PARAMS).unwrap();
                assert_eq!(answer, BODY);
            }
        }
    }

    #[test]
    fn the_actix_shapes_answer_both_eras_and_the_relay_feeds_its_child() {
        for bare in [Bare::ActixResponder, Bare::ActixRelay] {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let url = format!("http://{}/mcp", listener.local_addr().unwrap());
            std::thread::spawn(move || serve_actix(listener, bare == Bare::ActixRelay));
            let before = cats_of_threads(ACTIX_WORKER).len();
            for era in Era::BOTH {
                let mut client = McpClient::connect_era(&url, era).unwrap();
                for _ in 0..3 {
                    let answer = client.request("tools/call", crate::ECHO_PARAMS).unwrap();
                    assert_eq!(answer, BODY);
                }
            }
            // The relay's round trips went through a `cat` its worker started; the responder
            // starts none (the other test of this loop may have left some of its own).
            let after = cats_of_threads(ACTIX_WORKER).len();
            if bare == Bare::ActixRelay {
                assert!(
                    after > before,
                    "the relay started no cat: {before} before, {after} after"
                );
            } else {
                assert_eq!(after, before, "the responder started a cat");
            }
        }
    }

    /// How actix-web names its workers' threads (`actix-rt|system:S|arbiter:A`, cut to the 15
    /// bytes a thread name keeps).
    const ACTIX_WORKER: &str = "actix-rt|system";

    /// The `cat` children of this process's threads whose name starts with `thread`.
    fn cats_of_threads(thread: &str) -> Vec<u32> {
        let me = std::process::id();
        std::fs::read_dir(format!("/proc/{me}/task"))
            .unwrap()
            .filter_map(|task| {
                let task = task.unwrap().path();
                let comm = std::fs::read_to_string(task.join("comm")).ok()?;
                comm.starts_with(thread)
                    .then(|| std::fs::read_to_string(task.join("children")).ok())
                    .flatten()
            })
            .flat_map(|children| {
                children
                    .split_whitespace()
                    .filter_map(|pid| pid.parse().ok())
                    .collect::<Vec<u32>>()
            })
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|comm| comm.trim() == "cat")
            })
            .collect()
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
        let error = answer_requests(server, b"unused", None)
            .unwrap_err()
            .to_string();
        assert!(error.contains("Content-Length"), "{error}");
    }
}
