//! What keeps a web page in the operator's browser from driving the gateway: one rule for every
//! route, checked before authentication and before any handler runs.
//!
//! A gateway on loopback with authentication off trusts whoever reaches it, and a browser on the
//! same machine reaches it for any page it shows. Three checks close what such a page can try:
//!
//! - **Host** ([`check_host`], mounted outside CORS): the `Host` header must name the listener.
//!   Loopback names and addresses (`localhost`, `127.0.0.0/8`, `[::1]`, any port) always pass;
//!   on a listener bound to a non-loopback address, so do IP address literals (a browser puts
//!   the address it connected to there, which DNS cannot rebind); and so do the names of
//!   [`AllowedHosts`] (`*` turns the check off). Anything else answers 421
//!   `MisdirectedRequestError`. This stops DNS rebinding: a page whose own name an attacker
//!   points at 127.0.0.1 sends that name as its `Host`. The three probes are exempt,
//!   so an orchestrator may ask under any name (they reveal only counts). A request without any
//!   `Host` comes from no browser and passes.
//! - **Origin** ([`check_request`], mounted inside CORS, so that an allowed origin can read the
//!   refusal): a request whose `Origin` is neither the gateway's own (`http` or `https`, host and
//!   port as the `Host` header names them) nor allowed by `MCP_CORS_ORIGINS` answers 403
//!   `ForbiddenOriginError`, for every method but `GET`, `HEAD` and `OPTIONS`, for WebSocket
//!   upgrades, and for every request to `/mcp` (an MCP endpoint must check the origin of every
//!   request). `Origin: null` (sandboxed frames, local files, some redirects) is foreign unless
//!   listed. `/mcp` also admits the origins of [`McpOrigins`]. Requests without `Origin`
//!   (command-line clients, SDKs) pass.
//! - **Content type** (also [`check_request`]): a request under `/api/` other than `GET`,
//!   `HEAD` and `OPTIONS` that declares a `Content-Type` must declare `application/json`
//!   (parameters such as `charset` allowed), and one with a body (a `Content-Length` above 0, or
//!   a chunked body) must declare it; anything else answers 415 `UnsupportedMediaTypeError`. Browsers send only `text/plain`, form and
//!   multipart bodies across sites without asking first; JSON needs a CORS preflight, which only
//!   `MCP_CORS_ORIGINS` answers. Bodiless requests without a `Content-Type` (`curl -X POST
//!   .../start`) pass: a browser cannot send one across sites without an `Origin`, which the
//!   origin check refuses.

use std::net::IpAddr;

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderMap};
use actix_web::http::{Method, StatusCode};
use actix_web::middleware::Next;
use actix_web::{HttpMessage as _, ResponseError as _, web};
use futures::StreamExt as _;

use crate::cors::CorsSettings;
use crate::error::{ApiError, bounded_for_message, names};
use crate::state::ApiState;

/// The paths the Host check leaves alone: the probes, exactly (any other path under `/health/`
/// is checked like the rest).
const HOST_EXEMPT: [&str; 3] = ["/health/live", "/health/startup", "/health/ready"];

/// The `Host` names the gateway answers besides loopback (and, on a non-loopback listener, IP
/// address literals).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedHosts {
    /// Whether the listener is bound to a loopback address.
    loopback_listener: bool,
    /// `*`: any host.
    any: bool,
    /// Lowercase names (or addresses, without brackets), each with the one port it allows or
    /// any port.
    listed: Vec<(String, Option<u16>)>,
}

impl Default for AllowedHosts {
    /// A loopback listener, no other names.
    fn default() -> Self {
        Self {
            loopback_listener: true,
            any: false,
            listed: Vec::new(),
        }
    }
}

