//! Signing in and out: an API key, a local user's password, or single sign-on.
//!
//! The sign-in forms exist before any session, so their CSRF protection is a token that must
//! match the `mcpgw_login` cookie the page set (a page on another site can neither read the
//! cookie nor send it: `SameSite=Strict`). Single sign-on starts with a link (the browser leaves
//! for the identity provider) and binds the sign-in to the browser with the `mcpgw_sso` cookie,
//! which is `SameSite=Lax` so that it comes back with the provider's redirect; a callback URL
//! opened in another browser signs nobody in. Every sign-in opens a fresh session (the old one,
//! if any, ends), and failures count towards the address lockout as the API's do.

use std::collections::HashMap;

use actix_web::http::StatusCode;
use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use mcpgw_gateway::authz::{Identity, KeyHash};
use mcpgw_gateway::{AuthService, AuthServiceError, Credentials, SignInMethod};
use serde::Deserialize;

use super::{
    Console, LOGIN_COOKIE, Problem, SESSION_COOKIE, console_of, cookie, enabled_auth, render,
    secure, see_other, set_cookie,
};
use crate::state::ApiState;

/// The cookie that binds a single sign-on to the browser that started it.
const SSO_COOKIE: &str = "mcpgw_sso";
/// How long the sign-in forms' token is good for.
const LOGIN_TOKEN_MAX_AGE_S: u64 = 600;

#[derive(Template)]
#[template(path = "login.html")]
struct LoginPage<'a> {
    next: &'a str,
    token: &'a str,
    api_keys: bool,
    passwords: bool,
    sso_issuer: Option<&'a str>,
    error: Option<&'a str>,
    notice: Option<&'a str>,
    user_name: &'a str,
}

#[derive(Debug, Deserialize)]
pub(crate) struct LoginQuery {
    next: Option<String>,
    done: Option<String>,
}

/// Where to go after signing in: a console path, never another site (`//evil`, `/\evil`) nor
/// the sign-in pages themselves.
pub(crate) fn safe_next(next: Option<&str>) -> Option<&str> {
    let next = next?;
    let plain = next
        .bytes()
        .all(|byte| byte.is_ascii_graphic() && byte != b'\\');
    (plain && next.starts_with("/ui/") && !next.starts_with("/ui/login") && !next.contains("//"))
        .then_some(next)
}

/// The sign-in page. With authentication off there is nothing to sign in to; with a session
/// already open it goes on to `next`.
pub(crate) async fn page(
    request: HttpRequest,
    state: web::Data<ApiState>,
    query: web::Query<LoginQuery>,
) -> Result<HttpResponse, Problem> {
    let console = console_of(&state)?;
    let next = safe_next(query.next.as_deref()).unwrap_or("/ui/");
    let Some(auth) = enabled_auth(&state) else {
        return Ok(see_other(next));
    };
    if super::visitor(&request, &state).await.is_ok() {
        return Ok(see_other(next));
    }
    let notice = (query.done.as_deref() == Some("signed-out")).then_some("You are signed out.");
    login_page(
        &request,
        &state,
        console,
        &auth,
        next,
        StatusCode::OK,
        None,
        notice,
        "",
    )
}

#[allow(clippy::too_many_arguments)]
fn login_page(
    request: &HttpRequest,
    state: &ApiState,
    console: &Console,
    auth: &AuthService,
    next: &str,
    status: StatusCode,
    error: Option<&str>,
    notice: Option<&str>,
    user_name: &str,
) -> Result<HttpResponse, Problem> {
    let token = console.sessions().random_token().map_err(|error| {
        Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            crate::error::names::SERVICE_UNAVAILABLE,
            error.to_string(),
        )
    })?;
    let page = LoginPage {
        next,
        token: &token,
        api_keys: auth.settings().api_key_enabled,
        passwords: auth.accepts_passwords(),
        sso_issuer: console.sign_in.as_ref().map(|provider| provider.issuer()),
        error,
        notice,
        user_name,
    };
    let mut response = render(status, &page)?;
    response.headers_mut().append(
        header::SET_COOKIE,
        set_cookie(
            request,
            state,
            LOGIN_COOKIE,
            &token,
            Some(LOGIN_TOKEN_MAX_AGE_S),
        ),
    );
    Ok(response)
}

