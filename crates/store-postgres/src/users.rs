//! [`UserStore`] on the `users` table: local users, one row per name.
//!
//! Unlike API keys, users are not held in memory: a user is read when someone signs in, which
//! happens once per console session and costs an argon2id hash anyway, never on the path of an
//! ordinary request. A user written by another replica is therefore seen by the next read.
//! Every write that changed a row tells the other replicas ([`Topic::Users`]).

use async_trait::async_trait;
use mcpgw_authz::{LocalUser, PasswordHash, UserName, UserStore};
use mcpgw_core::Timestamp;

use crate::changes::Topic;
use crate::error::StoreError;
use crate::sql::column;
use crate::store::PostgresStore;

const USERS_TABLE: &str = "users";

/// A `users` row as PostgreSQL returns it, before the domain parses it.
struct UserRow {
    name: String,
    password_hash: String,
    created_at: i64,
    password_changed_at: i64,
    disabled: bool,
}

impl UserRow {
    /// Reads `name, password_hash, created_at, password_changed_at, disabled`, in that order.
    fn read(row: &tokio_postgres::Row) -> Result<Self, StoreError> {
        let operation = "read a user row";
        Ok(Self {
            name: column(row, 0, operation)?,
            password_hash: column(row, 1, operation)?,
            created_at: column(row, 2, operation)?,
            password_changed_at: column(row, 3, operation)?,
            disabled: column(row, 4, operation)?,
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

impl PostgresStore {
    async fn read_user(&self, name: &UserName) -> Result<Option<LocalUser>, StoreError> {
        let rows = self
            .read_rows(
                "read the user",
                "SELECT name, password_hash, created_at, password_changed_at, disabled
                 FROM users WHERE name = $1",
                &[&name.as_str()],
            )
            .await?;
        rows.first()
            .map(|row| UserRow::read(row)?.decode())
            .transpose()
    }

    async fn list_users(&self) -> Result<Vec<LocalUser>, StoreError> {
        // The column's "C" collation orders names by their bytes, as the port asks.
        let rows = self
            .read_rows(
                "list the users",
                "SELECT name, password_hash, created_at, password_changed_at, disabled
                 FROM users ORDER BY name",
                &[],
            )
            .await?;
        rows.iter()
            .map(|row| UserRow::read(row)?.decode())
            .collect()
    }
}

#[async_trait]
impl UserStore for PostgresStore {
    async fn insert_user(&self, user: &LocalUser) -> Result<bool, mcpgw_authz::StoreError> {
        let changed = self
            .write_notifying(
                Topic::Users,
                "store the user",
                "INSERT INTO users (name, password_hash, created_at, password_changed_at, disabled)
                 VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (name) DO NOTHING",
                &[
                    &user.name.as_str(),
                    &user.password_hash.as_str(),
                    &user.created_at.unix_micros(),
                    &user.password_changed_at.unix_micros(),
                    &user.disabled,
                ],
            )
            .await?;
        Ok(changed > 0)
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
        let changed = self
            .write_notifying(
                Topic::Users,
                "set the user's password",
                "UPDATE users SET password_hash = $2, password_changed_at = $3 WHERE name = $1",
                &[&name.as_str(), &hash.as_str(), &at.unix_micros()],
            )
            .await?;
        Ok(changed > 0)
    }

    async fn set_disabled(
        &self,
        name: &UserName,
        disabled: bool,
    ) -> Result<bool, mcpgw_authz::StoreError> {
        let changed = self
            .write_notifying(
                Topic::Users,
                "disable or enable the user",
                "UPDATE users SET disabled = $2 WHERE name = $1",
                &[&name.as_str(), &disabled],
            )
            .await?;
        Ok(changed > 0)
    }

    async fn delete_user(&self, name: &UserName) -> Result<bool, mcpgw_authz::StoreError> {
        let changed = self
            .write_notifying(
                Topic::Users,
                "delete the user",
                "DELETE FROM users WHERE name = $1",
                &[&name.as_str()],
            )
            .await?;
        Ok(changed > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid() -> UserRow {
        UserRow {
            name: "alice".to_owned(),
            password_hash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA".to_owned(),
            created_at: 1,
            password_changed_at: 2,
            disabled: true,
        }
    }

    #[test]
    fn a_valid_row_decodes_every_field() {
        let user = valid().decode().unwrap();
        assert_eq!(user.name.as_str(), "alice");
        assert_eq!(user.created_at, Timestamp::from_unix_micros(1));
        assert_eq!(user.password_changed_at, Timestamp::from_unix_micros(2));
        assert!(user.disabled);
    }

    /// Bad input: a name that is not a user name, and a hash that is not a PHC string. Both are
    /// reported with the name and never with the hash.
    #[test]
    fn rows_that_do_not_decode_are_reported_without_their_hash() {
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
}
