//! [`UserStore`] on the `users` table of migration 6: local users, one row per name.
//!
//! Unlike API keys, users are not held in memory: a user is read when someone signs in, which
//! happens once per console session and costs an argon2id hash anyway, never on the path of an
//! ordinary request. A user written by another process on the same file (`mcpgw auth
//! create-user` while a gateway runs) is therefore seen by the next read.

use async_trait::async_trait;
use mcpgw_authz::{LocalUser, PasswordHash, UserName, UserStore};
use mcpgw_core::Timestamp;
use rusqlite::{OptionalExtension, Row, params};

use crate::error::StoreError;
use crate::store::SqliteStore;

const USERS_TABLE: &str = "users";

const USER_COLUMNS: &str = "name, password_hash, created_at, password_changed_at, disabled";

/// A `users` row as SQLite returns it, before the domain parses it.
struct UserRow {
    name: String,
    password_hash: String,
    created_at: i64,
    password_changed_at: i64,
    disabled: bool,
}

impl UserRow {
    /// Reads the columns of [`USER_COLUMNS`], in that order.
    fn read(row: &Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            name: row.get(0)?,
            password_hash: row.get(1)?,
            created_at: row.get(2)?,
            password_changed_at: row.get(3)?,
            disabled: row.get(4)?,
        })
    }

    fn decode(self) -> Result<LocalUser, StoreError> {
        let corrupt = |reason: String| StoreError::CorruptRecord {
            table: USERS_TABLE,
            key: mcpgw_core::bounded_for_message(&self.name),
            reason,
        };
        let name = UserName::parse(&self.name).map_err(|error| corrupt(error.to_string()))?;
        // The reason never repeats the column's value: it is a password's hash.
        let password_hash = PasswordHash::parse(&self.password_hash)
            .map_err(|_| corrupt("`password_hash` is not a PHC string".to_owned()))?;
        Ok(LocalUser {
            name,
            password_hash,
            created_at: Timestamp::from_unix_micros(self.created_at),
            password_changed_at: Timestamp::from_unix_micros(self.password_changed_at),
            disabled: self.disabled,
        })
    }
}

impl SqliteStore {
    async fn read_user(&self, name: &UserName) -> Result<Option<LocalUser>, StoreError> {
        let name = name.as_str().to_owned();
        self.run_blocking(move |connection| {
            connection
                .query_row(
                    &format!("SELECT {USER_COLUMNS} FROM users WHERE name = ?1"),
                    [name],
                    UserRow::read,
                )
                .optional()
                .map_err(StoreError::sqlite("read the user"))?
                .map(UserRow::decode)
                .transpose()
        })
        .await
    }

    async fn list_users(&self) -> Result<Vec<LocalUser>, StoreError> {
        self.run_blocking(|connection| {
            // The default (binary) collation orders names by their bytes, as the port asks.
            let mut statement = connection
                .prepare(&format!("SELECT {USER_COLUMNS} FROM users ORDER BY name"))
                .map_err(StoreError::sqlite("list the users"))?;
            let rows = statement
                .query_map([], UserRow::read)
                .map_err(StoreError::sqlite("list the users"))?;
            let mut users = Vec::new();
            for row in rows {
                users.push(
                    row.map_err(StoreError::sqlite("read a user row"))?
                        .decode()?,
                );
            }
            Ok(users)
        })
        .await
    }

    /// Runs one write statement on the users table and answers whether it changed a row.
    async fn write_user(
        &self,
        operation: &'static str,
        sql: &'static str,
        values: Vec<rusqlite::types::Value>,
    ) -> Result<bool, StoreError> {
        self.run_blocking(move |connection| {
            let changed = connection
                .execute(sql, rusqlite::params_from_iter(values))
                .map_err(StoreError::sqlite(operation))?;
            Ok(changed > 0)
        })
        .await
    }
}

#[async_trait]
impl UserStore for SqliteStore {
    async fn insert_user(&self, user: &LocalUser) -> Result<bool, mcpgw_authz::StoreError> {
        let user = user.clone();
        Ok(self
            .run_blocking(move |connection| {
                let changed = connection
                    .execute(
                        &format!(
                            "INSERT INTO users ({USER_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5)
                             ON CONFLICT (name) DO NOTHING"
                        ),
                        params![
                            user.name.as_str(),
                            user.password_hash.as_str(),
                            user.created_at.unix_micros(),
                            user.password_changed_at.unix_micros(),
                            user.disabled,
                        ],
                    )
                    .map_err(StoreError::sqlite("store the user"))?;
                Ok(changed > 0)
            })
            .await?)
    }

    async fn user(&self, name: &UserName) -> Result<Option<LocalUser>, mcpgw_authz::StoreError> {
        Ok(self.read_user(name).await?)
    }

    async fn users(&self) -> Result<Vec<LocalUser>, mcpgw_authz::StoreError> {
        Ok(self.list_users().await?)
    }

    async fn set_password_hash(
        &self,
        name: &UserName,
        hash: &PasswordHash,
        at: Timestamp,
    ) -> Result<bool, mcpgw_authz::StoreError> {
        Ok(self
            .write_user(
                "set the user's password",
                "UPDATE users SET password_hash = ?2, password_changed_at = ?3 WHERE name = ?1",
                vec![
                    name.as_str().to_owned().into(),
                    hash.as_str().to_owned().into(),
                    at.unix_micros().into(),
                ],
            )
            .await?)
    }

