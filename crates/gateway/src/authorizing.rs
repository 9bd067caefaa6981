//! The MCP front end as a caller is allowed to see it: the catalogue behind the caller's
//! permissions and the tool access policies.
//!
//! With authentication on, `tools/list` (and the prompt and resource lists) need `tool:list`,
//! and a tool is listed only when the policies on its path admit the caller; `tools/call` (and
//! `prompts/get`, `resources/read`) need `tool:invoke`, and a tool the caller may not use is
//! answered exactly like an unknown one, with an `AuthorizationDenied` event recording it.
//! A call of `{server}__{tool}` (or `{group}__{tool}`) that the catalogue does not list yet
//! (it may start the server to learn its tools) is authorized on the path the tool would have,
//! so a caller the policies do not admit never starts anything; a name with no such server or
//! group is unknown without further ado. With authentication off, every call passes straight
//! through.
//!
//! With a [`RateLimiter`], a call to a listed tool also takes a token from the caller's bucket
//! for that tool (the principal's, or the client address's when anonymous; one bucket per tool,
//! whether it is called by its bare or its prefixed name), and is answered
//! [`FrontendErrorKind::RateLimited`] with the wait when there is none. Names the catalogue
//! does not list never reach the limiter, so callers cannot grow it with made-up tool names. A
//! limiter whose buckets are in a store shared by the fleet is awaited; buckets in this process
//! answer without a suspension or an allocation.

use std::sync::Arc;

use async_trait::async_trait;
use mcpgw_authz::{
    AccessPath, Admission, Identity, Permission, Principal, RateLimitCaller, RateLimitDecision,
    RateLimitKey, RateLimitScope, RateLimiter, RoleName, ScopeLimit, TenantId,
};
use mcpgw_core::trace::{Span, SpanKind, keys};
use mcpgw_core::{
    CallContext, Caller, CallerScopes, FrontendError, FrontendErrorKind, McpFrontend, Tool,
    ToolCallOutcome,
};
use serde_json::{Map, Value};
use tokio::sync::watch;

use crate::auth::AuthService;
use crate::catalog::ToolCatalog;

/// [`McpFrontend`] over a [`ToolCatalog`], filtered and guarded by an [`AuthService`].
pub struct AuthorizedFrontend {
    catalog: Arc<ToolCatalog>,
    auth: Arc<AuthService>,
    limiter: Option<Arc<dyn RateLimiter>>,
}

impl std::fmt::Debug for AuthorizedFrontend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthorizedFrontend").finish_non_exhaustive()
    }
}

impl AuthorizedFrontend {
    pub fn new(catalog: Arc<ToolCatalog>, auth: Arc<AuthService>) -> Arc<Self> {
        Arc::new(Self {
            catalog,
            auth,
            limiter: None,
        })
    }

    /// Like [`AuthorizedFrontend::new`], and limits tool calls per caller and tool with
    /// `limiter`.
    pub fn with_rate_limiter(
        catalog: Arc<ToolCatalog>,
        auth: Arc<AuthService>,
        limiter: Arc<dyn RateLimiter>,
    ) -> Arc<Self> {
        Arc::new(Self {
            catalog,
            auth,
            limiter: Some(limiter),
        })
    }

    /// The limiter, when tool calls are limited.
    fn active_limiter(&self) -> Option<&Arc<dyn RateLimiter>> {
        self.limiter
            .as_ref()
            .filter(|limiter| limiter.policy().is_enabled())
    }

    /// Asks `limiter` for a token for `caller`'s call of the tool `name` (a name the catalogue
    /// lists, whose access path is `path`).
    fn ask_rate(
        limiter: &dyn RateLimiter,
        caller: &Caller,
        name: &str,
        path: &AccessPath,
    ) -> Admission {
        let who = RateLimitCaller::of(caller.principal.as_deref(), caller.address);
        // The path starts with the tool's own address, `{owner}__{tool}`: the same for a tool
        // called by its bare name and by its prefixed one.
        let tool = path
            .addresses()
            .first()
            .map_or(name, |address| address.target_id());
        limiter.admit(&RateLimitKey {
            scope: RateLimitScope::ToolCall,
            caller: &who,
            tool: Some(tool),
        })
    }

