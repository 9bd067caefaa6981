//! The per-server ring buffer of captured stderr lines.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde::Serialize;

use crate::id::ServerId;
use crate::time::{Clock, Timestamp};

/// How many lines one server's buffer keeps; older lines are dropped first.
pub const LOG_RING_CAPACITY: usize = 1000;
/// The longest line kept, in bytes, including the `...` that marks a truncated line.
pub const LOG_LINE_MAX_BYTES: usize = 8192;
const TRUNCATION_MARK: &str = "...";

/// One captured line of a server's stderr.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LogLine {
    pub timestamp: Timestamp,
    pub line: String,
    pub mcp_server_id: ServerId,
    pub stream: &'static str,
}

/// Turns raw bytes of one stderr line into the text the API shows: the line terminator removed,
/// invalid UTF-8 replaced by U+FFFD, and lines longer than [`LOG_LINE_MAX_BYTES`] cut at a
/// character boundary so that, with the trailing `...`, they fit the limit exactly or below.
pub fn sanitize_log_line(raw: &[u8]) -> String {
    let raw = raw.strip_suffix(b"\n").unwrap_or(raw);
    let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
    // Invalid bytes may grow when replaced, so bound the input first: nothing beyond the limit
    // can survive truncation anyway.
    let bounded = &raw[..raw.len().min(LOG_LINE_MAX_BYTES + 4)];
    let text = String::from_utf8_lossy(bounded);
    if text.len() <= LOG_LINE_MAX_BYTES && bounded.len() == raw.len() {
        return text.into_owned();
    }
    let mut cut = LOG_LINE_MAX_BYTES - TRUNCATION_MARK.len();
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut truncated = String::with_capacity(cut + TRUNCATION_MARK.len());
    truncated.push_str(&text[..cut]);
    truncated.push_str(TRUNCATION_MARK);
    truncated
}

/// A bounded buffer of the most recent stderr lines of one server. Adapters that capture stderr
/// push raw lines into it; the buffer stamps them with the clock's wall time.
pub struct LogBuffer {
    server_id: ServerId,
    clock: Arc<dyn Clock>,
    lines: Mutex<VecDeque<(Timestamp, String)>>,
}

impl std::fmt::Debug for LogBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogBuffer")
            .field("server_id", &self.server_id)
            .finish_non_exhaustive()
    }
}

impl LogBuffer {
    pub fn new(server_id: ServerId, clock: Arc<dyn Clock>) -> Self {
        Self {
            server_id,
            clock,
            lines: Mutex::new(VecDeque::with_capacity(64)),
        }
    }

    pub fn server_id(&self) -> &ServerId {
        &self.server_id
    }

    /// Appends one raw line (with or without its terminator).
    pub fn push_raw(&self, raw: &[u8]) {
        let line = sanitize_log_line(raw);
        let stamp = self.clock.wall();
        let mut lines = self
            .lines
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if lines.len() == LOG_RING_CAPACITY {
            lines.pop_front();
        }
        lines.push_back((stamp, line));
    }

    /// The most recent `count` lines, oldest first.
    pub fn tail(&self, count: usize) -> Vec<LogLine> {
        let lines = self
            .lines
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let skip = lines.len().saturating_sub(count);
        lines
            .iter()
            .skip(skip)
            .map(|(timestamp, line)| LogLine {
                timestamp: *timestamp,
                line: line.clone(),
                mcp_server_id: self.server_id.clone(),
                stream: "stderr",
            })
            .collect()
    }

