//! `/mcp`: the MCP Streamable HTTP endpoint, mounted for a protocol adapter this crate never
//! names.
//!
//! The protocol itself lives in another adapter; this module only carries requests and answers
//! between actix-web and the standard `http` 1.x types that adapter speaks. The request goes over
//! whole (its body is one JSON-RPC message or batch, bounded by
//! [`HttpSettings::max_mcp_body_bytes`](crate::HttpSettings)). The answer comes back as a stream
//! of frames, each forwarded the moment it arrives, because a server-sent-event answer can stay
//! open for hours and every event must reach the client when it is produced. When the client goes
//! away, actix drops the answer, and with it the adapter's body.
//!
//! Actix 4 speaks `http` 0.2 internally, so methods, URIs, names and values cross over as bytes.
//! The URI and every header value are copied into one shared buffer, so a request costs one
//! allocation for all of them instead of one per value; bodies are never copied here.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use actix_web::body::{BodySize, MessageBody};
use actix_web::http::header as actix_header;
use actix_web::http::{Method as ActixMethod, StatusCode as ActixStatus, Version as ActixVersion};
use actix_web::{HttpMessage as _, HttpRequest, HttpResponse, web};
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use futures::future::BoxFuture;
use http_body::Body;
use http_body_util::combinators::UnsyncBoxBody;

use crate::error::{ApiError, ErrorEnvelope, names};
use crate::state::ApiState;

/// Where the MCP endpoint is mounted.
pub const MCP_PATH: &str = "/mcp";

/// Where each curated endpoint is served: `/mcp/v/{name}`.
pub const CURATED_PATH_PREFIX: &str = "/mcp/v/";

/// Whether `path` is an MCP endpoint: `/mcp`, or a curated endpoint's `/mcp/v/{name}`. Both
/// get the same treatment in front of their handler (origins, body limit, authentication).
pub fn is_mcp_path(path: &str) -> bool {
    path == MCP_PATH
        || path
            .strip_prefix(CURATED_PATH_PREFIX)
            .is_some_and(|name| !name.is_empty() && !name.contains('/'))
}

/// The handler of each curated endpoint, by name: `None` when the name has none (the
/// composition creates one per endpoint, on first use, each with sessions of its own).
pub type EndpointHandlers = Arc<dyn Fn(&str) -> Option<McpHttpHandler> + Send + Sync>;

/// The methods `/mcp` answers when an MCP handler is set.
pub const MCP_ALLOWED_METHODS: &str = "GET, POST, DELETE, OPTIONS";

/// The body of an MCP handler's answer: a stream of frames, sent on as they come.
pub type McpResponseBody = UnsyncBoxBody<Bytes, Infallible>;

/// What serves `/mcp`: the MCP protocol adapter's Streamable HTTP service, behind standard types
/// only, so that this crate needs no MCP library and the protocol adapter needs no actix.
///
/// It receives the request with its whole body, and answers with a body whose frames are
/// forwarded one by one. The future runs on an actix worker thread, polled by the request's
/// handler, which is a task of the worker's `tokio::task::LocalSet` (so the future may spawn
/// local tasks); dropping it, or dropping the answer's body, means the client has gone.
pub type McpHttpHandler = Arc<
    dyn Fn(http::Request<Bytes>) -> BoxFuture<'static, http::Response<McpResponseBody>>
        + Send
        + Sync,
>;

fn not_enabled() -> ApiError {
    ApiError::new(
        ActixStatus::NOT_FOUND,
        names::NOT_FOUND,
        "the MCP endpoint /mcp is not enabled in this gateway; an application that embeds the \
         API enables it with ApiState::with_mcp_handler",
    )
}

fn unreadable_body(error: &dyn std::fmt::Display) -> ApiError {
    ApiError::new(
        ActixStatus::BAD_REQUEST,
        names::BAD_REQUEST,
        format!("the request body could not be read ({error}); send it again"),
    )
}

