//! The stdio link: one upstream server's stdin and stdout, shared by rmcp's session machinery
//! and the session's own path for tool calls.
//!
//! A tool call through rmcp crosses threads twice on the way out and twice on the way back: the
//! calling task queues the request to rmcp's service task, which writes it; the answer is read
//! by that task and handed back to the caller. Every crossing wakes a thread, and on a machine
//! whose CPUs are idle a wake-up costs tens of microseconds, more than the gateway's own work.
//! The link takes the crossings out:
//!
//! - **Writes** happen on the calling task. A line goes to the pipe in one `write` when the pipe
//!   has room; only a write that has to wait is finished by a task of its own, so that a caller
//!   who goes away mid-line never leaves half a message in the stream.
//! - **Reads** happen on a reader task that moves to the runtime of the callers. The read end of
//!   the pipe is registered with that runtime's event loop (an actix worker's, when the calls
//!   come over HTTP), so an answer wakes the thread that is waiting for it and no other. The
//!   reader moves only when no direct call is waiting and the last few calls all came from the
//!   same other runtime, so that callers on two runtimes never make it bounce. When the callers
//!   run as tasks of a [`tokio::task::LocalSet`] (an actix worker's handlers do) and say so by
//!   running inside [`crate::on_local_set`], the reader joins that set too (see the `local_set`
//!   module for why).
//! - **Tool calls** go out with ids of their own (from [`DIRECT_ID_BASE`] up, far from rmcp's,
//!   which count from zero in 32 bits) and their answers go straight to the waiting caller as
//!   JSON, without rmcp's typed decoding and re-encoding.
//!
//! Everything else (the handshake, lists, pings, server-initiated requests, notifications) goes
//! to rmcp as before, in the order it arrived. Progress notifications are routed to their
//! callers here, before the answer that follows them, and `notifications/tools/list_changed` is
//! counted here and passed on.

use std::collections::HashMap;
use std::io;
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::Poll;

use mcpgw_core::{RelayRoutes, ServerId, ServerOutput};
use rmcp::RoleClient;
use rmcp::model::ProgressNotificationParam;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::runtime::{Handle, Id as RuntimeId};
use tokio::sync::{mpsc, oneshot, watch};

use crate::local_set::on_local_set_now;
use crate::progress::ProgressRoutes;
use crate::session::relay_log_message;

/// The first id of the link's own requests. rmcp numbers its requests with a 32-bit counter, so
/// ids from 2^32 never meet one of its; they stay exact in JavaScript's numbers (below 2^53).
pub(crate) const DIRECT_ID_BASE: i64 = 1 << 32;

/// A line longer than this is discarded, as rmcp's own stdio transport does.
const MAX_LINE_LENGTH: usize = 16 * 1024 * 1024;

/// How many calls in a row must come from one other runtime before the reader moves there.
const FOLLOW_AFTER: u32 = 4;

/// Messages for rmcp that may wait unread before the reader waits for rmcp.
const RMCP_QUEUE: usize = 256;

/// How much room the read buffer keeps for the next read.
const READ_CHUNK: usize = 16 * 1024;

/// A read buffer that grew beyond this for a long message shrinks back once it is empty.
const KEPT_BUFFER: usize = 1024 * 1024;

type Writer = Pin<Box<dyn AsyncWrite + Send>>;
type Waiters = HashMap<i64, oneshot::Sender<Value>>;

/// One upstream's stdin and stdout. See the module documentation.
pub(crate) struct StdioLink {
    server_id: ServerId,
    writer: tokio::sync::Mutex<Option<Writer>>,
    waiters: Mutex<Waiters>,
    next_id: AtomicI64,
    progress: Arc<ProgressRoutes>,
    /// Where log messages go: to the calling client, before the answer that follows them.
    relay_routes: Arc<RelayRoutes>,
    tool_list_changes: watch::Sender<u64>,
    place: Mutex<ReaderPlace>,
    /// Where the reader goes when the runtime it runs on shuts down: the runtime that made the
    /// link.
    home: Handle,
}

/// Where the reader runs, and what decides whether it moves.
#[derive(Default)]
struct ReaderPlace {
    /// The runtime the reader runs on; `None` once it ended.
    runtime: Option<RuntimeId>,
    /// Asks the running reader to stop and hand itself over. `None` for a reader that cannot
    /// move (a stream that is not a pipe), while it moves, and once it ended.
    recall: Option<oneshot::Sender<oneshot::Sender<ParkedReader>>>,
    /// The other runtime the latest calls came from, and how many in a row.
    candidate: Option<RuntimeId>,
    streak: u32,
}

