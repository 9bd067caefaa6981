//! Local users: people who sign in with a name and a password that the gateway keeps itself,
//! for deployments without an identity provider.
//!
//! A local user named `alice` is the principal `user:alice`. Being a local user grants nothing:
//! its roles come from role assignments of that principal, as for every other caller (a bearer
//! token whose subject is `alice` is the same principal and holds the same roles).
//!
//! This module says what a valid user name and a valid new password are, what is kept of a
//! user ([`LocalUser`]: never the password, only its hash as a PHC string) and why a sign-in was
//! refused ([`PasswordRejection`]). Hashing and checking passwords is the application's work
//! (it is slow on purpose and must run away from the async executors), and users are kept
//! through the [`UserStore`](crate::UserStore) port.

use std::fmt;

use mcpgw_core::{Timestamp, bounded_for_message};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::AuthError;
use crate::principal::{ANONYMOUS_USER_NAME, Principal, PrincipalKind};

/// The longest user name, in characters (all of them ASCII, so also in bytes).
pub const USER_NAME_MAX_CHARS: usize = 64;
/// The shortest password a user may be given, in bytes (UTF-8).
pub const PASSWORD_MIN_BYTES: usize = 12;
/// The longest password a user may be given or sign in with, in bytes (UTF-8).
pub const PASSWORD_MAX_BYTES: usize = 1024;
/// The longest password hash (PHC string) a store may hand back. Real ones are under 200 bytes.
pub const PASSWORD_HASH_MAX_LEN: usize = 512;

/// The name of a local user: 1 to 64 of `A-Z a-z 0-9 . _ @ -`, not starting with `.` or `-`.
///
/// The characters are those that read the same everywhere a name is shown or typed (a shell, a
/// URL path, a log line) and that an e-mail address needs, so `alice.smith@example.com` is a
/// valid name. Names are case-sensitive, as principals are: `Alice` and `alice` are two users.
/// `anonymous` is refused, since `user:anonymous` is the principal of requests without
/// credentials.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UserName(String);

impl UserName {
    pub fn parse(raw: &str) -> Result<Self, AuthError> {
        let invalid = |problem: String| AuthError::InvalidField {
            field: "user name",
            problem,
        };
        let shown = bounded_for_message(raw);
        if raw.is_empty() {
            return Err(invalid("must not be empty".to_owned()));
        }
        if raw.chars().count() > USER_NAME_MAX_CHARS {
            return Err(invalid(format!(
                "`{shown}` is longer than {USER_NAME_MAX_CHARS} characters"
            )));
        }
        if let Some(bad) = raw.chars().find(|c| !is_name_character(*c)) {
            return Err(invalid(format!(
                "`{shown}` holds `{}`; a user name may hold only letters A-Z and a-z, digits and \
                 . _ @ -",
                bad.escape_default()
            )));
        }
        if raw.starts_with(['.', '-']) {
            return Err(invalid(format!(
                "`{shown}` starts with `{}`; a user name must not start with `.` or `-`",
                &raw[..1]
            )));
        }
        if raw == ANONYMOUS_USER_NAME {
            return Err(invalid(
                "`anonymous` is taken: user:anonymous is whoever calls without credentials"
                    .to_owned(),
            ));
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `user:<name>`, the principal the user signs in as.
    pub fn principal(&self) -> Principal {
        // Every valid user name is a valid principal name (short, no `*`, no whitespace, no
        // control character), so this cannot fail; the fallback is never reached.
        Principal::new(PrincipalKind::User, &self.0).unwrap_or_else(|_| Principal::anonymous())
    }
}

fn is_name_character(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '@' | '-')
}

impl fmt::Display for UserName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for UserName {
    type Err = AuthError;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        Self::parse(raw)
    }
}

impl Serialize for UserName {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for UserName {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(deserializer)?;
        Self::parse(&raw).map_err(serde::de::Error::custom)
    }
}

/// Checks a password that is about to be given to a user: at least 12 and at most 1024 bytes
/// of UTF-8, and nothing else.
///
/// Only the length is ruled on. What makes a password hard to guess is mostly its length, so a
/// long passphrase of plain words is a good password; rules on which kinds of characters it must
/// hold (a digit, a capital, a symbol) push people towards the same few predictable shapes
/// (`Password1!`) and make nothing harder to guess. Every character is allowed, spaces and
/// non-ASCII ones included, and nothing is trimmed. The upper bound keeps hostile input from
/// being hashed at any length.
pub fn check_new_password(password: &str) -> Result<(), AuthError> {
    let length = password.len();
    let problem = if length < PASSWORD_MIN_BYTES {
        format!(
            "is {length} bytes long and must be at least {PASSWORD_MIN_BYTES}; a longer \
             passphrase is the best protection, and any characters may be used"
        )
    } else if length > PASSWORD_MAX_BYTES {
        format!("is {length} bytes long, more than the {PASSWORD_MAX_BYTES} a password may have")
    } else {
        return Ok(());
    };
    Err(AuthError::InvalidField {
        field: "password",
        problem,
    })
}

