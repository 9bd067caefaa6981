//! `${VAR}` and `${VAR:-default}` expansion on the text, before YAML parsing.
//!
//! Expanding the text (rather than the parsed values) keeps every line where it was, so that
//! the errors of the YAML parser and of validation point at the lines the operator wrote, and it
//! lets a reference stand for a number (`idle_ttl_s: ${TTL:-300}`). The price is that an inserted
//! value could change the YAML structure; a small lexer tracks which kind of scalar each
//! reference sits in, escapes values inside quotes, and refuses values that would silently change
//! the structure of a plain scalar instead of corrupting the configuration.

use crate::error::ConfigErrorKind;

/// Where one `${VAR}` reference was expanded: lets an exporter write `${VAR}` back instead of a
/// secret, and lets the gateway say which variables a configuration depends on.
#[derive(Clone, PartialEq, Eq, serde::Serialize)]
pub struct VariableReference {
    pub name: String,
    /// The text after `:-`, when the reference has one.
    pub default: Option<String>,
    /// Whether the variable was unset or empty, so that the default was used.
    pub used_default: bool,
    /// 1-based line and column of the `$`.
    pub line: usize,
    pub column: usize,
    /// The key path whose value holds the reference, such as
    /// `mcp_servers.api.headers.Authorization`.
    pub path: String,
    /// What the reference expanded to (the variable's value, or the default), so that an
    /// export can find it in the value and write the reference back. Never serialized nor
    /// shown by `Debug`: it may be a secret.
    #[serde(skip)]
    pub(crate) expanded: String,
}

