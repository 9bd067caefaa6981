//! A unified diff of two texts.
//!
//! Lines are compared with their line ending, so a last line without one differs from the same
//! line with one, as in `diff -u`; such a line is followed by `\ No newline at end of file`.
//! The edit script is Myers' shortest one, so the diff is minimal (up to a few thousand
//! differing lines, past which the differing middle is shown as removed, then added).

/// The unified diff (`---`/`+++` headers, `@@` hunks with `context` lines around each change)
/// of `old` into `new`; empty when they are equal.
///
/// Hunks whose context would touch or overlap are merged. Ranges are written as `diff -u`
/// writes them: a count of 1 is left out (`@@ -3 +3 @@`), and an empty range names the line
/// before it (`-0,0` for an insertion at the start of an empty text).
pub fn unified_diff(
    old_name: &str,
    old: &str,
    new_name: &str,
    new: &str,
    context: usize,
) -> String {
    if old == new {
        return String::new();
    }
    let old_lines: Vec<&str> = old.split_inclusive('\n').collect();
    let new_lines: Vec<&str> = new.split_inclusive('\n').collect();
    let edits = edit_script(&old_lines, &new_lines);

    let mut diff = format!("--- {old_name}\n+++ {new_name}\n");
    for hunk in hunks(&edits, context) {
        write_hunk(&mut diff, &edits, &hunk, &old_lines, &new_lines);
    }
    diff
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Edit {
    /// The old line at the first index equals the new line at the second.
    Keep(usize, usize),
    Delete(usize),
    Insert(usize),
}

/// The shortest edit script turning `old` into `new` (Myers 1986), deletions before insertions
/// within each change.
fn edit_script(old: &[&str], new: &[&str]) -> Vec<Edit> {
    // Common ends are cheap to strip and keep the search, whose cost grows with the number of
    // differences, small for the typical edit of a few lines.
    let prefix = old.iter().zip(new).take_while(|(a, b)| a == b).count();
    let suffix = old[prefix..]
        .iter()
        .rev()
        .zip(new[prefix..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let old_middle = &old[prefix..old.len() - suffix];
    let new_middle = &new[prefix..new.len() - suffix];

    let mut edits: Vec<Edit> = (0..prefix).map(|index| Edit::Keep(index, index)).collect();
    edits.extend(
        myers(old_middle, new_middle)
            .into_iter()
            .map(|edit| match edit {
                Edit::Keep(a, b) => Edit::Keep(a + prefix, b + prefix),
                Edit::Delete(a) => Edit::Delete(a + prefix),
                Edit::Insert(b) => Edit::Insert(b + prefix),
            }),
    );
    let old_suffix_start = old.len() - suffix;
    let new_suffix_start = new.len() - suffix;
    edits.extend(
        (0..suffix).map(|offset| Edit::Keep(old_suffix_start + offset, new_suffix_start + offset)),
    );
    edits
}

/// Beyond this many differing lines the search's memory (which grows with their square) is not
/// worth a minimal diff: the differing middle is shown as removed, then added.
const MAX_SEARCHED_DIFFERENCES: usize = 4_000;

fn myers(old: &[&str], new: &[&str]) -> Vec<Edit> {
    match shortest_edits(old, new) {
        Some(edits) => edits,
        None => (0..old.len())
            .map(Edit::Delete)
            .chain((0..new.len()).map(Edit::Insert))
            .collect(),
    }
}

/// Myers' greedy search, or `None` when the texts differ in more than
/// [`MAX_SEARCHED_DIFFERENCES`] lines.
fn shortest_edits(old: &[&str], new: &[&str]) -> Option<Vec<Edit>> {
    let n = old.len() as isize;
    let m = new.len() as isize;
    let max = (n + m) as usize;
    let offset = max as isize + 1;
    // `furthest[k + offset]`: the furthest old index reached on diagonal k = x - y.
    let mut furthest = vec![0isize; 2 * max + 3];
    // Before each round d, the diagonals -(d+1)..=d+1 that the backtrack reads.
    let mut trace: Vec<Vec<isize>> = Vec::new();
    'search: for d in 0..=max as isize {
        if d as usize > MAX_SEARCHED_DIFFERENCES {
            return None;
        }
        trace.push(furthest[(offset - d - 1) as usize..=(offset + d + 1) as usize].to_vec());
        let mut k = -d;
        while k <= d {
            let index = (k + offset) as usize;
            let mut x = if k == -d || (k != d && furthest[index - 1] < furthest[index + 1]) {
                furthest[index + 1]
            } else {
                furthest[index - 1] + 1
            };
            let mut y = x - k;
            while x < n && y < m && old[x as usize] == new[y as usize] {
                x += 1;
                y += 1;
            }
            furthest[index] = x;
            if x >= n && y >= m {
                break 'search;
            }
            k += 2;
        }
    }

    // Walk back from the end through the recorded rounds, one edit per round.
    let mut edits = Vec::new();
    let (mut x, mut y) = (n, m);
    for (d, before) in trace.iter().enumerate().rev() {
        let d = d as isize;
        let at = |k: isize| before[(k + d + 1) as usize];
        let k = x - y;
        let previous_k = if k == -d || (k != d && at(k - 1) < at(k + 1)) {
            k + 1
        } else {
            k - 1
        };
        let previous_x = if d == 0 { 0 } else { at(previous_k) };
        let previous_y = previous_x - previous_k;
        let (start_x, start_y) = if d == 0 {
            (0, 0)
        } else if previous_k == k + 1 {
            (previous_x, previous_y + 1)
        } else {
            (previous_x + 1, previous_y)
        };
        while x > start_x && y > start_y {
            x -= 1;
            y -= 1;
            edits.push(Edit::Keep(x as usize, y as usize));
        }
        if d > 0 {
            if previous_k == k + 1 {
                edits.push(Edit::Insert(previous_y as usize));
            } else {
                edits.push(Edit::Delete(previous_x as usize));
            }
        }
        x = previous_x;
        y = previous_y;
    }
    edits.reverse();
    Some(edits)
}

/// A run of edits that forms one hunk: changes with up to `context` kept lines on each side.
struct Hunk {
    start: usize,
    end: usize,
}

fn hunks(edits: &[Edit], context: usize) -> Vec<Hunk> {
    let changes: Vec<usize> = edits
        .iter()
        .enumerate()
        .filter(|(_, edit)| !matches!(edit, Edit::Keep(..)))
        .map(|(index, _)| index)
        .collect();
    let mut hunks: Vec<Hunk> = Vec::new();
    for change in changes {
        let start = change.saturating_sub(context);
        let end = (change + 1 + context).min(edits.len());
        match hunks.last_mut() {
            // Kept lines between two changes that fit in both contexts join the hunks.
            Some(last) if start <= last.end => last.end = end,
            _ => hunks.push(Hunk { start, end }),
        }
    }
    hunks
}

fn write_hunk(
    diff: &mut String,
    edits: &[Edit],
    hunk: &Hunk,
    old_lines: &[&str],
    new_lines: &[&str],
) {
    let before = &edits[..hunk.start];
    let edits = &edits[hunk.start..hunk.end];
    let old_before = before
        .iter()
        .filter(|edit| !matches!(edit, Edit::Insert(_)))
        .count();
    let new_before = before
        .iter()
        .filter(|edit| !matches!(edit, Edit::Delete(_)))
        .count();
    let old_count = edits
        .iter()
        .filter(|edit| !matches!(edit, Edit::Insert(_)))
        .count();
    let new_count = edits
        .iter()
        .filter(|edit| !matches!(edit, Edit::Delete(_)))
        .count();
    // A range is named by its first line; an empty one by the line before it.
    let old_start = if old_count == 0 {
        old_before
    } else {
        old_before + 1
    };
    let new_start = if new_count == 0 {
        new_before
    } else {
        new_before + 1
    };
    diff.push_str(&format!(
        "@@ -{} +{} @@\n",
        range(old_start, old_count),
        range(new_start, new_count)
    ));
    for edit in edits {
        let (marker, line) = match *edit {
            Edit::Keep(a, _) => (' ', old_lines[a]),
            Edit::Delete(a) => ('-', old_lines[a]),
            Edit::Insert(b) => ('+', new_lines[b]),
        };
        diff.push(marker);
        diff.push_str(line);
        if !line.ends_with('\n') {
            diff.push_str("\n\\ No newline at end of file\n");
        }
    }
}

fn range(start: usize, count: usize) -> String {
    if count == 1 {
        start.to_string()
    } else {
        format!("{start},{count}")
    }
}