/// What the upstream writes to, in the form it takes while no task reads it.
enum Source {
    Pipe(OwnedFd),
    Stream(Pin<Box<dyn AsyncRead + Send>>),
}

/// A reader between two tasks: the source, what was read of an unfinished line, and the queue to
/// rmcp. It travels with the reader, so moving loses nothing.
struct ParkedReader {
    source: Source,
    buffer: Vec<u8>,
    /// How much of `buffer` is known to hold no line end.
    scanned: usize,
    discarding: bool,
    to_rmcp: mpsc::Sender<RxJsonRpcMessage<RoleClient>>,
}

impl StdioLink {
    /// A link over `to_server` and `from_server`, with its reader started on the current runtime,
    /// and the transport rmcp runs the session over.
    pub(crate) fn open(
        server_id: ServerId,
        to_server: Writer,
        from_server: ServerOutput,
        progress: Arc<ProgressRoutes>,
        relay_routes: Arc<RelayRoutes>,
        tool_list_changes: watch::Sender<u64>,
    ) -> (Arc<Self>, LinkTransport) {
        let home = Handle::current();
        let (to_rmcp, from_reader) = mpsc::channel(RMCP_QUEUE);
        let link = Arc::new(Self {
            server_id,
            writer: tokio::sync::Mutex::new(Some(to_server)),
            waiters: Mutex::new(HashMap::new()),
            next_id: AtomicI64::new(DIRECT_ID_BASE),
            progress,
            relay_routes,
            tool_list_changes,
            place: Mutex::new(ReaderPlace::default()),
            home: home.clone(),
        });
        let source = match from_server {
            ServerOutput::Pipe(fd) => Source::Pipe(fd),
            ServerOutput::Stream(stream) => Source::Stream(stream),
        };
        link.start_reader(
            ParkedReader {
                source,
                buffer: Vec::new(),
                scanned: 0,
                discarding: false,
                to_rmcp,
            },
            &home,
            false,
        );
        let transport = LinkTransport {
            link: Arc::clone(&link),
            from_reader,
        };
        (link, transport)
    }

    fn place(&self) -> MutexGuard<'_, ReaderPlace> {
        self.place.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn waiters(&self) -> MutexGuard<'_, Waiters> {
        self.waiters.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts a reader task on `runtime`; with `local`, as a task of the
    /// [`tokio::task::LocalSet`] of the current thread, which runs on `runtime`.
    fn start_reader(self: &Arc<Self>, parked: ParkedReader, runtime: &Handle, local: bool) {
        let recall_receiver = {
            let mut place = self.place();
            place.runtime = Some(runtime.id());
            place.candidate = None;
            place.streak = 0;
            match parked.source {
                Source::Pipe(_) => {
                    let (recall, receiver) = oneshot::channel();
                    place.recall = Some(recall);
                    Some(receiver)
                }
                Source::Stream(_) => {
                    place.recall = None;
                    None
                }
            }
        };
        let task = ReaderTask {
            link: Arc::clone(self),
            parked: Some(parked),
            registered: None,
            spawned_on: runtime.id(),
            local,
        };
        if local {
            tokio::task::spawn_local(task.run(recall_receiver));
        } else {
            runtime.spawn(task.run(recall_receiver));
        }
    }

    /// Moves the reader to the caller's runtime when the calls have settled there. Called
    /// before a direct call is sent; a move costs one round trip to the reader, once.
    pub(crate) async fn follow_caller(self: &Arc<Self>) {
        let Ok(here) = Handle::try_current() else {
            return;
        };
        let recall = {
            let mut place = self.place();
            let Some(now) = place.runtime else {
                return;
            };
            if now == here.id() || place.recall.is_none() {
                place.candidate = None;
                place.streak = 0;
                return;
            }
            if place.candidate == Some(here.id()) {
                place.streak = place.streak.saturating_add(1);
            } else {
                place.candidate = Some(here.id());
                place.streak = 1;
            }
            if place.streak < FOLLOW_AFTER || !self.waiters().is_empty() {
                return;
            }
            place.recall.take()
        };
        let Some(recall) = recall else {
            return;
        };
        let (handover, parked) = oneshot::channel();
        if recall.send(handover).is_err() {
            // The reader ended in the meantime.
            return;
        }
        // If this caller goes away before the reader arrives, the reader finds the handover
        // closed and starts again where it was.
        if let Ok(parked) = parked.await {
            self.start_reader(parked, &here, on_local_set_now());
        }
    }

