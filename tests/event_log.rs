//! The persistent event log end to end: the tool history reads from it and survives a restart,
//! event ids continue after the last logged one, and retention trims the oldest events.
//!
//! Bad input tried: a history cursor below every event (an empty page) and a zero `limit` (422),
//! an `event_log` section with an unknown key and a zero compaction interval (refused at start).

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{RunningGateway, fixture_server_yaml, gateway};

fn config(extra: &str) -> String {
    format!("{extra}mcp_servers:\n{}", fixture_server_yaml("fx", &[]))
}

fn history(gw: &RunningGateway, query: &str) -> Value {
    let answer = gw.get(&format!("/api/mcp_servers/fx/tools/history{query}"));
    assert_eq!(answer.status, 200, "{}", answer.text);
    answer.json()
}

fn entries(page: &Value) -> Vec<Value> {
    page["history"].as_array().cloned().unwrap_or_default()
}

/// Event ids are strings in the API (a store may choose other ids); these are numbers.
fn id_of(entry: &Value) -> u64 {
    entry["event_id"]
        .as_str()
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("an event id: {entry}"))
}

fn ids(entries: &[Value]) -> Vec<u64> {
    entries.iter().map(id_of).collect()
}

fn call_echo(gw: &RunningGateway, text: &str) {
    let answer = gw.mcp_call_tool("fx__echo", json!({"text": text}));
    assert!(answer.get("result").is_some(), "{answer}");
}

#[test]
fn tool_history_survives_a_restart_and_new_ids_follow_the_old_ones() {
    let mut gw = gateway().config(&config("")).start();
    for index in 0..3 {
        call_echo(&gw, &format!("before {index}"));
    }
    let failed = gw.mcp_call_tool("fx__fail", json!({}));
    assert!(failed.get("result").is_some(), "{failed}");
    let before = entries(&history(&gw, "?limit=50"));
    assert_eq!(before.len(), 4, "{before:?}");
    assert_eq!(before[0]["tool"], "fail");
    assert_eq!(before[0]["success"], true, "a tool error is an answer");
    assert_eq!(before[3]["tool"], "echo");

    let status = gw.signal_and_wait(libc::SIGTERM, Duration::from_secs(20));
    assert!(status.success(), "{status:?}");
    let data_dir = std::mem::replace(&mut gw.data_dir, tempfile::tempdir().unwrap());
    drop(gw);
    assert!(
        data_dir.path().join("events.db").is_file(),
        "the log lives in the data directory"
    );

    let gw = gateway().config(&config("")).data_dir(data_dir).start();
    let after_restart = entries(&history(&gw, "?limit=50"));
    assert_eq!(after_restart, before, "the same entries, ids and all");

    call_echo(&gw, "after the restart");
    let newest = entries(&history(&gw, "?limit=1"));
    let old_max = ids(&before).into_iter().max().unwrap();
    assert!(
        id_of(&newest[0]) > old_max,
        "new ids continue after the logged ones: {newest:?} vs {old_max}"
    );

    // Paging over the restart boundary: two pages of 3 and 2, newest first, no overlap.
    let first = history(&gw, "?limit=3");
    let cursor = first["next_cursor"].clone();
    assert!(!cursor.is_null(), "{first}");
    let cursor = cursor.as_str().expect("a string cursor");
    let second = history(&gw, &format!("?limit=3&cursor={cursor}"));
    let mut all = ids(&entries(&first));
    all.extend(ids(&entries(&second)));
    assert_eq!(all.len(), 5, "{first} {second}");
    assert!(all.windows(2).all(|pair| pair[0] > pair[1]), "{all:?}");
    assert!(second["next_cursor"].is_null(), "{second}");

    // A cursor below every event answers an empty page, and limit 0 is refused clearly.
    let empty = history(&gw, "?limit=5&cursor=1");
    assert!(entries(&empty).is_empty(), "{empty}");
    let message = gw
        .get("/api/mcp_servers/fx/tools/history?limit=0")
        .assert_error(422, "ValidationError");
    assert!(message.contains("limit"), "{message}");
}

#[test]
fn retention_keeps_only_the_newest_events() {
    let gw = gateway()
        .config(&config(
            "event_log: {max_events: 5, compaction_interval_s: 1}\n",
        ))
        .start();
    for index in 0..12 {
        call_echo(&gw, &format!("call {index}"));
    }
    let newest_call = id_of(&entries(&history(&gw, "?limit=1"))[0]);
    // Compaction runs every second: wait until the log holds at most five events.
    let deadline = Instant::now() + Duration::from_secs(20);
    let kept = loop {
        let kept = entries(&history(&gw, "?limit=100"));
        if kept.len() <= 5 {
            break kept;
        }
        assert!(
            Instant::now() < deadline,
            "retention never trimmed the log: {} entries",
            kept.len()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(!kept.is_empty(), "the newest calls are kept");
    assert_eq!(
        id_of(&kept[0]),
        newest_call,
        "the newest call survives compaction"
    );
    let kept_ids = ids(&kept);
    assert!(
        kept_ids.iter().all(|id| *id + 5 > newest_call),
        "only events among the newest five remain: {kept_ids:?} (newest {newest_call})"
    );
}

#[test]
fn a_bad_event_log_section_stops_the_start_with_the_key() {
    for (section, key) in [
        (
            "event_log: {max_events: 5, keep: forever}\n",
            "event_log.keep",
        ),
        (
            "event_log: {compaction_interval_s: 0}\n",
            "event_log.compaction_interval_s",
        ),
    ] {
        let stderr = support::start_fails(Some(&config(section)), &[]);
        assert!(stderr.contains(key), "{section}: {stderr}");
    }
}
