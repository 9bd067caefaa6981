//! What every console page shares: the frame around it ([`Chrome`]), rendering, and the error
//! page ([`Problem`]).

use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpRequest, HttpResponse, ResponseError};
use askama::Template;

use super::{CSRF_FIELD, Visitor, secure};
use crate::error::{ApiError, names};

/// One entry of the navigation: shown only when the visitor may read what it leads to.
pub(crate) struct NavItem {
    pub href: &'static str,
    pub label: &'static str,
    pub current: bool,
}

/// The frame of every page: title, navigation, who is signed in, the CSRF token for its forms,
/// and a notice left by the action that led here.
pub(crate) struct Chrome {
    pub title: String,
    pub nav: Vec<NavItem>,
    pub who: String,
    pub method: &'static str,
    pub signed_in: bool,
    pub csrf_field: &'static str,
    pub csrf: String,
    pub notice: Option<&'static str>,
    /// Whether the visitor may read the event stream: the page then updates itself as events
    /// arrive, else it polls.
    pub live_events: bool,
}

/// The sections of the console: (section, href, label, the REST route that reading it needs).
const SECTIONS: [(&str, &str, &str, &str); 8] = [
    ("overview", "/ui/", "Overview", "/api/system"),
    ("servers", "/ui/servers", "MCP servers", "/api/mcp_servers"),
    ("tools", "/ui/tools", "Tools", "/api/mcp_servers/{id}/tools"),
    ("groups", "/ui/groups", "Groups", "/api/groups"),
    (
        "discovery",
        "/ui/discovery",
        "Discovery",
        "/api/discovery/pending",
    ),
    ("access", "/ui/access", "Access", "/api/auth/keys"),
    ("events", "/ui/events", "Events", "/api/ws/events"),
    ("config", "/ui/config", "Configuration", "/api/config/diff"),
];

/// The first section of the console `visitor` may read, for where to start.
pub(crate) fn first_section(visitor: &Visitor) -> Option<&'static str> {
    SECTIONS
        .iter()
        .find(|(_, _, _, route)| visitor.may("GET", route))
        .map(|(_, href, _, _)| *href)
}

impl Chrome {
    /// The frame for a page of `section`; `done` is the `?done=` of a redirect after an action.
    pub fn new(
        visitor: &Visitor,
        title: impl Into<String>,
        section: &str,
        done: Option<&str>,
    ) -> Self {
        let nav = SECTIONS
            .iter()
            .filter(|(_, _, _, route)| visitor.may("GET", route))
            .map(|(key, href, label, _)| NavItem {
                href,
                label,
                current: *key == section,
            })
            .collect();
        let session = &visitor.session;
        Self {
            title: title.into(),
            nav,
            who: session.identity.principal.to_string(),
            method: session.method.as_str(),
            signed_in: session.method != mcpgw_gateway::SignInMethod::AuthenticationOff,
            csrf_field: CSRF_FIELD,
            csrf: session.csrf_token.to_string(),
            notice: done.and_then(notice_of),
            live_events: visitor.may("GET", crate::EVENTS_WS_PATH),
        }
    }
}

/// The fixed notices an action can leave behind (never text from the request).
fn notice_of(done: &str) -> Option<&'static str> {
    Some(match done {
        "created" => "The server was created.",
        "updated" => "The server was updated.",
        "deleted" => "The server was deleted.",
        "started" => "The server was started.",
        "stopped" => "The server was stopped.",
        "restarted" => "The server was restarted.",
        "approved" => "The definition was approved and its server registered.",
        "rejected" => "The definition was rejected.",
        "revoked" => "The key was revoked.",
        "rebalanced" => "The group was rebalanced.",
        "signed-out" => "You are signed out.",
        _ => return None,
    })
}

/// Renders `template` as an HTML answer with `status`.
pub(crate) fn render(
    status: StatusCode,
    template: &impl Template,
) -> Result<HttpResponse, Problem> {
    let body = template.render().map_err(|error| {
        tracing::error!(%error, "a console page failed to render");
        Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            names::INTERNAL,
            "the page could not be rendered; see the gateway's log",
        )
    })?;
    let mut response = HttpResponse::build(status)
        .content_type("text/html; charset=utf-8")
        .body(body);
    response
        .headers_mut()
        .insert(header::VARY, HeaderValue::from_static("Cookie"));
    Ok(secure(response))
}

