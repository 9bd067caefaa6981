//! "Did you mean" suggestions for names that callers type: configuration keys, request fields,
//! permissions. One implementation, so that every error message suggests alike.

/// The optimal string alignment distance: insertions, deletions, substitutions and swaps of two
/// neighbours each cost 1, so that `comamnd` is one step from `command`.
pub fn edit_distance(left: &str, right: &str) -> usize {
    let left: Vec<char> = left.chars().collect();
    let right: Vec<char> = right.chars().collect();
    let width = right.len() + 1;
    let mut table = vec![0usize; (left.len() + 1) * width];
    for (row, cell) in table.iter_mut().step_by(width).enumerate() {
        *cell = row;
    }
    for (column, cell) in table.iter_mut().take(width).enumerate() {
        *cell = column;
    }
    for row in 1..=left.len() {
        for column in 1..=right.len() {
            let substitution = usize::from(left[row - 1] != right[column - 1]);
            let mut best = (table[(row - 1) * width + column] + 1)
                .min(table[row * width + column - 1] + 1)
                .min(table[(row - 1) * width + column - 1] + substitution);
            if row > 1
                && column > 1
                && left[row - 1] == right[column - 2]
                && left[row - 2] == right[column - 1]
            {
                best = best.min(table[(row - 2) * width + column - 2] + 1);
            }
            table[row * width + column] = best;
        }
    }
    table[left.len() * width + right.len()]
}

/// The candidate closest to `word`, if one is close enough to be a plausible typo: within a
/// third of the word's length in edits (at least one), the same but for case, or a prefix either
/// way of at least three characters (`idle_ttl` for `idle_ttl_s`). A candidate equal to `word`
/// is not a suggestion.
///
/// ```
/// use mcpgw_core::suggest::nearest;
///
/// let fields = ["command", "env", "idle_ttl_s", "mode"];
/// assert_eq!(nearest("comand", fields), Some("command"));
/// assert_eq!(nearest("idle_ttl", fields), Some("idle_ttl_s"));
/// assert_eq!(nearest("colour", fields), None);
/// ```
pub fn nearest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let lowered = word.to_lowercase();
    let limit = (word.chars().count().max(3)) / 3;
    let mut best: Option<(usize, &'a str)> = None;
    for candidate in candidates {
        if candidate == word {
            continue;
        }
        let candidate_lowered = candidate.to_lowercase();
        let distance = if candidate_lowered == lowered {
            0
        } else {
            let distance = edit_distance(&lowered, &candidate_lowered);
            let is_prefix = lowered.len() >= 3
                && (candidate_lowered.starts_with(&lowered)
                    || lowered.starts_with(&candidate_lowered));
            if distance <= limit {
                distance
            } else if is_prefix {
                limit + 1
            } else {
                continue;
            }
        };
        if best.is_none_or(|(best_distance, _)| distance < best_distance) {
            best = Some((distance, candidate));
        }
    }
    best.map(|(_, candidate)| candidate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_single_edits_and_swaps() {
        for (left, right, distance) in [
            ("", "", 0),
            ("", "abc", 3),
            ("abc", "abc", 0),
            ("abc", "abd", 1),
            ("abc", "ab", 1),
            ("ab", "abc", 1),
            ("comamnd", "command", 1),
            ("kitten", "sitting", 3),
        ] {
            assert_eq!(edit_distance(left, right), distance, "{left} / {right}");
        }
    }

    #[test]
    fn nearest_finds_typos_cases_and_prefixes_and_nothing_far_off() {
        let keys = [
            "command",
            "env",
            "idle_ttl_s",
            "mode",
            "principal",
            "url_path",
        ];
        assert_eq!(nearest("comand", keys), Some("command"));
        assert_eq!(nearest("Command", keys), Some("command"));
        assert_eq!(nearest("idle_ttl", keys), Some("idle_ttl_s"));
        assert_eq!(nearest("mdoe", keys), Some("mode"));
        assert_eq!(nearest("envs", keys), Some("env"));
        assert_eq!(nearest("principle", keys), Some("principal"));
        assert_eq!(
            nearest("command", keys),
            None,
            "the word itself is no suggestion"
        );
        assert_eq!(nearest("zzzzzz", keys), None);
        assert_eq!(nearest("url", keys), Some("url_path"));
        assert_eq!(nearest("ur", keys), None, "a prefix needs three characters");
    }
}