impl AllowedHosts {
    /// The hosts of a listener bound to `listener` (the address it is bound to; `0.0.0.0` and
    /// `::` count as non-loopback), plus `entries`: `gateway.example.com` (any port),
    /// `gateway.example.com:8443` (that port only), an address (`10.0.0.5`, `[fd00::5]:8000`),
    /// or `*` (any host: only behind a proxy that checks `Host` itself). The error names the
    /// entry that is none of these.
    pub fn new<S: AsRef<str>>(listener: IpAddr, entries: &[S]) -> Result<Self, String> {
        let mut hosts = Self {
            loopback_listener: is_loopback(listener),
            ..Self::default()
        };
        for entry in entries {
            let entry = entry.as_ref().trim();
            if entry == "*" {
                hosts.any = true;
                continue;
            }
            let parsed = Authority::parse(entry).ok_or_else(|| {
                format!(
                    "allowed_hosts: `{}` is not a host name (write the name alone, \
                     gateway.example.com, or with a port, gateway.example.com:8443, without a \
                     scheme or a path)",
                    bounded_for_message(entry)
                )
            })?;
            hosts.listed.push((parsed.host, parsed.port));
        }
        Ok(hosts)
    }

    /// Whether a request that names `authority` (a `Host` header value) may be answered.
    pub fn admits(&self, authority: &str) -> bool {
        if self.any {
            return true;
        }
        let Some(authority) = Authority::parse(authority) else {
            return false;
        };
        if authority.host == "localhost" {
            return true;
        }
        if let Ok(address) = authority.host.parse::<IpAddr>()
            && (is_loopback(address) || !self.loopback_listener)
        {
            return true;
        }
        self.listed.iter().any(|(host, port)| {
            *host == authority.host && port.is_none_or(|port| Some(port) == authority.port)
        })
    }
}

fn is_loopback(address: IpAddr) -> bool {
    match address {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or(v6.is_loopback(), |v4| v4.is_loopback()),
        v4 => v4.is_loopback(),
    }
}

/// A `Host` value (or an `allowed_hosts` entry) taken apart: the host lowercase, without
/// brackets or a trailing dot, and the port if there is one.
#[derive(Debug, PartialEq, Eq)]
struct Authority {
    host: String,
    port: Option<u16>,
}

impl Authority {
    fn parse(raw: &str) -> Option<Self> {
        let raw = raw.trim();
        // An authority with credentials, a path or a scheme is not a `Host`.
        if raw.is_empty() || raw.contains(['@', '/', '?', '#', ' ', '\t']) {
            return None;
        }
        let authority = raw.parse::<http::uri::Authority>().ok()?;
        let host = authority.host();
        let host = host
            .strip_prefix('[')
            .and_then(|inner| inner.strip_suffix(']'))
            .unwrap_or(host);
        let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
        if host.is_empty() {
            return None;
        }
        Some(Self {
            host,
            port: authority.port_u16(),
        })
    }
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

/// Browser origins `/mcp` admits besides the gateway's own and those of `MCP_CORS_ORIGINS`
/// (the configuration's `mcp_endpoint.allowed_origins`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpOrigins {
    any: bool,
    null: bool,
    /// Scheme, host and port (the scheme's default when not written), or any port.
    listed: Vec<(String, String, PortRule)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PortRule {
    Only(Option<u16>),
    Any,
}

impl McpOrigins {
    /// Origins such as `https://app.example.com` (the scheme's default port),
    /// `https://app.example.com:8443`, `http://localhost:*` (any port), `null`, or `*` (any).
    /// The error names the entry that is none of these.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Self, String> {
        let mut origins = Self::default();
        for entry in entries {
            let entry = entry.as_ref().trim();
            match entry {
                "*" => origins.any = true,
                "null" => origins.null = true,
                _ => {
                    let (text, port) = match entry.strip_suffix(":*") {
                        Some(rest) => (rest, PortRule::Any),
                        None => (entry, PortRule::Only(None)),
                    };
                    let Some(origin) = Origin::parse(text) else {
                        return Err(format!(
                            "mcp_endpoint.allowed_origins: `{}` is not an origin \
                             (scheme://host[:port], such as https://app.example.com)",
                            bounded_for_message(entry)
                        ));
                    };
                    let port = match port {
                        PortRule::Any => PortRule::Any,
                        PortRule::Only(_) => PortRule::Only(origin.port),
                    };
                    origins.listed.push((origin.scheme, origin.host, port));
                }
            }
        }
        Ok(origins)
    }

