//! Learned tool lists survive restarts, end to end: servers that declare no tools are probed
//! once, and a gateway restarted on the same data directory serves their lists from the store
//! without starting any of them; a server whose definition changed is probed again, and the
//! list of a deleted (or no longer configured) server is gone.
//!
//! Every server here is the fixture behind `sh -c 'echo ID >> FILE; exec fixture'`, so that
//! each process start leaves one line in a file the test reads: the count of real starts,
//! whatever the gateway believes.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use support::{RunningGateway, fixture_binary, gateway};

const PROBE_WAIT: Duration = Duration::from_secs(30);

/// The shell command that records a start of `id` in `starts` and then runs the fixture, whose
/// tools are prefixed with `{id}_` so that every server lists its own.
fn counted_command(id: &str, starts: &Path) -> Vec<String> {
    vec![
        "sh".to_owned(),
        "-c".to_owned(),
        format!(
            "echo {id} >> '{}'; exec '{}' --tools-prefix {id}_",
            starts.display(),
            fixture_binary().display()
        ),
    ]
}

/// A configuration entry for a subprocess server that runs `command`.
fn subprocess_yaml(id: &str, command: &[String]) -> String {
    let command: Vec<String> = command
        .iter()
        .map(|part| serde_json::to_string(part).unwrap())
        .collect();
    format!(
        "  {id}:\n    mode: subprocess\n    command: [{}]\n",
        command.join(", ")
    )
}

/// A configuration entry for a counted server; `env` (when given) changes its definition.
fn counted_yaml(id: &str, starts: &Path, env: Option<&str>) -> String {
    let mut yaml = subprocess_yaml(id, &counted_command(id, starts));
    if let Some(value) = env {
        yaml.push_str(&format!("    env: {{MODE: {value}}}\n"));
    }
    yaml
}

fn config(entries: &[String]) -> String {
    format!("mcp_servers:\n{}", entries.concat())
}

/// How many times each server's process was started, from the starts file.
fn starts(file: &Path) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for line in std::fs::read_to_string(file).unwrap_or_default().lines() {
        *counts.entry(line.trim().to_owned()).or_default() += 1;
    }
    counts
}

fn counts(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs
        .iter()
        .map(|(id, count)| ((*id).to_owned(), *count))
        .collect()
}

fn tools(gw: &RunningGateway, id: &str) -> Value {
    let answer = gw.get(&format!("/api/mcp_servers/{id}/tools"));
    assert_eq!(answer.status, 200, "{}", answer.text);
    answer.json()
}