/// The fields of the sign-in forms.
#[derive(Debug, Deserialize)]
pub(crate) struct LoginForm {
    login_token: Option<String>,
    next: Option<String>,
    api_key: Option<String>,
    user_name: Option<String>,
    password: Option<String>,
}

/// The sign-in form's token must match the cookie the sign-in page set.
fn check_login_token(request: &HttpRequest, form: &LoginForm) -> Result<(), Problem> {
    let cookie = cookie(request, LOGIN_COOKIE).unwrap_or_default();
    let presented = form.login_token.as_deref().unwrap_or_default();
    if cookie.is_empty() || cookie.len() != presented.len() || cookie != presented {
        return Err(Problem::new(
            StatusCode::FORBIDDEN,
            crate::error::names::ACCESS_DENIED,
            "the sign-in form was refused: it did not come from this gateway's sign-in page, or \
             the page is older than 10 minutes (reload it and try again)",
        ));
    }
    Ok(())
}

/// Signs in with an API key.
pub(crate) async fn with_key(
    request: HttpRequest,
    state: web::Data<ApiState>,
    form: web::Form<LoginForm>,
) -> Result<HttpResponse, Problem> {
    let console = console_of(&state)?;
    let Some(auth) = enabled_auth(&state) else {
        return Ok(see_other("/ui/"));
    };
    check_login_token(&request, &form)?;
    let next = safe_next(form.next.as_deref()).unwrap_or("/ui/");
    let raw = form
        .api_key
        .as_deref()
        .unwrap_or_default()
        .trim()
        .to_owned();
    let client = state.client_address(&request);
    let outcome = if raw.is_empty() {
        Err(None)
    } else {
        auth.authenticate(Credentials::api_key(raw.clone()), client)
            .await
            .map_err(Some)
    };
    match outcome {
        Ok(identity) => {
            let hash = KeyHash::of(&raw);
            let Some(expires_at) = auth.key_standing(&hash).await else {
                return refused(&request, &state, console, &auth, next, None, "");
            };
            open_session(
                &request,
                &state,
                console,
                identity,
                SignInMethod::ApiKey,
                Some((hash, expires_at)),
                next,
            )
        }
        Err(error) => refused(&request, &state, console, &auth, next, error.as_ref(), ""),
    }
}

/// Signs in with a local user's name and password.
pub(crate) async fn with_password(
    request: HttpRequest,
    state: web::Data<ApiState>,
    form: web::Form<LoginForm>,
) -> Result<HttpResponse, Problem> {
    let console = console_of(&state)?;
    let Some(auth) = enabled_auth(&state) else {
        return Ok(see_other("/ui/"));
    };
    check_login_token(&request, &form)?;
    let next = safe_next(form.next.as_deref()).unwrap_or("/ui/");
    let name = form.user_name.as_deref().unwrap_or_default().trim();
    let password = form.password.as_deref().unwrap_or_default();
    let client = state.client_address(&request);
    let outcome = if name.is_empty() || password.is_empty() {
        Err(None)
    } else {
        auth.authenticate_password(name, password, client)
            .await
            .map_err(Some)
    };
    match outcome {
        Ok(identity) => open_session(
            &request,
            &state,
            console,
            identity,
            SignInMethod::Password,
            None,
            next,
        ),
        Err(error) => refused(&request, &state, console, &auth, next, error.as_ref(), name),
    }
}

