//! The process table as Linux's /proc shows it, for tests and harnesses that check what the
//! gateway leaves running: descendants, zombies.

/// One process: its id, its parent's, and its state letter (`R`, `S`, `Z` for a zombie, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessEntry {
    pub pid: u32,
    pub parent: u32,
    pub state: char,
}

/// Every process /proc lists now; processes that exit while it is read are skipped.
pub fn process_table() -> Vec<ProcessEntry> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // The command name is in parentheses and may hold spaces: split after it.
            let (_, rest) = stat.rsplit_once(')')?;
            let mut fields = rest.split_whitespace();
            let state = fields.next().and_then(|s| s.chars().next()).unwrap_or('?');
            let parent = fields.next()?.parse::<u32>().ok()?;
            Some(ProcessEntry { pid, parent, state })
        })
        .collect()
}

/// Every process below `pid` (children, grandchildren, ...), zombies included.
pub fn descendants(pid: u32) -> Vec<ProcessEntry> {
    let table = process_table();
    let mut found: Vec<ProcessEntry> = Vec::new();
    let mut frontier = vec![pid];
    while let Some(current) = frontier.pop() {
        for entry in &table {
            if entry.parent == current && !found.iter().any(|seen| seen.pid == entry.pid) {
                found.push(*entry);
                frontier.push(entry.pid);
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spawned_child_is_a_descendant_until_it_is_reaped() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let own = std::process::id();
        let below = descendants(own);
        assert!(
            below
                .iter()
                .any(|entry| entry.pid == child.id() && entry.parent == own),
            "{below:?}"
        );
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!descendants(own).iter().any(|entry| entry.pid == child.id()));
    }
}
