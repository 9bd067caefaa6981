//! Turns a container's stderr, arriving in chunks of any size, into log lines, in bounded memory.

use std::sync::Arc;

use mcpgw_core::{LogBuffer, LogLineSplitter};
use tokio::io::{AsyncRead, AsyncReadExt};

const READ_CHUNK_BYTES: usize = 16 * 1024;

/// Feeds chunks of a stderr stream into a log buffer, one line per push.
pub(crate) struct StderrLines {
    logs: Arc<LogBuffer>,
    splitter: LogLineSplitter,
}

impl StderrLines {
    pub(crate) fn new(logs: Arc<LogBuffer>) -> Self {
        Self {
            logs,
            splitter: LogLineSplitter::default(),
        }
    }

    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        let logs = &self.logs;
        self.splitter.feed(bytes, |line| logs.push_raw(line));
    }

    /// Pushes the last line when the stream ended without a newline after it.
    pub(crate) fn finish(self) {
        let logs = self.logs;
        self.splitter.finish(|line| logs.push_raw(line));
    }
}

/// Reads a child's stderr pipe to its end into `logs`, as fast as the child writes, so that a
/// chatty server never blocks on a full pipe.
pub(crate) async fn capture_stderr<R>(mut stderr: R, logs: Arc<LogBuffer>)
where
    R: AsyncRead + Unpin,
{
    let server_id = logs.server_id().clone();
    let mut lines = StderrLines::new(logs);
    let mut chunk = vec![0u8; READ_CHUNK_BYTES];
    loop {
        match stderr.read(&mut chunk).await {
            Ok(0) => break,
            Ok(read) => lines.feed(&chunk[..read]),
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) => {
                tracing::debug!(%server_id, %error, "stopped reading the container's stderr");
                break;
            }
        }
    }
    lines.finish();
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpgw_core::{Clock, MonoTime, ServerId, Timestamp};

    struct StillClock;

    #[async_trait::async_trait]
    impl Clock for StillClock {
        fn now(&self) -> MonoTime {
            MonoTime::from_duration(std::time::Duration::ZERO)
        }
        fn wall(&self) -> Timestamp {
            Timestamp::from_unix_micros(0)
        }
        async fn sleep(&self, _duration: std::time::Duration) {}
    }

    fn buffer() -> Arc<LogBuffer> {
        Arc::new(LogBuffer::new(
            ServerId::parse("s").unwrap(),
            Arc::new(StillClock),
        ))
    }

    fn lines_of(logs: &LogBuffer) -> Vec<String> {
        logs.tail(usize::MAX)
            .into_iter()
            .map(|line| line.line)
            .collect()
    }

    #[test]
    fn lines_split_across_chunks_are_joined_and_the_last_one_is_kept() {
        let logs = buffer();
        let mut lines = StderrLines::new(Arc::clone(&logs));
        for chunk in [&b"fir"[..], b"st\nsec", b"ond\r\n", b"\nthird"] {
            lines.feed(chunk);
        }
        lines.finish();
        assert_eq!(lines_of(&logs), ["first", "second", "", "third"]);
    }

    #[test]
    fn a_stream_ending_with_a_newline_has_no_extra_line() {
        let logs = buffer();
        let mut lines = StderrLines::new(Arc::clone(&logs));
        lines.feed(b"only\n");
        lines.finish();
        assert_eq!(lines_of(&logs), ["only"]);
    }

    #[test]
    fn an_endless_line_is_pushed_once_cut_and_marked_truncated() {
        let logs = buffer();
        let mut lines = StderrLines::new(Arc::clone(&logs));
        for _ in 0..1000 {
            lines.feed(&[b'z'; READ_CHUNK_BYTES]);
        }
        lines.feed(b"\nnext\n");
        let kept = lines_of(&logs);
        assert_eq!(kept.len(), 2);
        assert_eq!(kept[0].len(), mcpgw_core::LOG_LINE_MAX_BYTES);
        assert!(kept[0].ends_with("z..."));
        assert_eq!(kept[1], "next");
    }
}