/// The sign-in page again, saying why (a lockout answers 429 with `Retry-After`).
fn refused(
    request: &HttpRequest,
    state: &ApiState,
    console: &Console,
    auth: &AuthService,
    next: &str,
    error: Option<&AuthServiceError>,
    user_name: &str,
) -> Result<HttpResponse, Problem> {
    let (status, message) = match error {
        None => (
            StatusCode::UNAUTHORIZED,
            "fill in the form: the credentials are missing".to_owned(),
        ),
        Some(AuthServiceError::LockedOut { retry_after_secs }) => (
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "too many failed sign-ins from this address; try again in {retry_after_secs} s"
            ),
        ),
        Some(error) if error.kind() == mcpgw_gateway::core::ErrorKind::Unauthenticated => {
            (StatusCode::UNAUTHORIZED, error.to_string())
        }
        Some(error) => {
            let api = crate::error::ApiError::from(error.clone());
            (api.status(), api.message().to_owned())
        }
    };
    let mut response = login_page(
        request,
        state,
        console,
        auth,
        next,
        status,
        Some(&message),
        None,
        user_name,
    )?;
    if let Some(retry) = error.and_then(AuthServiceError::retry_after_secs)
        && let Ok(value) = header::HeaderValue::from_str(&retry.to_string())
    {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    Ok(response)
}

/// Opens a session for `identity` and sends the browser on to `next`.
fn open_session(
    request: &HttpRequest,
    state: &ApiState,
    console: &Console,
    identity: Identity,
    method: SignInMethod,
    key: Option<(KeyHash, Option<mcpgw_gateway::core::Timestamp>)>,
    next: &str,
) -> Result<HttpResponse, Problem> {
    if let Some(old) = cookie(request, SESSION_COOKIE) {
        console.sessions().close(&old);
    }
    let opened = console
        .sessions()
        .open(identity, method, key)
        .map_err(|error| {
            Problem::new(
                StatusCode::SERVICE_UNAVAILABLE,
                crate::error::names::SERVICE_UNAVAILABLE,
                error.to_string(),
            )
        })?;
    tracing::info!(
        principal = %opened.session.identity.principal,
        method = method.as_str(),
        "a console session was opened"
    );
    let mut response = see_other(next);
    let headers = response.headers_mut();
    headers.append(
        header::SET_COOKIE,
        set_cookie(request, state, SESSION_COOKIE, &opened.token, None),
    );
    headers.append(
        header::SET_COOKIE,
        set_cookie(request, state, LOGIN_COOKIE, "", Some(0)),
    );
    Ok(response)
}

/// Starts single sign-on: the browser is sent to the identity provider.
pub(crate) async fn begin_sso(
    request: HttpRequest,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, Problem> {
    let console = console_of(&state)?;
    if enabled_auth(&state).is_none() {
        return Ok(see_other("/ui/"));
    }
    let Some(provider) = &console.sign_in else {
        return Err(Problem::not_found(
            "single sign-on is not configured (console.sso in the configuration file)",
        ));
    };
    let redirect_uri = console.redirect_uri.clone().unwrap_or_else(|| {
        format!(
            "{}/ui/login/sso/callback",
            crate::oauth::origin_of(&request, &state)
        )
    });
    let started = provider.begin(&redirect_uri).await.map_err(|error| {
        tracing::warn!(%error, "single sign-on could not start");
        Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            crate::error::names::SERVICE_UNAVAILABLE,
            format!("single sign-on cannot start: {error}"),
        )
    })?;
    let browser = console.sessions().random_token().map_err(|error| {
        Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            crate::error::names::SERVICE_UNAVAILABLE,
            error.to_string(),
        )
    })?;
    console
        .sessions()
        .remember_sign_in(started.pending, &browser);
    let mut response = HttpResponse::new(StatusCode::SEE_OTHER);
    if let Ok(location) = header::HeaderValue::from_str(&started.authorize_url) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    let mut binding = format!(
        "{SSO_COOKIE}={browser}; Path=/ui/login/sso; HttpOnly; SameSite=Lax; Max-Age={}",
        mcpgw_gateway::PENDING_SIGN_IN_LIFETIME.as_secs()
    );
    if crate::oauth::is_https(&request, &state) {
        binding.push_str("; Secure");
    }
    if let Ok(value) = header::HeaderValue::from_str(&binding) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    Ok(secure(response))
}