fn unconvertible(what: &str) -> ApiError {
    ApiError::new(
        ActixStatus::BAD_REQUEST,
        names::BAD_REQUEST,
        format!("the request's {what} cannot be passed to the MCP endpoint; send a valid one"),
    )
}

/// Reads the whole body, refusing it as soon as it is known to exceed `limit_bytes`: from its
/// declared length before a byte is read, else from what has arrived. A body that arrives in one
/// chunk (the usual JSON-RPC message) is passed on without being copied.
async fn read_body(
    request: &HttpRequest,
    mut payload: web::Payload,
    limit_bytes: usize,
) -> Result<Bytes, ApiError> {
    let declared_length = request
        .headers()
        .get(actix_header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if declared_length.is_some_and(|length| length > limit_bytes as u64) {
        return Err(ApiError::payload_too_large(limit_bytes));
    }
    let mut first_chunk = Bytes::new();
    let mut joined: Option<BytesMut> = None;
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|error| {
            if crate::limits::is_body_timeout(&error) {
                ApiError::body_timeout(&error)
            } else {
                unreadable_body(&error)
            }
        })?;
        let received = joined.as_ref().map_or(first_chunk.len(), BytesMut::len) + chunk.len();
        if received > limit_bytes {
            return Err(ApiError::payload_too_large(limit_bytes));
        }
        if let Some(buffer) = joined.as_mut() {
            buffer.extend_from_slice(&chunk);
        } else if first_chunk.is_empty() {
            first_chunk = chunk;
        } else {
            // `received <= limit_bytes`, so the declared length (also within the limit) or what
            // has arrived bounds the buffer.
            let capacity = declared_length.map_or(received, |length| {
                usize::try_from(length).unwrap_or(received).max(received)
            });
            let mut buffer = BytesMut::with_capacity(capacity);
            buffer.extend_from_slice(&first_chunk);
            buffer.extend_from_slice(&chunk);
            joined = Some(buffer);
        }
    }
    Ok(joined.map_or(first_chunk, BytesMut::freeze))
}

fn http_version(version: ActixVersion) -> http::Version {
    match version {
        ActixVersion::HTTP_09 => http::Version::HTTP_09,
        ActixVersion::HTTP_10 => http::Version::HTTP_10,
        ActixVersion::HTTP_2 => http::Version::HTTP_2,
        ActixVersion::HTTP_3 => http::Version::HTTP_3,
        _ => http::Version::HTTP_11,
    }
}

fn http_method(method: &ActixMethod) -> Result<http::Method, ApiError> {
    // The endpoint's three methods are the common case; naming them skips the parser.
    match *method {
        ActixMethod::GET => Ok(http::Method::GET),
        ActixMethod::POST => Ok(http::Method::POST),
        ActixMethod::DELETE => Ok(http::Method::DELETE),
        _ => http::Method::from_bytes(method.as_str().as_bytes())
            .map_err(|_| unconvertible("method")),
    }
}

/// The MCP headers are not standard HTTP names, so a parser would allocate for them on every
/// request; naming them statically does not.
fn http_header_name(name: &str) -> Result<http::HeaderName, ApiError> {
    match name {
        "mcp-session-id" => Ok(http::HeaderName::from_static("mcp-session-id")),
        "mcp-protocol-version" => Ok(http::HeaderName::from_static("mcp-protocol-version")),
        "last-event-id" => Ok(http::HeaderName::from_static("last-event-id")),
        "mcp-method" => Ok(http::HeaderName::from_static("mcp-method")),
        "mcp-name" => Ok(http::HeaderName::from_static("mcp-name")),
        _ => {
            http::HeaderName::from_bytes(name.as_bytes()).map_err(|_| unconvertible("header name"))
        }
    }
}

fn actix_header_name(name: &str) -> Option<actix_header::HeaderName> {
    match name {
        "mcp-session-id" => Some(actix_header::HeaderName::from_static("mcp-session-id")),
        "mcp-protocol-version" => Some(actix_header::HeaderName::from_static(
            "mcp-protocol-version",
        )),
        _ => actix_header::HeaderName::from_bytes(name.as_bytes()).ok(),
    }
}

