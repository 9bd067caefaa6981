//! The web console under `/ui/`: server-rendered pages for operators, with a small vendored
//! library (htmx) for the parts of a page that update themselves.
//!
//! # No back doors
//!
//! Every page and every action names the REST route it stands for, and is allowed or refused
//! by that route's permission (`Permission::for_rest_route`), through the same authorization
//! snapshot and policy engine as the API. Actions call the same code as the API's handlers, so
//! a definition the API refuses is refused here with the same message. Controls that the
//! session's roles do not allow are not shown; a forged form is refused anyway.
//!
//! # Sessions and forms
//!
//! With authentication on, every page but the sign-in page needs a session: a random token in
//! the `mcpgw_session` cookie (`HttpOnly`, `SameSite=Strict`, `Path=/`, and `Secure` when the
//! browser reached the gateway over TLS), held server side by [`ConsoleSessions`] with an idle
//! and an absolute lifetime. Every form carries the session's CSRF token, and a POST without it
//! is refused before anything happens; the gateway's `Origin` check refuses cross-site posts
//! too. The sign-in forms, before there is a session, carry a token that must match the
//! `mcpgw_login` cookie. With authentication off, the console opens without signing in, as the
//! API does.
//!
//! # Browser safety
//!
//! Pages are sent with a strict Content-Security-Policy (scripts, styles and connections from
//! the gateway only, no inline script, no framing), `X-Content-Type-Options: nosniff`, a
//! referrer for the gateway's own pages only, and `Cache-Control: no-store`. The `Host` check in front of every route refuses DNS
//! rebinding here as everywhere.

mod access;
mod assets;
mod catalogue;
mod configuration;
mod discovery;
mod events;
mod groups;
mod login;
mod openapi;
mod overview;
mod page;
mod servers;
mod utf8_form;

use std::sync::Arc;

use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpMessage as _, HttpRequest, HttpResponse, web};
use mcpgw_gateway::authz::{BuiltInRole, Decision, Identity, Permission, SignInProvider};
use mcpgw_gateway::{
    AuthService, ConsoleSession, ConsoleSessions, OsSecrets, SessionSettings, TokioClock,
};

use crate::oauth;
use crate::state::ApiState;

pub(crate) use page::{Chrome, Problem, render};

/// Where the console is mounted.
pub const CONSOLE_PATH: &str = "/ui";
/// The cookie that names a console session.
pub const SESSION_COOKIE: &str = "mcpgw_session";
/// The cookie that the sign-in forms' token must match.
const LOGIN_COOKIE: &str = "mcpgw_login";
/// The form field of the CSRF token.
pub(crate) const CSRF_FIELD: &str = "csrf_token";

/// The console's own state: its sessions and, when configured, single sign-on.
#[derive(Clone)]
pub struct Console {
    sessions: ConsoleSessions,
    sign_in: Option<Arc<dyn SignInProvider>>,
    redirect_uri: Option<String>,
    samples: Arc<overview::Samples>,
}

impl std::fmt::Debug for Console {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Console")
            .field("sessions", &self.sessions)
            .field(
                "sign_in",
                &self
                    .sign_in
                    .as_ref()
                    .map(|provider| provider.issuer().to_owned()),
            )
            .field("redirect_uri", &self.redirect_uri)
            .finish()
    }
}

impl Console {
    pub fn new(sessions: ConsoleSessions) -> Self {
        Self {
            sessions,
            sign_in: None,
            redirect_uri: None,
            samples: Arc::default(),
        }
    }

    /// Sessions with the default lifetimes, the operating system's randomness and tokio's
    /// clock.
    pub fn with_default_sessions() -> Self {
        Self::new(ConsoleSessions::new(
            SessionSettings::default(),
            Arc::new(TokioClock::default()),
            Arc::new(OsSecrets),
        ))
    }