impl std::fmt::Debug for VariableReference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VariableReference")
            .field("name", &self.name)
            .field("default", &self.default)
            .field("used_default", &self.used_default)
            .field("line", &self.line)
            .field("column", &self.column)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExpansionProblem {
    pub(crate) kind: ConfigErrorKind,
    pub(crate) line: usize,
    pub(crate) column: usize,
    pub(crate) message: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Expanded {
    pub(crate) text: String,
    /// References in text order, without their `path` (the caller locates them).
    pub(crate) references: Vec<VariableReference>,
}

/// The kind of scalar a reference sits in decides how the value is written into the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ScalarContext {
    /// `at_start`: the reference starts the scalar, so a leading indicator would change its
    /// meaning (`*` an alias, `!` a tag, `&` an anchor, ...).
    Plain {
        in_flow: bool,
        at_start: bool,
    },
    DoubleQuoted,
    SingleQuoted,
    Block,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quote {
    None,
    Double,
    Single,
}

/// Expands every reference, or reports every reference that cannot be expanded.
pub(crate) fn expand(
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Expanded, Vec<ExpansionProblem>> {
    let mut expander = Expander {
        env,
        output: String::with_capacity(text.len()),
        references: Vec::new(),
        problems: Vec::new(),
        quote: Quote::None,
        flow_depth: 0,
        block_scalar_parent_indent: None,
    };
    for (line_index, raw_line) in text.split_inclusive('\n').enumerate() {
        let body_end = raw_line.trim_end_matches(['\n', '\r']).len();
        let (body, ending) = raw_line.split_at(body_end);
        expander.expand_line(line_index + 1, body);
        expander.output.push_str(ending);
    }
    if expander.problems.is_empty() {
        Ok(Expanded {
            text: expander.output,
            references: expander.references,
        })
    } else {
        Err(expander.problems)
    }
}

struct Expander<'env> {
    env: &'env dyn Fn(&str) -> Option<String>,
    output: String,
    references: Vec<VariableReference>,
    problems: Vec<ExpansionProblem>,
    quote: Quote,
    flow_depth: usize,
    /// Inside a `|` or `>` block scalar: lines indented deeper than this belong to it.
    block_scalar_parent_indent: Option<usize>,
}

impl Expander<'_> {
    fn expand_line(&mut self, line_number: usize, body: &str) {
        let indent = body.len() - body.trim_start_matches(' ').len();
        let blank = body.trim().is_empty();
        if let Some(parent_indent) = self.block_scalar_parent_indent {
            if blank || indent > parent_indent {
                self.expand_block_scalar_line(line_number, body);
                return;
            }
            self.block_scalar_parent_indent = None;
        }
        if self.quote == Quote::None && body.trim_start().starts_with('#') {
            self.output.push_str(body);
            return;
        }

        // The last non-blank character outside quotes: a quote only opens a quoted scalar where
        // a scalar can start, so that the apostrophe in `it's` is just a character.
        let mut previous_significant: Option<char> = None;
        let mut code_end = body.len();
        let mut position = 0;
        while position < body.len() {
            let rest = &body[position..];
            if rest.starts_with("$${") {
                self.output.push_str("${");
                position += 3;
                previous_significant = Some('$');
                continue;
            }
            if rest.starts_with("${") {
                let at_start = quote_may_open(
                    previous_significant,
                    position == 0 || body[..position].ends_with([' ', '\t']),
                );
                let context = match self.quote {
                    Quote::None => ScalarContext::Plain {
                        in_flow: self.flow_depth > 0,
                        at_start,
                    },
                    Quote::Double => ScalarContext::DoubleQuoted,
                    Quote::Single => ScalarContext::SingleQuoted,
                };
                position += self.expand_reference(line_number, body, position, context);
                previous_significant = Some('}');
                continue;
            }
            let Some(character) = rest.chars().next() else {
                break;
            };
            let width = character.len_utf8();
            match self.quote {
                Quote::Double => {
                    if character == '\\' {
                        let escaped_width = rest[1..].chars().next().map_or(0, char::len_utf8);
                        self.output.push_str(&rest[..1 + escaped_width]);
                        position += 1 + escaped_width;
                        continue;
                    }
                    if character == '"' {
                        self.quote = Quote::None;
                    }
                }
                Quote::Single => {
                    if character == '\'' {
                        if rest[1..].starts_with('\'') {
                            self.output.push_str("''");
                            position += 2;
                            continue;
                        }
                        self.quote = Quote::None;
                    }
                }
                Quote::None => {
                    let after_blank = position == 0 || body[..position].ends_with([' ', '\t']);
                    if character == '#' && after_blank {
                        self.output.push_str(rest);
                        code_end = position;
                        break;
                    }
                    if (character == '"' || character == '\'')
                        && quote_may_open(previous_significant, after_blank)
                    {
                        self.quote = if character == '"' {
                            Quote::Double
                        } else {
                            Quote::Single
                        };
                    }
                    match character {
                        '[' | '{' => self.flow_depth += 1,
                        ']' | '}' => self.flow_depth = self.flow_depth.saturating_sub(1),
                        _ => {}
                    }
                    if !character.is_whitespace() {
                        previous_significant = Some(character);
                    }
                }
            }
            self.output.push(character);
            position += width;
        }
        if self.quote == Quote::None && self.flow_depth == 0 {
            self.block_scalar_parent_indent = block_scalar_parent_indent(&body[..code_end]);
        }
    }

    fn expand_block_scalar_line(&mut self, line_number: usize, body: &str) {
        let mut position = 0;
        while let Some(offset) = body[position..].find('$') {
            let start = position + offset;
            self.output.push_str(&body[position..start]);
            if body[start..].starts_with("$${") {
                self.output.push_str("${");
                position = start + 3;
            } else if body[start..].starts_with("${") {
                position =
                    start + self.expand_reference(line_number, body, start, ScalarContext::Block);
            } else {
                self.output.push('$');
                position = start + 1;
            }
        }
        self.output.push_str(&body[position..]);
    }

    /// Expands the reference that starts at `start` (at `${`) and answers how many bytes of the
    /// line it took.
    fn expand_reference(
        &mut self,
        line_number: usize,
        body: &str,
        start: usize,
        context: ScalarContext,
    ) -> usize {
        let column = body[..start].chars().count() + 1;
        let Some(close_offset) = body[start + 2..].find('}') else {
            self.problem(
                ConfigErrorKind::Variable,
                line_number,
                column,
                "`${` is not closed by `}` on this line; write `${NAME}`, or `$${` for a \
                 literal `${`"
                    .to_owned(),
            );
            self.output.push_str(&body[start..]);
            return body.len() - start;
        };
        let inner = &body[start + 2..start + 2 + close_offset];
        let taken = close_offset + 3;
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        if !is_variable_name(name) {
            self.problem(
                ConfigErrorKind::Variable,
                line_number,
                column,
                format!(
                    "`${{{inner}}}` is not a variable reference; names are letters, digits and \
                     `_`, not starting with a digit (write `$${{` for a literal `${{`)"
                ),
            );
            self.output.push_str(&body[start..start + taken]);
            return taken;
        }
        let value = (self.env)(name);
        let expanded = match (&value, default) {
            (Some(value), Some(_)) if !value.is_empty() => value.clone(),
            (Some(value), None) => value.clone(),
            (_, Some(default)) => default.to_owned(),
            (None, None) => String::new(),
        };
        // Like the shell's `:-`, an empty value counts as unset when there is a default.
        let (text, used_default) = match (value, default) {
            (Some(value), Some(_)) if !value.is_empty() => (self.escape(&value, context), false),
            (Some(value), None) => (self.escape(&value, context), false),
            (_, Some(default)) => (Ok(default.to_owned()), true),
            (None, None) => {
                self.problem(
                    ConfigErrorKind::Variable,
                    line_number,
                    column,
                    format!(
                        "environment variable `{name}` is not set; set it, or give a default \
                         with `${{{name}:-default}}`"
                    ),
                );
                (Ok(String::new()), false)
            }
        };
        match text {
            Ok(text) => self.output.push_str(&text),
            Err(reason) => self.problem(
                ConfigErrorKind::Variable,
                line_number,
                column,
                format!(
                    "environment variable `{name}` holds {reason}, which would change the YAML \
                     structure here; put the reference inside double quotes, as in \"${{{name}}}\""
                ),
            ),
        }
        self.references.push(VariableReference {
            name: name.to_owned(),
            default: default.map(str::to_owned),
            used_default,
            line: line_number,
            column,
            path: String::new(),
            expanded,
        });
        taken
    }

    /// Writes a variable's value so that the scalar it sits in keeps its meaning, or says why
    /// that is impossible. A default is file text and is written as it is.
    fn escape(&self, value: &str, context: ScalarContext) -> Result<String, &'static str> {
        match context {
            ScalarContext::DoubleQuoted => Ok(escape_double_quoted(value)),
            ScalarContext::SingleQuoted => {
                if value.contains(['\n', '\r']) {
                    Err("a line break")
                } else {
                    Ok(value.replace('\'', "''"))
                }
            }
            ScalarContext::Block => {
                if value.contains(['\n', '\r']) {
                    Err("a line break")
                } else {
                    Ok(value.to_owned())
                }
            }
            ScalarContext::Plain { in_flow, at_start } => {
                if value.contains(['\n', '\r']) {
                    Err("a line break")
                } else if at_start && starts_with_indicator(value) {
                    Err("a leading YAML indicator character")
                } else if value.contains(": ") || value.ends_with(':') {
                    Err("`: `")
                } else if value.contains(" #") || value.contains("\t#") {
                    Err("` #`")
                } else if in_flow && value.contains([',', '[', ']', '{', '}']) {
                    Err("a flow indicator (`,`, `[`, `]`, `{` or `}`)")
                } else {
                    Ok(value.to_owned())
                }
            }
        }
    }

    fn problem(&mut self, kind: ConfigErrorKind, line: usize, column: usize, message: String) {
        self.problems.push(ExpansionProblem {
            kind,
            line,
            column,
            message,
        });
    }
}

