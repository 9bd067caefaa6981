//! Limits on what one request may cost the gateway before a handler sees it: the size of its
//! headers and the time its body may take to arrive.
//!
//! The HTTP parser bounds a request head at 128 KiB and 96 headers on its own, and answers a bare
//! 431 past that; this middleware refuses anything above [`HttpSettings::max_header_bytes`] with
//! the API's error envelope first, since no handler needs headers that large. The parser's
//! `client_request_timeout` covers only the head: a client that sends its head at once and then
//! its body a byte a second would hold a connection and a handler for as long as it likes. Every
//! body is therefore read under a deadline ([`HttpSettings::client_body_timeout`]) counted from
//! the end of the head; past it, reading the body fails with a timeout that the handlers answer
//! with 408 `RequestTimeoutError`, after which the connection is closed (its body is unread).
//! WebSocket upgrades are not timed: their "body" is the stream itself. Instead, the frames a
//! WebSocket client sends are checked as they pass: the WebSocket parser of actix buffers a
//! whole frame before it compares its length with its limit, so a client that announces a huge
//! frame could make it buffer without bound; here a frame whose header announces more than
//! [`MAX_CLIENT_FRAME_BYTES`] ends the stream with an overflow as soon as its header is seen.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::error::PayloadError;
use actix_web::http::header;
use actix_web::middleware::Next;
use actix_web::{HttpMessage as _, ResponseError as _, web};
use bytes::Bytes;
use futures::Stream;
use tokio::time::{Instant, Sleep};

use crate::error::ApiError;
use crate::state::ApiState;
use crate::ws::MAX_CLIENT_FRAME_BYTES;

type BoxedBody = Pin<Box<dyn Stream<Item = Result<Bytes, PayloadError>>>>;

/// The middleware (mount with `actix_web::middleware::from_fn`, outside everything that reads
/// headers or bodies).
pub async fn limit_request(
    mut request: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody + 'static>>, actix_web::Error> {
    let Some(settings) = request
        .app_data::<web::Data<ApiState>>()
        .map(|state| state.settings().clone())
    else {
        return next
            .call(request)
            .await
            .map(ServiceResponse::map_into_left_body);
    };
    let header_bytes: usize = request
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len())
        .sum();
    if header_bytes > settings.max_header_bytes {
        let response =
            ApiError::header_fields_too_large(settings.max_header_bytes).error_response();
        return Ok(request.into_response(response).map_into_right_body());
    }
    let payload = request.take_payload();
    if matches!(payload, Payload::None) {
        // Nothing to guard.
    } else if request.headers().contains_key(header::UPGRADE) {
        let guarded: BoxedBody = Box::pin(FrameGuard::new(payload, MAX_CLIENT_FRAME_BYTES));
        request.set_payload(Payload::from(guarded));
    } else {
        let timed: BoxedBody = Box::pin(TimedBody::new(payload, settings.client_body_timeout));
        request.set_payload(Payload::from(timed));
    }
    next.call(request)
        .await
        .map(ServiceResponse::map_into_left_body)
}

/// Whether a body read failed because the client took longer than the body timeout.
pub(crate) fn is_body_timeout(error: &PayloadError) -> bool {
    matches!(error, PayloadError::Io(io) if io.kind() == std::io::ErrorKind::TimedOut)
}

/// A request body that fails with a timeout once its deadline has passed. The timer is armed
/// only when the body is not all there at once, so a body that arrived with its head costs none.
struct TimedBody {
    inner: Payload,
    deadline: Instant,
    timeout: Duration,
    timer: Option<Pin<Box<Sleep>>>,
    expired: bool,
}

impl TimedBody {
    fn new(inner: Payload, timeout: Duration) -> Self {
        Self {
            inner,
            deadline: Instant::now() + timeout,
            timeout,
            timer: None,
            expired: false,
        }
    }
}

impl Stream for TimedBody {
    type Item = Result<Bytes, PayloadError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.expired {
            return Poll::Ready(None);
        }
        if let Poll::Ready(item) = Pin::new(&mut self.inner).poll_next(cx) {
            return Poll::Ready(item);
        }
        let deadline = self.deadline;
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if timer.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        self.expired = true;
        Poll::Ready(Some(Err(PayloadError::Io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!(
                "the request body did not arrive within {} s",
                self.timeout.as_secs()
            ),
        )))))
    }
}

/// The bytes a WebSocket client sends, passed on unchanged while every frame header is read:
/// a frame that announces more than `max_frame_bytes` of payload fails the stream with
/// [`PayloadError::Overflow`] before any of that payload is buffered.
struct FrameGuard {
    inner: Payload,
    max_frame_bytes: u64,
    /// The header of the next frame, as far as it has arrived (at most 14 bytes).
    header: [u8; 14],
    header_length: usize,
    /// Payload bytes of the current frame still to pass.
    remaining: u64,
    failed: bool,
}