    async fn set_disabled(
        &self,
        name: &UserName,
        disabled: bool,
    ) -> Result<bool, mcpgw_authz::StoreError> {
        Ok(self
            .write_user(
                "disable or enable the user",
                "UPDATE users SET disabled = ?2 WHERE name = ?1",
                vec![name.as_str().to_owned().into(), i64::from(disabled).into()],
            )
            .await?)
    }

    async fn delete_user(&self, name: &UserName) -> Result<bool, mcpgw_authz::StoreError> {
        Ok(self
            .write_user(
                "delete the user",
                "DELETE FROM users WHERE name = ?1",
                vec![name.as_str().to_owned().into()],
            )
            .await?)
    }
}

#[cfg(test)]
mod tests {
    use mcpgw_testkit::auth_store::SAMPLE_TIME;
    use mcpgw_testkit::repository_suite::RepositoryWithGuard;
    use mcpgw_testkit::user_store::{sample_password_hash, sample_user, sample_user_name};

    use super::*;

    fn open_temporary_store() -> RepositoryWithGuard<SqliteStore, tempfile::TempDir> {
        let directory = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&directory.path().join("users.sqlite3")).unwrap();
        RepositoryWithGuard::new(store, directory)
    }

    mod contract {
        mcpgw_testkit::user_store_contract_suite!(super::open_temporary_store());
    }

    /// Bad input: a duplicate name, and a password change, a disabling and a deletion of a user
    /// that does not exist. Each is an `Ok(false)` that writes nothing, never an error.
    #[tokio::test]
    async fn a_duplicate_name_and_an_unknown_user_change_nothing() {
        let store = open_temporary_store();
        let alice = sample_user("alice", SAMPLE_TIME);
        assert_eq!(store.insert_user(&alice).await, Ok(true));
        let second = LocalUser {
            password_hash: sample_password_hash("second"),
            ..alice.clone()
        };
        assert_eq!(store.insert_user(&second).await, Ok(false));
        let ghost = sample_user_name("ghost");
        let hash = sample_password_hash("ghost");
        assert_eq!(
            store.set_password_hash(&ghost, &hash, SAMPLE_TIME).await,
            Ok(false)
        );
        assert_eq!(store.set_disabled(&ghost, true).await, Ok(false));
        assert_eq!(store.delete_user(&ghost).await, Ok(false));
        assert_eq!(store.users().await.unwrap(), [alice]);
    }

    /// Users written through one handle, or by another process on the same file, are seen by
    /// the next read of another handle, and survive closing and reopening the file.
    #[tokio::test]
    async fn users_are_read_from_the_file_every_time() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("mcpgw.db");
        let gateway = SqliteStore::open(&path).unwrap();
        assert_eq!(gateway.user(&sample_user_name("alice")).await, Ok(None));
        let alice = sample_user("alice", SAMPLE_TIME);
        {
            let command_line = SqliteStore::open(&path).unwrap();
            assert_eq!(command_line.insert_user(&alice).await, Ok(true));
        }
        assert_eq!(gateway.user(&alice.name).await, Ok(Some(alice.clone())));
        drop(gateway);
        let reopened = SqliteStore::open(&path).unwrap();
        assert_eq!(reopened.users().await, Ok(vec![alice]));
    }

    /// Rows no use case writes (edited by hand, damaged) are reported with their name and never
    /// with their hash.
    #[test]
    fn rows_that_do_not_decode_are_reported_without_their_hash() {
        let valid = || UserRow {
            name: "alice".to_owned(),
            password_hash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA".to_owned(),
            created_at: 1,
            password_changed_at: 2,
            disabled: false,
        };
        assert!(valid().decode().is_ok());
        let error = UserRow {
            name: "al ice".to_owned(),
            ..valid()
        }
        .decode()
        .unwrap_err();
        assert!(
            matches!(&error, StoreError::CorruptRecord { table: "users", key, .. } if key == "al ice"),
            "{error:?}"
        );
        let secret_looking = "not a phc string but a hash 0123456789abcdef";
        let error = UserRow {
            password_hash: secret_looking.to_owned(),
            ..valid()
        }
        .decode()
        .unwrap_err();
        assert!(
            matches!(&error, StoreError::CorruptRecord { table: "users", key, .. } if key == "alice"),
            "{error:?}"
        );
        assert!(!error.to_string().contains("0123456789abcdef"), "{error}");
    }

    /// A row damaged behind the store's back fails the read with a clear error, not a panic.
    #[tokio::test]
    async fn a_damaged_row_fails_the_read_cleanly() {
        let store = open_temporary_store();
        let connection = store.repository.connection_for_tests();
        connection
            .lock()
            .unwrap()
            .execute(
                "INSERT INTO users (name, password_hash, created_at, password_changed_at, disabled)
                 VALUES ('bob', 'plain text', 0, 0, 0)",
                [],
            )
            .unwrap();
        let error = store.user(&sample_user_name("bob")).await.unwrap_err();
        assert!(error.0.contains("users record `bob`"), "{error}");
        assert!(!error.0.contains("plain text"), "{error}");
        assert!(store.users().await.is_err());
    }
}