    fn admits(&self, origin: &str) -> bool {
        if self.any {
            return true;
        }
        if origin == "null" {
            return self.null;
        }
        let Some(origin) = Origin::parse(origin) else {
            return false;
        };
        self.listed.iter().any(|(scheme, host, port)| {
            *scheme == origin.scheme
                && *host == origin.host
                && match port {
                    PortRule::Any => true,
                    PortRule::Only(port) => *port == origin.port,
                }
        })
    }
}

/// A serialized origin, `scheme://host[:port]`, the port filled in from the scheme.
#[derive(Debug, PartialEq, Eq)]
struct Origin {
    scheme: String,
    host: String,
    port: Option<u16>,
}

impl Origin {
    fn parse(raw: &str) -> Option<Self> {
        let raw = raw.trim().trim_end_matches('/');
        let (scheme, rest) = raw.split_once("://")?;
        let scheme = scheme.to_ascii_lowercase();
        let authority = Authority::parse(rest)?;
        let port = authority.port.or_else(|| default_port(&scheme));
        Some(Self {
            scheme,
            host: authority.host,
            port,
        })
    }

    /// The page was served by the host the request was sent to: the origin's host and port are
    /// those `authority` (the request's `Host`) names. Only sound once the Host check passed.
    fn is_same_as(&self, authority: &str) -> bool {
        if default_port(&self.scheme).is_none() {
            return false;
        }
        let Some(authority) = Authority::parse(authority) else {
            return false;
        };
        authority.host == self.host
            && authority.port.or_else(|| default_port(&self.scheme)) == self.port
    }
}

fn header_text<'a>(headers: &'a HeaderMap, name: &header::HeaderName) -> Option<&'a str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

/// The authorities a request names: its `Host` header (a value that is not text names nothing
/// the check could accept) and the authority of an absolute-form target.
/// Borrowed: the check runs on every request, `/mcp`'s included, and copies nothing.
fn named_authorities(request: &ServiceRequest) -> impl Iterator<Item = &str> {
    let host = request
        .headers()
        .get(header::HOST)
        .map(|value| value.to_str().unwrap_or("\u{0}"));
    host.into_iter().chain(
        request
            .uri()
            .authority()
            .map(|authority| authority.as_str()),
    )
}

/// The authority the page's own origin is compared with: the `Host` header, else the target's.
fn request_authority(request: &ServiceRequest) -> Option<String> {
    header_text(request.headers(), &header::HOST)
        .map(str::to_owned)
        .or_else(|| {
            request
                .uri()
                .authority()
                .map(|authority| authority.to_string())
        })
}

fn misdirected() -> ApiError {
    ApiError::new(
        StatusCode::MISDIRECTED_REQUEST,
        names::MISDIRECTED_REQUEST,
        "the Host header does not name this gateway; call it by an address it listens on \
         (localhost or 127.0.0.1 on this machine), or add the name clients use to \
         `allowed_hosts` in the configuration",
    )
}

/// The Host check (mount with `actix_web::middleware::from_fn`, outside CORS and
/// authentication, inside the request limits).
pub(crate) async fn check_host(
    request: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody + 'static>>, actix_web::Error> {
    let Some(state) = request.app_data::<web::Data<ApiState>>() else {
        return Ok(unmounted(request).map_into_right_body());
    };
    let refused = !HOST_EXEMPT.contains(&request.path())
        && named_authorities(&request).any(|authority| !state.allowed_hosts().admits(authority));
    if refused {
        tracing::warn!(
            method = %request.method(),
            path = request.path(),
            "refused a request whose Host does not name the gateway (a DNS-rebinding page, or \
             a name missing from allowed_hosts)"
        );
        let response = misdirected().error_response();
        return Ok(request.into_response(response).map_into_right_body());
    }
    next.call(request)
        .await
        .map(ServiceResponse::map_into_left_body)
}

