//! Key paths such as `mcp_servers.math.members[0].id`, the way every error names its place.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum PathSegment {
    Key(String),
    Index(usize),
}

/// A path from the document root to one node. It renders the way serde_yaml renders its own
/// paths, so that the two never disagree in one message.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub(crate) struct KeyPath {
    segments: Vec<PathSegment>,
}

impl KeyPath {
    pub(crate) fn root() -> Self {
        Self::default()
    }

    #[must_use]
    pub(crate) fn key(&self, key: impl Into<String>) -> Self {
        let mut child = self.clone();
        child.segments.push(PathSegment::Key(key.into()));
        child
    }

    #[must_use]
    pub(crate) fn index(&self, index: usize) -> Self {
        let mut child = self.clone();
        child.segments.push(PathSegment::Index(index));
        child
    }

    pub(crate) fn push(&mut self, segment: PathSegment) {
        self.segments.push(segment);
    }

    pub(crate) fn pop(&mut self) -> Option<PathSegment> {
        self.segments.pop()
    }

    pub(crate) fn is_root(&self) -> bool {
        self.segments.is_empty()
    }

    pub(crate) fn segments(&self) -> &[PathSegment] {
        &self.segments
    }
}

impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (position, segment) in self.segments.iter().enumerate() {
            match segment {
                PathSegment::Key(key) if position == 0 => f.write_str(key)?,
                PathSegment::Key(key) => write!(f, ".{key}")?,
                PathSegment::Index(index) => write!(f, "[{index}]")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_keys_with_dots_and_indices_in_brackets() {
        let path = KeyPath::root()
            .key("mcp_servers")
            .key("pool")
            .key("members")
            .index(2)
            .key("id");
        assert_eq!(path.to_string(), "mcp_servers.pool.members[2].id");
        assert_eq!(KeyPath::root().to_string(), "");
        assert_eq!(KeyPath::root().index(0).to_string(), "[0]");
    }
}