    /// Single sign-on through `provider`. The provider sends browsers back to `redirect_uri`
    /// (it must be registered with the provider); `None`: the address each browser reached the
    /// gateway at, plus `/ui/login/sso/callback`.
    #[must_use]
    pub fn with_sign_in(
        mut self,
        provider: Arc<dyn SignInProvider>,
        redirect_uri: Option<String>,
    ) -> Self {
        self.sign_in = Some(provider);
        self.redirect_uri = redirect_uri;
        self
    }

    pub fn sessions(&self) -> &ConsoleSessions {
        &self.sessions
    }
}

/// Who is looking at a page: the session, and what its roles allow.
#[derive(Clone)]
pub(crate) struct Visitor {
    pub session: ConsoleSession,
    auth: Option<Arc<AuthService>>,
}

impl Visitor {
    pub fn identity(&self) -> &Identity {
        &self.session.identity
    }

    /// Whether the REST route `method path` is open to this visitor, for showing or hiding a
    /// control. The snapshot alone answers (the policy engine is asked when the action runs).
    pub fn may(&self, method: &str, path: &str) -> bool {
        self.auth.is_none()
            || Permission::for_rest_route(method, path).is_some_and(|needed| self.holds(needed))
    }

    /// Whether the roles let this visitor call tools at all (`tools/call`); which tools, the
    /// tool access policies decide, and the catalogue lists only those.
    pub fn may_call_tools(&self) -> bool {
        self.holds(Permission::ToolInvoke)
    }

    fn holds(&self, permission: Permission) -> bool {
        self.auth.as_ref().is_none_or(|auth| {
            auth.authorizer()
                .decide(self.identity(), permission, None)
                .is_allowed()
        })
    }

    /// Refuses the action unless the REST route `method path` is open to this visitor, asking
    /// everything the API asks (the snapshot, then the policy engine).
    pub async fn require(&self, method: &str, path: &str) -> Result<(), Problem> {
        let Some(auth) = &self.auth else {
            return Ok(());
        };
        let Some(permission) = Permission::for_rest_route(method, path) else {
            return Err(Problem::forbidden());
        };
        match auth.authorize(self.identity(), permission, None).await {
            Decision::Allow { .. } => Ok(()),
            Decision::Deny { reason } => {
                tracing::info!(
                    principal = %self.identity().principal,
                    %permission,
                    %reason,
                    "the console refused an action"
                );
                Err(Problem::forbidden())
            }
        }
    }
}

/// The console of `state`, or a 404 page when the console is turned off.
pub(crate) fn console_of(state: &ApiState) -> Result<&Console, Problem> {
    state.console().ok_or_else(Problem::console_off)
}

fn enabled_auth(state: &ApiState) -> Option<Arc<AuthService>> {
    state.auth().filter(|auth| auth.is_enabled()).cloned()
}

/// The value of cookie `name` in the request, if any.
pub(crate) fn cookie(request: &HttpRequest, name: &str) -> Option<String> {
    request
        .headers()
        .get_all(header::COOKIE)
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.trim().to_owned())
}

/// Who is asking, or the answer that sends them to sign in (a redirect for a page, a 401 page
/// for anything else).
pub(crate) async fn visitor(request: &HttpRequest, state: &ApiState) -> Result<Visitor, Problem> {
    if let Some(known) = request.extensions().get::<Visitor>() {
        return Ok(known.clone());
    }
    let console = console_of(state)?;
    let Some(auth) = enabled_auth(state) else {
        let identity = Identity::anonymous().with_key_role(BuiltInRole::Admin.role_name());
        return Ok(Visitor {
            session: ConsoleSession::authentication_off(identity, Default::default()),
            auth: None,
        });
    };
    let session = match cookie(request, SESSION_COOKIE) {
        Some(token) => console.sessions.get(&token),
        None => None,
    };
    let Some(session) = session else {
        return Err(Problem::sign_in_needed(request));
    };
    if !still_good(&auth, &session).await {
        // The key was revoked or expired, or the local user was disabled, deleted or given a
        // new password: the session ends with it.
        if let Some(token) = cookie(request, SESSION_COOKIE) {
            console.sessions.close(&token);
        }
        return Err(Problem::sign_in_needed(request));
    }
    Ok(Visitor {
        session,
        auth: Some(auth),
    })
}

