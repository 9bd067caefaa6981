//! `mcpgw auth create-key`: the way to make the first admin key, before any key exists to
//! call the REST API with.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use mcpgw_authz::{AuthStore, NewApiKey, RoleBook};
use mcpgw_core::Clock as _;
use mcpgw_gateway::{OsSecrets, TokioClock};
use mcpgw_store_sqlite::SqliteStore;

/// What `auth create-key` was asked for.
#[derive(Debug)]
pub struct CreateKey<'a> {
    pub principal: &'a str,
    pub name: &'a str,
    pub role: Option<&'a str>,
    pub expires_in_days: Option<i64>,
}

/// Writes a new key into the store under `data_dir` and prints the raw key alone on the first
/// line of stdout (the only time it is shown); what was made goes to stderr.
pub fn create_key(data_dir: &Path, request: &CreateKey<'_>) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(data_dir).with_context(|| {
        format!(
            "cannot create the data directory {}; pass a writable --data-dir",
            data_dir.display()
        )
    })?;
    let store =
        SqliteStore::open(&data_dir.join("mcpgw.db")).context("cannot open the gateway's store")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start a runtime")?;
    let issued = runtime.block_on(async {
        let custom_roles = store
            .custom_roles()
            .await
            .context("cannot read the roles from the store")?;
        let roles = RoleBook::new(custom_roles);
        let request = match NewApiKey::parse(
            request.principal,
            request.name,
            request.role,
            request.expires_in_days,
            &roles,
        ) {
            Ok(request) => request,
            Err(error) => return Ok(Err(error)),
        };
        let issued = request
            .issue(&OsSecrets, TokioClock::default().wall())
            .context("cannot make a key")?;
        store
            .insert_key(&issued.record)
            .await
            .context("cannot store the key")?;
        anyhow::Ok(Ok(issued))
    })?;
    let issued = match issued {
        Ok(issued) => issued,
        Err(error) => {
            eprintln!("mcpgw: {error}");
            return Ok(ExitCode::from(2));
        }
    };
    #[allow(clippy::print_stdout)]
    {
        println!("{}", issued.raw_key.expose());
    }
    let record = &issued.record;
    eprintln!(
        "created key {} ({:?}) for {}{}{}; it is shown once, keep it now",
        record.id,
        record.name,
        record.principal,
        record
            .role
            .as_ref()
            .map(|role| format!(" with role {role}"))
            .unwrap_or_default(),
        record
            .expires_at
            .map(|at| format!(", expiring {at}"))
            .unwrap_or_else(|| ", never expiring".to_owned()),
    );
    Ok(ExitCode::SUCCESS)
}