fn quote_may_open(previous_significant: Option<char>, after_blank: bool) -> bool {
    match previous_significant {
        None | Some('[' | '{' | ',') => true,
        Some(':' | '-' | '?') => after_blank,
        Some(_) => false,
    }
}

/// Whether a plain scalar starting with `value` would be read as something else than text.
/// `[` and `{` are left alone: a variable may deliberately hold a flow list or mapping.
fn starts_with_indicator(value: &str) -> bool {
    value.starts_with(['!', '&', '*', '|', '>', '\'', '"', '%', '@', '`', '#'])
        || ["-", "?", ":"]
            .iter()
            .any(|indicator| value == *indicator || value.starts_with(&format!("{indicator} ")))
}

fn is_variable_name(name: &str) -> bool {
    let mut characters = name.chars();
    matches!(characters.next(), Some(first) if first.is_ascii_alphabetic() || first == '_')
        && characters.all(|character| character.is_ascii_alphanumeric() || character == '_')
}

fn escape_double_quoted(value: &str) -> String {
    let mut escaped = String::with_capacity(value.len());
    for character in value.chars() {
        match character {
            '\\' => escaped.push_str("\\\\"),
            '"' => escaped.push_str("\\\""),
            '\n' => escaped.push_str("\\n"),
            '\r' => escaped.push_str("\\r"),
            '\t' => escaped.push_str("\\t"),
            control if control.is_control() => {
                escaped.push_str(&format!("\\u{:04x}", u32::from(control)));
            }
            other => escaped.push(other),
        }
    }
    escaped
}