impl FrameGuard {
    fn new(inner: Payload, max_frame_bytes: usize) -> Self {
        Self {
            inner,
            max_frame_bytes: u64::try_from(max_frame_bytes).unwrap_or(u64::MAX),
            header: [0; 14],
            header_length: 0,
            remaining: 0,
            failed: false,
        }
    }

    /// The header's full size and the payload length it announces, once enough of it is in.
    fn parsed_header(&self) -> Option<(usize, u64)> {
        let header = &self.header[..self.header_length];
        let (&_, rest) = header.split_first()?;
        let (&second, extended) = rest.split_first()?;
        let masked = second & 0x80 != 0;
        let (extension, length) = match second & 0x7F {
            126 => {
                let bytes: [u8; 2] = extended.get(..2)?.try_into().ok()?;
                (2, u64::from(u16::from_be_bytes(bytes)))
            }
            127 => {
                let bytes: [u8; 8] = extended.get(..8)?.try_into().ok()?;
                (8, u64::from_be_bytes(bytes))
            }
            short => (0, u64::from(short)),
        };
        let size = 2 + extension + if masked { 4 } else { 0 };
        (self.header_length >= size).then_some((size, length))
    }

    /// Follows the frames through `chunk`; fails on a frame over the limit.
    fn inspect(&mut self, chunk: &[u8]) -> Result<(), PayloadError> {
        let mut position = 0;
        while position < chunk.len() {
            if self.remaining > 0 {
                let available = u64::try_from(chunk.len() - position).unwrap_or(u64::MAX);
                let skipped = self.remaining.min(available);
                self.remaining -= skipped;
                position += usize::try_from(skipped).unwrap_or(chunk.len());
                continue;
            }
            self.header[self.header_length] = chunk[position];
            self.header_length += 1;
            position += 1;
            if let Some((_, length)) = self.parsed_header() {
                if length > self.max_frame_bytes {
                    return Err(PayloadError::Overflow);
                }
                self.remaining = length;
                self.header_length = 0;
            }
        }
        Ok(())
    }
}

impl Stream for FrameGuard {
    type Item = Result<Bytes, PayloadError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.failed {
            return Poll::Ready(None);
        }
        let item = std::task::ready!(Pin::new(&mut self.inner).poll_next(cx));
        if let Some(Ok(chunk)) = &item
            && let Err(error) = self.inspect(chunk)
        {
            self.failed = true;
            return Poll::Ready(Some(Err(error)));
        }
        Poll::Ready(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(max: usize) -> FrameGuard {
        FrameGuard::new(Payload::None, max)
    }

    /// A masked client frame header announcing `length` bytes.
    fn header(length: u64) -> Vec<u8> {
        let mut bytes = vec![0x81];
        if length < 126 {
            bytes.push(0x80 | u8::try_from(length).unwrap());
        } else if let Ok(short) = u16::try_from(length) {
            bytes.push(0x80 | 126);
            bytes.extend_from_slice(&short.to_be_bytes());
        } else {
            bytes.push(0x80 | 127);
            bytes.extend_from_slice(&length.to_be_bytes());
        }
        bytes.extend_from_slice(&[1, 2, 3, 4]);
        bytes
    }

    #[test]
    fn frames_within_the_limit_pass_in_any_split() {
        let mut stream = Vec::new();
        for length in [0_u64, 5, 125, 126, 1000, 65_535, 65_536] {
            stream.extend(header(length));
            stream.extend(std::iter::repeat_n(b'x', usize::try_from(length).unwrap()));
        }
        for piece in [1, 3, 7, 4096, stream.len()] {
            let mut frames = guard(65_536);
            for chunk in stream.chunks(piece) {
                frames.inspect(chunk).unwrap();
            }
            assert_eq!((frames.remaining, frames.header_length), (0, 0), "{piece}");
        }
    }

    #[test]
    fn a_frame_over_the_limit_fails_at_its_header() {
        for length in [65_537_u64, 16 << 20, u64::MAX >> 1] {
            let mut frames = guard(65_536);
            frames.inspect(&header(10)).unwrap();
            frames.inspect(&[b'y'; 10]).unwrap();
            let announced = header(length);
            let (first, second) = announced.split_at(3);
            // Part of the header: nothing to judge yet.
            frames.inspect(first).unwrap();
            assert!(matches!(
                frames.inspect(second),
                Err(PayloadError::Overflow)
            ));
        }
    }
}