/// The answer of a check that finds no [`ApiState`] in the request: it cannot tell what it
/// would let through, so it lets nothing through. The gateway's own mounts always provide the
/// state; this is an embedder's mount that forgot it, and says so in the log.
pub(crate) fn unmounted(request: ServiceRequest) -> ServiceResponse {
    let error = ApiError::internal(&format_args!(
        "{} {} reached a check of the gateway without its state: mount the gateway with \
         mcpgw_http_actix::service or app, or add its ApiState as app data",
        request.method(),
        request.path()
    ));
    let response = error.error_response();
    request.into_response(response)
}

/// Why a request's origin or body is refused, if it is.
fn refusal(
    request: &ServiceRequest,
    cors: Option<&CorsSettings>,
    mcp: &McpOrigins,
) -> Option<ApiError> {
    let headers = request.headers();
    let safe = matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    );
    let upgrade = header_text(headers, &header::UPGRADE)
        .is_some_and(|value| value.to_ascii_lowercase().contains("websocket"));
    let is_mcp = crate::mcp_endpoint::is_mcp_path(request.path());
    if let Some(origin) = headers.get(header::ORIGIN)
        && (!safe || upgrade || (is_mcp && *request.method() != Method::OPTIONS))
    {
        let text = origin.to_str().unwrap_or_default().trim();
        let own = Origin::parse(text).is_some_and(|parsed| {
            request_authority(request).is_some_and(|authority| parsed.is_same_as(&authority))
        });
        let allowed = own
            || cors.is_some_and(|cors| cors.allows_origin(text))
            || (is_mcp && mcp.admits(text));
        if !allowed {
            return Some(ApiError::new(
                StatusCode::FORBIDDEN,
                names::FORBIDDEN_ORIGIN,
                format!(
                    "requests from the web page at `{}` are refused: it is neither this \
                     gateway's own origin nor listed in MCP_CORS_ORIGINS; add the origin to \
                     MCP_CORS_ORIGINS to let its pages call the gateway",
                    bounded_for_message(text)
                ),
            ));
        }
    }
    // A GET, HEAD or OPTIONS body means nothing to any route, and a browser sends none.
    if !safe && request.path().starts_with("/api/") {
        return unsupported_body(headers);
    }
    None
}

/// A 415 for a body that is not declared JSON.
fn unsupported_body(headers: &HeaderMap) -> Option<ApiError> {
    let content_type = headers.get(header::CONTENT_TYPE);
    if let Some(content_type) = content_type {
        let is_json = content_type
            .to_str()
            .ok()
            .and_then(|value| value.split(';').next())
            .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"));
        if is_json {
            return None;
        }
        return Some(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            names::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "request bodies must be JSON, not `{}`; send the body with `Content-Type: \
                 application/json`",
                bounded_for_message(content_type.to_str().unwrap_or("(not text)"))
            ),
        ));
    }
    let declared_length = header_text(headers, &header::CONTENT_LENGTH).map(|value| {
        value
            .trim()
            .parse::<u64>()
            .map_or(true, |length| length > 0)
    });
    let chunked = header_text(headers, &header::TRANSFER_ENCODING).is_some();
    if declared_length == Some(true) || chunked {
        return Some(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            names::UNSUPPORTED_MEDIA_TYPE,
            "the request has a body but no Content-Type; send the JSON body with \
             `Content-Type: application/json`",
        ));
    }
    None
}

/// Reads and drops a refused request's body, up to `limit` bytes (and within the body timeout,
/// which the request limits put on every body). A connection closed with a body still unread
/// is reset, and a browser that is still sending its form loses the refusal with it; read, it
/// is answered and stays open.
async fn discard_body(request: &mut ServiceRequest, limit: usize) {
    // An upgrade's "body" is the connection itself, which is closed after the refusal.
    if request.headers().contains_key(header::UPGRADE) {
        return;
    }
    let mut payload = request.take_payload();
    let mut read = 0_usize;
    while let Some(Ok(chunk)) = payload.next().await {
        read = read.saturating_add(chunk.len());
        if read > limit {
            break;
        }
    }
}