/// The actix request as a standard `http` 1.x request: method, URI with its query, version,
/// every header (repeated ones in their order) and the body.
pub(crate) fn standard_request(
    request: &HttpRequest,
    body: Bytes,
) -> Result<http::Request<Bytes>, ApiError> {
    let uri = request.uri();
    let path_and_query = uri.path_and_query().map_or("/", |part| part.as_str());
    // An HTTP/2 request, or an HTTP/1.1 one in absolute form, names its scheme and authority in
    // the URI; a Host check downstream needs them.
    let scheme_and_authority = uri
        .scheme_str()
        .zip(uri.authority().map(|part| part.as_str()));
    let uri_length = path_and_query.len()
        + scheme_and_authority.map_or(0, |(scheme, authority)| {
            scheme.len() + "://".len() + authority.len()
        });
    let headers = request.headers();
    let values_length: usize = headers.iter().map(|(_, value)| value.len()).sum();

    let mut text = BytesMut::with_capacity(uri_length + values_length);
    if let Some((scheme, authority)) = scheme_and_authority {
        text.extend_from_slice(scheme.as_bytes());
        text.extend_from_slice(b"://");
        text.extend_from_slice(authority.as_bytes());
    }
    text.extend_from_slice(path_and_query.as_bytes());
    for (_, value) in headers.iter() {
        text.extend_from_slice(value.as_bytes());
    }
    let mut text = text.freeze();

    let uri = http::Uri::from_maybe_shared(text.split_to(uri_length))
        .map_err(|_| unconvertible("URI"))?;
    let mut standard_headers = http::HeaderMap::with_capacity(headers.len());
    // The same iteration order as the copy above, so each value takes its own bytes back.
    for (name, value) in headers.iter() {
        let mut standard_value = http::HeaderValue::from_maybe_shared(text.split_to(value.len()))
            .map_err(|_| unconvertible("header value"))?;
        standard_value.set_sensitive(value.is_sensitive());
        standard_headers.append(http_header_name(name.as_str())?, standard_value);
    }

    let mut standard = http::Request::new(body);
    *standard.method_mut() = http_method(request.method())?;
    *standard.uri_mut() = uri;
    *standard.version_mut() = http_version(request.version());
    *standard.headers_mut() = standard_headers;
    Ok(standard)
}

/// Headers that describe how the answer is framed on the wire: actix frames the answer itself
/// from the body's size, so the handler's own say is left out.
fn is_framing_header(name: &http::HeaderName) -> bool {
    name == http::header::CONTENT_LENGTH
        || name == http::header::TRANSFER_ENCODING
        || name == http::header::CONNECTION
}

/// The handler's answer as an actix response: status, headers, and the body streamed frame by
/// frame.
pub(crate) fn actix_response(
    response: http::Response<McpResponseBody>,
) -> HttpResponse<StreamedBody> {
    let (parts, body) = response.into_parts();
    let status =
        ActixStatus::from_u16(parts.status.as_u16()).unwrap_or(ActixStatus::INTERNAL_SERVER_ERROR);
    let mut actix = HttpResponse::with_body(status, StreamedBody(body));

    let values_length: usize = parts
        .headers
        .iter()
        .filter(|(name, _)| !is_framing_header(name))
        .map(|(_, value)| value.len())
        .sum();
    let mut text = BytesMut::with_capacity(values_length);
    for (_, value) in parts
        .headers
        .iter()
        .filter(|(name, _)| !is_framing_header(name))
    {
        text.extend_from_slice(value.as_bytes());
    }
    let mut text = text.freeze();
    let actix_headers = actix.headers_mut();
    for (name, value) in parts
        .headers
        .iter()
        .filter(|(name, _)| !is_framing_header(name))
    {
        let bytes = text.split_to(value.len());
        // Both crates accept the same names and values; one that did not convert would be a bug
        // in the handler, and is better dropped than allowed to fail the whole answer.
        match (
            actix_header_name(name.as_str()),
            actix_header::HeaderValue::from_maybe_shared(bytes),
        ) {
            (Some(actix_name), Ok(mut actix_value)) => {
                actix_value.set_sensitive(value.is_sensitive());
                actix_headers.append(actix_name, actix_value);
            }
            _ => tracing::warn!(header = name.as_str(), "an MCP answer's header was dropped"),
        }
    }
    actix
}