/// A password hash as it is kept: a PHC string (`$argon2id$v=19$m=...,t=...,p=...$salt$hash`).
///
/// This crate does not hash or check passwords; it only makes sure that what is stored looks
/// like a PHC string (a `$`, then printable ASCII without spaces, at most
/// [`PASSWORD_HASH_MAX_LEN`] bytes). `Debug` shows the algorithm only: a hash is not a secret
/// the way a password is, but it is what a guesser works on, so it stays out of logs.
#[derive(Clone, PartialEq, Eq)]
pub struct PasswordHash(String);

impl PasswordHash {
    pub fn parse(raw: &str) -> Result<Self, AuthError> {
        let invalid = |problem: &str| AuthError::InvalidField {
            field: "password hash",
            problem: problem.to_owned(),
        };
        if !raw.starts_with('$') || raw.len() < 2 {
            return Err(invalid("is not a PHC string (`$algorithm$...`)"));
        }
        if raw.len() > PASSWORD_HASH_MAX_LEN {
            return Err(invalid("is longer than 512 bytes"));
        }
        if !raw.bytes().all(|byte| byte.is_ascii_graphic()) {
            return Err(invalid(
                "holds a character that is not printable ASCII, or a space",
            ));
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The algorithm's name, the PHC string's first field (`argon2id`).
    pub fn algorithm(&self) -> &str {
        self.0[1..].split('$').next().unwrap_or_default()
    }
}

impl fmt::Debug for PasswordHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PasswordHash(${}$...)", self.algorithm())
    }
}

/// A local user as it is kept. Stores round-trip every field exactly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalUser {
    pub name: UserName,
    pub password_hash: PasswordHash,
    pub created_at: Timestamp,
    /// When the password was last set (the creation time until it is changed).
    pub password_changed_at: Timestamp,
    /// A disabled user cannot sign in, whatever password it gives; it keeps its roles.
    pub disabled: bool,
}

impl LocalUser {
    /// A new, enabled user whose password was set `at`.
    pub fn new(name: UserName, password_hash: PasswordHash, at: Timestamp) -> Self {
        Self {
            name,
            password_hash,
            created_at: at,
            password_changed_at: at,
            disabled: false,
        }
    }

    /// `user:<name>`.
    pub fn principal(&self) -> Principal {
        self.name.principal()
    }
}

/// Why a sign-in with a user name and a password was refused. Clients always see
/// `Invalid user name or password`, whichever it is; this goes to logs and events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PasswordRejection {
    /// The name is not a valid user name, or the password is empty or longer than
    /// [`PASSWORD_MAX_BYTES`]; nothing was hashed.
    Malformed,
    /// No user has that name (a dummy hash was checked, so that this takes as long as a wrong
    /// password does).
    UnknownUser,
    WrongPassword,
    /// The password is right but the user is disabled.
    Disabled,
    /// The stored hash cannot be read or is not one the gateway checks: the user cannot sign in
    /// until its password is set again.
    UnusableHash,
    /// This gateway keeps no users (it has no user store).
    NoUsers,
}

impl fmt::Display for PasswordRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PasswordRejection::Malformed => "the user name or the password is malformed",
            PasswordRejection::UnknownUser => "no such user",
            PasswordRejection::WrongPassword => "the password is wrong",
            PasswordRejection::Disabled => "the user is disabled",
            PasswordRejection::UnusableHash => "the stored password hash cannot be checked",
            PasswordRejection::NoUsers => "this gateway keeps no local users",
        })
    }
}

#[cfg(test)]
mod tests {
    use mcpgw_core::ErrorKind;

    use super::*;

    #[test]
    fn user_names_of_the_allowed_characters_are_their_user_principal() {
        for raw in [
            "a",
            "alice",
            "Alice",
            "alice.smith@example.com",
            "ops_bot-2",
            "9lives",
            "_underscore",
            "@home",
            &"x".repeat(USER_NAME_MAX_CHARS),
        ] {
            let name = UserName::parse(raw).unwrap_or_else(|error| panic!("{raw}: {error}"));
            assert_eq!(name.as_str(), raw);
            assert_eq!(name.to_string(), raw);
            assert_eq!(name.principal().to_string(), format!("user:{raw}"));
            assert_eq!(name.principal().kind(), PrincipalKind::User);
        }
    }

