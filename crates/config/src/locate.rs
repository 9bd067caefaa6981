//! Finds the line and column of a key path in YAML text.
//!
//! serde_yaml reports where syntax and type errors happen, but the parsed values carry no
//! positions, so errors found by validation after parsing are located here: a small scanner
//! walks block mappings and sequences by indentation, and flow collections (`{a: 1, b: [x]}`)
//! by their brackets, and records where every key and sequence item starts. It only has to be
//! right for documents that parsed; where it is unsure, a path falls back to its nearest recorded
//! ancestor.

use std::collections::HashMap;

use crate::path::{KeyPath, PathSegment};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Position {
    /// 1-based.
    pub(crate) line: usize,
    /// 1-based, in characters.
    pub(crate) column: usize,
}

#[derive(Debug, Default)]
pub(crate) struct KeyLocator {
    /// Every recorded node in text order.
    nodes: Vec<(Position, KeyPath)>,
    by_path: HashMap<KeyPath, Vec<Position>>,
}

impl KeyLocator {
    pub(crate) fn new(text: &str) -> Self {
        let lines: Vec<&str> = text
            .split('\n')
            .map(|line| line.strip_suffix('\r').unwrap_or(line))
            .collect();
        let mut scanner = Scanner {
            lines: &lines,
            locator: KeyLocator::default(),
        };
        scanner.scan_document();
        scanner.locator
    }

    /// The position of `path`, or of its nearest recorded ancestor.
    pub(crate) fn locate(&self, path: &KeyPath) -> Option<Position> {
        self.locate_occurrence(path, 0)
    }

    /// The position of the `occurrence`th (0-based) node at `path`, for a key written twice;
    /// falls back to the first one, then to the nearest recorded ancestor.
    pub(crate) fn locate_occurrence(&self, path: &KeyPath, occurrence: usize) -> Option<Position> {
        let mut candidate = path.clone();
        loop {
            if let Some(positions) = self.by_path.get(&candidate) {
                return positions.get(occurrence).or(positions.first()).copied();
            }
            candidate.pop()?;
        }
    }

    /// The path of the last node that starts at or before `position`: the key whose value holds
    /// whatever is written at `position`.
    pub(crate) fn path_at(&self, position: Position) -> KeyPath {
        let after = self.nodes.partition_point(|(start, _)| *start <= position);
        after
            .checked_sub(1)
            .map_or_else(KeyPath::root, |index| self.nodes[index].1.clone())
    }

    fn record(&mut self, path: &KeyPath, line_index: usize, line: &str, byte: usize) {
        let position = Position {
            line: line_index + 1,
            column: line[..byte].chars().count() + 1,
        };
        self.by_path.entry(path.clone()).or_default().push(position);
        self.nodes.push((position, path.clone()));
    }
}

struct Frame {
    indent: usize,
    segment: PathSegment,
}

struct Scanner<'text> {
    lines: &'text [&'text str],
    locator: KeyLocator,
}

/// A place in the text: line index and byte offset in that line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cursor {
    line: usize,
    byte: usize,
}

