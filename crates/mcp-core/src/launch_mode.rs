//! Launch modes beyond the built-in ones, registered by whoever assembles the gateway.
//!
//! A mode is a name and a check of the `settings` a definition in that mode carries. The
//! configuration file, the REST API and the stores accept a definition in a registered mode
//! (`{mode: in_process, settings: {...}}`) exactly as they accept a built-in one, and the
//! launcher registered under the same name starts it.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::spec::LaunchSpec;

/// The longest name a registered mode may have.
pub const MAX_MODE_NAME_LENGTH: usize = 32;

/// Why a mode name cannot be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchModeError {
    #[error(
        "`{0}` is not a valid mode name: use 1 to {MAX_MODE_NAME_LENGTH} lowercase letters, \
         digits, `_` or `-`, starting with a letter"
    )]
    InvalidName(String),
    #[error("`{0}` is a built-in mode; a registered mode needs a name of its own")]
    BuiltIn(String),
}

/// Refuses names that are not valid for a registered mode.
pub(crate) fn check_custom_mode_name(name: &str) -> Result<(), LaunchModeError> {
    if LaunchSpec::BUILT_IN_MODES.contains(&name) || name == "group" {
        return Err(LaunchModeError::BuiltIn(name.to_owned()));
    }
    let well_formed = name.len() <= MAX_MODE_NAME_LENGTH
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if well_formed {
        Ok(())
    } else {
        Err(LaunchModeError::InvalidName(crate::bounded_for_message(
            name,
        )))
    }
}

/// What is wrong with a definition's `settings`, as the mode's check says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingsError {
    /// The key under `settings` the problem is at (`greeting`, `limits.memory`), when there is
    /// one: configuration errors then point at its line.
    pub key: Option<String>,
    pub message: String,
}

impl SettingsError {
    /// A problem with the settings as a whole.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            key: None,
            message: message.into(),
        }
    }

    /// A problem with the value under `key` (dotted for nested keys).
    pub fn at(key: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            key: Some(key.into()),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for SettingsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.key {
            Some(key) => write!(f, "settings.{key}: {}", self.message),
            None => write!(f, "settings: {}", self.message),
        }
    }
}

type SettingsCheck = dyn Fn(&Map<String, Value>) -> Result<(), SettingsError> + Send + Sync;

/// A registered launch mode: its name, and the check every definition's `settings` must pass
/// before the definition is accepted (from the file, over REST, from discovery).
///
/// ```
/// use mcpgw_core::{LaunchMode, SettingsError};
///
/// let mode = LaunchMode::new("in_process", |settings| match settings.get("greeting") {
///     Some(value) if value.is_string() => Ok(()),
///     Some(_) => Err(SettingsError::at("greeting", "must be a string")),
///     None => Err(SettingsError::new("missing key `greeting`")),
/// })
/// .unwrap();
/// assert_eq!(mode.name(), "in_process");
/// assert!(mode.check(&serde_json::Map::new()).is_err());
/// assert!(LaunchMode::new("docker", |_| Ok(())).is_err());
/// ```
#[derive(Clone)]
pub struct LaunchMode {
    name: String,
    check: Arc<SettingsCheck>,
}

impl LaunchMode {
    /// A mode named `name` (1 to 32 lowercase letters, digits, `_` or `-`, starting with a
    /// letter, and none of `subprocess`, `docker`, `remote` or `group`).
    pub fn new(
        name: impl Into<String>,
        check: impl Fn(&Map<String, Value>) -> Result<(), SettingsError> + Send + Sync + 'static,
    ) -> Result<Self, LaunchModeError> {
        let name = name.into();
        check_custom_mode_name(&name)?;
        Ok(Self {
            name,
            check: Arc::new(check),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether `settings` are valid for this mode.
    pub fn check(&self, settings: &Map<String, Value>) -> Result<(), SettingsError> {
        (self.check)(settings)
    }
}

impl std::fmt::Debug for LaunchMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LaunchMode")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_rule_and_leave_the_built_in_ones_alone() {
        for good in ["in_process", "k8s", "fire-cracker", "a"] {
            assert!(check_custom_mode_name(good).is_ok(), "{good}");
        }
        for built_in in ["subprocess", "docker", "remote", "group"] {
            assert_eq!(
                check_custom_mode_name(built_in),
                Err(LaunchModeError::BuiltIn(built_in.to_owned()))
            );
        }
        let too_long = "a".repeat(MAX_MODE_NAME_LENGTH + 1);
        for bad in [
            "",
            "InProcess",
            "9lives",
            "_x",
            "in process",
            "é",
            too_long.as_str(),
        ] {
            assert!(
                matches!(
                    check_custom_mode_name(bad),
                    Err(LaunchModeError::InvalidName(_))
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_settings_error_names_its_key() {
        assert_eq!(
            SettingsError::at("limits.memory", "must be a size").to_string(),
            "settings.limits.memory: must be a size"
        );
        assert_eq!(
            SettingsError::new("is empty").to_string(),
            "settings: is empty"
        );
    }
}