    /// The id of the next direct request.
    pub(crate) fn next_id(&self) -> i64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Waits for the answer to request `id`; the registration ends when the returned guard is
    /// dropped.
    pub(crate) fn expect_answer(self: &Arc<Self>, id: i64) -> (Expected, oneshot::Receiver<Value>) {
        let (sender, receiver) = oneshot::channel();
        self.waiters().insert(id, sender);
        (
            Expected {
                link: Arc::clone(self),
                id,
            },
            receiver,
        )
    }

    /// Writes one message (a line without its newline) to the server's stdin. The line is
    /// written whole even when the caller goes away: half a message would garble the stream.
    pub(crate) async fn send_line(self: &Arc<Self>, mut line: Vec<u8>) -> io::Result<()> {
        line.push(b'\n');
        let link = Arc::clone(self);
        let mut write = Box::pin(async move { link.write_whole(&line).await });
        // With the lock free and room in the pipe, the write completes within this first poll.
        let first = std::future::poll_fn(|cx| Poll::Ready(write.as_mut().poll(cx))).await;
        match first {
            Poll::Ready(result) => result,
            Poll::Pending => match tokio::spawn(write).await {
                Ok(result) => result,
                Err(error) => Err(io::Error::other(error)),
            },
        }
    }

    async fn write_whole(&self, line: &[u8]) -> io::Result<()> {
        let mut writer = self.writer.lock().await;
        let Some(writer) = writer.as_mut() else {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the server's stdin is closed",
            ));
        };
        writer.write_all(line).await?;
        writer.flush().await
    }

    /// Closes the server's stdin, which tells a stdio server to exit.
    async fn close_writer(&self) {
        let taken = self.writer.lock().await.take();
        if let Some(mut writer) = taken {
            let _ = writer.shutdown().await;
        }
    }

    /// The reader ended for good: every direct call still waiting learns it at once.
    fn finish(&self) {
        let mut place = self.place();
        place.runtime = None;
        place.recall = None;
        drop(place);
        self.waiters().clear();
    }

    /// Acts on one line from the server: the answer of a direct call goes to its caller,
    /// progress to its route, everything else to rmcp.
    async fn dispatch(&self, line: &[u8], to_rmcp: &mpsc::Sender<RxJsonRpcMessage<RoleClient>>) {
        let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let message: Value = match serde_json::from_slice(line) {
            Ok(message) => message,
            Err(error) => {
                // Like the official SDKs: no id to answer, and answering garbage can start a
                // storm of errors with a server that echoes them.
                tracing::debug!(server = %self.server_id, %error, "ignoring a line that is not JSON");
                return;
            }
        };
        let method = message.get("method").and_then(Value::as_str);
        if method.is_none()
            && let Some(id) = message.get("id").and_then(Value::as_i64)
            && id >= DIRECT_ID_BASE
        {
            match self.waiters().remove(&id) {
                Some(waiter) => {
                    let _ = waiter.send(message);
                }
                None => {
                    tracing::debug!(server = %self.server_id, id, "an answer came after its caller left");
                }
            }
            return;
        }
        match method {
            Some("notifications/progress") => {
                // Read in place: the notification itself is not needed afterwards.
                match message
                    .get("params")
                    .map(<ProgressNotificationParam as serde::Deserialize>::deserialize)
                {
                    Some(Ok(progress)) => self.progress.deliver(progress),
                    _ => {
                        tracing::debug!(server = %self.server_id, "ignoring a malformed progress notification");
                    }
                }
                return;
            }
            Some("notifications/message") => {
                let params = match message {
                    Value::Object(mut message) => message.remove("params").unwrap_or_default(),
                    _ => Value::Null,
                };
                relay_log_message(&self.relay_routes, params, None);
                return;
            }
            Some("notifications/tools/list_changed") => {
                self.tool_list_changes
                    .send_modify(|changes| *changes = changes.wrapping_add(1));
            }
            _ => {}
        }
        match serde_json::from_value::<RxJsonRpcMessage<RoleClient>>(message) {
            Ok(message) => {
                // rmcp gone means the session is ending; the line has no one left to read it.
                let _ = to_rmcp.send(message).await;
            }
            Err(error) => {
                tracing::debug!(server = %self.server_id, %error, "a message of the server has no valid shape");
            }
        }
    }

    /// Splits what was read into lines and acts on every complete one.
    async fn consume(&self, parked: &mut ParkedReader) {
        let ParkedReader {
            buffer,
            scanned,
            discarding,
            to_rmcp,
            ..
        } = parked;
        let mut start = 0;
        // Bytes scanned by an earlier read are not scanned again: a long line arrives in many
        // reads.
        let mut from = (*scanned).min(buffer.len());
        while let Some(offset) = buffer[from..].iter().position(|&b| b == b'\n') {
            let end = from + offset;
            if *discarding {
                *discarding = false;
            } else {
                self.dispatch(&buffer[start..end], to_rmcp).await;
            }
            start = end + 1;
            from = start;
        }
        buffer.drain(..start);
        *scanned = buffer.len();
        // A server that once sent a huge message does not keep its buffer for good.
        if buffer.is_empty() && buffer.capacity() > KEPT_BUFFER {
            buffer.shrink_to(READ_CHUNK);
        }
        if parked.buffer.len() > MAX_LINE_LENGTH {
            tracing::error!(
                server = %self.server_id,
                max_line_length = MAX_LINE_LENGTH,
                "a message of the server exceeded the maximum line length; discarding it"
            );
            parked.buffer.clear();
            parked.scanned = 0;
            parked.discarding = true;
        }
    }
}