/// Whether what opened `session` still stands: the API key is neither revoked nor expired;
/// the local user still exists, is not disabled, and kept the password it signed in with.
async fn still_good(auth: &AuthService, session: &ConsoleSession) -> bool {
    if let Some(key) = &session.key {
        return auth.key_standing(key).await.is_some();
    }
    if session.method == mcpgw_gateway::SignInMethod::Password {
        return match auth.user(session.identity.principal.name()).await {
            Ok(user) => !user.disabled && user.password_changed_at <= session.opened_at,
            Err(_) => false,
        };
    }
    true
}

/// The identity of the console session a request carries, for the event stream's WebSocket:
/// the console's pages open it with their session cookie (the `Origin` check keeps other sites
/// from doing the same).
pub(crate) async fn session_identity(request: &HttpRequest, state: &ApiState) -> Option<Identity> {
    let console = state.console()?;
    let auth = enabled_auth(state)?;
    let token = cookie(request, SESSION_COOKIE)?;
    let session = console.sessions.get(&token)?;
    still_good(&auth, &session)
        .await
        .then_some(session.identity)
}

/// A form that carries nothing but the CSRF token: the buttons that act on one thing.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct ButtonForm {
    pub csrf_token: Option<String>,
}

/// The visitor who posted a form, once the form's CSRF token checks out.
pub(crate) async fn poster(
    request: &HttpRequest,
    state: &ApiState,
    csrf_token: Option<&str>,
) -> Result<Visitor, Problem> {
    let visitor = visitor(request, state).await?;
    check_csrf(&visitor, csrf_token)?;
    Ok(visitor)
}

/// Checks a form's CSRF token against the session's.
pub(crate) fn check_csrf(visitor: &Visitor, presented: Option<&str>) -> Result<(), Problem> {
    match presented {
        Some(token) if visitor.session.csrf_matches(token) => Ok(()),
        _ => Err(Problem::csrf()),
    }
}

/// A `Set-Cookie` value: `HttpOnly`, `SameSite=Strict`, `Path=/`, `Secure` over TLS.
pub(crate) fn set_cookie(
    request: &HttpRequest,
    state: &ApiState,
    name: &str,
    value: &str,
    max_age_s: Option<u64>,
) -> HeaderValue {
    let mut cookie = format!("{name}={value}; Path=/; HttpOnly; SameSite=Strict");
    if oauth::is_https(request, state) {
        cookie.push_str("; Secure");
    }
    if let Some(max_age) = max_age_s {
        cookie.push_str(&format!("; Max-Age={max_age}"));
    }
    HeaderValue::from_str(&cookie).unwrap_or_else(|_| HeaderValue::from_static("invalid=1"))
}

