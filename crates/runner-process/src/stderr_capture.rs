//! Copies a child's stderr into its log buffer, one line at a time, in bounded memory.

use std::sync::Arc;

use mcpgw_core::{LOG_LINE_MAX_BYTES, LogBuffer};
use tokio::io::{AsyncRead, AsyncReadExt};

/// How much of one line is kept. The log buffer cuts lines longer than
/// [`LOG_LINE_MAX_BYTES`] and looks at no more than four bytes beyond it (enough to tell a line
/// that fits from one that does not, even when invalid bytes are replaced), so anything past
/// that can be dropped as it arrives.
const KEPT_LINE_BYTES: usize = LOG_LINE_MAX_BYTES + 4;

const READ_CHUNK_BYTES: usize = 16 * 1024;

/// Reads `stderr` to its end and pushes each line into `logs`.
///
/// It reads as fast as the child writes, whatever the lines look like, so that a chatty or
/// broken server never blocks on a full stderr pipe.
pub(crate) async fn capture_stderr<R>(mut stderr: R, logs: Arc<LogBuffer>)
where
    R: AsyncRead + Unpin,
{
    let mut chunk = vec![0u8; READ_CHUNK_BYTES];
    let mut lines = LineSplitter::default();
    loop {
        match stderr.read(&mut chunk).await {
            Ok(0) => break,
            Ok(read) => lines.feed(&chunk[..read], |line| logs.push_raw(line)),
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(error) => {
                tracing::debug!(
                    server_id = %logs.server_id(),
                    %error,
                    "stopped reading the server's stderr"
                );
                break;
            }
        }
    }
    lines.finish(|line| logs.push_raw(line));
}

/// Splits a byte stream into lines, keeping at most [`KEPT_LINE_BYTES`] of each.
#[derive(Default)]
struct LineSplitter {
    current_line: Vec<u8>,
    has_unfinished_line: bool,
}

impl LineSplitter {
    fn feed(&mut self, mut bytes: &[u8], mut emit: impl FnMut(&[u8])) {
        while let Some(newline) = bytes.iter().position(|&byte| byte == b'\n') {
            self.keep(&bytes[..newline]);
            emit(&self.current_line);
            self.current_line.clear();
            self.has_unfinished_line = false;
            bytes = &bytes[newline + 1..];
        }
        if !bytes.is_empty() {
            self.keep(bytes);
            self.has_unfinished_line = true;
        }
    }

    /// Emits the last line when the stream ended without a newline after it.
    fn finish(mut self, mut emit: impl FnMut(&[u8])) {
        if self.has_unfinished_line {
            emit(&self.current_line);
            self.current_line.clear();
            self.has_unfinished_line = false;
        }
    }

    fn keep(&mut self, part: &[u8]) {
        let room = KEPT_LINE_BYTES.saturating_sub(self.current_line.len());
        self.current_line
            .extend_from_slice(&part[..part.len().min(room)]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(chunks: &[&[u8]]) -> Vec<Vec<u8>> {
        let mut lines = Vec::new();
        let mut splitter = LineSplitter::default();
        for chunk in chunks {
            splitter.feed(chunk, |line| lines.push(line.to_vec()));
        }
        splitter.finish(|line| lines.push(line.to_vec()));
        lines
    }

    #[test]
    fn lines_split_across_chunks_are_joined() {
        let lines = split(&[b"fir", b"st\nsec", b"ond\n", b"\nthird"]);
        assert_eq!(lines, [&b"first"[..], b"second", b"", b"third"]);
    }

    #[test]
    fn a_stream_ending_with_a_newline_has_no_extra_empty_line() {
        assert_eq!(split(&[b"only\n"]), [b"only"]);
        assert!(split(&[]).is_empty());
    }

    #[test]
    fn over_long_lines_keep_only_their_beginning_and_the_next_line_is_intact() {
        let mut chunks: Vec<Vec<u8>> = vec![b"ab".to_vec()];
        chunks.extend(std::iter::repeat_n(vec![b'x'; 7000], 10));
        chunks.push(b"yy\nnext\n".to_vec());
        let chunk_refs: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
        let lines = split(&chunk_refs);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].len(), KEPT_LINE_BYTES);
        assert!(lines[0].starts_with(b"abxxx"));
        assert_eq!(lines[1], b"next");
    }

    #[test]
    fn memory_held_for_a_line_stays_bounded() {
        let mut splitter = LineSplitter::default();
        for _ in 0..1000 {
            splitter.feed(&[b'z'; READ_CHUNK_BYTES], |_| {
                panic!("no newline was written")
            });
        }
        assert_eq!(splitter.current_line.len(), KEPT_LINE_BYTES);
        assert!(splitter.current_line.capacity() <= 2 * KEPT_LINE_BYTES);
    }

    #[test]
    fn a_kept_over_long_line_is_marked_truncated_by_the_log_buffer_rules() {
        // The splitter relies on the sanitizer seeing more than the limit to add the mark.
        let lines = split(&[&vec![b'q'; 3 * LOG_LINE_MAX_BYTES]]);
        let shown = mcpgw_core::sanitize_log_line(&lines[0]);
        assert_eq!(shown.len(), LOG_LINE_MAX_BYTES);
        assert!(shown.ends_with("q..."));
    }
}
