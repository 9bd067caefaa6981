//! Making a local user, or setting one's password, straight in the store under a data
//! directory: how the first user of the web console is made, before anyone can sign in.
//!
//! The work is [`AuthService`]'s own (the same name and password rules, the same argon2id
//! hashing, the same role checks as the console's), run over the SQLite store of the data
//! directory. A gateway running on the same directory sees the user at its next sign-in.

use std::io::BufRead;

use std::sync::Arc;

use crate::StoreLocation;
use mcpgw_core::NullEventSink;
use mcpgw_gateway::authz::{AuthError, PASSWORD_MAX_BYTES, RoleName};
use mcpgw_gateway::{
    AuthService, AuthServiceError, AuthSettings, OsSecrets, TokioClock, UserSummary,
};

use crate::StartError;

/// Why a request for a user was refused: exit code 2 for the command line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UserRequestError {
    /// A bad name or password, a taken name, no such user.
    #[error(transparent)]
    Refused(#[from] AuthServiceError),
    #[error("role `{role}` does not exist; the roles are: {}", known.join(", "))]
    UnknownRole { role: String, known: Vec<String> },
    #[error("the password on stdin is not UTF-8 text")]
    PasswordNotText,
}

/// What [`create_user`] made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatedUser {
    pub user: UserSummary,
    /// The roles now assigned to `user:<name>` in the global scope, in the order asked for.
    pub roles: Vec<RoleName>,
}

/// Reads a password from `input`: one line, without its line break (`\n` or `\r\n`); nothing
/// else of it is trimmed. Empty input is an empty password, which the password rule refuses.
/// At most a few bytes more than the longest password are read, so endless input is refused
/// rather than read.
pub fn read_password(input: impl BufRead) -> Result<String, ReadPasswordError> {
    let limit = PASSWORD_MAX_BYTES + 3;
    let mut line = Vec::new();
    input
        .take(u64::try_from(limit).unwrap_or(u64::MAX))
        .read_until(b'\n', &mut line)
        .map_err(ReadPasswordError::Io)?;
    if line.len() >= limit && !line.ends_with(b"\n") {
        return Err(ReadPasswordError::Refused(UserRequestError::Refused(
            AuthError::InvalidField {
                field: "password",
                problem: format!(
                    "is longer than the {PASSWORD_MAX_BYTES} bytes a password may have"
                ),
            }
            .into(),
        )));
    }
    if line.ends_with(b"\n") {
        line.pop();
        if line.ends_with(b"\r") {
            line.pop();
        }
    }
    String::from_utf8(line)
        .map_err(|_| ReadPasswordError::Refused(UserRequestError::PasswordNotText))
}

/// Why no password was read: the input failed (exit 1), or what it held is refused (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum ReadPasswordError {
    #[error("cannot read the password from stdin: {0}")]
    Io(std::io::Error),
    #[error(transparent)]
    Refused(UserRequestError),
}

/// Makes the local user `name` with `password` in the store at `location` and assigns it
/// each of `roles` in the global scope. Everything is checked before anything is written: a bad
/// name or password, an unknown role or a taken name leaves the store as it was. The outer
/// error is the store's or the runtime's; the inner one says what is wrong with the request.
pub fn create_user(
    location: &StoreLocation,
    name: &str,
    password: &str,
    roles: &[String],
) -> Result<Result<CreatedUser, UserRequestError>, StartError> {
    with_auth_service(location, |auth| async move {
        let known = auth.list_all_roles();
        let mut assigned = Vec::with_capacity(roles.len());
        for role in roles {
            match known.iter().find(|known| known.name().as_str() == role) {
                Some(found) if assigned.contains(found.name()) => {}
                Some(found) => assigned.push(found.name().clone()),
                None => {
                    return Ok(Err(UserRequestError::UnknownRole {
                        role: mcpgw_core::bounded_for_message(role),
                        known: known.iter().map(|role| role.name().to_string()).collect(),
                    }));
                }
            }
        }
        let user = match auth.create_user(name, password).await {
            Ok(user) => user,
            Err(error) => return refused_or_failed(error),
        };
        let principal = user.principal.to_string();
        for role in &assigned {
            auth.assign_role(&principal, role.as_str(), None)
                .await
                .map_err(|error| {
                    StartError::new(format!(
                        "made user {} but cannot assign it role {role}: {error}",
                        user.name
                    ))
                })?;
        }
        Ok(Ok(CreatedUser {
            user,
            roles: assigned,
        }))
    })
}

/// Gives the existing local user `name` the new `password` in the store at `location`.
pub fn set_password(
    location: &StoreLocation,
    name: &str,
    password: &str,
) -> Result<Result<UserSummary, UserRequestError>, StartError> {
    with_auth_service(location, |auth| async move {
        if let Err(error) = auth.set_password(name, password).await {
            return refused_or_failed(error);
        }
        match auth.user(name).await {
            Ok(user) => Ok(Ok(user)),
            Err(error) => refused_or_failed(error),
        }
    })
}

/// What was made, for the operator (never the password nor its hash).
pub fn describe(created: &CreatedUser) -> String {
    let roles = if created.roles.is_empty() {
        format!(
            "no role yet (assign roles to {} to let it do anything)",
            created.user.principal
        )
    } else {
        let names: Vec<String> = created.roles.iter().map(ToString::to_string).collect();
        format!("the global role(s) {}", names.join(", "))
    };
    format!(
        "created user {} (signs in as {}) with {roles}",
        created.user.name, created.user.principal
    )
}