    /// The call of the tool `name` goes on when `decision` allowed it.
    fn admit_rate(decision: RateLimitDecision, name: &str) -> Result<(), FrontendError> {
        if decision.allowed {
            return Ok(());
        }
        metrics::counter!(
            crate::metrics::RATE_LIMIT_HITS_TOTAL,
            "scope" => RateLimitScope::ToolCall.as_str()
        )
        .increment(1);
        Err(FrontendError::new(
            FrontendErrorKind::RateLimited {
                retry_after_ms: decision.retry_after_millis(),
            },
            format!("rate limit exceeded for tool `{name}`"),
        ))
    }

    /// Whether `caller` may get prompts and read, follow and complete resources: the rule of
    /// `tool:invoke`, when authorization is enforced.
    async fn may_use_prompts_and_resources(&self, caller: &Caller) -> bool {
        !self.enforced()
            || self
                .may(identity_of(caller).as_ref(), Permission::ToolInvoke)
                .await
    }

    fn enforced(&self) -> bool {
        self.auth.is_enabled()
    }

    /// May the caller list tools, prompts and resources at all? Decided on the current
    /// snapshot only: listing never waits on an external policy engine.
    fn may_list(&self, identity: Option<&Identity>) -> bool {
        identity.is_some_and(|identity| {
            self.auth
                .authorizer()
                .decide(identity, Permission::ToolList, None)
                .is_allowed()
        })
    }

    /// May the caller invoke the tool at `path`?
    async fn may_invoke(&self, identity: Option<&Identity>, path: &AccessPath) -> bool {
        let Some(identity) = identity else {
            return false;
        };
        self.auth
            .authorize(identity, Permission::ToolInvoke, Some(path))
            .await
            .is_allowed()
    }

    async fn may(&self, identity: Option<&Identity>, permission: Permission) -> bool {
        match identity {
            Some(identity) => self
                .auth
                .authorize(identity, permission, None)
                .await
                .is_allowed(),
            None => false,
        }
    }
}

/// The authorization identity of a front-end caller; `None` when the caller carries no
/// principal that parses (such a caller may do nothing while authentication is on).
pub fn identity_of(caller: &Caller) -> Option<Identity> {
    let principal = Principal::parse(caller.principal.as_deref()?).ok()?;
    let mut identity = Identity::new(principal);
    identity.groups = caller
        .groups
        .iter()
        .filter_map(|group| Principal::parse(group).ok())
        .collect();
    identity.tenant = caller
        .tenant
        .as_deref()
        .and_then(|tenant| TenantId::parse(tenant).ok());
    identity.key_role = caller
        .key_role
        .as_deref()
        .and_then(|role| RoleName::parse(role).ok());
    identity.scope_limit = caller
        .token_scopes
        .as_ref()
        .map(|carried| ScopeLimit::from_carried(carried.scopes.clone(), &carried.covers));
    Some(identity)
}

/// The front-end caller of an authenticated identity.
pub fn caller_of(identity: &Identity) -> Caller {
    Caller {
        principal: Some(identity.principal.to_string()),
        groups: identity.groups.iter().map(ToString::to_string).collect(),
        tenant: identity.tenant.as_ref().map(ToString::to_string),
        key_role: identity.key_role.as_ref().map(ToString::to_string),
        address: None,
        token_scopes: identity.scope_limit.as_ref().map(|limit| {
            Arc::new(CallerScopes {
                scopes: limit.scopes().to_vec(),
                covers: limit.covers_names(),
            })
        }),
        // The identity does not hold the token; the HTTP adapter adds it.
        subject_token: None,
    }
}