/// A direct call's place among the waiters, given up when the call ends however it ends.
pub(crate) struct Expected {
    link: Arc<StdioLink>,
    id: i64,
}

impl Drop for Expected {
    fn drop(&mut self) {
        self.link.waiters().remove(&self.id);
    }
}

/// The task that reads the server's output. Dropped before it ended (its runtime shut down
/// under it), it starts again on the link's home runtime, unless that is the one shutting down.
struct ReaderTask {
    link: Arc<StdioLink>,
    /// The reader; `None` once it ended or was handed over.
    parked: Option<ParkedReader>,
    /// The pipe while it is registered with this task's runtime.
    registered: Option<pipe::Receiver>,
    spawned_on: RuntimeId,
    /// Whether it is a task of the current thread's [`tokio::task::LocalSet`].
    local: bool,
}

/// How a reader stopped reading.
enum Stop {
    /// End of output, a read error, or rmcp gone: the session is over.
    Ended,
    /// Asked to move: hand over to the caller waiting on the sender.
    Recalled(oneshot::Sender<ParkedReader>),
}

impl ReaderTask {
    async fn run(mut self, recall: Option<oneshot::Receiver<oneshot::Sender<ParkedReader>>>) {
        let stop = self.read(recall).await;
        match stop {
            Stop::Recalled(handover) => self.hand_over(handover),
            Stop::Ended => {
                self.parked = None;
                self.registered = None;
                self.link.finish();
            }
        }
    }

    async fn read(
        &mut self,
        recall: Option<oneshot::Receiver<oneshot::Sender<ParkedReader>>>,
    ) -> Stop {
        let Some(parked) = self.parked.as_mut() else {
            return Stop::Ended;
        };
        let source = std::mem::replace(
            &mut parked.source,
            Source::Stream(Box::pin(tokio::io::empty())),
        );
        match source {
            // The checked form, which also puts the descriptor in non-blocking mode: a child's
            // stdout taken over from tokio is handed back in blocking mode.
            Source::Pipe(fd) => match pipe::Receiver::from_owned_fd(fd) {
                Ok(receiver) => {
                    let receiver = self.registered.insert(receiver);
                    read_pipe(&self.link, receiver, parked, recall).await
                }
                Err(error) => {
                    tracing::warn!(server = %self.link.server_id, %error,
                        "the server's stdout could not be registered for reading");
                    Stop::Ended
                }
            },
            Source::Stream(mut stream) => {
                let stop = read_stream(&self.link, &mut stream, parked).await;
                parked.source = Source::Stream(stream);
                stop
            }
        }
    }