    pub fn len(&self) -> usize {
        self.lines
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// How much of one line [`LogLineSplitter`] keeps: the log buffer cuts a line longer than
/// [`LOG_LINE_MAX_BYTES`] and looks no further than four bytes past it (enough to tell a line
/// that fits from one that does not, even after invalid bytes are replaced), so the rest of an
/// over-long line is dropped as it arrives.
pub const LOG_LINE_KEPT_BYTES: usize = LOG_LINE_MAX_BYTES + 4;

/// Turns a stderr stream, arriving in chunks of any size, into log lines, in bounded memory
/// whatever the server writes: what every runner (process, container) feeds its server's
/// [`LogBuffer`] with.
#[derive(Debug, Default)]
pub struct LogLineSplitter {
    current_line: Vec<u8>,
    has_unfinished_line: bool,
}

impl LogLineSplitter {
    /// Hands each line completed by `bytes` to `emit`, without its newline.
    pub fn feed(&mut self, mut bytes: &[u8], mut emit: impl FnMut(&[u8])) {
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

    /// Hands over the last line when the stream ended without a newline after it.
    pub fn finish(mut self, mut emit: impl FnMut(&[u8])) {
        if self.has_unfinished_line {
            emit(&self.current_line);
            self.current_line.clear();
            self.has_unfinished_line = false;
        }
    }

    fn keep(&mut self, part: &[u8]) {
        let room = LOG_LINE_KEPT_BYTES.saturating_sub(self.current_line.len());
        self.current_line
            .extend_from_slice(&part[..part.len().min(room)]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(chunks: &[&[u8]]) -> Vec<Vec<u8>> {
        let mut lines = Vec::new();
        let mut splitter = LogLineSplitter::default();
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
        assert_eq!(lines[0].len(), LOG_LINE_KEPT_BYTES);
        assert!(lines[0].starts_with(b"abxxx"));
        assert_eq!(lines[1], b"next");
    }

    #[test]
    fn memory_held_for_a_line_stays_bounded() {
        let mut splitter = LogLineSplitter::default();
        for _ in 0..1000 {
            splitter.feed(&[b'z'; 16 * 1024], |_| panic!("no newline was written"));
        }
        assert_eq!(splitter.current_line.len(), LOG_LINE_KEPT_BYTES);
        assert!(splitter.current_line.capacity() <= 2 * LOG_LINE_KEPT_BYTES);
    }

    #[test]
    fn a_kept_over_long_line_is_marked_truncated_by_the_log_buffer_rules() {
        // The splitter relies on the sanitizer seeing more than the limit to add the mark.
        let lines = split(&[&vec![b'q'; 3 * LOG_LINE_MAX_BYTES]]);
        let shown = sanitize_log_line(&lines[0]);
        assert_eq!(shown.len(), LOG_LINE_MAX_BYTES);
        assert!(shown.ends_with("q..."));
    }

    #[test]
    fn terminators_are_removed() {
        assert_eq!(sanitize_log_line(b"hello\n"), "hello");
        assert_eq!(sanitize_log_line(b"hello\r\n"), "hello");
        assert_eq!(sanitize_log_line(b"hello"), "hello");
        assert_eq!(sanitize_log_line(b""), "");
    }

    #[test]
    fn invalid_utf8_becomes_replacement_characters() {
        assert_eq!(sanitize_log_line(b"a\xffb\xfe"), "a\u{fffd}b\u{fffd}");
    }

    #[test]
    fn a_line_of_exactly_the_limit_is_kept_whole() {
        let exact = vec![b'x'; LOG_LINE_MAX_BYTES];
        assert_eq!(sanitize_log_line(&exact).len(), LOG_LINE_MAX_BYTES);
        assert!(!sanitize_log_line(&exact).ends_with("..."));
    }

    #[test]
    fn longer_lines_are_cut_to_the_limit_including_the_mark() {
        let long = vec![b'y'; 100_000];
        let line = sanitize_log_line(&long);
        assert_eq!(line.len(), LOG_LINE_MAX_BYTES);
        assert!(line.ends_with("yyy..."));
        let just_over = vec![b'z'; LOG_LINE_MAX_BYTES + 1];
        assert_eq!(sanitize_log_line(&just_over).len(), LOG_LINE_MAX_BYTES);
    }

    #[test]
    fn truncation_never_splits_a_character() {
        // 'é' is two bytes, so the cut point falls inside a character for one parity.
        for prefix in 0..2 {
            let mut raw = vec![b'a'; prefix];
            while raw.len() < 20_000 {
                raw.extend_from_slice("é".as_bytes());
            }
            let line = sanitize_log_line(&raw);
            assert!(line.len() <= LOG_LINE_MAX_BYTES);
            assert!(
                line.ends_with("é...") || line.ends_with("a..."),
                "{}",
                &line[line.len() - 8..]
            );
        }
    }

    #[test]
    fn replaced_bytes_cannot_push_a_line_over_the_limit() {
        let invalid = vec![0xffu8; LOG_LINE_MAX_BYTES];
        let line = sanitize_log_line(&invalid);
        assert!(line.len() <= LOG_LINE_MAX_BYTES);
        assert!(line.ends_with("..."));
    }
}