impl AuthorizedFrontend {
    /// A tool call after its span began: the caller's access and rate checks, then the route.
    async fn authorized_call(
        &self,
        caller: &Caller,
        name: &str,
        arguments: Option<Map<String, Value>>,
        ctx: CallContext,
    ) -> Result<ToolCallOutcome, FrontendError> {
        let limiter = self.active_limiter();
        if self.enforced() || limiter.is_some() {
            // One lookup of the tool's path serves both checks.
            let path = self.catalog.access_path(name);
            if self.enforced() {
                let mut decision =
                    Span::start_local("authorize", SpanKind::Internal, ctx.trace.as_ref());
                // A name the catalogue does not list is authorized on the path its tool would
                // have, before the catalogue may start a server to learn it.
                let unlisted;
                let checked = match &path {
                    Some(path) => Some(path),
                    None => {
                        unlisted = self.catalog.unlisted_access_path(name);
                        unlisted.as_ref()
                    }
                };
                // Boxed: the authorization's future is large, and would otherwise make every
                // call's future as large, enforced or not.
                let admitted = match checked {
                    Some(checked) => {
                        Box::pin(self.may_invoke(identity_of(caller).as_ref(), checked)).await
                    }
                    None => false,
                };
                if decision.is_recording() {
                    decision.set_attribute(keys::GEN_AI_TOOL_NAME, name.to_owned());
                    decision.set_attribute(
                        keys::AUTHZ_DECISION,
                        if admitted { "allow" } else { "deny" },
                    );
                }
                decision.end();
                if !admitted {
                    return Err(FrontendError::unknown("tool", name));
                }
            }
            if let (Some(limiter), Some(path)) = (limiter, &path) {
                // Buckets in this process answer at once; a shared store's answer is awaited.
                let decision = match Self::ask_rate(limiter.as_ref(), caller, name, path) {
                    Admission::Now(decision) => decision,
                    Admission::Later(pending) => pending.await,
                };
                Self::admit_rate(decision, name)?;
            }
        }
        self.catalog.call_tool(caller, name, arguments, ctx).await
    }
}

#[async_trait]
impl McpFrontend for AuthorizedFrontend {
    fn tools(&self, caller: &Caller) -> Arc<Vec<Tool>> {
        if !self.enforced() {
            return self.catalog.tools(caller);
        }
        let identity = identity_of(caller);
        match identity {
            Some(identity) if self.may_list(Some(&identity)) => {
                // One snapshot of the rules for the whole list.
                let authorizer = self.auth.authorizer();
                self.catalog
                    .tools_admitted(|path| authorizer.admits(&identity, path).is_ok())
            }
            _ => Arc::new(Vec::new()),
        }
    }

    async fn call_tool(
        &self,
        caller: &Caller,
        name: &str,
        arguments: Option<Map<String, Value>>,
        mut ctx: CallContext,
    ) -> Result<ToolCallOutcome, FrontendError> {
        // The MCP method's span, under the caller's context (its `_meta`, else its HTTP
        // request): it covers the authorization, the route and the upstream request.
        let mut span = Span::start_local("tools/call", SpanKind::Server, ctx.trace.as_ref());
        if let Some(context) = span.context() {
            ctx.trace = Some(context.clone());
        }
        if span.is_recording() {
            span.update_name(|| format!("tools/call {name}"));
            span.set_attribute(keys::MCP_METHOD_NAME, "tools/call");
            span.set_attribute(keys::GEN_AI_OPERATION_NAME, "execute_tool");
            span.set_attribute(keys::GEN_AI_TOOL_NAME, name.to_owned());
            if let Some(principal) = &caller.principal {
                span.set_attribute(keys::PRINCIPAL, principal.clone());
            }
        }
        let result = self.authorized_call(caller, name, arguments, ctx).await;
        if span.is_recording() {
            if let Some((key, owner)) = self.catalog.owner_attribute(name) {
                span.set_attribute(key, owner);
            }
            match &result {
                Ok(outcome) if outcome.is_error => {
                    span.set_error("tool_error", "the tool answered an error");
                }
                Ok(_) => {}
                Err(error) => {
                    if let FrontendErrorKind::Upstream { code } = error.kind {
                        span.set_attribute(keys::RPC_RESPONSE_STATUS_CODE, code.to_string());
                    }
                    // On `tools/call` an unknown name is an unknown tool.
                    let error_type = match error.kind {
                        FrontendErrorKind::UnknownName => "unknown_tool",
                        _ => error.kind.as_str(),
                    };
                    span.set_error(error_type, &error.message);
                }
            }
        }
        result
    }

    fn changes(&self) -> watch::Receiver<u64> {
        self.catalog.changes()
    }

    fn list_changes(&self) -> Option<watch::Receiver<mcpgw_core::ListChanges>> {
        self.catalog.list_changes()
    }

    fn offers_tasks(&self) -> bool {
        self.catalog.offers_tasks()
    }

    async fn settle(&self) {
        self.catalog.settle().await;
    }

    async fn prompts(&self, caller: &Caller) -> Vec<Value> {
        if self.enforced() && !self.may_list(identity_of(caller).as_ref()) {
            return Vec::new();
        }
        self.catalog.prompts(caller).await
    }

