//! Cross-origin resource sharing for browser clients of the API.
//!
//! Off unless the state carries [`CorsSettings`]: then no response has a CORS header. When on,
//! a preflight (`OPTIONS` with `Origin` and `Access-Control-Request-Method`) is answered here,
//! before authentication and routing: 204 with the allowed origin, methods and headers for an
//! allowed origin and method, 403 `AccessDeniedError` without CORS headers otherwise. Any other
//! request from an allowed origin gets `Access-Control-Allow-Origin` and the headers a browser
//! script may read (`Access-Control-Expose-Headers`); from another origin it is served without
//! CORS headers, so the browser withholds the answer. The allowed origin is always echoed (never
//! `*`), with `Vary: Origin`, so caches keep answers for different origins apart.
//!
//! CORS only decides what a browser lets a page read, and which requests it sends after a
//! preflight. What a foreign page can send without asking (simple requests, forms, WebSocket
//! upgrades) is refused by the origin check in front of the handlers, which admits the origins
//! allowed here; see the guard module.

use actix_web::body::{EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderMap, HeaderValue};
use actix_web::http::{Method, StatusCode};
use actix_web::middleware::Next;
use actix_web::{ResponseError as _, web};

use crate::error::{ApiError, names};
use crate::state::ApiState;

/// The methods `*` stands for in `MCP_CORS_METHODS`.
pub const CORS_ALL_METHODS: &[&str] = &["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/// The response headers a browser script may read: the MCP session, rate limiting and the
/// authentication challenge.
pub const CORS_EXPOSED_HEADERS: &str =
    "Mcp-Session-Id, Retry-After, X-RateLimit-Limit, X-RateLimit-Remaining, WWW-Authenticate";

/// How long a browser may cache a preflight answer, in seconds.
pub const CORS_MAX_AGE_SECONDS: u32 = 600;

/// Which origins, methods and request headers cross-origin callers may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorsSettings {
    /// `None` for any origin (`*`), else the allowed origins, lowercase, without a trailing
    /// slash.
    origins: Option<Vec<String>>,
    /// Uppercase method names.
    methods: Vec<String>,
    /// `None` for any header (`*`: the requested ones are echoed), else the allowed headers.
    headers: Option<Vec<String>>,
}