impl Scanner<'_> {
    fn scan_document(&mut self) {
        let mut frames: Vec<Frame> = Vec::new();
        let mut block_scalar_parent_indent: Option<usize> = None;
        let mut line_index = 0;
        while line_index < self.lines.len() {
            let line = self.lines[line_index];
            let indent = line.len() - line.trim_start_matches(' ').len();
            let content = &line[indent..];
            if let Some(parent_indent) = block_scalar_parent_indent {
                if content.trim().is_empty() || indent > parent_indent {
                    line_index += 1;
                    continue;
                }
                block_scalar_parent_indent = None;
            }
            let trimmed = content.trim_end();
            if trimmed.is_empty()
                || trimmed.starts_with('#')
                || trimmed.starts_with('%')
                || (indent == 0 && (trimmed.starts_with("---") || trimmed.starts_with("...")))
            {
                if indent == 0 && trimmed.starts_with("---") {
                    frames.clear();
                }
                line_index += 1;
                continue;
            }

            let mut column = indent;
            let mut last_dash = None;
            while line[column..].starts_with("- ") || &line[column..] == "-" {
                self.enter_sequence_item(&mut frames, line_index, line, column);
                last_dash = Some(column);
                column += 1;
                column += line[column..].len() - line[column..].trim_start().len();
            }
            let mut node_indent = last_dash.unwrap_or(indent);
            let mut value_byte = column;
            if let Some((key, after_colon)) = block_key(line, column) {
                frames.retain(|frame| frame.indent < column);
                frames.push(Frame {
                    indent: column,
                    segment: PathSegment::Key(key),
                });
                self.locator
                    .record(&path_of(&frames), line_index, line, column);
                node_indent = column;
                value_byte = after_colon;
            }
            value_byte = skip_blanks_and_properties(line, value_byte);
            match line[value_byte..].chars().next() {
                Some('{' | '[') => {
                    let mut path = path_of(&frames);
                    let mut cursor = Cursor {
                        line: line_index,
                        byte: value_byte,
                    };
                    self.scan_flow_node(&mut cursor, &mut path);
                    line_index = cursor.line + 1;
                    continue;
                }
                Some(quote @ ('"' | '\'')) => {
                    let mut cursor = Cursor {
                        line: line_index,
                        byte: value_byte + 1,
                    };
                    self.skip_quoted(&mut cursor, quote);
                    line_index = cursor.line + 1;
                    continue;
                }
                Some('|' | '>') => block_scalar_parent_indent = Some(node_indent),
                _ => {}
            }
            line_index += 1;
        }
    }

    fn enter_sequence_item(
        &mut self,
        frames: &mut Vec<Frame>,
        line_index: usize,
        line: &str,
        column: usize,
    ) {
        frames.retain(|frame| frame.indent <= column);
        let index = match frames.last() {
            Some(Frame {
                indent,
                segment: PathSegment::Index(previous),
            }) if *indent == column => {
                let next = previous + 1;
                frames.pop();
                next
            }
            _ => 0,
        };
        frames.push(Frame {
            indent: column,
            segment: PathSegment::Index(index),
        });
        let path = path_of(frames);
        self.locator.record(&path, line_index, line, column);
    }

    fn peek(&self, cursor: Cursor) -> Option<char> {
        let line = self.lines.get(cursor.line)?;
        match line[cursor.byte..].chars().next() {
            Some(character) => Some(character),
            None if cursor.line + 1 < self.lines.len() => Some('\n'),
            None => None,
        }
    }

    fn peek_second(&self, cursor: Cursor) -> Option<char> {
        let mut next = cursor;
        self.advance(&mut next);
        self.peek(next)
    }

    fn advance(&self, cursor: &mut Cursor) {
        let Some(line) = self.lines.get(cursor.line) else {
            return;
        };
        match line[cursor.byte..].chars().next() {
            Some(character) => cursor.byte += character.len_utf8(),
            None => {
                cursor.line += 1;
                cursor.byte = 0;
            }
        }
    }

    fn at_blank_or_line_start(&self, cursor: Cursor) -> bool {
        let line = self.lines[cursor.line];
        cursor.byte == 0 || line[..cursor.byte].ends_with([' ', '\t'])
    }

    fn skip_blanks_and_comments(&self, cursor: &mut Cursor) {
        while let Some(character) = self.peek(*cursor) {
            match character {
                ' ' | '\t' | '\n' => self.advance(cursor),
                '#' if self.at_blank_or_line_start(*cursor) => {
                    cursor.line += 1;
                    cursor.byte = 0;
                }
                _ => return,
            }
        }
    }

    /// Moves past the closing quote of a scalar whose opening quote is already behind `cursor`.
    fn skip_quoted(&self, cursor: &mut Cursor, quote: char) {
        while let Some(character) = self.peek(*cursor) {
            self.advance(cursor);
            if quote == '"' && character == '\\' {
                self.advance(cursor);
            } else if character == quote {
                if quote == '\'' && self.peek(*cursor) == Some('\'') {
                    self.advance(cursor);
                } else {
                    return;
                }
            }
        }
    }

    /// Reads a flow scalar (a key or a value) and answers its text, unquoted.
    fn read_flow_scalar(&self, cursor: &mut Cursor) -> String {
        match self.peek(*cursor) {
            Some(quote @ ('"' | '\'')) => {
                let start = *cursor;
                self.advance(cursor);
                self.skip_quoted(cursor, quote);
                if start.line == cursor.line {
                    unquote(&self.lines[start.line][start.byte..cursor.byte])
                } else {
                    String::new()
                }
            }
            _ => {
                let mut text = String::new();
                while let Some(character) = self.peek(*cursor) {
                    let ends_here = match character {
                        ',' | '[' | ']' | '{' | '}' => true,
                        ':' => matches!(
                            self.peek_second(*cursor),
                            None | Some(' ' | '\t' | '\n' | ',' | '[' | ']' | '{' | '}')
                        ),
                        '#' => self.at_blank_or_line_start(*cursor),
                        _ => false,
                    };
                    if ends_here {
                        break;
                    }
                    text.push(if character == '\n' { ' ' } else { character });
                    self.advance(cursor);
                }
                text.trim().to_owned()
            }
        }
    }

    fn scan_flow_node(&mut self, cursor: &mut Cursor, path: &mut KeyPath) {
        self.skip_blanks_and_comments(cursor);
        match self.peek(*cursor) {
            Some('{') => {
                self.advance(cursor);
                loop {
                    self.skip_blanks_and_comments(cursor);
                    match self.peek(*cursor) {
                        None => return,
                        Some('}') => {
                            self.advance(cursor);
                            return;
                        }
                        Some(',') => self.advance(cursor),
                        Some(']') => self.advance(cursor),
                        Some(_) => {
                            let start = *cursor;
                            let key = self.read_flow_scalar(cursor);
                            path.push(PathSegment::Key(key));
                            let line = self.lines[start.line];
                            self.locator.record(path, start.line, line, start.byte);
                            self.skip_blanks_and_comments(cursor);
                            if self.peek(*cursor) == Some(':') {
                                self.advance(cursor);
                                self.scan_flow_node(cursor, path);
                            }
                            path.pop();
                            if *cursor == start {
                                self.advance(cursor);
                            }
                        }
                    }
                }
            }
            Some('[') => {
                self.advance(cursor);
                let mut index = 0;
                loop {
                    self.skip_blanks_and_comments(cursor);
                    match self.peek(*cursor) {
                        None => return,
                        Some(']') => {
                            self.advance(cursor);
                            return;
                        }
                        Some(',') => {
                            self.advance(cursor);
                            index += 1;
                        }
                        Some('}') => self.advance(cursor),
                        Some(_) => {
                            let start = *cursor;
                            path.push(PathSegment::Index(index));
                            let line = self.lines[start.line];
                            self.locator.record(path, start.line, line, start.byte);
                            self.scan_flow_node(cursor, path);
                            self.skip_blanks_and_comments(cursor);
                            if self.peek(*cursor) == Some(':') {
                                self.advance(cursor);
                                self.scan_flow_node(cursor, path);
                            }
                            path.pop();
                            if *cursor == start {
                                self.advance(cursor);
                            }
                        }
                    }
                }
            }
            Some('&' | '!') => {
                while let Some(character) = self.peek(*cursor) {
                    if matches!(character, ' ' | '\t' | '\n' | ',' | ']' | '}') {
                        break;
                    }
                    self.advance(cursor);
                }
                self.scan_flow_node(cursor, path);
            }
            Some(_) => {
                self.read_flow_scalar(cursor);
            }
            None => {}
        }
    }
}