    async fn get_prompt(
        &self,
        caller: &Caller,
        name: &str,
        arguments: Option<Map<String, Value>>,
        ctx: CallContext,
    ) -> Result<Value, FrontendError> {
        if !self.may_use_prompts_and_resources(caller).await {
            return Err(FrontendError::unknown("prompt", name));
        }
        self.catalog.get_prompt(caller, name, arguments, ctx).await
    }

    async fn task_request(
        &self,
        caller: &Caller,
        method: &str,
        task_id: &str,
        params: Value,
    ) -> Result<Value, FrontendError> {
        // Only the caller that created a task holds its id (the protocol adapter binds the id
        // to the caller), and the call that created it passed the tool's policies.
        self.catalog
            .task_request(caller, method, task_id, params)
            .await
    }

    async fn resources(&self, caller: &Caller) -> Vec<Value> {
        if self.enforced() && !self.may_list(identity_of(caller).as_ref()) {
            return Vec::new();
        }
        self.catalog.resources(caller).await
    }

    async fn resource_templates(&self, caller: &Caller) -> Vec<Value> {
        if self.enforced() && !self.may_list(identity_of(caller).as_ref()) {
            return Vec::new();
        }
        self.catalog.resource_templates(caller).await
    }

    async fn read_resource(
        &self,
        caller: &Caller,
        uri: &str,
        ctx: CallContext,
    ) -> Result<Value, FrontendError> {
        if !self.may_use_prompts_and_resources(caller).await {
            return Err(FrontendError::unknown("resource", uri));
        }
        self.catalog.read_resource(caller, uri, ctx).await
    }