/// A refusal of the request (a client error) for the caller; anything else (the store failed,
/// hashing failed) ends the command.
fn refused_or_failed<T>(
    error: AuthServiceError,
) -> Result<Result<T, UserRequestError>, StartError> {
    match error.kind() {
        mcpgw_core::ErrorKind::Invalid
        | mcpgw_core::ErrorKind::Conflict
        | mcpgw_core::ErrorKind::NotFound => Ok(Err(error.into())),
        _ => Err(StartError::new(error.to_string())),
    }
}

/// Opens the store at `location`, builds an [`AuthService`] over it with the local users in the
/// same store, and runs `work` on a runtime of its own.
fn with_auth_service<T, W, F>(location: &StoreLocation, work: W) -> Result<T, StartError>
where
    W: FnOnce(Arc<AuthService>) -> F,
    F: Future<Output = Result<T, StartError>>,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| StartError::new(format!("cannot start a runtime: {error}")))?;
    runtime.block_on(async {
        let (store, users) = location.open().await?;
        let auth = AuthService::new(
            AuthSettings::default(),
            store,
            Arc::new(NullEventSink),
            Arc::new(TokioClock::default()),
            Arc::new(OsSecrets),
        )
        .with_user_store(users);
        auth.load()
            .await
            .map_err(|error| StartError::new(format!("cannot read the roles: {error}")))?;
        work(Arc::new(auth)).await
    })
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;
    use std::path::Path;

    use super::*;

    fn read(input: &[u8]) -> Result<String, String> {
        read_password(Cursor::new(input.to_vec())).map_err(|error| error.to_string())
    }

    #[test]
    fn a_password_is_one_line_without_its_line_break_and_nothing_else_trimmed() {
        assert_eq!(read(b"correct horse\n").unwrap(), "correct horse");
        assert_eq!(read(b"correct horse\r\n").unwrap(), "correct horse");
        assert_eq!(read(b"correct horse").unwrap(), "correct horse");
        assert_eq!(read(b"  spaced out \t\n").unwrap(), "  spaced out \t");
        assert_eq!(read(b"first\nsecond\n").unwrap(), "first");
        // Empty input is an empty password, for the password rule to refuse.
        assert_eq!(read(b"").unwrap(), "");
        assert_eq!(read(b"\n").unwrap(), "");
    }

    #[test]
    fn endless_or_binary_input_is_refused() {
        // Bad input: far more than a password without a line break, and bytes that are not
        // UTF-8.
        let endless = vec![b'p'; 1_000_000];
        let message = read(&endless).unwrap_err();
        assert_eq!(
            message,
            "password: is longer than the 1024 bytes a password may have"
        );
        let longest = vec![b'p'; PASSWORD_MAX_BYTES];
        assert_eq!(
            read(&[longest.as_slice(), b"\n"].concat()).unwrap().len(),
            1024
        );
        assert_eq!(
            read(b"caf\xe9 au lait\n").unwrap_err(),
            "the password on stdin is not UTF-8 text"
        );
    }

    /// The bundled gateway keeps its users in the store of its data directory: a user made
    /// here signs in to a gateway built on the same directory and holds the role given to it.
    /// With the auth store replaced there are no local users, unless a user store is given.
    #[test]
    fn a_user_made_here_signs_in_to_a_gateway_built_on_the_same_directory() {
        let data = tempfile::tempdir().unwrap();
        let password = "correct horse battery";
        let created = create_user(
            &data.path().into(),
            "alice",
            password,
            &["viewer".to_owned()],
        )
        .unwrap()
        .unwrap();
        assert_eq!(created.roles, [RoleName::parse("viewer").unwrap()]);
        assert_eq!(
            describe(&created),
            "created user alice (signs in as user:alice) with the global role(s) viewer"
        );
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        let no_environment: mcpgw_gateway::Environment = Arc::new(|_: &str| None);
        let build = |dir: &Path| {
            crate::GatewayBuilder::new(Default::default())
                .data_dir(dir)
                .environment(no_environment.clone())
        };
        runtime.block_on(async {
            let running = build(data.path()).build().await.unwrap();
            let auth = running.auth();
            assert!(auth.accepts_passwords());
            let identity = auth
                .authenticate_password("alice", password, None)
                .await
                .unwrap();
            assert_eq!(identity.principal.to_string(), "user:alice");
            let roles: Vec<String> = auth
                .roles_of("user:alice")
                .unwrap()
                .iter()
                .map(|held| held.role.to_string())
                .collect();
            assert_eq!(roles, ["viewer"]);
            running.shutdown().await;

            let elsewhere = tempfile::tempdir().unwrap();
            let replaced = build(elsewhere.path())
                .with_auth_store(Arc::new(mcpgw_testkit::auth_store::InMemoryAuthStore::new()))
                .build()
                .await
                .unwrap();
            assert!(!replaced.auth().accepts_passwords());
            replaced.shutdown().await;
            let given = build(elsewhere.path())
                .with_auth_store(Arc::new(mcpgw_testkit::auth_store::InMemoryAuthStore::new()))
                .with_user_store(Arc::new(mcpgw_testkit::user_store::InMemoryUserStore::new()))
                .build()
                .await
                .unwrap();
            assert!(given.auth().accepts_passwords());
            given.shutdown().await;
        });
    }

    #[test]
    fn an_unknown_role_names_the_roles_there_are() {
        let error = UserRequestError::UnknownRole {
            role: "superuser".to_owned(),
            known: vec!["admin".to_owned(), "viewer".to_owned()],
        };
        assert_eq!(
            error.to_string(),
            "role `superuser` does not exist; the roles are: admin, viewer"
        );
    }
}