/// The Origin and content-type checks (mount with `actix_web::middleware::from_fn`, inside CORS
/// and outside authentication).
pub(crate) async fn check_request(
    mut request: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody + 'static>>, actix_web::Error> {
    let Some(state) = request.app_data::<web::Data<ApiState>>().cloned() else {
        return Ok(unmounted(request).map_into_right_body());
    };
    if let Some(error) = refusal(&request, state.cors(), state.mcp_origins()) {
        tracing::info!(
            method = %request.method(),
            path = request.path(),
            error = error.name(),
            "refused a request before it reached a handler"
        );
        let limit = if crate::mcp_endpoint::is_mcp_path(request.path()) {
            state.settings().max_mcp_body_bytes
        } else {
            state.settings().max_body_bytes
        };
        discard_body(&mut request, limit).await;
        let response = error.error_response();
        return Ok(request.into_response(response).map_into_right_body());
    }
    next.call(request)
        .await
        .map(ServiceResponse::map_into_left_body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loopback(entries: &[&str]) -> AllowedHosts {
        AllowedHosts::new("127.0.0.1".parse().unwrap(), entries).unwrap()
    }

    #[actix_web::test]
    async fn a_check_without_the_gateways_state_lets_nothing_through() {
        use actix_web::middleware::from_fn;
        use actix_web::{App, HttpResponse, test as actix_test, web};

        // Bad input: each check wrapped around a route of one's own without the gateway's
        // state, which is how it could be left open; a GET and a POST through each.
        macro_rules! refuses_alone {
            ($check:path) => {{
                let app = actix_test::init_service(
                    App::new()
                        .route("/open", web::route().to(HttpResponse::Ok))
                        .wrap(from_fn($check)),
                )
                .await;
                for method in [actix_web::http::Method::GET, actix_web::http::Method::POST] {
                    let response = actix_test::call_service(
                        &app,
                        actix_test::TestRequest::default()
                            .method(method.clone())
                            .uri("/open")
                            .insert_header(("Host", "evil.example"))
                            .to_request(),
                    )
                    .await;
                    assert_eq!(response.status(), 500, "{} {method}", stringify!($check));
                    let body: serde_json::Value = actix_test::read_body_json(response).await;
                    assert_eq!(body["error"], "InternalServerError", "{body}");
                }
            }};
        }
        refuses_alone!(super::check_host);
        refuses_alone!(super::check_request);
        refuses_alone!(crate::authn::authenticate);
    }

    #[test]
    fn a_loopback_listener_answers_loopback_names_and_the_listed_ones() {
        let hosts = loopback(&["gw.example.com", "api.example.com:8443"]);
        for good in [
            "localhost",
            "LOCALHOST:8000",
            "localhost.:8000",
            "127.0.0.1:8000",
            "127.1.2.3",
            "[::1]:8000",
            "[::ffff:127.0.0.1]:80",
            "gw.example.com",
            "GW.example.com:1234",
            "api.example.com:8443",
        ] {
            assert!(hosts.admits(good), "{good}");
        }
        // Bad input: a rebinding name, another port of a port-bound name, a look-alike, another
        // machine's address, an authority with credentials, garbage.
        for bad in [
            "evil.example",
            "evil.example:8000",
            "api.example.com:8000",
            "localhost.evil.example",
            "gw.example.com.evil.example",
            "10.0.0.5:8000",
            "[fd00::1]:8000",
            "user@localhost:8000",
            "localhost:8000/x",
            "",
            "\u{0}",
        ] {
            assert!(!hosts.admits(bad), "{bad:?}");
        }
    }

    #[test]
    fn a_non_loopback_listener_also_answers_address_literals_never_other_names() {
        for listener in ["0.0.0.0", "::", "10.0.0.5"] {
            let hosts = AllowedHosts::new(listener.parse().unwrap(), &[] as &[&str]).unwrap();
            assert!(hosts.admits("10.1.2.3:8000"), "{listener}");
            assert!(hosts.admits("[fd00::7]:8000"), "{listener}");
            assert!(hosts.admits("localhost:8000"), "{listener}");
            assert!(!hosts.admits("evil.example:8000"), "{listener}");
            assert!(!hosts.admits("mcpgw.default.svc:8000"), "{listener}");
        }
    }

    #[test]
    fn a_star_answers_any_host_and_bad_entries_are_named() {
        assert!(loopback(&["*"]).admits("evil.example:8000"));
        // Bad input: a scheme, a path, an empty entry.
        for bad in ["https://gw.example.com", "gw.example.com/mcp", " "] {
            let error = AllowedHosts::new("127.0.0.1".parse().unwrap(), &[bad]).unwrap_err();
            assert!(error.contains("allowed_hosts"), "{error}");
        }
    }

    #[test]
    fn the_own_origin_is_the_host_with_either_scheme_and_its_default_port() {
        let own = |origin: &str, host: &str| Origin::parse(origin).unwrap().is_same_as(host);
        assert!(own("http://127.0.0.1:8000", "127.0.0.1:8000"));
        assert!(own("http://LOCALHOST:8000", "localhost:8000"));
        assert!(own("https://gw.example.com", "gw.example.com"));
        assert!(own("https://gw.example.com:443", "gw.example.com"));
        assert!(own("http://gw.example.com", "gw.example.com:80"));
        // Bad input: another port, another host, a scheme without a default port.
        assert!(!own("http://127.0.0.1:9000", "127.0.0.1:8000"));
        assert!(!own("http://localhost:8000", "127.0.0.1:8000"));
        assert!(!own("https://gw.example.com", "gw.example.com:8000"));
        assert!(!own("ftp://127.0.0.1:8000", "127.0.0.1:8000"));
        assert!(Origin::parse("null").is_none());
    }

    #[test]
    fn mcp_origins_match_scheme_host_and_port_with_wildcards() {
        let origins =
            McpOrigins::parse(&["https://app.example.com", "http://localhost:*", "null"]).unwrap();
        assert!(origins.admits("https://app.example.com"));
        assert!(origins.admits("https://app.example.com:443"));
        assert!(origins.admits("http://localhost:5173"));
        assert!(origins.admits("null"));
        assert!(!origins.admits("https://app.example.com:8443"));
        assert!(!origins.admits("http://app.example.com"));
        assert!(!origins.admits("https://evil.example"));
        assert!(
            McpOrigins::parse(&["*"])
                .unwrap()
                .admits("https://evil.example")
        );
        assert!(!McpOrigins::default().admits("null"));
        let error = McpOrigins::parse(&["app.example.com"]).unwrap_err();
        assert!(error.contains("app.example.com"), "{error}");
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(
                header::HeaderName::from_static(name),
                header::HeaderValue::from_static(value),
            );
        }
        headers
    }

    #[test]
    fn bodies_must_be_declared_json() {
        for good in [
            &[][..],
            &[("content-length", "0")],
            &[("content-type", "application/json")],
            &[("content-type", "Application/JSON; charset=UTF-8")],
            &[
                ("content-type", "application/json"),
                ("content-length", "12"),
            ],
        ] {
            assert!(unsupported_body(&headers(good)).is_none(), "{good:?}");
        }
        // Bad input: the three types a browser sends across sites unasked, a body without a
        // type, a chunked body without a type, a JSON look-alike.
        for bad in [
            &[("content-type", "text/plain"), ("content-length", "3")][..],
            &[
                ("content-type", "text/plain;charset=UTF-8"),
                ("content-length", "0"),
            ],
            &[("content-type", "application/x-www-form-urlencoded")],
            &[("content-type", "multipart/form-data; boundary=x")],
            &[("content-length", "12")],
            &[("transfer-encoding", "chunked")],
            &[("content-type", "application/jsonp")],
        ] {
            let error = unsupported_body(&headers(bad)).expect("refused");
            assert_eq!(
                error.status(),
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "{bad:?}"
            );
            assert!(
                error.message().contains("Content-Type: application/json"),
                "{error}"
            );
        }
    }
}