    /// Takes the reader back from this task's runtime, as a descriptor that any runtime can
    /// register again.
    fn unregister(&mut self) -> Option<ParkedReader> {
        let mut parked = self.parked.take()?;
        if let Some(receiver) = self.registered.take() {
            match receiver.into_nonblocking_fd() {
                Ok(fd) => parked.source = Source::Pipe(fd),
                Err(error) => {
                    tracing::warn!(server = %self.link.server_id, %error,
                        "the server's stdout could not be moved to another thread");
                    return None;
                }
            }
        }
        Some(parked)
    }

    /// Gives the reader to the caller that recalled it; if that caller left, starts it again
    /// here.
    fn hand_over(&mut self, handover: oneshot::Sender<ParkedReader>) {
        let Some(parked) = self.unregister() else {
            self.link.finish();
            return;
        };
        if let Err(parked) = handover.send(parked) {
            match Handle::try_current() {
                Ok(here) => self.link.start_reader(parked, &here, self.local),
                Err(_) => self.link.finish(),
            }
        }
    }
}

impl Drop for ReaderTask {
    fn drop(&mut self) {
        if self.parked.is_none() {
            return;
        }
        let home = self.link.home.clone();
        match self.unregister() {
            Some(parked) if self.spawned_on != home.id() => {
                self.link.start_reader(parked, &home, false);
            }
            _ => self.link.finish(),
        }
    }
}

/// What ended a wait for the pipe.
enum Woken {
    Readable,
    Stop(Stop),
    RecallDropped,
}

/// Reads a pipe until its end, an error, rmcp's end, or a recall.
async fn read_pipe(
    link: &StdioLink,
    receiver: &pipe::Receiver,
    parked: &mut ParkedReader,
    mut recall: Option<oneshot::Receiver<oneshot::Sender<ParkedReader>>>,
) -> Stop {
    loop {
        if parked.buffer.capacity() - parked.buffer.len() < READ_CHUNK / 4 {
            parked.buffer.reserve(READ_CHUNK);
        }
        match receiver.try_read_buf(&mut parked.buffer) {
            Ok(0) => return Stop::Ended,
            Ok(_) => {
                link.consume(parked).await;
                // A server that writes without pause must not keep the thread (an HTTP
                // worker's, often) from its other tasks.
                tokio::task::consume_budget().await;
                continue;
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => {
                tracing::debug!(server = %link.server_id, %error, "reading the server's stdout failed");
                return Stop::Ended;
            }
        }
        let recalled = async {
            match recall.as_mut() {
                Some(receiver) => receiver.await.ok(),
                None => std::future::pending().await,
            }
        };
        let woken = tokio::select! {
            biased;
            () = parked.to_rmcp.closed() => Woken::Stop(Stop::Ended),
            handover = recalled => match handover {
                Some(handover) => Woken::Stop(Stop::Recalled(handover)),
                None => Woken::RecallDropped,
            },
            ready = receiver.readable() => match ready {
                Ok(()) => Woken::Readable,
                Err(error) => {
                    tracing::debug!(server = %link.server_id, %error, "waiting for the server's stdout failed");
                    Woken::Stop(Stop::Ended)
                }
            },
        };
        match woken {
            Woken::Readable => {}
            Woken::Stop(stop) => return stop,
            // The link let go of its end without asking: it no longer moves this reader.
            Woken::RecallDropped => recall = None,
        }
    }
}

/// Reads a stream that is not a pipe until its end, an error, or rmcp's end; it never moves.
async fn read_stream(
    link: &StdioLink,
    stream: &mut Pin<Box<dyn AsyncRead + Send>>,
    parked: &mut ParkedReader,
) -> Stop {
    loop {
        if parked.buffer.capacity() - parked.buffer.len() < READ_CHUNK / 4 {
            parked.buffer.reserve(READ_CHUNK);
        }
        let ParkedReader {
            buffer, to_rmcp, ..
        } = &mut *parked;
        let read = tokio::select! {
            biased;
            () = to_rmcp.closed() => return Stop::Ended,
            read = stream.read_buf(buffer) => read,
        };
        match read {
            Ok(0) => return Stop::Ended,
            Ok(_) => link.consume(parked).await,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => {
                tracing::debug!(server = %link.server_id, %error, "reading the server's stdout failed");
                return Stop::Ended;
            }
        }
    }
}

/// The transport rmcp runs the session over: its messages are written through the link, and it
/// receives what the link's reader does not route itself.
pub(crate) struct LinkTransport {
    link: Arc<StdioLink>,
    from_reader: mpsc::Receiver<RxJsonRpcMessage<RoleClient>>,
}

impl Transport<RoleClient> for LinkTransport {
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let encoded = serde_json::to_vec(&item).map_err(io::Error::other);
        let link = Arc::clone(&self.link);
        async move { link.send_line(encoded?).await }
    }

    // Cancel-safe: the only await point is the channel's, which is.
    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        self.from_reader.recv().await
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.link.close_writer().await;
        Ok(())
    }
}