    async fn complete(&self, caller: &Caller, params: Value) -> Result<Value, FrontendError> {
        // Completing a prompt's or template's argument is part of using it: the same rule as
        // getting the prompt or reading the resource.
        if !self.may_use_prompts_and_resources(caller).await {
            let name = params
                .pointer("/ref/name")
                .or_else(|| params.pointer("/ref/uri"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            return Err(FrontendError::unknown("completion reference", &name));
        }
        self.catalog.complete(caller, params).await
    }

    async fn set_logging_level(&self, caller: &Caller, level: &str) {
        // Only a caller who may see the catalogue changes how its servers log.
        if self.enforced() && !self.may_list(identity_of(caller).as_ref()) {
            return;
        }
        self.catalog.set_logging_level(caller, level).await;
    }

    async fn subscribe_resource(
        &self,
        caller: &Caller,
        uri: &str,
    ) -> Result<mcpgw_core::ResourceSubscription, FrontendError> {
        // Following a resource's changes is reading it: the same rule as `resources/read`.
        if !self.may_use_prompts_and_resources(caller).await {
            return Err(FrontendError::unknown("resource", uri));
        }
        self.catalog.subscribe_resource(caller, uri).await
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use mcpgw_authz::{Admission, RateLimitDecision, RateLimitKey, RateLimitPolicy, RateLimiter};
    use mcpgw_config::ToolNames;
    use mcpgw_core::{
        CallContext, Caller, FrontendErrorKind, ManagerSettings, McpFrontend, ServerId,
        ServerManager, ServerSpec, Tool,
    };
    use mcpgw_testkit::clock::FakeClock;
    use mcpgw_testkit::fakes::{FakeLauncher, RecordingEventSink, TokioSpawner};
    use serde_json::json;

    use super::AuthorizedFrontend;
    use crate::auth::{AuthService, AuthSettings};
    use crate::catalog::ToolCatalog;
    use crate::runtime::OsSecrets;

    /// Answers the decisions it is given, in order, each after suspending once as a round trip
    /// to a shared store does; records the bucket of every request.
    struct StoreLimiter {
        decisions: Mutex<VecDeque<RateLimitDecision>>,
        buckets: Mutex<Vec<String>>,
    }

    impl RateLimiter for StoreLimiter {
        fn policy(&self) -> RateLimitPolicy {
            RateLimitPolicy {
                requests_per_second: 1.0,
                burst: 2,
            }
        }

        fn check(&self, _key: &RateLimitKey<'_>) -> RateLimitDecision {
            panic!("tool calls must ask through admit, which a store's limiter overrides");
        }

        fn admit(&self, key: &RateLimitKey<'_>) -> Admission {
            let mut bucket = String::new();
            key.write_bucket_key(&mut bucket);
            self.buckets.lock().unwrap().push(bucket);
            let decision = self
                .decisions
                .lock()
                .unwrap()
                .pop_front()
                .expect("a decision left for this call");
            Admission::Later(Box::pin(async move {
                tokio::task::yield_now().await;
                decision
            }))
        }

        fn evict_idle(&self) -> usize {
            0
        }

        fn tracked(&self) -> usize {
            0
        }
    }

    fn decision(allowed: bool, retry_after: Duration) -> RateLimitDecision {
        RateLimitDecision {
            allowed,
            limit: 2,
            remaining: 0,
            retry_after,
        }
    }

    /// A front end over one server `math` with the tool `echo` (which the fake server echoes), limited by a store that answers
    /// `decisions`; auth is off.
    async fn limited(
        decisions: Vec<RateLimitDecision>,
    ) -> (
        Arc<AuthorizedFrontend>,
        Arc<StoreLimiter>,
        Arc<FakeLauncher>,
    ) {
        let launcher = Arc::new(FakeLauncher::new());
        let manager = ServerManager::new(
            launcher.clone(),
            Arc::new(FakeClock::new()),
            Arc::new(RecordingEventSink::default()),
            Arc::new(TokioSpawner),
            None,
            ManagerSettings::default(),
        );
        manager
            .register(ServerSpec {
                predefined_tools: vec![Tool::new("echo")],
                ..ServerSpec::subprocess(ServerId::parse("math").unwrap(), vec!["x".into()])
            })
            .await
            .unwrap();
        let catalog = ToolCatalog::new(manager, ToolNames::prefixed());
        let auth = Arc::new(AuthService::new(
            AuthSettings::default(),
            Arc::new(mcpgw_testkit::auth_store::InMemoryAuthStore::new()),
            Arc::new(RecordingEventSink::default()),
            Arc::new(FakeClock::new()),
            Arc::new(OsSecrets),
        ));
        let limiter = Arc::new(StoreLimiter {
            decisions: Mutex::new(decisions.into()),
            buckets: Mutex::new(Vec::new()),
        });
        let frontend = AuthorizedFrontend::with_rate_limiter(catalog, auth, limiter.clone());
        (frontend, limiter, launcher)
    }

    async fn call(
        frontend: &AuthorizedFrontend,
        name: &str,
    ) -> Result<mcpgw_core::ToolCallOutcome, mcpgw_core::FrontendError> {
        frontend
            .call_tool(
                &Caller::principal("user:alice"),
                name,
                json!({"text": "hi"}).as_object().cloned(),
                CallContext::default(),
            )
            .await
    }

    #[tokio::test]
    async fn a_call_waits_for_the_stores_decision_and_goes_on_when_allowed() {
        let (frontend, limiter, launcher) = limited(vec![decision(true, Duration::ZERO)]).await;
        let outcome = call(&frontend, "math__echo").await.expect("allowed");
        assert_eq!(outcome.result["content"][0]["text"], "hi");
        assert_eq!(launcher.launches(), 1);
        assert_eq!(
            *limiter.buckets.lock().unwrap(),
            ["t\u{1f}p:user:alice\u{1f}math__echo"]
        );
    }

    #[tokio::test]
    async fn a_call_the_store_refuses_is_rate_limited_with_its_wait_and_starts_nothing() {
        let (frontend, _limiter, launcher) =
            limited(vec![decision(false, Duration::from_millis(1500))]).await;
        let error = call(&frontend, "math__echo").await.expect_err("refused");
        assert_eq!(
            error.kind,
            FrontendErrorKind::RateLimited {
                retry_after_ms: 1500
            }
        );
        assert_eq!(error.message, "rate limit exceeded for tool `math__echo`");
        assert_eq!(launcher.launches(), 0);
    }

    #[tokio::test]
    async fn a_name_the_catalogue_does_not_list_never_reaches_the_store() {
        // Bad input: a made-up tool name, which must not make a bucket in the shared store.
        let (frontend, limiter, _launcher) = limited(Vec::new()).await;
        let error = call(&frontend, "math__nope").await.expect_err("unknown");
        assert_eq!(error.kind, FrontendErrorKind::UnknownName);
        assert!(limiter.buckets.lock().unwrap().is_empty());
    }
}