#[derive(Template)]
#[template(path = "continue.html")]
struct ContinuePage<'a> {
    next: &'a str,
}

/// Where the identity provider sends the browser back: the sign-in is finished, a session
/// opened, and the browser goes on to the console. The answer is a page that moves on by
/// itself rather than a redirect: the browser arrived from another site, and would not send the
/// new `SameSite=Strict` cookie along a redirect chain that began there.
pub(crate) async fn finish_sso(
    request: HttpRequest,
    state: web::Data<ApiState>,
    query: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, Problem> {
    let console = console_of(&state)?;
    let Some(auth) = enabled_auth(&state) else {
        return Ok(see_other("/ui/"));
    };
    let Some(provider) = &console.sign_in else {
        return Err(Problem::not_found(
            "single sign-on is not configured (console.sso in the configuration file)",
        ));
    };
    let refuse = |message: String| {
        login_page(
            &request,
            &state,
            console,
            &auth,
            "/ui/",
            StatusCode::UNAUTHORIZED,
            Some(&message),
            None,
            "",
        )
    };
    if let Some(error) = query.get("error") {
        let description = query
            .get("error_description")
            .map(|text| format!(": {}", crate::error::bounded_for_message(text)))
            .unwrap_or_default();
        return refuse(format!(
            "the identity provider refused the sign-in ({}){description}",
            crate::error::bounded_for_message(error)
        ));
    }
    let (Some(state_param), Some(code)) = (query.get("state"), query.get("code")) else {
        return Err(Problem::bad_form(
            "the identity provider's answer lacks `state` or `code`",
        ));
    };
    let browser = cookie(&request, SSO_COOKIE).unwrap_or_default();
    let Some(pending) = console.sessions().take_sign_in(state_param, &browser) else {
        return refuse(
            "this sign-in is unknown, was already used, expired, or began in another browser; \
             sign in again"
                .to_owned(),
        );
    };
    let claims = match provider.finish(&pending, state_param, code).await {
        Ok(claims) => claims,
        Err(error) => {
            tracing::warn!(%error, "single sign-on failed");
            return refuse(format!("single sign-on failed: {error}"));
        }
    };
    let identity = match Identity::from_claims(&claims) {
        Ok(identity) => identity,
        Err(error) => return refuse(format!("single sign-on failed: {error}")),
    };
    let mut response = open_session(
        &request,
        &state,
        console,
        identity,
        SignInMethod::SingleSignOn,
        None,
        "/ui/",
    )?;
    let cookies: Vec<_> = response
        .headers()
        .get_all(header::SET_COOKIE)
        .cloned()
        .collect();
    let mut page = render(StatusCode::OK, &ContinuePage { next: "/ui/" })?;
    for value in cookies {
        page.headers_mut().append(header::SET_COOKIE, value);
    }
    page.headers_mut().append(
        header::SET_COOKIE,
        header::HeaderValue::from_static(
            "mcpgw_sso=; Path=/ui/login/sso; HttpOnly; SameSite=Lax; Max-Age=0",
        ),
    );
    response = page;
    Ok(response)
}

/// Signs out: the session ends on the server, and the cookie is cleared.
pub(crate) async fn logout(
    request: HttpRequest,
    state: web::Data<ApiState>,
    form: web::Form<super::ButtonForm>,
) -> Result<HttpResponse, Problem> {
    let console = console_of(&state)?;
    let visitor = match super::visitor(&request, &state).await {
        Ok(visitor) => visitor,
        // No session (it expired, or it was never there): nothing to end.
        Err(_) => return Ok(see_other("/ui/login?done=signed-out")),
    };
    super::check_csrf(&visitor, form.csrf_token.as_deref())?;
    if let Some(token) = cookie(&request, SESSION_COOKIE) {
        console.sessions().close(&token);
    }
    let mut response = see_other("/ui/login?done=signed-out");
    response.headers_mut().append(
        header::SET_COOKIE,
        set_cookie(&request, &state, SESSION_COOKIE, "", Some(0)),
    );
    Ok(response)
}