/// The handler's body as actix's body: each data frame is sent on as soon as it arrives.
pub struct StreamedBody(McpResponseBody);

impl MessageBody for StreamedBody {
    type Error = Infallible;

    fn size(&self) -> BodySize {
        match self.0.size_hint().exact() {
            Some(length) => BodySize::Sized(length),
            None => BodySize::Stream,
        }
    }

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, Self::Error>>> {
        loop {
            let frame = match Pin::new(&mut self.0).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Ready(Some(Ok(frame))) => frame,
                Poll::Ready(Some(Err(never))) => match never {},
            };
            // An empty chunk would end a chunked HTTP/1.1 answer early, and trailers have no
            // place in one; both are passed over.
            if let Ok(data) = frame.into_data()
                && !data.is_empty()
            {
                return Poll::Ready(Some(Ok(data)));
            }
        }
    }
}

async fn forward(
    state: web::Data<ApiState>,
    request: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse<StreamedBody>, ApiError> {
    let Some(handler) = state.mcp_handler() else {
        return Err(not_enabled());
    };
    forward_to(handler, &state, &request, payload).await
}

/// The handler of the curated endpoint `name`, once the caller is known to be admitted: a
/// name that is no endpoint is 404, a caller its rules leave out 403, both in the envelope.
fn curated_handler(
    state: &ApiState,
    request: &HttpRequest,
    name: &str,
) -> Result<McpHttpHandler, ApiError> {
    let not_found = || {
        ApiError::new(
            ActixStatus::NOT_FOUND,
            names::NOT_FOUND,
            format!(
                "no curated endpoint is named `{}`; GET /api/endpoints lists them",
                crate::error::bounded_for_message(name)
            ),
        )
    };
    let endpoints = state.gateway().endpoints().ok_or_else(not_found)?;
    let caller = request
        .extensions()
        .get::<mcpgw_gateway::core::Caller>()
        .cloned()
        .unwrap_or_default();
    match endpoints.admits(name, &caller) {
        None => return Err(not_found()),
        Some(false) => {
            return Err(ApiError::new(
                ActixStatus::FORBIDDEN,
                names::ACCESS_DENIED,
                format!(
                    "the curated endpoint `{name}` does not admit {}",
                    caller.principal.as_deref().unwrap_or("this caller")
                ),
            ));
        }
        Some(true) => {}
    }
    state
        .endpoint_handlers()
        .and_then(|handlers| handlers(name))
        .ok_or_else(not_found)
}

/// A request to a curated endpoint, `/mcp/v/{name}`.
async fn forward_curated(
    state: web::Data<ApiState>,
    request: HttpRequest,
    name: web::Path<String>,
    payload: web::Payload,
) -> Result<HttpResponse<StreamedBody>, ApiError> {
    let handler = curated_handler(&state, &request, &name)?;
    forward_to(&handler, &state, &request, payload).await
}

async fn forward_to(
    handler: &McpHttpHandler,
    state: &ApiState,
    request: &HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse<StreamedBody>, ApiError> {
    let body = read_body(request, payload, state.settings().max_mcp_body_bytes).await?;
    let mut standard = standard_request(request, body)?;
    // Who is calling, as the authentication middleware found (nobody in particular while
    // authentication is off), and from where: the MCP layer reads it from the request's
    // extensions, and tool-call rate limits tell anonymous callers apart by address.
    let mut caller = request
        .extensions()
        .get::<mcpgw_gateway::core::Caller>()
        .cloned()
        .unwrap_or_default();
    if caller.address.is_none() {
        caller.address = state.client_address(request);
    }
    standard.extensions_mut().insert(caller);
    // The trace the request continues: its span's (when tracing is on), else the caller's own
    // `traceparent`, which is passed on to the upstreams unchanged.
    let trace = request
        .extensions()
        .get::<mcpgw_core::trace::TraceContext>()
        .cloned()
        .or_else(|| crate::trace_spans::header_context(request.headers()));
    if let Some(trace) = trace {
        standard.extensions_mut().insert(trace);
    }
    let response = handler(standard).await;
    Ok(actix_response(response))
}

/// A curated endpoint: the same exchange as `/mcp` (GET opens the stream of a session).
#[utoipa::path(
    get,
    path = "/mcp/v/{name}",
    tag = "mcp",
    operation_id = "curated_open_stream",
    description = "A curated endpoint (see `/api/endpoints`): the MCP Streamable HTTP endpoint \
        of a named selection of tools, exchanged exactly as at `/mcp`. A caller the endpoint's \
        rules leave out is refused before the exchange.",
    params(("name" = String, Path, description = "The endpoint's name")),
    responses(
        (status = 200, description = "Server-sent events, one JSON-RPC message each", content_type = "text/event-stream", body = String),
        (status = 403, description = "The endpoint's `allow`/`deny` rules leave the caller out (AccessDeniedError)", body = ErrorEnvelope),
        (status = 404, description = "No curated endpoint has that name (NotFoundError), or the \
            session is unknown (plain text)", content(
            (ErrorEnvelope = "application/json"),
            (String = "text/plain"),
        )),
    )
)]
pub(crate) async fn curated_open_stream(
    state: web::Data<ApiState>,
    request: HttpRequest,
    name: web::Path<String>,
    payload: web::Payload,
) -> Result<HttpResponse<StreamedBody>, ApiError> {
    forward_curated(state, request, name, payload).await
}

