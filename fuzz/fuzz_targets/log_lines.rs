//! Arbitrary bytes as a server's stderr, fed in arbitrary chunks through `LogLineSplitter` into
//! a `LogBuffer`, as every runner does.
//!
//! The first two bytes choose the chunk sizes; the rest is the stream. The log buffer's rules
//! (docs/api.md, "Logs") are asserted against a model built from the whole stream at once:
//! every kept line is the line's text with invalid UTF-8 replaced by U+FFFD and its `\r\n` or
//! `\n` removed; a line longer than 8192 bytes is cut at a character boundary and ends with
//! `...`, 8192 bytes at most in all; lines come oldest first; the buffer keeps the most recent
//! 1000.

#![no_main]

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use mcpgw_core::{
    Clock, LOG_LINE_KEPT_BYTES, LOG_LINE_MAX_BYTES, LOG_RING_CAPACITY, LogBuffer, LogLineSplitter,
    MonoTime, ServerId, Timestamp,
};

/// A clock that moves one microsecond per reading, so the order of lines shows in their stamps.
#[derive(Default)]
struct TickingClock(AtomicI64);

#[async_trait::async_trait]
impl Clock for TickingClock {
    fn now(&self) -> MonoTime {
        let micros = self.0.fetch_add(1, Ordering::Relaxed);
        MonoTime::from_duration(Duration::from_micros(micros.unsigned_abs()))
    }

    fn wall(&self) -> Timestamp {
        Timestamp::from_unix_micros(self.0.fetch_add(1, Ordering::Relaxed))
    }

    async fn sleep(&self, _duration: Duration) {}
}

/// The text a raw line (without its `\n`) must be shown as.
fn expected_text(raw: &[u8]) -> String {
    let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
    let text = String::from_utf8_lossy(raw);
    if text.len() <= LOG_LINE_MAX_BYTES {
        return text.into_owned();
    }
    let mut cut = LOG_LINE_MAX_BYTES - 3;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}...", &text[..cut])
}

/// The lines of the whole stream: split at `\n`, a last line without `\n` included.
fn model_lines(stream: &[u8]) -> Vec<&[u8]> {
    if stream.is_empty() {
        return Vec::new();
    }
    let mut lines: Vec<&[u8]> = stream.split(|&byte| byte == b'\n').collect();
    if stream.ends_with(b"\n") {
        lines.pop();
    }
    lines
}

fuzz_target!(|data: &[u8]| {
    let (chunking, stream) = match data {
        [first, second, rest @ ..] => (u16::from_le_bytes([*first, *second]), rest),
        _ => return,
    };

    let clock = Arc::new(TickingClock::default());
    let buffer = LogBuffer::new(ServerId::parse("fuzz").expect("a valid id"), clock);
    let mut splitter = LogLineSplitter::default();
    let mut emitted: Vec<Vec<u8>> = Vec::new();
    let mut emit = |line: &[u8]| {
        assert!(
            line.len() <= LOG_LINE_KEPT_BYTES,
            "the splitter handed over {} bytes of one line, more than {LOG_LINE_KEPT_BYTES}",
            line.len()
        );
        assert!(!line.contains(&b'\n'), "a handed-over line holds a newline");
        emitted.push(line.to_vec());
        buffer.push_raw(line);
    };

    // Chunk sizes cycle from 1 byte up to far beyond one line, as pipes deliver them.
    let largest = usize::from(chunking % 20_000) + 1;
    let mut size = usize::from(chunking >> 8) % largest + 1;
    let mut rest = stream;
    while !rest.is_empty() {
        let take = size.min(rest.len());
        splitter.feed(&rest[..take], &mut emit);
        rest = &rest[take..];
        size = (size * 7 + 3) % largest + 1;
    }
    splitter.finish(&mut emit);

    let model = model_lines(stream);
    assert_eq!(
        emitted.len(),
        model.len(),
        "the splitter found another number of lines"
    );
    for (index, (kept, line)) in emitted.iter().zip(&model).enumerate() {
        let expected_raw = &line[..line.len().min(LOG_LINE_KEPT_BYTES)];
        assert_eq!(
            kept.as_slice(),
            expected_raw,
            "line {index} was not kept as its beginning"
        );
    }

    let held = buffer.len();
    assert_eq!(
        held,
        model.len().min(LOG_RING_CAPACITY),
        "the buffer holds the wrong count"
    );
    let tail = buffer.tail(usize::MAX);
    assert_eq!(tail.len(), held);
    let first_kept = model.len() - held;
    let mut previous: Option<Timestamp> = None;
    for (offset, entry) in tail.iter().enumerate() {
        let index = first_kept + offset;
        assert!(
            entry.line.len() <= LOG_LINE_MAX_BYTES,
            "line {index} is {} bytes, more than {LOG_LINE_MAX_BYTES}",
            entry.line.len()
        );
        assert!(!entry.line.contains('\n'), "line {index} holds a newline");
        assert_eq!(
            entry.line,
            expected_text(model[index]),
            "line {index} is shown wrong"
        );
        if let Some(previous) = previous {
            assert!(previous < entry.timestamp, "lines are not oldest first");
        }
        previous = Some(entry.timestamp);
    }

    // A shorter tail is the end of the whole one.
    let count = usize::from(chunking) % (held + 1);
    let short = buffer.tail(count);
    assert_eq!(short.len(), count);
    assert_eq!(short.as_slice(), &tail[held - count..]);
});