fn path_of(frames: &[Frame]) -> KeyPath {
    let mut path = KeyPath::root();
    for frame in frames {
        path.push(frame.segment.clone());
    }
    path
}

/// The byte where a value starts: after blanks, anchors (`&name`) and tags (`!tag`).
fn skip_blanks_and_properties(line: &str, mut byte: usize) -> usize {
    loop {
        byte += line[byte..].len() - line[byte..].trim_start().len();
        if !line[byte..].starts_with(['&', '!']) {
            return byte;
        }
        byte += line[byte..].find([' ', '\t']).unwrap_or(line.len() - byte);
    }
}

/// A block mapping key that starts at `start`: its text, and the byte just after its `:`.
fn block_key(line: &str, start: usize) -> Option<(String, usize)> {
    let text = &line[start..];
    let (key, after_key) = match text.chars().next()? {
        quote @ ('"' | '\'') => {
            let end = closing_quote(text, quote)?;
            (unquote(&text[..=end]), start + end + 1)
        }
        '[' | '{' | '#' | '|' | '>' | '%' | '@' | '`' | '?' => return None,
        _ => {
            let mut search_from = 0;
            loop {
                let colon = search_from + text[search_from..].find(':')?;
                let after = &text[colon + 1..];
                if after.is_empty() || after.starts_with([' ', '\t']) {
                    let key = text[..colon].trim_end();
                    if key.contains(" #") || key.contains("\t#") {
                        return None;
                    }
                    break (key.to_owned(), start + colon);
                }
                search_from = colon + 1;
            }
        }
    };
    let rest = &line[after_key..];
    let blanks = rest.len() - rest.trim_start().len();
    let rest = &rest[blanks..];
    if !rest.starts_with(':') {
        return None;
    }
    let after_colon = &rest[1..];
    if after_colon.is_empty() || after_colon.starts_with([' ', '\t']) {
        Some((key, after_key + blanks + 1))
    } else {
        None
    }
}