impl CorsSettings {
    /// Settings from the values of `MCP_CORS_ORIGINS` (comma-separated origins such as
    /// `https://app.example.com`, or `*`), `MCP_CORS_METHODS` and `MCP_CORS_HEADERS`
    /// (comma-separated, or `*`; `None` means `*`). Errors name the bad entry.
    pub fn parse(
        origins: &str,
        methods: Option<&str>,
        headers: Option<&str>,
    ) -> Result<Self, String> {
        let origins = match list_or_any(origins) {
            None => None,
            Some(entries) if entries.is_empty() => {
                return Err(
                    "MCP_CORS_ORIGINS lists no origin; unset it to turn CORS off".to_owned(),
                );
            }
            Some(entries) => Some(
                entries
                    .into_iter()
                    .map(|entry| parse_origin(&entry))
                    .collect::<Result<Vec<_>, _>>()?,
            ),
        };
        let methods = match methods.and_then(list_or_any) {
            None => CORS_ALL_METHODS
                .iter()
                .map(|&method| method.to_owned())
                .collect(),
            Some(entries) if entries.is_empty() => {
                return Err("MCP_CORS_METHODS lists no method".to_owned());
            }
            Some(entries) => entries
                .into_iter()
                .map(|entry| {
                    if is_token(&entry) {
                        Ok(entry.to_ascii_uppercase())
                    } else {
                        Err(format!("MCP_CORS_METHODS: `{entry}` is not an HTTP method"))
                    }
                })
                .collect::<Result<Vec<_>, _>>()?,
        };
        let headers = match headers.and_then(list_or_any) {
            None => None,
            Some(entries) if entries.is_empty() => {
                return Err("MCP_CORS_HEADERS lists no header".to_owned());
            }
            Some(entries) => Some(
                entries
                    .into_iter()
                    .map(|entry| {
                        if is_token(&entry) {
                            Ok(entry.to_ascii_lowercase())
                        } else {
                            Err(format!("MCP_CORS_HEADERS: `{entry}` is not a header name"))
                        }
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
        };
        Ok(Self {
            origins,
            methods,
            headers,
        })
    }

    /// Whether a request from `origin` may be answered with CORS headers. Under `*`, the opaque
    /// origin `null` (sandboxed frames, local files) is allowed only when listed.
    pub fn allows_origin(&self, origin: &str) -> bool {
        let origin = origin.trim_end_matches('/').to_ascii_lowercase();
        match &self.origins {
            None => origin != "null",
            Some(allowed) => allowed.contains(&origin),
        }
    }

    /// Whether every origin (but `null`) is allowed: `MCP_CORS_ORIGINS=*`.
    pub fn allows_any_origin(&self) -> bool {
        self.origins.is_none()
    }

    fn allows_method(&self, method: &str) -> bool {
        self.methods
            .iter()
            .any(|allowed| allowed.eq_ignore_ascii_case(method.trim()))
    }
}

/// `None` for `*`, else the non-empty comma-separated entries.
fn list_or_any(raw: &str) -> Option<Vec<String>> {
    let entries: Vec<String> = raw
        .split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .map(str::to_owned)
        .collect();
    if entries.iter().any(|entry| entry == "*") {
        None
    } else {
        Some(entries)
    }
}

fn parse_origin(entry: &str) -> Result<String, String> {
    let origin = entry.trim_end_matches('/').to_ascii_lowercase();
    if origin == "null" {
        return Ok(origin);
    }
    let valid = origin.split_once("://").is_some_and(|(scheme, rest)| {
        is_token(scheme) && !rest.is_empty() && !rest.contains(['/', '?', '#', ' '])
    });
    if valid {
        Ok(origin)
    } else {
        Err(format!(
            "MCP_CORS_ORIGINS: `{entry}` is not an origin (scheme://host[:port], such as \
             https://app.example.com)"
        ))
    }
}

/// An HTTP token (a method or header name).
fn is_token(raw: &str) -> bool {
    !raw.is_empty()
        && raw
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte))
}

fn header_text<'a>(headers: &'a HeaderMap, name: &header::HeaderName) -> Option<&'a str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

/// Adds `value` to `Vary` unless it is there already.
fn add_vary_origin(headers: &mut HeaderMap) {
    let present = headers
        .get_all(header::VARY)
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|entry| entry.trim().eq_ignore_ascii_case("origin") || entry.trim() == "*");
    if !present {
        headers.append(header::VARY, HeaderValue::from_static("Origin"));
    }
}

/// The actix middleware (mount with `actix_web::middleware::from_fn`, outside authentication).
pub(crate) async fn cors(
    request: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody + 'static>>, actix_web::Error> {
    let settings = request
        .app_data::<web::Data<ApiState>>()
        .and_then(|state| state.cors().cloned());
    let (Some(settings), Some(origin)) = (
        settings,
        header_text(request.headers(), &header::ORIGIN).map(str::to_owned),
    ) else {
        return next
            .call(request)
            .await
            .map(ServiceResponse::map_into_left_body);
    };
    let allowed = settings.allows_origin(&origin);
    // The origin header is echoed only when it is a valid header value (it came in as one).
    let origin_value = HeaderValue::from_str(&origin).ok().filter(|_| allowed);

    let requested_method =
        header_text(request.headers(), &header::ACCESS_CONTROL_REQUEST_METHOD).map(str::to_owned);
    if request.method() == Method::OPTIONS
        && let Some(requested_method) = requested_method
    {
        let response = preflight(
            &settings,
            &request,
            origin_value,
            &origin,
            &requested_method,
        );
        return Ok(request.into_response(response).map_into_right_body());
    }

    let mut response = next.call(request).await?;
    if let Some(origin_value) = origin_value {
        let headers = response.headers_mut();
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin_value);
        headers.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static(CORS_EXPOSED_HEADERS),
        );
    }
    // Whether the answer has CORS headers depends on the origin, allowed or not.
    add_vary_origin(response.headers_mut());
    Ok(response.map_into_left_body())
}