/// A curated endpoint: one JSON-RPC message, as at `/mcp`.
#[utoipa::path(
    post,
    path = "/mcp/v/{name}",
    tag = "mcp",
    operation_id = "curated_send_message",
    description = "A curated endpoint: `tools/list` answers the endpoint's tools (with its names \
        and overrides, and only those the caller may use), or the `find_tools` search tool alone \
        when the endpoint has `tool_search`; `tools/call` reaches them by those names. It has no \
        prompts or resources.",
    params(("name" = String, Path, description = "The endpoint's name")),
    request_body(content = Object, content_type = "application/json",
        description = "One JSON-RPC message"),
    responses(
        (status = 200, description = "The JSON-RPC response, as JSON or as server-sent events", content(
            (Object = "application/json"),
            (String = "text/event-stream"),
        )),
        (status = 202, description = "A notification or response was accepted"),
        (status = 403, description = "The endpoint's `allow`/`deny` rules leave the caller out (AccessDeniedError)", body = ErrorEnvelope),
        (status = 404, description = "No curated endpoint has that name (NotFoundError)", body = ErrorEnvelope),
        (status = 413, description = "The body is larger than the MCP body limit (PayloadTooLargeError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn curated_send_message(
    state: web::Data<ApiState>,
    request: HttpRequest,
    name: web::Path<String>,
    payload: web::Payload,
) -> Result<HttpResponse<StreamedBody>, ApiError> {
    forward_curated(state, request, name, payload).await
}

/// A curated endpoint: ends a session, as at `/mcp`.
#[utoipa::path(
    delete,
    path = "/mcp/v/{name}",
    tag = "mcp",
    operation_id = "curated_end_session",
    params(("name" = String, Path, description = "The endpoint's name")),
    responses(
        (status = 204, description = "The session ended"),
        (status = 403, description = "The endpoint's `allow`/`deny` rules leave the caller out (AccessDeniedError)", body = ErrorEnvelope),
        (status = 404, description = "No curated endpoint has that name (NotFoundError)", body = ErrorEnvelope),
    )
)]
pub(crate) async fn curated_end_session(
    state: web::Data<ApiState>,
    request: HttpRequest,
    name: web::Path<String>,
    payload: web::Payload,
) -> Result<HttpResponse<StreamedBody>, ApiError> {
    forward_curated(state, request, name, payload).await
}