    #[test]
    fn bad_user_names_are_refused_with_a_reason() {
        // Bad input: empty, too long, a space, a colon, a slash, non-ASCII, a control
        // character, a leading dot or dash, a wildcard, and the anonymous user's name.
        let too_long = "x".repeat(USER_NAME_MAX_CHARS + 1);
        let cases: &[(&str, &str)] = &[
            ("", "must not be empty"),
            (&too_long, "longer than 64 characters"),
            ("al ice", "holds ` `"),
            ("user:alice", "holds `:`"),
            ("a/b", "holds `/`"),
            ("zoë", "holds `\\u{eb}`"),
            ("al\nice", "holds `\\n`"),
            (".hidden", "must not start with `.` or `-`"),
            ("-rf", "must not start with `.` or `-`"),
            ("*", "holds `*`"),
            (
                "anonymous",
                "user:anonymous is whoever calls without credentials",
            ),
        ];
        for (raw, expected) in cases {
            let error = UserName::parse(raw).expect_err(raw);
            assert_eq!(error.kind(), ErrorKind::Invalid, "{raw:?}");
            let message = error.to_string();
            assert!(message.starts_with("user name: "), "{message}");
            assert!(message.contains(expected), "{raw:?}: {message}");
            assert!(!message.contains('\n'), "{message}");
            assert!(message.len() < 300, "{message}");
        }
        // `Anonymous` is another name: names are case-sensitive.
        assert!(UserName::parse("Anonymous").is_ok());
    }

    #[test]
    fn user_names_travel_as_strings_and_are_checked_on_the_way_in() {
        let name: UserName = serde_json::from_str("\"alice\"").unwrap();
        assert_eq!(serde_json::to_string(&name).unwrap(), "\"alice\"");
        // Bad input: a name with a space.
        let error = serde_json::from_str::<UserName>("\"al ice\"").unwrap_err();
        assert!(error.to_string().contains("user name"), "{error}");
    }

    #[test]
    fn new_passwords_are_judged_by_their_length_alone() {
        for good in [
            "twelve bytes",
            "correct horse battery staple",
            "aaaaaaaaaaaa",
            // Four three-byte characters are twelve bytes.
            "日本語だ",
            &"p".repeat(PASSWORD_MAX_BYTES),
        ] {
            assert_eq!(check_new_password(good), Ok(()), "{good}");
        }
        // Bad input: empty, one byte short, one byte too long, and short non-ASCII.
        let cases = [
            (String::new(), "is 0 bytes long and must be at least 12"),
            (
                "eleven byte".to_owned(),
                "is 11 bytes long and must be at least 12",
            ),
            (
                "p".repeat(PASSWORD_MAX_BYTES + 1),
                "is 1025 bytes long, more than the 1024 a password may have",
            ),
            ("日本語".to_owned(), "is 9 bytes long"),
        ];
        for (bad, expected) in cases {
            let error = check_new_password(&bad).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::Invalid);
            let message = error.to_string();
            assert!(message.starts_with("password: "), "{message}");
            assert!(message.contains(expected), "{message}");
            assert!(!message.contains(&bad) || bad.is_empty(), "{message}");
        }
    }

    #[test]
    fn password_hashes_must_look_like_phc_strings_and_stay_out_of_debug_output() {
        let raw = "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNo";
        let hash = PasswordHash::parse(raw).unwrap();
        assert_eq!(hash.as_str(), raw);
        assert_eq!(hash.algorithm(), "argon2id");
        let shown = format!("{hash:?}");
        assert_eq!(shown, "PasswordHash($argon2id$...)");
        // Bad input: empty, no leading `$`, a lone `$`, a space, a line break, too long.
        let too_long = format!("${}", "a".repeat(PASSWORD_HASH_MAX_LEN));
        for bad in [
            "",
            "argon2id$v=19",
            "$",
            "$argon2id $x",
            "$argon2id\n",
            &too_long,
        ] {
            let error = PasswordHash::parse(bad).expect_err(bad);
            assert!(
                error.to_string().starts_with("password hash: "),
                "{bad:?}: {error}"
            );
        }
    }

    #[test]
    fn a_new_user_is_enabled_and_its_password_was_set_when_it_was_made() {
        let at = Timestamp::from_unix_micros(1_800_000_000_000_000);
        let user = LocalUser::new(
            UserName::parse("alice").unwrap(),
            PasswordHash::parse("$argon2id$x").unwrap(),
            at,
        );
        assert!(!user.disabled);
        assert_eq!(user.created_at, at);
        assert_eq!(user.password_changed_at, at);
        assert_eq!(user.principal(), Principal::parse("user:alice").unwrap());
    }

    #[test]
    fn rejections_explain_themselves_for_the_log_and_clients_see_one_message() {
        let table = [
            (
                PasswordRejection::Malformed,
                "the user name or the password is malformed",
            ),
            (PasswordRejection::UnknownUser, "no such user"),
            (PasswordRejection::WrongPassword, "the password is wrong"),
            (PasswordRejection::Disabled, "the user is disabled"),
            (
                PasswordRejection::UnusableHash,
                "the stored password hash cannot be checked",
            ),
            (
                PasswordRejection::NoUsers,
                "this gateway keeps no local users",
            ),
        ];
        for (reason, text) in table {
            assert_eq!(reason.to_string(), text);
            let error = AuthError::InvalidPassword { reason };
            assert_eq!(error.to_string(), crate::INVALID_PASSWORD_MESSAGE);
            assert_eq!(error.kind(), ErrorKind::Unauthenticated);
        }
    }
}