fn preflight(
    settings: &CorsSettings,
    request: &ServiceRequest,
    origin_value: Option<HeaderValue>,
    origin: &str,
    requested_method: &str,
) -> actix_web::HttpResponse {
    let Some(origin_value) = origin_value else {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            names::ACCESS_DENIED,
            format!(
                "cross-origin requests from `{}` are not allowed; add the origin to \
                 MCP_CORS_ORIGINS",
                mcpgw_core::bounded_for_message(origin)
            ),
        )
        .error_response();
    };
    if !settings.allows_method(requested_method) {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            names::ACCESS_DENIED,
            format!(
                "cross-origin `{}` requests are not allowed; the allowed methods are {} \
                 (MCP_CORS_METHODS)",
                mcpgw_core::bounded_for_message(requested_method),
                settings.methods.join(", ")
            ),
        )
        .error_response();
    }
    let mut response = actix_web::HttpResponse::NoContent();
    response
        .insert_header((header::ACCESS_CONTROL_ALLOW_ORIGIN, origin_value))
        .insert_header((header::VARY, "Origin"))
        .insert_header((
            header::ACCESS_CONTROL_ALLOW_METHODS,
            settings.methods.join(", "),
        ))
        .insert_header((
            header::ACCESS_CONTROL_MAX_AGE,
            CORS_MAX_AGE_SECONDS.to_string(),
        ));
    let allow_headers = match &settings.headers {
        Some(listed) => Some(listed.join(", ")),
        // `*`: whatever the browser asks for.
        None => header_text(request.headers(), &header::ACCESS_CONTROL_REQUEST_HEADERS)
            .map(str::trim)
            .filter(|requested| !requested.is_empty())
            .map(str::to_owned),
    };
    if let Some(allow_headers) = allow_headers
        && let Ok(value) = HeaderValue::from_str(&allow_headers)
    {
        response.insert_header((header::ACCESS_CONTROL_ALLOW_HEADERS, value));
    }
    response.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn star_allows_every_origin_but_null_and_every_method() {
        let settings = CorsSettings::parse("*", None, None).unwrap();
        assert!(settings.allows_any_origin());
        assert!(settings.allows_origin("https://anything.example"));
        assert!(!settings.allows_origin("null"));
        for method in CORS_ALL_METHODS {
            assert!(settings.allows_method(method));
        }
        assert!(!settings.allows_method("TRACE"));
    }

    #[test]
    fn listed_origins_match_exactly_ignoring_case_and_a_trailing_slash() {
        let settings = CorsSettings::parse(
            " https://App.example.com/ , http://localhost:3000",
            None,
            None,
        )
        .unwrap();
        assert!(settings.allows_origin("https://app.example.com"));
        assert!(settings.allows_origin("http://localhost:3000"));
        assert!(!settings.allows_any_origin());
        // Bad input: another port, another scheme, a suffix attack.
        assert!(!settings.allows_origin("http://localhost:3001"));
        assert!(!settings.allows_origin("http://app.example.com"));
        assert!(!settings.allows_origin("https://app.example.com.evil.test"));
    }

    #[test]
    fn methods_and_headers_lists_are_normalized() {
        let settings = CorsSettings::parse(
            "https://a.example",
            Some("get, post"),
            Some("X-API-Key, Content-Type"),
        )
        .unwrap();
        assert_eq!(settings.methods, ["GET", "POST"]);
        assert_eq!(
            settings.headers.as_deref(),
            Some(&["x-api-key".to_owned(), "content-type".to_owned()][..])
        );
        assert!(settings.allows_method("post"));
        assert!(!settings.allows_method("DELETE"));
    }

    #[test]
    fn bad_entries_are_named() {
        // Bad input: a path in an origin, no scheme, an empty list, a method with a space.
        let error = CorsSettings::parse("https://a.example/app", None, None).unwrap_err();
        assert!(error.contains("https://a.example/app"), "{error}");
        let error = CorsSettings::parse("a.example", None, None).unwrap_err();
        assert!(error.contains("a.example"), "{error}");
        assert!(CorsSettings::parse(" , ", None, None).is_err());
        let error = CorsSettings::parse("*", Some("GE T"), None).unwrap_err();
        assert!(error.contains("GE T"), "{error}");
        let error = CorsSettings::parse("*", None, Some("x:y")).unwrap_err();
        assert!(error.contains("x:y"), "{error}");
    }
}