fn closing_quote(text: &str, quote: char) -> Option<usize> {
    let mut characters = text.char_indices().skip(1).peekable();
    while let Some((index, character)) = characters.next() {
        if quote == '"' && character == '\\' {
            characters.next();
        } else if character == quote {
            if quote == '\'' && characters.peek().is_some_and(|(_, next)| *next == '\'') {
                characters.next();
            } else {
                return Some(index);
            }
        }
    }
    None
}

/// The text of a quoted scalar written on one line, with the common escapes undone.
fn unquote(quoted: &str) -> String {
    let Some(quote) = quoted.chars().next() else {
        return String::new();
    };
    let inner = &quoted[quote.len_utf8()..];
    // An unterminated scalar (in text that will not parse anyway) has no closing quote.
    let inner = inner.strip_suffix(quote).unwrap_or(inner);
    if quote == '\'' {
        return inner.replace("''", "'");
    }
    let mut text = String::with_capacity(inner.len());
    let mut characters = inner.chars();
    while let Some(character) = characters.next() {
        if character != '\\' {
            text.push(character);
            continue;
        }
        match characters.next() {
            Some('n') => text.push('\n'),
            Some('t') => text.push('\t'),
            Some(other) => text.push(other),
            None => {}
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(rendered: &str) -> KeyPath {
        let mut path = KeyPath::root();
        for part in rendered.split('.') {
            let (key, indices) = part
                .split_once('[')
                .map_or((part, ""), |(key, rest)| (key, rest));
            if !key.is_empty() {
                path.push(PathSegment::Key(key.to_owned()));
            }
            for index in indices.split('[').filter(|index| !index.is_empty()) {
                path.push(PathSegment::Index(
                    index.trim_end_matches(']').parse().unwrap(),
                ));
            }
        }
        path
    }

    fn at(locator: &KeyLocator, rendered: &str) -> Option<(usize, usize)> {
        locator
            .locate(&path(rendered))
            .map(|position| (position.line, position.column))
    }

    #[test]
    fn block_mappings_and_sequences_are_located_by_indentation() {
        let text = "\
# comment
top:
  child: 1
  list:
  - a
  - key: x
    other: y
  -   - nested
other:
  - {k: v}
";
        let locator = KeyLocator::new(text);
        for (rendered, expected) in [
            ("top", (2, 1)),
            ("top.child", (3, 3)),
            ("top.list", (4, 3)),
            ("top.list[0]", (5, 3)),
            ("top.list[1]", (6, 3)),
            ("top.list[1].key", (6, 5)),
            ("top.list[1].other", (7, 5)),
            ("top.list[2]", (8, 3)),
            ("top.list[2][0]", (8, 7)),
            ("other", (9, 1)),
            ("other[0].k", (10, 6)),
        ] {
            assert_eq!(at(&locator, rendered), Some(expected), "{rendered}");
        }
    }

    #[test]
    fn unknown_paths_fall_back_to_their_nearest_ancestor() {
        let locator = KeyLocator::new("a:\n  b: {c: 1}\n");
        assert_eq!(at(&locator, "a.b.c"), Some((2, 7)));
        assert_eq!(at(&locator, "a.b.zzz"), Some((2, 3)));
        assert_eq!(at(&locator, "zzz"), None);
    }

    #[test]
    fn flow_collections_may_span_lines_and_hold_quoted_keys() {
        let text = "\
servers: {a: {mode: x, members: [
    {id: one},   # a comment, with a comma
    {\"id\": 'two'}
  ]}, b: 2}
after: 1
";
        let locator = KeyLocator::new(text);
        for (rendered, expected) in [
            ("servers.a.mode", (1, 15)),
            ("servers.a.members[0].id", (2, 6)),
            ("servers.a.members[1].id", (3, 6)),
            ("servers.b", (4, 7)),
            ("after", (5, 1)),
        ] {
            assert_eq!(at(&locator, rendered), Some(expected), "{rendered}");
        }
    }

    #[test]
    fn scalar_contents_are_not_mistaken_for_keys() {
        let text = "\
a: |
  looks: like a key
  - like an item
b: \"a long
  quoted: text\"
'c d': &anchor !tag >-
  folded: text
e: plain # with: comment
f: http://example.com/x
";
        let locator = KeyLocator::new(text);
        assert_eq!(at(&locator, "b"), Some((4, 1)));
        assert_eq!(at(&locator, "c d"), Some((6, 1)));
        assert_eq!(at(&locator, "e"), Some((8, 1)));
        assert_eq!(at(&locator, "f"), Some((9, 1)));
        assert_eq!(at(&locator, "looks"), None);
        assert_eq!(at(&locator, "quoted"), None);
        assert_eq!(at(&locator, "folded"), None);
        assert_eq!(
            at(&locator, "a[0]"),
            Some((1, 1)),
            "falls back to `a`, records no item"
        );
    }

    #[test]
    fn a_repeated_key_has_each_occurrence() {
        let locator = KeyLocator::new("m:\n  x: 1\n  x: 2\n");
        let x = path("m.x");
        assert_eq!(locator.locate_occurrence(&x, 0).map(|p| p.line), Some(2));
        assert_eq!(locator.locate_occurrence(&x, 1).map(|p| p.line), Some(3));
        assert_eq!(locator.locate_occurrence(&x, 2).map(|p| p.line), Some(2));
    }

    #[test]
    fn path_at_names_the_key_that_holds_a_position() {
        let locator = KeyLocator::new("a:\n  b: {c: \"x\", d: [1, 2]}\n  e: 3\n");
        let path_at = |line, column| locator.path_at(Position { line, column }).to_string();
        assert_eq!(path_at(2, 12), "a.b.c");
        assert_eq!(path_at(2, 23), "a.b.d[1]");
        assert_eq!(path_at(3, 6), "a.e");
        assert_eq!(path_at(1, 1), "a");
    }

    #[test]
    fn columns_count_characters_not_bytes() {
        let locator = KeyLocator::new("é: {ü: 1, k: 2}\n");
        assert_eq!(at(&locator, "é.k"), Some((1, 11)));
    }
}
