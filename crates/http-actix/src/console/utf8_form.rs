//! Console forms whose text is not UTF-8 are refused instead of read with stand-ins.
//!
//! Forms are decoded the way browsers encode them: percent-escaped UTF-8. A byte sequence that
//! is not UTF-8 (`%FF`, or raw bytes) would otherwise be read as U+FFFD and the form carried out
//! with text its sender never wrote: a key for `user:��`, a policy for a principal nobody has.
//! The guard passes the body through unchanged as it arrives, keeps a copy up to the console's
//! form limit, and at its end checks that every decoded name and value is UTF-8; when one is
//! not, the body fails with an error that the form's reader answers as a form it could not read
//! (400, saying why). A body over the limit is not checked: the form's reader refuses it for
//! its size first.

use std::pin::Pin;
use std::task::{Context, Poll};

use actix_web::HttpMessage as _;
use actix_web::body::MessageBody;
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::error::PayloadError;
use actix_web::http::{Method, header};
use actix_web::middleware::Next;
use bytes::{Bytes, BytesMut};
use futures::Stream;

/// What the refusal says.
pub(crate) const NOT_UTF8: &str = "the form's text is not UTF-8 (a percent-escape or a byte \
     that does not spell UTF-8 text); send it from the console's page, which encodes it right";

/// Wraps the body of an urlencoded `POST` in [`CheckedForm`]; any other request passes as it is.
pub(crate) async fn guard(
    mut request: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody + 'static>, actix_web::Error> {
    let urlencoded = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| {
            value.split(';').next().is_some_and(|kind| {
                kind.trim()
                    .eq_ignore_ascii_case("application/x-www-form-urlencoded")
            })
        });
    if request.method() == Method::POST && urlencoded {
        let inner = request.take_payload();
        let checked: Pin<Box<dyn Stream<Item = Result<Bytes, PayloadError>>>> =
            Box::pin(CheckedForm::new(inner, super::FORM_LIMIT_BYTES));
        request.set_payload(Payload::from(checked));
    }
    next.call(request).await
}

/// A form body passed on as it arrives, checked for UTF-8 when it ends (see the module).
struct CheckedForm {
    inner: Payload,
    seen: BytesMut,
    limit: usize,
    over_limit: bool,
    done: bool,
}

impl CheckedForm {
    fn new(inner: Payload, limit: usize) -> Self {
        Self {
            inner,
            seen: BytesMut::new(),
            limit,
            over_limit: false,
            done: false,
        }
    }
}

impl Stream for CheckedForm {
    type Item = Result<Bytes, PayloadError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        match Pin::new(&mut self.inner).poll_next(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                if !self.over_limit {
                    if self.seen.len() + chunk.len() > self.limit {
                        self.over_limit = true;
                        self.seen = BytesMut::new();
                    } else {
                        self.seen.extend_from_slice(&chunk);
                    }
                }
                Poll::Ready(Some(Ok(chunk)))
            }
            Poll::Ready(None) => {
                self.done = true;
                if !self.over_limit && !is_utf8_form(&self.seen) {
                    return Poll::Ready(Some(Err(PayloadError::Io(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        NOT_UTF8,
                    )))));
                }
                Poll::Ready(None)
            }
            other => other,
        }
    }
}

/// Whether every name and value of the urlencoded `form` decodes to UTF-8 text: `+` is a
/// space, `%XY` the byte `XY`, and a `%` not followed by two hexadecimal digits stands for
/// itself (as browsers and the form reader take it).
pub(crate) fn is_utf8_form(form: &[u8]) -> bool {
    form.split(|byte| *byte == b'&')
        .flat_map(|pair| pair.splitn(2, |byte| *byte == b'='))
        .all(|part| std::str::from_utf8(&percent_decoded(part)).is_ok())
}

fn percent_decoded(part: &[u8]) -> Vec<u8> {
    let hex = |byte: u8| (byte as char).to_digit(16).map(|digit| digit as u8);
    let mut decoded = Vec::with_capacity(part.len());
    let mut index = 0;
    while index < part.len() {
        let byte = part[index];
        let escaped = (byte == b'%')
            .then(|| Some((hex(*part.get(index + 1)?)?, hex(*part.get(index + 2)?)?)))
            .flatten();
        match (byte, escaped) {
            (_, Some((high, low))) => {
                decoded.push(high << 4 | low);
                index += 3;
            }
            (b'+', None) => {
                decoded.push(b' ');
                index += 1;
            }
            (other, None) => {
                decoded.push(other);
                index += 1;
            }
        }
    }
    decoded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_forms_pass_and_others_are_found() {
        // Plain fields, escapes of UTF-8 (é, ✓), `+` spaces, empty values, a lone `%` and a
        // `%` with one hex digit, which stand for themselves.
        for good in [
            &b"csrf_token=abc&principal=user%3Aalice&role=viewer"[..],
            b"name=caf%C3%A9&note=%E2%9C%93+done",
            b"a=&=b&&c",
            b"pct=100%&half=%4",
            "raw=é".as_bytes(),
            b"",
        ] {
            assert!(is_utf8_form(good), "{}", String::from_utf8_lossy(good));
        }
        // Bad input: escapes of bytes that spell no UTF-8 (in a value and in a name), a
        // truncated two-byte sequence, an escaped surrogate, and raw bytes that are not UTF-8.
        for bad in [
            &b"principal=user%3A%FF%FE"[..],
            b"%FF=x",
            b"name=caf%C3",
            b"s=%ED%A0%80",
            b"raw=\xff\xfe",
        ] {
            assert!(!is_utf8_form(bad), "{}", String::from_utf8_lossy(bad));
        }
    }
}