/// An error page: the status, the error's name as the API would give it, and a message that
/// says what to do. A request that needs a session is sent to sign in instead.
#[derive(Debug)]
pub(crate) struct Problem {
    status: StatusCode,
    name: String,
    message: String,
    /// Where to send the browser instead of showing the page.
    redirect: Option<String>,
    /// The methods a 405's page takes, for `Allow`.
    allow: Option<&'static str>,
}

#[derive(Template)]
#[template(path = "problem.html")]
struct ProblemPage<'a> {
    status: u16,
    reason: &'a str,
    name: &'a str,
    message: &'a str,
}

impl Problem {
    pub fn new(status: StatusCode, name: &str, message: impl Into<String>) -> Self {
        Self {
            status,
            name: name.to_owned(),
            message: message.into(),
            redirect: None,
            allow: None,
        }
    }

    pub fn status(&self) -> StatusCode {
        self.status
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    /// No session: a page is sent to the sign-in page (which comes back here afterwards), any
    /// other request gets 401.
    pub fn sign_in_needed(request: &HttpRequest) -> Self {
        let mut problem = Self::new(
            StatusCode::UNAUTHORIZED,
            names::AUTHENTICATION,
            "sign in to use the console",
        );
        let is_page = request.method() == actix_web::http::Method::GET
            && !request.headers().contains_key("hx-request");
        if is_page {
            let next = super::login::safe_next(Some(request.path())).unwrap_or("/ui/");
            problem.redirect = Some(format!("/ui/login?next={}", encode_component(next)));
        }
        problem
    }

    pub fn forbidden() -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            names::ACCESS_DENIED,
            "Access denied: your roles do not allow this",
        )
    }

    pub fn csrf() -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            names::ACCESS_DENIED,
            "the form was refused: it did not carry this session's CSRF token (reload the page \
             and try again)",
        )
    }

    pub fn not_found(message: &str) -> Self {
        Self::new(StatusCode::NOT_FOUND, names::NOT_FOUND, message)
    }

    pub fn bad_form(message: &str) -> Self {
        Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            names::VALIDATION,
            crate::error::bounded_for_message(message),
        )
    }

    /// 405, with `allow` (the methods the page takes) sent as `Allow`.
    pub fn method_not_allowed(allow: &'static str) -> Self {
        let mut problem = Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            names::METHOD_NOT_ALLOWED,
            format!("this page takes {allow} only"),
        );
        problem.allow = Some(allow);
        problem
    }

    pub fn console_off() -> Self {
        Self::not_found("the web console is turned off (console.enabled: false)")
    }

    pub fn into_error(self) -> actix_web::Error {
        actix_web::error::InternalError::from_response(self.message.clone(), self.error_response())
            .into()
    }
}

impl From<ApiError> for Problem {
    fn from(error: ApiError) -> Self {
        Self::new(error.status(), error.name(), error.message())
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.status.as_u16(),
            self.name,
            self.message
        )
    }
}

impl ResponseError for Problem {
    fn status_code(&self) -> StatusCode {
        self.status
    }

    fn error_response(&self) -> HttpResponse {
        if let Some(location) = &self.redirect {
            return super::see_other(location);
        }
        let page = ProblemPage {
            status: self.status.as_u16(),
            reason: self.status.canonical_reason().unwrap_or("Error"),
            name: &self.name,
            message: &self.message,
        };
        let body = page.render().unwrap_or_else(|_| self.message.clone());
        let mut response = HttpResponse::build(self.status)
            .content_type("text/html; charset=utf-8")
            .body(body);
        if let Some(allow) = self.allow {
            response
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static(allow));
        }
        secure(response)
    }
}

impl actix_web::Responder for Problem {
    type Body = actix_web::body::BoxBody;

    fn respond_to(self, _: &HttpRequest) -> HttpResponse {
        self.error_response()
    }
}

/// A form field's text, trimmed; `None` when it is absent or blank.
pub(crate) fn filled(field: &Option<String>) -> Option<String> {
    field
        .as_deref()
        .map(str::trim)
        .filter(|value| !value.is_empty())
        .map(str::to_owned)
}

/// The `page` of a paginated list: 1 when absent or blank; not a whole number from 1 is refused.
pub(crate) fn page_number(raw: Option<&str>) -> Result<usize, Problem> {
    match raw.filter(|raw| !raw.is_empty()) {
        None => Ok(1),
        Some(raw) => raw
            .parse::<usize>()
            .ok()
            .filter(|page| *page >= 1)
            .ok_or_else(|| {
                Problem::bad_form(&format!("page: must be a whole number from 1; got `{raw}`"))
            }),
    }
}

/// Percent-encodes a query component.
pub(crate) fn encode_component(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    for byte in raw.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~' | b'/') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}