#[cfg(test)]
impl StdioLink {
    /// The runtime the reader runs on now.
    fn reader_runtime(&self) -> Option<RuntimeId> {
        self.place().runtime
    }
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader, Write};
    use std::time::Duration;

    use super::*;
    use crate::local_set::on_local_set;
    use mcpgw_core::ProgressUpdate;
    use rmcp::model::{JsonRpcMessage, NumberOrString, ProgressToken};

    const PATIENCE: Duration = Duration::from_secs(10);

    /// The server's side of a link: the test writes what the server would print and reads what
    /// the gateway sent.
    struct ScriptedServer {
        stdout: std::io::PipeWriter,
        stdin: BufReader<std::io::PipeReader>,
    }

    impl ScriptedServer {
        fn print(&mut self, text: &str) {
            self.stdout.write_all(text.as_bytes()).unwrap();
            self.stdout.flush().unwrap();
        }

        fn read_line(&mut self) -> Value {
            let mut line = String::new();
            self.stdin.read_line(&mut line).unwrap();
            serde_json::from_str(&line).unwrap_or_else(|error| panic!("{line:?}: {error}"))
        }
    }

    struct Opened {
        link: Arc<StdioLink>,
        transport: LinkTransport,
        server: ScriptedServer,
        progress: Arc<ProgressRoutes>,
        tool_list_changes: watch::Receiver<u64>,
    }

    /// A link over real pipes, opened on the current runtime.
    fn open() -> Opened {
        let (stdin_reader, stdin_writer) = std::io::pipe().unwrap();
        let (stdout_reader, stdout_writer) = std::io::pipe().unwrap();
        let to_server = tokio::net::unix::pipe::Sender::from_owned_fd(OwnedFd::from(stdin_writer))
            .expect("a pipe's write end");
        let progress = Arc::new(ProgressRoutes::default());
        let (changes, tool_list_changes) = watch::channel(0);
        let (link, transport) = StdioLink::open(
            ServerId::parse("scripted").unwrap(),
            Box::pin(to_server),
            ServerOutput::Pipe(OwnedFd::from(stdout_reader)),
            Arc::clone(&progress),
            Arc::new(RelayRoutes::new(true)),
            changes,
        );
        Opened {
            link,
            transport,
            server: ScriptedServer {
                stdout: stdout_writer,
                stdin: BufReader::new(stdin_reader),
            },
            progress,
            tool_list_changes,
        }
    }

    /// The next message the link passed on to rmcp.
    async fn next_for_rmcp(transport: &mut LinkTransport) -> Option<RxJsonRpcMessage<RoleClient>> {
        tokio::time::timeout(PATIENCE, transport.receive())
            .await
            .expect("the link passes a message on in time")
    }

    fn is_response_to(message: &Option<RxJsonRpcMessage<RoleClient>>, id: i64) -> bool {
        matches!(message, Some(JsonRpcMessage::Response(response)) if response.id == NumberOrString::Number(id))
    }

    /// Sends a direct request with the link's next id and waits for its answer, which the server
    /// prints after `before_answer`.
    async fn call(
        link: &Arc<StdioLink>,
        server: &mut ScriptedServer,
        text: &str,
        before_answer: &str,
    ) -> Value {
        link.follow_caller().await;
        let id = link.next_id();
        let (_expected, answer) = link.expect_answer(id);
        let request = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "echo"}});
        link.send_line(request.to_string().into_bytes())
            .await
            .unwrap();
        // Already written: reading it does not wait for the runtime.
        let seen = server.read_line();
        assert_eq!(seen["id"], id);
        server.print(before_answer);
        server.print(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"text\":\"{text}\"}}}}\n"
        ));
        tokio::time::timeout(PATIENCE, answer)
            .await
            .expect("the answer arrives")
            .expect("the link is open")
    }

    /// The reader is back on `home`, and a call from there is answered.
    async fn assert_went_home(link: &Arc<StdioLink>, server: &mut ScriptedServer, home: RuntimeId) {
        assert_eq!(link.reader_runtime(), Some(home), "the reader went home");
        let answer = call(link, server, "home again", "").await;
        assert_eq!(answer["result"]["text"], "home again");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn direct_answers_reach_their_callers_and_everything_else_reaches_rmcp_in_order() {
        let Opened {
            link,
            mut transport,
            mut server,
            progress,
            tool_list_changes,
        } = open();
        let id = link.next_id();
        assert!(id >= DIRECT_ID_BASE);
        let (_expected, answer) = link.expect_answer(id);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&seen);
        let _route = progress.register(
            ProgressToken(NumberOrString::Number(id)),
            Arc::new(move |update: ProgressUpdate| sink.lock().unwrap().push(update.progress)),
        );
        // A byte-order mark, carriage returns, blank lines and a line that is not JSON are
        // tolerated; rmcp's own answer (a small id) and a server request go to rmcp.
        server.print(
            "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}\r\n\n   \nnot json at all\n",
        );
        server.print(&format!(
            "{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{{\"progressToken\":{id},\"progress\":1}}}}\n"
        ));
        server.print("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n");
        server.print(&format!(
            "{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{{\"progressToken\":{id},\"progress\":2}}}}\n"
        ));
        server.print(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"ok\":true}}}}\n"
        ));
        server.print("{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\"}\n");

        let answer = tokio::time::timeout(PATIENCE, answer)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(answer["result"]["ok"], true);
        assert_eq!(
            *seen.lock().unwrap(),
            [1.0, 2.0],
            "progress came before the answer"
        );
        assert_eq!(*tool_list_changes.borrow(), 1);

        let first = next_for_rmcp(&mut transport).await;
        assert!(is_response_to(&first, 3), "{first:?}");
        let second = next_for_rmcp(&mut transport).await;
        assert!(
            matches!(second, Some(JsonRpcMessage::Notification(_))),
            "the list change is passed on too: {second:?}"
        );
        let third = next_for_rmcp(&mut transport).await;
        assert!(
            matches!(third, Some(JsonRpcMessage::Request(_))),
            "{third:?}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_reader_moves_to_the_runtime_of_the_calls_and_loses_nothing_on_the_way() {
        let Opened {
            link,
            mut transport,
            mut server,
            ..
        } = open();
        let home = Handle::current().id();
        assert_eq!(link.reader_runtime(), Some(home));

        let (link_there, mut server) = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let there = runtime.handle().id();
            runtime.block_on(async {
                for round in 1..=FOLLOW_AFTER * 2 {
                    // Half a message for rmcp is read before the move (which comes with call
                    // `FOLLOW_AFTER`); its end comes after.
                    let before = if round == FOLLOW_AFTER {
                        server.print("{\"jsonrpc\":\"2.0\",\"id\":7,");
                        "\"result\":{}}\n"
                    } else {
                        ""
                    };
                    let answer = call(&link, &mut server, &format!("call {round}"), before).await;
                    assert_eq!(answer["result"]["text"], format!("call {round}"));
                    let expected = if round < FOLLOW_AFTER { home } else { there };
                    assert_eq!(link.reader_runtime(), Some(expected), "after call {round}");
                }
            });
            // The runtime shuts down with the reader on it: the reader goes home.
            drop(runtime);
            (link, server)
        })
        .join()
        .unwrap();

        let message = next_for_rmcp(&mut transport).await;
        assert!(
            is_response_to(&message, 7),
            "the message cut by the move arrived whole: {message:?}"
        );
        assert_went_home(&link_there, &mut server, home).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn callers_on_a_local_set_bring_the_reader_into_the_set_and_it_goes_home_after() {
        let Opened {
            link,
            mut transport,
            server,
            ..
        } = open();
        let home = Handle::current().id();

        let (link_there, mut server, runtime_tasks) = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let there = runtime.handle().id();
            let local_set = tokio::task::LocalSet::new();
            // What the runtime itself runs (the reader, when it is not the set's) once the
            // reader came: the calls' own tasks are the set's.
            let runtime_handle = runtime.handle().clone();
            let (link, server, runtime_tasks) = local_set.block_on(&runtime, async move {
                let mut link = link;
                let mut server = server;
                let mut runtime_tasks = Vec::new();
                for round in 1..=FOLLOW_AFTER * 2 {
                    let (answer, moved_link, moved_server) = tokio::task::spawn_local(async move {
                        let text = format!("local call {round}");
                        let answer = on_local_set(call(&link, &mut server, &text, "")).await;
                        (answer, link, server)
                    })
                    .await
                    .unwrap();
                    (link, server) = (moved_link, moved_server);
                    assert_eq!(answer["result"]["text"], format!("local call {round}"));
                    if round >= FOLLOW_AFTER {
                        assert_eq!(link.reader_runtime(), Some(there), "after call {round}");
                        runtime_tasks.push(runtime_handle.metrics().num_alive_tasks());
                    }
                }
                (link, server, runtime_tasks)
            });
            // The set ends with the reader in it: the reader goes home.
            drop(local_set);
            drop(runtime);
            (link, server, runtime_tasks)
        })
        .join()
        .unwrap();

        assert!(
            runtime_tasks.iter().all(|tasks| *tasks == 0),
            "the reader ran as a task of the set, not of the runtime: {runtime_tasks:?}"
        );
        assert_went_home(&link_there, &mut server, home).await;
        // rmcp's side of the link still receives what is not a direct answer.
        server.print("{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{}}\n");
        let message = next_for_rmcp(&mut transport).await;
        assert!(is_response_to(&message, 9), "{message:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn calls_from_two_runtimes_at_once_do_not_move_the_reader_back_and_forth() {
        let Opened {
            link,
            mut server,
            transport: _rmcp_side,
            ..
        } = open();
        let home = Handle::current().id();
        let id = link.next_id();
        let (_expected, waiting) = link.expect_answer(id);
        // While a direct call waits, calls from elsewhere leave the reader where it is.
        let other = Arc::clone(&link);
        let moved = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                for _ in 0..FOLLOW_AFTER * 2 {
                    other.follow_caller().await;
                }
            });
            other.reader_runtime()
        })
        .join()
        .unwrap();
        assert_eq!(moved, Some(home));
        server.print(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{}}}}\n"
        ));
        tokio::time::timeout(PATIENCE, waiting)
            .await
            .unwrap()
            .unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_end_of_output_fails_waiting_calls_at_once_and_ends_rmcp() {
        let Opened {
            link,
            mut transport,
            server,
            ..
        } = open();
        let id = link.next_id();
        let (_expected, waiting) = link.expect_answer(id);
        drop(server.stdout);
        let outcome = tokio::time::timeout(PATIENCE, waiting).await.unwrap();
        assert!(
            outcome.is_err(),
            "the waiting call learns that the reader ended"
        );
        assert!(next_for_rmcp(&mut transport).await.is_none());
        assert_eq!(link.reader_runtime(), None);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_line_whose_writer_gives_up_is_still_written_whole() {
        let Opened {
            link,
            mut server,
            transport: _rmcp_side,
            ..
        } = open();
        // More than a pipe holds, so the write has to wait for the server to read.
        let long = "x".repeat(1 << 20);
        let line = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": long}});
        let given_up = tokio::time::timeout(
            Duration::from_millis(50),
            link.send_line(line.to_string().into_bytes()),
        )
        .await;
        assert!(
            given_up.is_err(),
            "the pipe was full, so the write was still waiting"
        );
        let received = tokio::task::spawn_blocking(move || {
            let first = server.read_line();
            let second = server.read_line();
            (first, second)
        });
        link.send_line(b"{\"jsonrpc\":\"2.0\",\"method\":\"after\"}".to_vec())
            .await
            .unwrap();
        let (first, second) = tokio::time::timeout(PATIENCE, received)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            first["params"]["data"].as_str().map(str::len),
            Some(1 << 20)
        );
        assert_eq!(second["method"], "after");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_oversized_line_is_discarded_and_the_next_one_is_read() {
        let Opened {
            mut transport,
            server,
            ..
        } = open();
        let mut stdout = server.stdout;
        let writer = std::thread::spawn(move || {
            let chunk = vec![b'x'; 1 << 20];
            for _ in 0..(MAX_LINE_LENGTH >> 20) + 2 {
                stdout.write_all(&chunk).unwrap();
            }
            stdout
                .write_all(b"\n{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{}}\n")
                .unwrap();
            stdout
        });
        let message = next_for_rmcp(&mut transport).await;
        assert!(is_response_to(&message, 9), "{message:?}");
        drop(writer.join().unwrap());
    }
}