/// A `303 See Other` to `location` (a path of the console).
pub(crate) fn see_other(location: &str) -> HttpResponse {
    let mut response = HttpResponse::new(StatusCode::SEE_OTHER);
    if let Ok(value) = HeaderValue::from_str(location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    secure(response)
}

/// Adds the headers every console answer carries.
pub(crate) fn secure(mut response: HttpResponse) -> HttpResponse {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
             connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    // Not `no-referrer`: under it a browser sends `Origin: null` with the console's own form
    // posts, which the Origin check must refuse. Other sites never see a console address.
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    if !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

/// Mounts the console's routes.
pub(crate) fn mount(cfg: &mut web::ServiceConfig, state: &web::Data<ApiState>) {
    if state.console().is_none() {
        cfg.service(
            web::resource([CONSOLE_PATH, "/ui/{tail:.*}"])
                .default_service(web::to(|| async { Problem::console_off() })),
        );
        return;
    }
    // The overview's charts cover the time before anyone opens it.
    overview::start_sampling(state);
    // Each resource answers a method it does not serve with 405 and the methods it does.
    // Every page but the sign-in pages and the public files needs a session, checked before
    // anything of the request is read.
    let resource = |path: &str, allow: &'static str| {
        let public = PUBLIC_PATHS.contains(&path);
        web::resource(path)
            // Inside the session check: nothing of a form is read before a session is known.
            .wrap(actix_web::middleware::from_fn(utf8_form::guard))
            .wrap(actix_web::middleware::Condition::new(
                !public,
                actix_web::middleware::from_fn(require_session),
            ))
            .app_data(state.clone())
            .app_data(
                web::FormConfig::default()
                    .limit(FORM_LIMIT_BYTES)
                    .error_handler(|error, _| form_problem(error).into_error()),
            )
            .app_data(web::QueryConfig::default().error_handler(|error, _| {
                Problem::bad_form(&format!("the query string is invalid: {error}")).into_error()
            }))
            .app_data(
                web::PathConfig::default()
                    .error_handler(|_, _| Problem::not_found("no such page").into_error()),
            )
            .default_service(web::to(move || async move {
                Problem::method_not_allowed(allow)
            }))
    };
    cfg.service(resource(CONSOLE_PATH, "GET").route(web::get().to(|| async { see_other("/ui/") })))
        .service(resource("/ui/", "GET").route(web::get().to(overview::page)))
        .service(resource("/ui/overview/live", "GET").route(web::get().to(overview::live)))
        .service(resource("/ui/assets/{name}", "GET").route(web::get().to(assets::asset)))
        .service(
            resource(openapi::CONSOLE_OPENAPI_PATH, "GET").route(web::get().to(openapi::document)),
        )
        .service(resource("/ui/login", "GET").route(web::get().to(login::page)))
        .service(resource("/ui/login/key", "POST").route(web::post().to(login::with_key)))
        .service(resource("/ui/login/password", "POST").route(web::post().to(login::with_password)))
        .service(resource("/ui/login/sso", "GET").route(web::get().to(login::begin_sso)))
        .service(resource("/ui/login/sso/callback", "GET").route(web::get().to(login::finish_sso)))
        .service(resource("/ui/logout", "POST").route(web::post().to(login::logout)))
        .service(
            resource("/ui/servers", "GET, POST")
                .route(web::get().to(servers::list))
                .route(web::post().to(servers::create)),
        )
        // Outside `/ui/servers/`, so that no server id is shadowed by them.
        .service(resource("/ui/servers-rows", "GET").route(web::get().to(servers::rows)))
        .service(resource("/ui/new-server", "GET").route(web::get().to(servers::new_form)))
        .service(
            resource("/ui/servers/{id}", "GET, POST")
                .route(web::get().to(servers::detail))
                .route(web::post().to(servers::update)),
        )
        .service(resource("/ui/servers/{id}/live", "GET").route(web::get().to(servers::live)))
        .service(resource("/ui/servers/{id}/edit", "GET").route(web::get().to(servers::edit_form)))
        .service(resource("/ui/servers/{id}/{action}", "POST").route(web::post().to(servers::act)))
        .service(resource("/ui/tools", "GET").route(web::get().to(catalogue::list)))
        .service(
            resource("/ui/tools/{name}", "GET, POST")
                .route(web::get().to(catalogue::tool))
                .route(web::post().to(catalogue::call)),
        )
        .service(resource("/ui/discovery", "GET").route(web::get().to(discovery::page)))
        .service(
            resource("/ui/discovery/{id}/{action}", "POST").route(web::post().to(discovery::act)),
        )
        .service(resource("/ui/groups", "GET").route(web::get().to(groups::page)))
        .service(
            resource("/ui/groups/{id}/rebalance", "POST").route(web::post().to(groups::rebalance)),
        )
        .service(resource("/ui/events", "GET").route(web::get().to(events::page)))
        .service(resource("/ui/config", "GET").route(web::get().to(configuration::page)))
        .service(resource("/ui/config/{action}", "POST").route(web::post().to(configuration::act)))
        .service(resource("/ui/access", "GET").route(web::get().to(access::page)))
        .service(resource("/ui/access/keys", "POST").route(web::post().to(access::create_key)))
        .service(
            resource("/ui/access/keys/{id}/revoke", "POST")
                .route(web::post().to(access::revoke_key)),
        )
        .service(resource("/ui/access/assignments", "POST").route(web::post().to(access::assign)))
        .service(
            resource("/ui/access/assignments/revoke", "POST")
                .route(web::post().to(access::unassign)),
        )
        .service(resource("/ui/access/roles", "POST").route(web::post().to(access::create_role)))
        .service(
            resource("/ui/access/roles/{name}", "POST").route(web::post().to(access::update_role)),
        )
        .service(
            resource("/ui/access/roles/{name}/delete", "POST")
                .route(web::post().to(access::delete_role)),
        )
        .service(resource("/ui/access/policies", "POST").route(web::post().to(access::set_policy)))
        .service(
            resource("/ui/access/policies/delete", "POST")
                .route(web::post().to(access::delete_policy)),
        )
        .service(
            web::resource("/ui/{tail:.*}")
                .default_service(web::to(|| async { Problem::not_found("no such page") })),
        );
}

/// The console's paths that need no session: the sign-in pages, the files every page loads,
/// the description of the routes, and the redirect of the bare `/ui`.
const PUBLIC_PATHS: [&str; 9] = [
    CONSOLE_PATH,
    "/ui/assets/{name}",
    openapi::CONSOLE_OPENAPI_PATH,
    "/ui/login",
    "/ui/login/key",
    "/ui/login/password",
    "/ui/login/sso",
    "/ui/login/sso/callback",
    "/ui/logout",
];

/// Answers a request without a session (a page with the redirect to sign in, anything else with
/// 401) before its query or form is read; with one, hands the visitor on to the handler.
async fn require_session(
    request: actix_web::dev::ServiceRequest,
    next: actix_web::middleware::Next<impl actix_web::body::MessageBody + 'static>,
) -> Result<
    actix_web::dev::ServiceResponse<
        actix_web::body::EitherBody<impl actix_web::body::MessageBody + 'static>,
    >,
    actix_web::Error,
> {
    use actix_web::ResponseError as _;
    let Some(state) = request.app_data::<web::Data<ApiState>>().cloned() else {
        return Ok(crate::guard::unmounted(request).map_into_right_body());
    };
    match visitor(request.request(), &state).await {
        Ok(known) => {
            request.extensions_mut().insert(known);
            next.call(request)
                .await
                .map(actix_web::dev::ServiceResponse::map_into_left_body)
        }
        Err(problem) => {
            let response = problem.error_response();
            Ok(request.into_response(response).map_into_right_body())
        }
    }
}

/// The largest form the console reads.
pub(crate) const FORM_LIMIT_BYTES: usize = 256 * 1024;

/// A form that could not be read, answered as the API answers the same fault in a body.
fn form_problem(error: actix_web::error::UrlencodedError) -> Problem {
    use actix_web::error::UrlencodedError;
    match error {
        UrlencodedError::Overflow { .. } => {
            Problem::from(crate::error::ApiError::payload_too_large(FORM_LIMIT_BYTES))
        }
        UrlencodedError::ContentType => Problem::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            crate::error::names::UNSUPPORTED_MEDIA_TYPE,
            "console forms are sent as application/x-www-form-urlencoded, as a browser sends \
             them",
        ),
        UrlencodedError::Payload(payload) if crate::limits::is_body_timeout(&payload) => {
            Problem::from(crate::error::ApiError::body_timeout(&payload))
        }
        UrlencodedError::Payload(payload) => Problem::new(
            StatusCode::BAD_REQUEST,
            crate::error::names::BAD_REQUEST,
            format!("the form could not be read ({payload}); send it again"),
        ),
        other => Problem::bad_form(&other.to_string()),
    }
}