/// Open the stream of server-to-client messages (Streamable HTTP).
#[utoipa::path(
    get,
    path = "/mcp",
    tag = "mcp",
    operation_id = "mcp_open_stream",
    description = "The MCP Streamable HTTP endpoint (protocol versions 2025-06-18, 2025-11-25 \
        and 2026-07-28): a GET with `Accept: text/event-stream` opens the stream of messages \
        the server sends unasked. The MCP specification describes the exchange. The answers of \
        the MCP layer itself are plain text or JSON-RPC errors, not the error envelope.",
    responses(
        (status = 200, description = "Server-sent events, one JSON-RPC message each", content_type = "text/event-stream", body = String),
        (status = 400, description = "No `Mcp-Session-Id`, or an `MCP-Protocol-Version` this \
            gateway does not speak; the reason as plain text", content_type = "text/plain", body = String),
        (status = 404, description = "The session in `Mcp-Session-Id` is unknown or has ended \
            (plain text; the client initializes again), or the MCP endpoint is not enabled \
            (NotFoundError)", content(
            (ErrorEnvelope = "application/json"),
            (String = "text/plain"),
        )),
        (status = 405, description = "A GET of the stateless protocol version (2026-07-28), which \
            has no stream to open (plain text, `Allow: POST`); or a method other than GET, POST, \
            DELETE or OPTIONS (MethodNotAllowedError)", content(
            (ErrorEnvelope = "application/json"),
            (String = "text/plain"),
        )),
        (status = 406, description = "`Accept` does not name `text/event-stream`; the reason as \
            plain text", content_type = "text/plain", body = String),
    )
)]
pub(crate) async fn open_stream(
    state: web::Data<ApiState>,
    request: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse<StreamedBody>, ApiError> {
    forward(state, request, payload).await
}

/// Send one JSON-RPC message or batch (Streamable HTTP).
#[utoipa::path(
    post,
    path = "/mcp",
    tag = "mcp",
    operation_id = "mcp_send_message",
    description = "The MCP Streamable HTTP endpoint: a POST carries a JSON-RPC request, \
        notification or response. A request is answered with JSON or with a stream of \
        server-sent events that ends with its response; a notification or response with 202.",
    request_body(content = Object, content_type = "application/json",
        description = "One JSON-RPC message (batches are not accepted)"),
    responses(
        (status = 200, description = "The JSON-RPC response, as JSON or as server-sent events", content(
            (Object = "application/json"),
            (String = "text/event-stream"),
        )),
        (status = 202, description = "A notification or response was accepted"),
        (status = 400, description = "The body is not a JSON-RPC message the endpoint accepts: a \
            JSON-RPC error response (code -32700 when the body is not JSON, -32600 when it is JSON \
            but not a valid message, -32602 for request metadata that contradicts the headers). \
            Or, as plain text: a request of a session without `Mcp-Session-Id`, or an \
            `MCP-Protocol-Version` this gateway does not speak", content(
            (Object = "application/json"),
            (String = "text/plain"),
        )),
        (status = 404, description = "The session in `Mcp-Session-Id` is unknown or has ended \
            (plain text; the client initializes again); a stateless request for a method the \
            gateway does not have (a JSON-RPC error, code -32601); or the MCP endpoint is not \
            enabled (NotFoundError)", content(
            (ErrorEnvelope = "application/json"),
            (String = "text/plain"),
        )),
        (status = 406, description = "`Accept` does not name both `application/json` and \
            `text/event-stream`; the reason as plain text", content_type = "text/plain", body = String),
        (status = 413, description = "The body is larger than the MCP body limit (PayloadTooLargeError)", body = ErrorEnvelope),
        (status = 415, description = "`Content-Type` is not `application/json`; the reason as \
            plain text", content_type = "text/plain", body = String),
    )
)]
pub(crate) async fn send_message(
    state: web::Data<ApiState>,
    request: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse<StreamedBody>, ApiError> {
    forward(state, request, payload).await
}

/// End an MCP session (Streamable HTTP).
#[utoipa::path(
    delete,
    path = "/mcp",
    tag = "mcp",
    operation_id = "mcp_end_session",
    description = "The MCP Streamable HTTP endpoint: a DELETE with `Mcp-Session-Id` ends that \
        session.",
    responses(
        (status = 204, description = "The session ended (also when it had already ended)"),
        (status = 400, description = "No `Mcp-Session-Id`, or an `MCP-Protocol-Version` this \
            gateway does not speak; the reason as plain text", content_type = "text/plain", body = String),
        (status = 404, description = "The MCP endpoint is not enabled (NotFoundError)", body = ErrorEnvelope),
        (status = 405, description = "A DELETE of the stateless protocol version (2026-07-28), \
            which has no sessions (plain text, `Allow: POST`)", content_type = "text/plain", body = String),
    )
)]
pub(crate) async fn end_session(
    state: web::Data<ApiState>,
    request: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse<StreamedBody>, ApiError> {
    forward(state, request, payload).await
}

/// `OPTIONS /mcp` names the methods. A CORS layer, when there is one, answers preflights before
/// they get here.
pub(crate) async fn options() -> HttpResponse {
    HttpResponse::NoContent()
        .insert_header((actix_header::ALLOW, MCP_ALLOWED_METHODS))
        .finish()
}

/// Every method of `/mcp` while no MCP handler is set. The body is never read.
pub(crate) async fn endpoint_not_enabled() -> ApiError {
    not_enabled()
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use http_body::Frame;
    use http_body_util::{BodyExt, Full};

    use super::*;

    /// A body that yields prepared frames and then ends.
    struct Frames(VecDeque<Frame<Bytes>>);

    impl Body for Frames {
        type Data = Bytes;
        type Error = Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            Poll::Ready(self.0.pop_front().map(Ok))
        }
    }

    fn next_chunk(body: &mut StreamedBody) -> Option<Bytes> {
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        match Pin::new(body).poll_next(&mut cx) {
            Poll::Ready(chunk) => chunk.map(|chunk| chunk.unwrap_or_else(|never| match never {})),
            Poll::Pending => panic!("a ready body answered pending"),
        }
    }

    #[test]
    fn empty_frames_and_trailers_do_not_end_the_stream() {
        let mut trailers = http::HeaderMap::new();
        trailers.insert("x-done", http::HeaderValue::from_static("yes"));
        let frames = Frames(VecDeque::from([
            Frame::data(Bytes::from_static(b"one")),
            Frame::data(Bytes::new()),
            Frame::data(Bytes::from_static(b"two")),
            Frame::trailers(trailers),
        ]));
        let mut body = StreamedBody(frames.boxed_unsync());
        assert_eq!(body.size(), BodySize::Stream);
        assert_eq!(next_chunk(&mut body).as_deref(), Some(&b"one"[..]));
        assert_eq!(next_chunk(&mut body).as_deref(), Some(&b"two"[..]));
        assert_eq!(next_chunk(&mut body), None);
    }

    #[test]
    fn a_body_of_known_length_is_sent_with_that_length() {
        let body = StreamedBody(Full::new(Bytes::from_static(b"{\"x\":1}")).boxed_unsync());
        assert_eq!(body.size(), BodySize::Sized(7));
    }

    #[test]
    fn framing_headers_of_the_handler_are_left_to_actix() {
        let response = http::Response::builder()
            .status(202)
            .header("content-length", "999")
            .header("transfer-encoding", "chunked")
            .header("connection", "close")
            .header("mcp-session-id", "abc")
            .body(Full::new(Bytes::from_static(b"ok")).boxed_unsync())
            .unwrap();
        let actix = actix_response(response);
        assert_eq!(actix.status().as_u16(), 202);
        let names: Vec<&str> = actix.headers().keys().map(|name| name.as_str()).collect();
        assert_eq!(names, ["mcp-session-id"]);
    }
}