fn tool_names(answer: &Value) -> Vec<String> {
    answer["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("tools: {answer}"))
        .iter()
        .map(|tool| tool["name"].as_str().unwrap().to_owned())
        .collect()
}

/// Waits until `id`'s tools were listed by the server itself in this run.
fn wait_until_learned(gw: &RunningGateway, id: &str) -> Value {
    gw.wait_for(
        &format!("/api/mcp_servers/{id}/tools"),
        PROBE_WAIT,
        |body| body["source"] == "live",
    )
}

/// Lists the aggregated tools over MCP, which waits for probes under way to end, so that the
/// starts counted afterwards include every probe of this boot.
fn mcp_tools_after_probes(gw: &RunningGateway) -> Vec<String> {
    let mut names = gw.mcp_tool_names();
    names.sort();
    names
}

/// Stops the gateway as an operator would and hands back its data directory.
fn stop(mut gw: RunningGateway) -> tempfile::TempDir {
    let status = gw.signal_and_wait(libc::SIGTERM, Duration::from_secs(20));
    assert!(status.success(), "{status:?}\n{}", gw.stderr());
    std::mem::replace(&mut gw.data_dir, tempfile::tempdir().unwrap())
}

fn total_starts(gw: &RunningGateway, id: &str) -> u64 {
    let answer = gw.get(&format!("/api/mcp_servers/{id}/health"));
    assert_eq!(answer.status, 200, "{}", answer.text);
    answer.json()["total_starts"].as_u64().unwrap()
}

#[test]
fn learned_tool_lists_survive_restarts_and_only_changed_servers_are_probed_again() {
    let scratch = tempfile::tempdir().unwrap();
    let file: PathBuf = scratch.path().join("starts");
    let a = counted_yaml("a", &file, None);
    let b = counted_yaml("b", &file, None);
    let b_changed = counted_yaml("b", &file, Some("changed"));
    let c = counted_yaml("c", &file, None);

    // Boot 1: three configured servers and one created over REST, each probed once.
    let gw = gateway()
        .config(&config(&[a.clone(), b.clone(), c.clone()]))
        .start();
    let created = gw.post(
        "/api/mcp_servers",
        &json!({"mcp_server_id": "r", "mode": "subprocess", "command": counted_command("r", &file)}),
    );
    assert_eq!(created.status, 201, "{}", created.text);
    let mut learned = BTreeMap::new();
    for id in ["a", "b", "c", "r"] {
        let answer = wait_until_learned(&gw, id);
        assert!(answer["learned_at"].is_string(), "{answer}");
        learned.insert(id, tool_names(&answer));
    }
    assert!(learned["a"].contains(&"a_echo".to_owned()), "{learned:?}");
    let all_tools = mcp_tools_after_probes(&gw);
    assert_eq!(
        starts(&file),
        counts(&[("a", 1), ("b", 1), ("c", 1), ("r", 1)])
    );
    let data_dir = stop(gw);

    // Boot 2, same definitions: not one start, and every list is served from the store.
    let gw = gateway()
        .config(&config(&[a.clone(), b.clone(), c.clone()]))
        .data_dir(data_dir)
        .start();
    assert_eq!(mcp_tools_after_probes(&gw), all_tools);
    assert_eq!(
        starts(&file),
        counts(&[("a", 1), ("b", 1), ("c", 1), ("r", 1)]),
        "no server was started at the second boot"
    );
    for id in ["a", "b", "c", "r"] {
        let answer = tools(&gw, id);
        assert_eq!(answer["source"], "stored", "{id}: {answer}");
        assert!(answer["learned_at"].is_string(), "{id}: {answer}");
        assert_eq!(tool_names(&answer), learned[id], "{id}");
        assert_eq!(total_starts(&gw, id), 0, "{id}");
    }
    // A call still starts its server, which lists its tools itself.
    let answer = gw.mcp_call_tool("a__a_echo", json!({"text": "hi"}));
    assert!(answer.get("result").is_some(), "{answer}");
    assert_eq!(tools(&gw, "a")["source"], "live");
    // The server created over REST is deleted, and its list with it.
    assert_eq!(gw.delete("/api/mcp_servers/r").status, 200);
    let data_dir = stop(gw);
    let after_second = counts(&[("a", 2), ("b", 1), ("c", 1), ("r", 1)]);
    assert_eq!(starts(&file), after_second);

    // Boot 3: `b`'s definition changed and `c` is no longer configured. Exactly `b` is probed,
    // and its old list is never served.
    let gw = gateway()
        .config(&config(&[a.clone(), b_changed.clone()]))
        .data_dir(data_dir)
        .start();
    assert_ne!(tools(&gw, "b")["source"], "stored");
    wait_until_learned(&gw, "b");
    mcp_tools_after_probes(&gw);
    assert_eq!(
        starts(&file),
        counts(&[("a", 2), ("b", 2), ("c", 1), ("r", 1)]),
        "only the changed server was started"
    );
    assert_eq!(tools(&gw, "a")["source"], "stored");
    let data_dir = stop(gw);

    // Boot 4: `c` comes back unchanged and `r` comes back, now from the file, with the very
    // definition it had. Their lists were deleted with them, so both are probed; `a` and the
    // changed `b` are served from the store.
    let r = counted_yaml("r", &file, None);
    let gw = gateway()
        .config(&config(&[a, b_changed, c, r]))
        .data_dir(data_dir)
        .start();
    for id in ["c", "r"] {
        wait_until_learned(&gw, id);
    }
    mcp_tools_after_probes(&gw);
    assert_eq!(
        starts(&file),
        counts(&[("a", 2), ("b", 2), ("c", 2), ("r", 2)])
    );
    for id in ["a", "b"] {
        assert_eq!(tools(&gw, id)["source"], "stored", "{id}");
    }
}

#[test]
fn a_call_of_a_tool_the_kept_list_lacks_asks_the_server_behind_the_unchanged_definition() {
    let scratch = tempfile::tempdir().unwrap();
    let file = scratch.path().join("starts");
    let version = scratch.path().join("version");
    std::fs::write(&version, "one").unwrap();
    // The definition never changes, but what it runs does, as a newer version of a package
    // behind the same command would: the tools are prefixed with the version file's content.
    let command = vec![
        "sh".to_owned(),
        "-c".to_owned(),
        format!(
            "echo a >> '{}'; exec '{}' --tools-prefix \"$(cat '{}')_\"",
            file.display(),
            fixture_binary().display(),
            version.display()
        ),
    ];
    let yaml = config(&[subprocess_yaml("a", &command)]);

    let gw = gateway().config(&yaml).start();
    assert!(tool_names(&wait_until_learned(&gw, "a")).contains(&"one_echo".to_owned()));
    let data_dir = stop(gw);

    std::fs::write(&version, "two").unwrap();
    let gw = gateway().config(&yaml).data_dir(data_dir).start();
    let served = tools(&gw, "a");
    assert_eq!(served["source"], "stored", "{served}");
    assert!(
        tool_names(&served).contains(&"one_echo".to_owned()),
        "{served}"
    );
    assert_eq!(starts(&file), counts(&[("a", 1)]));

    // A tool the kept list lacks: the server is started and asked, and the call runs.
    let answer = gw.mcp_call_tool("a__two_echo", json!({"text": "hi"}));
    assert!(answer.get("result").is_some(), "{answer}");
    assert_eq!(starts(&file), counts(&[("a", 2)]));
    let live = tools(&gw, "a");
    assert_eq!(live["source"], "live", "{live}");
    assert!(
        !tool_names(&live).contains(&"one_echo".to_owned()),
        "{live}"
    );
    // From now on the server's own list answers: a tool it lacks is unknown, with no start.
    let unknown = gw.mcp_call_tool("a__three_echo", json!({"text": "hi"}));
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    assert_eq!(starts(&file), counts(&[("a", 2)]));
}
