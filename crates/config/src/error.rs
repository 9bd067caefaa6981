//! Configuration errors: each one names the source, the line and column where known, the key
//! path and what is wrong, so that an operator can fix a file without guessing.

use std::fmt;

/// What kind of problem an error reports, independent of its wording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConfigErrorKind {
    /// The text is not valid YAML (or not valid JSON).
    Syntax,
    /// A `${VAR}` reference names a variable that is not set and has no default, or is malformed.
    Variable,
    /// A key that the schema does not know.
    UnknownKey,
    /// A key that must be present is absent.
    MissingKey,
    /// The same key appears twice in one mapping.
    DuplicateKey,
    /// A value of the wrong type (a string where a number belongs, ...).
    WrongType,
    /// A number outside its allowed range.
    OutOfRange,
    /// A value of the right type that is not acceptable (a malformed URL, an empty command, ...).
    InvalidValue,
    /// A key that exists in the schema but not for the server's `mode`.
    WrongMode,
    /// A reference to something that does not exist or may not be referenced (group members).
    Reference,
}

/// One problem in a configuration source.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    pub kind: ConfigErrorKind,
    /// The display name of the source, usually the file path; empty for a request body.
    pub source_name: String,
    /// 1-based line, where known.
    pub line: Option<usize>,
    /// 1-based column, where known.
    pub column: Option<usize>,
    /// The key path, such as `mcp_servers.math.idle_ttl_s`; empty for the document itself.
    pub path: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_located(
            f,
            &self.source_name,
            self.line,
            self.column,
            &self.path,
            &self.message,
        )
    }
}

/// Something legal but probably not what the operator meant (an OIDC issuer over plain HTTP,
/// a group that can never be healthy). It never stops a configuration from loading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigWarning {
    pub source_name: String,
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub path: String,
    pub message: String,
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_located(
            f,
            &self.source_name,
            self.line,
            self.column,
            &self.path,
            &self.message,
        )
    }
}

/// `source:line:column: path: message`, leaving out what is unknown, the way compilers print.
fn write_located(
    f: &mut fmt::Formatter<'_>,
    source_name: &str,
    line: Option<usize>,
    column: Option<usize>,
    path: &str,
    message: &str,
) -> fmt::Result {
    let mut prefix = String::from(source_name);
    if let Some(line) = line {
        if !prefix.is_empty() {
            prefix.push(':');
        }
        prefix.push_str(&line.to_string());
        if let Some(column) = column {
            prefix.push(':');
            prefix.push_str(&column.to_string());
        }
    }
    if !prefix.is_empty() {
        write!(f, "{prefix}: ")?;
    }
    if !path.is_empty() {
        write!(f, "{path}: ")?;
    }
    f.write_str(message)
}

/// Every problem found in one configuration source, in the order of the source's lines.
///
/// Syntax and type errors stop parsing, so there is one of those at most; semantic errors are
/// all collected, so that one round of editing can fix them all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigErrors {
    errors: Vec<ConfigError>,
}

impl ConfigErrors {
    /// Sorts by line and column; errors without a line come last, in the order given.
    pub(crate) fn new(mut errors: Vec<ConfigError>) -> Self {
        errors.sort_by_key(|error| (error.line.is_none(), error.line, error.column));
        Self { errors }
    }

    pub fn errors(&self) -> &[ConfigError] {
        &self.errors
    }

    pub fn into_errors(self) -> Vec<ConfigError> {
        self.errors
    }

    pub fn len(&self) -> usize {
        self.errors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }

    /// A configuration error is always the caller's input being invalid.
    pub fn kind(&self) -> mcpgw_core::ErrorKind {
        mcpgw_core::ErrorKind::Invalid
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (position, error) in self.errors.iter().enumerate() {
            if position > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl IntoIterator for ConfigErrors {
    type Item = ConfigError;
    type IntoIter = std::vec::IntoIter<ConfigError>;

    fn into_iter(self) -> Self::IntoIter {
        self.errors.into_iter()
    }
}

impl<'a> IntoIterator for &'a ConfigErrors {
    type Item = &'a ConfigError;
    type IntoIter = std::slice::Iter<'a, ConfigError>;

    fn into_iter(self) -> Self::IntoIter {
        self.errors.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(
        source_name: &str,
        line: Option<usize>,
        column: Option<usize>,
        path: &str,
    ) -> ConfigError {
        ConfigError {
            kind: ConfigErrorKind::OutOfRange,
            source_name: source_name.into(),
            line,
            column,
            path: path.into(),
            message: "must be between 1 and 86400, got 0".into(),
        }
    }

    #[test]
    fn display_leaves_out_what_is_unknown() {
        let path = "mcp_servers.math.idle_ttl_s";
        assert_eq!(
            error("gateway.yaml", Some(7), Some(5), path).to_string(),
            "gateway.yaml:7:5: mcp_servers.math.idle_ttl_s: must be between 1 and 86400, got 0"
        );
        assert_eq!(
            error("gateway.yaml", Some(7), None, path).to_string(),
            "gateway.yaml:7: mcp_servers.math.idle_ttl_s: must be between 1 and 86400, got 0"
        );
        assert_eq!(
            error("gateway.yaml", None, None, path).to_string(),
            "gateway.yaml: mcp_servers.math.idle_ttl_s: must be between 1 and 86400, got 0"
        );
        assert_eq!(
            error("", None, None, "idle_ttl_s").to_string(),
            "idle_ttl_s: must be between 1 and 86400, got 0"
        );
        assert_eq!(
            error("f", Some(1), Some(1), "").to_string(),
            "f:1:1: must be between 1 and 86400, got 0"
        );
    }

    #[test]
    fn errors_print_one_per_line_in_source_order() {
        let errors = ConfigErrors::new(vec![
            error("f", None, None, "c"),
            error("f", Some(9), Some(1), "b"),
            error("f", Some(2), Some(3), "a"),
        ]);
        let paths: Vec<&str> = errors
            .errors()
            .iter()
            .map(|error| error.path.as_str())
            .collect();
        assert_eq!(paths, ["a", "b", "c"]);
        assert_eq!(errors.to_string().lines().count(), 3);
        assert_eq!(errors.kind(), mcpgw_core::ErrorKind::Invalid);
    }
}