/// When a line ends with a block scalar header (`key: |`, `- >-`), the indentation that the
/// scalar's lines must exceed.
fn block_scalar_parent_indent(code: &str) -> Option<usize> {
    let trimmed = code.trim_end();
    let header_start = trimmed.rfind([' ', '\t']).map_or(0, |blank| blank + 1);
    let header = &trimmed[header_start..];
    if !is_block_scalar_header(header) {
        return None;
    }
    let before = trimmed[..header_start].trim_end();
    // The node the scalar belongs to starts after the indentation and any `- ` indicators.
    let mut node_start = code.len() - code.trim_start().len();
    let mut last_dash = None;
    while code[node_start..].starts_with("- ") || code[node_start..].starts_with("-\t") {
        last_dash = Some(node_start);
        node_start += 1;
        node_start += code[node_start..].len() - code[node_start..].trim_start().len();
    }
    let last_token = before.rsplit([' ', '\t']).next().unwrap_or_default();
    if before.ends_with(':') || last_token.starts_with(['!', '&']) {
        Some(node_start)
    } else if before.ends_with('-') {
        last_dash
    } else {
        None
    }
}

fn is_block_scalar_header(token: &str) -> bool {
    let mut characters = token.chars();
    if !matches!(characters.next(), Some('|' | '>')) {
        return false;
    }
    let rest: Vec<char> = characters.collect();
    rest.len() <= 2
        && rest
            .iter()
            .all(|character| matches!(character, '+' | '-' | '1'..='9'))
        && rest
            .iter()
            .filter(|character| matches!(character, '+' | '-'))
            .count()
            <= 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn environment(name: &str) -> Option<String> {
        match name {
            "TOKEN" => Some("s3cr\"t\\x".to_owned()),
            "PORT" => Some("8080".to_owned()),
            "EMPTY" => Some(String::new()),
            "MULTI" => Some("a\nb".to_owned()),
            "HASH" => Some("abc #def".to_owned()),
            "LIST" => Some("a,b".to_owned()),
            "QUOTE" => Some("it's".to_owned()),
            "STAR" => Some("*secret".to_owned()),
            "DASH" => Some("- x".to_owned()),
            _ => None,
        }
    }

    fn expanded(text: &str) -> String {
        expand(text, &environment).expect("expands").text
    }

    fn problems(text: &str) -> Vec<(usize, usize, String)> {
        expand(text, &environment)
            .expect_err("fails")
            .into_iter()
            .map(|problem| (problem.line, problem.column, problem.message))
            .collect()
    }

    #[test]
    fn plain_references_become_yaml_text() {
        assert_eq!(expanded("port: ${PORT}\n"), "port: 8080\n");
        assert_eq!(expanded("a: x${PORT}y ${PORT}\n"), "a: x8080y 8080\n");
        assert_eq!(expanded("a: ${UNSET:-300}\n"), "a: 300\n");
        assert_eq!(expanded("a: ${EMPTY:-fallback}\n"), "a: fallback\n");
        assert_eq!(expanded("a: '${EMPTY}'\n"), "a: ''\n");
        assert_eq!(expanded("a: ${UNSET:-}\n"), "a: \n");
    }

    #[test]
    fn quoted_references_are_escaped_for_their_quotes() {
        assert_eq!(
            expanded("a: \"Bearer ${TOKEN}\"\n"),
            "a: \"Bearer s3cr\\\"t\\\\x\"\n"
        );
        assert_eq!(expanded("a: \"${MULTI}\"\n"), "a: \"a\\nb\"\n");
        assert_eq!(expanded("a: '${QUOTE}'\n"), "a: 'it''s'\n");
        assert_eq!(expanded("a: {h: \"${HASH}\"}\n"), "a: {h: \"abc #def\"}\n");
        let value: serde_yaml::Value =
            serde_yaml::from_str(&expanded("a: \"${TOKEN}\"\n")).unwrap();
        assert_eq!(value["a"].as_str(), Some("s3cr\"t\\x"));
    }

    #[test]
    fn an_apostrophe_inside_a_plain_scalar_opens_no_quote() {
        assert_eq!(
            expanded("a: it's ${PORT}\nb: \"${TOKEN}\"\n"),
            "a: it's 8080\nb: \"s3cr\\\"t\\\\x\"\n"
        );
    }

    #[test]
    fn comments_are_left_alone() {
        assert_eq!(
            expanded("# ${UNSET}\n  # ${UNSET}\na: 1 # ${UNSET}\n"),
            "# ${UNSET}\n  # ${UNSET}\na: 1 # ${UNSET}\n"
        );
        assert_eq!(expanded("a: b#${PORT}\n"), "a: b#8080\n");
        // A `#` inside quotes does not start a comment.
        assert_eq!(expanded("a: \"x # ${PORT}\"\n"), "a: \"x # 8080\"\n");
    }

    #[test]
    fn dollar_dollar_brace_is_a_literal() {
        assert_eq!(
            expanded("a: $${UNSET} and $$ and $x\n"),
            "a: ${UNSET} and $$ and $x\n"
        );
        assert_eq!(expanded("a: |\n  $${UNSET}\n"), "a: |\n  ${UNSET}\n");
    }

    #[test]
    fn block_scalars_expand_without_quote_tracking() {
        let text = "a: |\n  it's \"${PORT}\" # ${PORT}\nb: '${QUOTE}'\n";
        assert_eq!(expanded(text), "a: |\n  it's \"8080\" # 8080\nb: 'it''s'\n");
        let text = "list:\n  - |-\n    x ${PORT}\n  - '${QUOTE}'\n";
        assert_eq!(expanded(text), "list:\n  - |-\n    x 8080\n  - 'it''s'\n");
        assert_eq!(block_scalar_parent_indent("  - run: >2"), Some(4));
        assert_eq!(block_scalar_parent_indent("  - |"), Some(2));
        assert_eq!(block_scalar_parent_indent("key: value|"), None);
        assert_eq!(block_scalar_parent_indent("key: a |"), None);
    }

    #[test]
    fn unset_variables_are_all_reported_with_line_and_column() {
        let text = "a: 1\nb: ${ONE}\n\nc: \"x ${TWO}\"\n";
        assert_eq!(
            problems(text),
            [
                (2, 4, "environment variable `ONE` is not set; set it, or give a default with `${ONE:-default}`".to_owned()),
                (4, 7, "environment variable `TWO` is not set; set it, or give a default with `${TWO:-default}`".to_owned()),
            ]
        );
    }

    #[test]
    fn malformed_references_are_errors() {
        let reported = problems("a: ${1X}\nb: ${OPEN\nc: ${}\n");
        assert_eq!(reported.len(), 3);
        assert!(
            reported[0]
                .2
                .contains("`${1X}` is not a variable reference"),
            "{}",
            reported[0].2
        );
        assert!(reported[1].2.contains("not closed"), "{}", reported[1].2);
        assert_eq!((reported[2].0, reported[2].1), (3, 4));
    }

    #[test]
    fn values_that_would_change_a_plain_scalar_are_refused() {
        for (text, reason) in [
            ("a: ${MULTI}\n", "a line break"),
            ("a: Bearer ${HASH}\n", "` #`"),
            ("a: [${LIST}]\n", "flow indicator"),
            ("a: '${MULTI}'\n", "a line break"),
            ("a: |\n  ${MULTI}\n", "a line break"),
            ("a: ${STAR}\n", "a leading YAML indicator"),
            ("a: [x, ${STAR}]\n", "a leading YAML indicator"),
            ("- ${DASH}\n", "a leading YAML indicator"),
        ] {
            let reported = problems(text);
            assert_eq!(reported.len(), 1, "{text}");
            assert!(reported[0].2.contains(reason), "{text}: {}", reported[0].2);
            assert!(
                reported[0].2.contains("inside double quotes"),
                "{}",
                reported[0].2
            );
        }
        // Outside flow collections a comma is an ordinary character, and an indicator after
        // the start of a scalar is an ordinary character too.
        assert_eq!(expanded("a: ${LIST}\n"), "a: a,b\n");
        assert_eq!(expanded("a: x${STAR}\n"), "a: x*secret\n");
        assert_eq!(expanded("a: \"${STAR}\"\n"), "a: \"*secret\"\n");
        assert_eq!(expanded("a: $${X} \"q\"\n"), "a: ${X} \"q\"\n");
    }

    #[test]
    fn references_are_recorded_in_text_order() {
        let result = expand("a: ${PORT}\nb: \"${UNSET:-d}\"\n", &environment).unwrap();
        let recorded: Vec<(&str, Option<&str>, bool, usize, usize)> = result
            .references
            .iter()
            .map(|reference| {
                (
                    reference.name.as_str(),
                    reference.default.as_deref(),
                    reference.used_default,
                    reference.line,
                    reference.column,
                )
            })
            .collect();
        assert_eq!(
            recorded,
            [
                ("PORT", None, false, 1, 4),
                ("UNSET", Some("d"), true, 2, 5)
            ]
        );
    }

    #[test]
    fn line_endings_and_line_count_survive() {
        let text = "a: ${PORT}\r\nb: 2\r\n\r\nc: 3";
        let result = expanded(text);
        assert_eq!(result, "a: 8080\r\nb: 2\r\n\r\nc: 3");
        assert_eq!(result.lines().count(), text.lines().count());
    }
}
