//! Making an API key straight in the store under a data directory: how the first admin key is
//! made, before any key exists to call the REST API with.

use crate::{StartError, StoreLocation};
use mcpgw_core::Clock as _;
use mcpgw_gateway::authz::{AuthError, IssuedApiKey, NewApiKey, RoleBook};
use mcpgw_gateway::{OsSecrets, TokioClock};

/// What a new key is for.
#[derive(Debug, Clone, Copy)]
pub struct KeyRequest<'a> {
    /// Who the key authenticates: `user:NAME`, `service:NAME` or `group:NAME`.
    pub principal: &'a str,
    /// A name for the key, such as the client that will use it.
    pub name: &'a str,
    /// A role the key itself carries.
    pub role: Option<&'a str>,
    /// Days until the key expires (1 to 3650); `None` never expires.
    pub expires_in_days: Option<i64>,
}

/// Writes a new key into the store at `location` (a gateway running on the same data
/// directory sees it within seconds; the replicas sharing a PostgreSQL store within one). The
/// outer error is the store's; the inner one says what is wrong with the request (an unknown
/// role, a bad principal, an expiry out of range). The raw key is in the answer and nowhere
/// else.
pub fn create_key(
    location: &StoreLocation,
    request: KeyRequest<'_>,
) -> Result<Result<IssuedApiKey, AuthError>, StartError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| StartError::new(format!("cannot start a runtime: {error}")))?;
    runtime.block_on(async {
        let (store, _) = location.open().await?;
        let custom_roles = store.custom_roles().await.map_err(|error| {
            StartError::new(format!("cannot read the roles from the store: {error}"))
        })?;
        let roles = RoleBook::new(custom_roles);
        let parsed = NewApiKey::parse(
            request.principal,
            request.name,
            request.role,
            request.expires_in_days,
            &roles,
        );
        let new_key = match parsed {
            Ok(new_key) => new_key,
            Err(error) => return Ok(Err(error)),
        };
        let issued = new_key
            .issue(&OsSecrets, TokioClock::default().wall())
            .map_err(|error| StartError::new(format!("cannot make a key: {error}")))?;
        store
            .insert_key(&issued.record)
            .await
            .map_err(|error| StartError::new(format!("cannot store the key: {error}")))?;
        Ok(Ok(issued))
    })
}

/// What was made, for the operator: the key's id, name, principal, role and expiry (never
/// the raw key).
pub fn describe(issued: &IssuedApiKey) -> String {
    let record = &issued.record;
    let role = record
        .role
        .as_ref()
        .map(|role| format!(" with role {role}"));
    let expiry = record.expires_at.map(|at| format!(", expiring {at}"));
    format!(
        "created key {} ({:?}) for {}{}{}; it is shown once, keep it now",
        record.id,
        record.name,
        record.principal,
        role.unwrap_or_default(),
        expiry.unwrap_or_else(|| ", never expiring".to_owned()),
    )
}
