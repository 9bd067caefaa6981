//! End-to-end tests of load-balanced groups: the real binary, the testkit's fixture MCP server
//! as every member (real subprocesses), calls through `/mcp`, and the REST API under
//! `/api/groups`.
//!
//! Every member fixture runs with `MCPGW_TEST_MEMBER=<its id>` in its environment, and the
//! calls go to the fixture's `env` tool for that variable, so each answer names the member that
//! gave it. The tool invocation history of each member server counts the same calls again on
//! the gateway's side.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::peers::run_python_client;
use support::{RunningGateway, descendants, fixture_binary, gateway, send_signal};

/// Set in each member's environment to the member's id.
const MEMBER_VARIABLE: &str = "MCPGW_TEST_MEMBER";

/// How long a member may take to be restarted after a crash: the restart backoff grows while
/// it keeps failing (1 s, 2 s, 4 s, ...), and the recovery pass runs periodically.
const RECOVERY_WITHIN: Duration = Duration::from_secs(120);

const SOON: Duration = Duration::from_secs(30);

/// A fixture server entry of `mcp_servers`, with extra YAML lines (indented by four spaces).
fn member_yaml(id: &str, extra: &str) -> String {
    format!(
        "  {id}:\n    mode: subprocess\n    command: [\"{}\"]\n    env: {{{MEMBER_VARIABLE}: {id}}}\n{extra}",
        fixture_binary().display()
    )
}

/// A member whose start succeeds only while `gate` exists: `sh` checks the file and then
/// becomes the fixture (`exec`), so the process the gateway watches is the fixture itself.
/// Removing the gate keeps a killed member down until the test puts it back.
fn gated_member_yaml(id: &str, gate: &Path, extra: &str) -> String {
    let script = format!(
        "test -e '{}' || {{ echo 'gate closed' >&2; exit 3; }}; exec '{}'",
        gate.display(),
        fixture_binary().display()
    );
    format!(
        "  {id}:\n    mode: subprocess\n    command: [\"/bin/sh\", \"-c\", {}]\n    env: {{{MEMBER_VARIABLE}: {id}}}\n{extra}",
        serde_json::to_string(&script).unwrap()
    )
}

fn group_yaml(id: &str, strategy: &str, min_healthy: u32, members: &[&str]) -> String {
    let members: Vec<String> = members
        .iter()
        .map(|member| format!("{{id: {member}}}"))
        .collect();
    format!(
        "  {id}:\n    mode: group\n    strategy: {strategy}\n    min_healthy: {min_healthy}\n    members: [{}]\n",
        members.join(", ")
    )
}

fn config(entries: &[String]) -> String {
    format!("mcp_servers:\n{}", entries.join(""))
}

/// A gate file for [`gated_member_yaml`]; open (present) until closed.
struct Gate(PathBuf);

impl Gate {
    fn new(dir: &Path, id: &str) -> Self {
        let gate = Gate(dir.join(format!("{id}.gate")));
        gate.open();
        gate
    }

    fn open(&self) {
        std::fs::write(&self.0, b"open").unwrap();
    }

    fn close(&self) {
        std::fs::remove_file(&self.0).unwrap();
    }
}

/// Polls `condition` until it holds, or fails with `what` after `within`.
#[track_caller]
fn wait_until(within: Duration, what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !condition() {
        assert!(Instant::now() < deadline, "not within {within:?}: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn group(gw: &RunningGateway, id: &str) -> Value {
    let answer = gw.get(&format!("/api/groups/{id}"));
    assert_eq!(answer.status, 200, "{}", answer.text);
    answer.json()
}

fn member<'a>(group: &'a Value, id: &str) -> &'a Value {
    group["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|member| member["id"] == id)
        .unwrap_or_else(|| panic!("no member {id} in {group}"))
}

fn member_ids(group: &Value) -> Vec<String> {
    group["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|member| member["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Waits until `tools/list` offers `{group}__env`, i.e. the group knows its members' tools.
fn wait_for_group_tools(gw: &RunningGateway, group: &str) {
    let wanted = format!("{group}__env");
    wait_until(SOON, &format!("tools/list offers {wanted}"), || {
        gw.mcp_tool_names().contains(&wanted)
    });
}

/// One call of `{group}__env` for the member variable; answers the member that served it.
#[track_caller]
fn who_answers(gw: &RunningGateway, group: &str) -> String {
    let tool = format!("{group}__env");
    let answer = gw.mcp_call_tool(&tool, json!({"name": MEMBER_VARIABLE}));
    let result = &answer["result"];
    assert!(
        result.is_object() && result["isError"] != true,
        "{tool} failed: {answer}"
    );
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{tool} answered no text: {answer}"))
        .to_owned()
}

/// `calls` calls through the group, in order: who answered each.
fn answers(gw: &RunningGateway, group: &str, calls: usize) -> Vec<String> {
    (0..calls).map(|_| who_answers(gw, group)).collect()
}

fn tally(answers: &[String]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for answer in answers {
        *counts.entry(answer.clone()).or_insert(0) += 1;
    }
    counts
}

fn counts(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs
        .iter()
        .map(|(member, count)| ((*member).to_owned(), *count))
        .collect()
}

/// How many successful `env` calls the server's invocation history holds.
fn env_calls_recorded(gw: &RunningGateway, server: &str) -> usize {
    let history = gw
        .get(&format!(
            "/api/mcp_servers/{server}/tools/history?limit=500"
        ))
        .json();
    history["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|entry| entry["tool"] == "env" && entry["success"] == true)
        .count()
}

/// Waits until each member's history records exactly its expected number of `env` calls.
#[track_caller]
fn assert_recorded_on_members(gw: &RunningGateway, expected: &BTreeMap<String, usize>) {
    for (server, count) in expected {
        wait_until(
            Duration::from_secs(10),
            &format!("{count} env calls recorded on {server}"),
            || env_calls_recorded(gw, server) == *count,
        );
    }
}

/// The pid of the member fixture `id`, found among the gateway's descendants by its
/// environment.
fn member_pid(gw: &RunningGateway, id: &str) -> i32 {
    let marker = format!("{MEMBER_VARIABLE}={id}");
    let found: Vec<i32> = descendants(gw.pid())
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
                environ
                    .split(|byte| *byte == 0)
                    .any(|entry| entry == marker.as_bytes())
            })
        })
        .collect();
    assert_eq!(found.len(), 1, "one process of member {id}: {found:?}");
    found[0]
}

fn tool_names(gw: &RunningGateway) -> Vec<String> {
    gw.mcp_tool_names()
}

#[test]
fn a_group_of_the_configuration_file_spreads_calls_round_robin_and_hides_its_members() {
    let gw = gateway()
        .config(&config(&[
            member_yaml("m1", ""),
            member_yaml("m2", ""),
            member_yaml("m3", ""),
            group_yaml("pool", "round_robin", 2, &["m1", "m2", "m3"]),
        ]))
        .start();

    let list = gw.get("/api/groups").json();
    let groups = list["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "{list}");
    let pool = &groups[0];
    assert_eq!(pool["group_id"], "pool");
    assert_eq!(pool["origin"], "config");
    assert_eq!(pool["strategy"], "round_robin");
    assert_eq!(pool["min_healthy"], 2);
    assert_eq!(pool["state"], "healthy");
    assert_eq!(member_ids(pool), ["m1", "m2", "m3"]);
    for member in pool["members"].as_array().unwrap() {
        assert_eq!(member["weight"], 1, "{member}");
        assert_eq!(member["priority"], 0, "{member}");
        assert_eq!(member["in_rotation"], true, "{member}");
    }
    // The group's servers are ordinary servers in the server list.
    let servers = gw.get("/api/mcp_servers").json();
    assert_eq!(servers["mcp_servers"].as_array().unwrap().len(), 3);

    // tools/list: the group's tools, and none of its members' own.
    wait_for_group_tools(&gw, "pool");
    let names = tool_names(&gw);
    for expected in ["pool__echo", "pool__add", "pool__env"] {
        assert!(
            names.contains(&expected.to_owned()),
            "{expected}: {names:?}"
        );
    }
    assert!(
        names.iter().all(|name| name.starts_with("pool__")),
        "members are not listed on their own: {names:?}"
    );

    // Round robin: every member in turn, exactly.
    let order = answers(&gw, "pool", 30);
    let first_three: std::collections::BTreeSet<&String> = order[..3].iter().collect();
    assert_eq!(first_three.len(), 3, "{order:?}");
    for (index, answer) in order.iter().enumerate() {
        assert_eq!(answer, &order[index % 3], "call {index} of {order:?}");
    }
    let expected = counts(&[("m1", 10), ("m2", 10), ("m3", 10)]);
    assert_eq!(tally(&order), expected);
    assert_recorded_on_members(&gw, &expected);

    // The official Python SDK, in the 2025 era with a session, sees the same catalogue and
    // calls through the group.
    let run = run_python_client(
        "http_client.py",
        &[
            gw.url("/mcp"),
            "--protocol".to_owned(),
            "2025-11-25".to_owned(),
            "--call".to_owned(),
            "pool__echo".to_owned(),
            r#"{"text": "through the group"}"#.to_owned(),
        ],
    );
    let listed: Vec<&str> = run["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool.as_str().unwrap())
        .collect();
    assert!(listed.contains(&"pool__echo"), "{listed:?}");
    assert!(
        !listed
            .iter()
            .any(|name| ["m1__", "m2__", "m3__"].iter().any(|p| name.starts_with(p))),
        "{listed:?}"
    );
    let call = &run["calls"][0];
    assert_eq!(call["name"], "pool__echo", "{run}");
    assert_eq!(call["content"][0]["text"], "through the group", "{run}");

    // The file is the source of truth of this group.
    for (method, path, body) in [
        ("PUT", "/api/groups/pool", Some(json!({"min_healthy": 1}))),
        ("DELETE", "/api/groups/pool", None),
        (
            "POST",
            "/api/groups/pool/members",
            Some(json!({"member_id": "m1"})),
        ),
        ("DELETE", "/api/groups/pool/members/m1", None),
    ] {
        let answer = match (method, body) {
            ("PUT", Some(body)) => gw.put(path, &body),
            ("POST", Some(body)) => gw.post(path, &body),
            _ => gw.delete(path),
        };
        let message = answer.assert_error(409, "ConflictError");
        assert!(
            message.contains("configuration file"),
            "{method} {path}: {message}"
        );
    }
    assert_eq!(gw.post_empty("/api/groups/pool/rebalance").status, 200);
    assert_eq!(member_ids(&group(&gw, "pool")), ["m1", "m2", "m3"]);
}

#[test]
fn a_group_built_over_rest_spreads_weighted_calls_3_to_1_and_survives_a_restart() {
    let yaml = config(&[member_yaml("w1", ""), member_yaml("w2", "")]);
    let mut gw = gateway().config(&yaml).start();

    let created = gw.post(
        "/api/groups",
        &json!({
            "group_id": "weighted",
            "strategy": "weighted_round_robin",
            "min_healthy": 1,
            "description": "three to one",
            "members": [{"id": "w1", "weight": 3}, {"member_id": "w2", "weight": 1}],
        }),
    );
    assert_eq!(created.status, 201, "{}", created.text);
    let created = created.json();
    assert_eq!(created["created"], true);
    assert_eq!(created["origin"], "api");
    assert_eq!(created["state"], "healthy");
    assert_eq!(member(&created, "w1")["weight"], 3);

    wait_for_group_tools(&gw, "weighted");
    let order = answers(&gw, "weighted", 40);
    // Smooth weighted round robin: exactly 3 of every 4 calls go to w1.
    for (block, calls) in order.chunks(4).enumerate() {
        assert_eq!(
            tally(calls),
            counts(&[("w1", 3), ("w2", 1)]),
            "block {block} of {order:?}"
        );
    }
    let expected = counts(&[("w1", 30), ("w2", 10)]);
    assert_recorded_on_members(&gw, &expected);

    // A create body without members, then members added one by one.
    let built = gw.post(
        "/api/groups",
        &json!({"group_id": "built", "strategy": "round_robin", "min_healthy": 1}),
    );
    assert_eq!(built.status, 201, "{}", built.text);
    assert_eq!(built.json()["state"], "unavailable");
    assert_eq!(built.json()["members"], json!([]));
    for (id, weight, priority) in [("w2", 1, 0), ("w1", 2, 1)] {
        let added = gw.post(
            "/api/groups/built/members",
            &json!({"member_id": id, "weight": weight, "priority": priority}),
        );
        assert_eq!(added.status, 201, "{}", added.text);
    }
    let built = group(&gw, "built");
    assert_eq!(member_ids(&built), ["w2", "w1"]);
    assert_eq!(member(&built, "w1")["weight"], 2);
    assert_eq!(member(&built, "w1")["priority"], 1);
    assert_eq!(built["state"], "healthy");
    wait_for_group_tools(&gw, "built");
    assert_eq!(
        tally(&answers(&gw, "built", 4)),
        counts(&[("w1", 2), ("w2", 2)])
    );
    let removed = gw.delete("/api/groups/built/members/w1");
    assert_eq!(removed.status, 200, "{}", removed.text);
    assert_eq!(member_ids(&removed.json()), ["w2"]);
    assert_eq!(tally(&answers(&gw, "built", 3)), counts(&[("w2", 3)]));
    let deleted = gw.delete("/api/groups/built");
    assert_eq!(deleted.status, 200, "{}", deleted.text);
    assert_eq!(
        deleted.json(),
        json!({"group_id": "built", "deleted": true})
    );
    wait_until(SOON, "built__env leaves tools/list", || {
        !tool_names(&gw).contains(&"built__env".to_owned())
    });
    gw.get("/api/groups/built")
        .assert_error(404, "GroupNotFoundError");

    // The REST group is stored and comes back after a restart.
    let status = gw.signal_and_wait(libc::SIGTERM, Duration::from_secs(20));
    assert!(status.success(), "{status:?}");
    let data_dir = std::mem::replace(&mut gw.data_dir, tempfile::tempdir().unwrap());
    drop(gw);
    let gw = gateway().config(&yaml).data_dir(data_dir).start();
    let restored = gw.get("/api/groups").json();
    let ids: Vec<&str> = restored["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|group| group["group_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["weighted"], "{restored}");
    let weighted = group(&gw, "weighted");
    assert_eq!(weighted["strategy"], "weighted_round_robin");
    assert_eq!(weighted["description"], "three to one");
    assert_eq!(member_ids(&weighted), ["w1", "w2"]);
    assert_eq!(member(&weighted, "w1")["weight"], 3);
    wait_for_group_tools(&gw, "weighted");
    assert_eq!(
        tally(&answers(&gw, "weighted", 8)),
        counts(&[("w1", 6), ("w2", 2)])
    );
}

#[test]
fn a_killed_member_leaves_rotation_and_returns_after_it_recovers() {
    let gates_dir = tempfile::tempdir().unwrap();
    let gates: BTreeMap<&str, Gate> = ["k1", "k2", "k3"]
        .into_iter()
        .map(|id| (id, Gate::new(gates_dir.path(), id)))
        .collect();
    let gw = gateway()
        .config(&config(&[
            gated_member_yaml("k1", &gates["k1"].0, ""),
            gated_member_yaml("k2", &gates["k2"].0, ""),
            gated_member_yaml("k3", &gates["k3"].0, ""),
            group_yaml("trio", "round_robin", 3, &["k1", "k2", "k3"]),
        ]))
        .start();
    wait_for_group_tools(&gw, "trio");
    // One call each starts every member.
    assert_eq!(
        tally(&answers(&gw, "trio", 3)),
        counts(&[("k1", 1), ("k2", 1), ("k3", 1)])
    );
    let trio = group(&gw, "trio");
    assert_eq!(trio["state"], "healthy", "{trio}");
    assert_eq!(trio["members_in_rotation"], 3);

    // k2 dies and cannot come back yet: it leaves rotation; below min_healthy 3, the group is
    // partial.
    gates["k2"].close();
    send_signal(member_pid(&gw, "k2"), libc::SIGKILL);
    wait_until(SOON, "k2 leaves rotation", || {
        member(&group(&gw, "trio"), "k2")["in_rotation"] == false
    });
    let trio = group(&gw, "trio");
    assert_eq!(trio["state"], "partial", "{trio}");
    assert_eq!(trio["members_in_rotation"], 2);
    assert_ne!(member(&trio, "k2")["state"], "ready", "{trio}");

    // Calls keep succeeding, on the other two, in turn.
    let order = answers(&gw, "trio", 12);
    assert_eq!(tally(&order), counts(&[("k1", 6), ("k3", 6)]), "{order:?}");

    // With no member left the group is unavailable, and a call says so.
    for id in ["k1", "k3"] {
        gates[id].close();
        send_signal(member_pid(&gw, id), libc::SIGKILL);
    }
    wait_until(SOON, "the group becomes unavailable", || {
        group(&gw, "trio")["state"] == "unavailable"
    });
    assert_eq!(group(&gw, "trio")["members_in_rotation"], 0);
    let refused = gw.mcp_call_tool("trio__env", json!({"name": MEMBER_VARIABLE}));
    let failed = refused["error"].is_object() || refused["result"]["isError"] == true;
    assert!(failed, "a call to an unavailable group fails: {refused}");
    assert!(
        refused.to_string().contains("no member in rotation"),
        "{refused}"
    );

    // Once they can start again, the recovery restarts them and they return.
    for gate in gates.values() {
        gate.open();
    }
    wait_until(RECOVERY_WITHIN, "every member returns to rotation", || {
        let trio = group(&gw, "trio");
        trio["state"] == "healthy"
            && trio["members"]
                .as_array()
                .unwrap()
                .iter()
                .all(|member| member["in_rotation"] == true && member["state"] == "ready")
    });
    let order = answers(&gw, "trio", 9);
    assert_eq!(
        tally(&order),
        counts(&[("k1", 3), ("k2", 3), ("k3", 3)]),
        "{order:?}"
    );
}

#[test]
fn rebalance_returns_a_healthy_member_to_rotation_and_restarts_the_strategy() {
    // Health checks every 5 s (the least allowed), so that a frozen member fails one soon.
    let every_5_s = "    health_check_interval_s: 5\n";
    let gw = gateway()
        .config(&config(&[
            member_yaml("r1", every_5_s),
            member_yaml("r2", every_5_s),
            group_yaml("duo", "round_robin", 2, &["r1", "r2"]),
        ]))
        .start();
    wait_for_group_tools(&gw, "duo");
    // Three calls: r1, r2, r1; the next turn would be r2's.
    let order = answers(&gw, "duo", 3);
    assert_eq!(order[0], order[2], "{order:?}");
    assert_ne!(order[0], order[1], "{order:?}");
    let first = order[0].clone();
    let duo = group(&gw, "duo");
    assert_eq!(
        member_ids(&duo)[0],
        first,
        "round robin starts at the first member"
    );

    // Frozen, r1 fails a health check and leaves rotation; its server is still ready (one
    // failure is below its limit), so only a passing health check or a rebalance returns it.
    let pid = member_pid(&gw, "r1");
    send_signal(pid, libc::SIGSTOP);
    wait_until(Duration::from_secs(60), "r1 fails a health check", || {
        member(&group(&gw, "duo"), "r1")["in_rotation"] == false
    });
    send_signal(pid, libc::SIGCONT);
    let duo = group(&gw, "duo");
    assert_eq!(duo["state"], "partial", "{duo}");
    assert_eq!(member(&duo, "r1")["state"], "ready", "{duo}");

    let rebalanced = gw.post_empty("/api/groups/duo/rebalance");
    assert_eq!(rebalanced.status, 200, "{}", rebalanced.text);
    let rebalanced = rebalanced.json();
    assert_eq!(
        member(&rebalanced, "r1")["in_rotation"],
        true,
        "{rebalanced}"
    );
    assert_eq!(rebalanced["state"], "healthy", "{rebalanced}");
    assert_eq!(rebalanced["members_in_rotation"], 2);

    // The strategy starts again from the first member, and both take calls.
    let order = answers(&gw, "duo", 4);
    assert_eq!(order, ["r1", "r2", "r1", "r2"], "after the rebalance");
}

#[test]
fn bad_group_requests_answer_the_documented_errors() {
    let gw = gateway()
        .config(&format!(
            "probe_tools: false\n{}",
            config(&[
                member_yaml("s1", ""),
                member_yaml("s2", ""),
                group_yaml("filed", "round_robin", 1, &["s1"]),
            ])
        ))
        .start();
    let created = gw.post(
        "/api/groups/",
        &json!({"group_id": "pool", "strategy": "priority", "min_healthy": 1,
                "members": [{"id": "s2", "priority": 1}]}),
    );
    assert_eq!(created.status, 201, "{}", created.text);

    // Unknown group, on every route that names one.
    for (method, path) in [
        ("GET", "/api/groups/nope"),
        ("PUT", "/api/groups/nope"),
        ("DELETE", "/api/groups/nope"),
        ("POST", "/api/groups/nope/rebalance"),
        ("POST", "/api/groups/nope/members"),
        ("DELETE", "/api/groups/nope/members/s1"),
    ] {
        let answer = match method {
            "GET" => gw.get(path),
            "PUT" => gw.put(path, &json!({"min_healthy": 1})),
            "POST" if path.ends_with("/members") => gw.post(path, &json!({"member_id": "s1"})),
            "POST" => gw.post_empty(path),
            _ => gw.delete(path),
        };
        let message = answer.assert_error(404, "GroupNotFoundError");
        assert!(message.contains("`nope`"), "{method} {path}: {message}");
    }
    // A server that is not a member of the group.
    let message = gw
        .delete("/api/groups/pool/members/s1")
        .assert_error(404, "GroupMemberNotFoundError");
    assert!(message.contains("`s1`"), "{message}");
    // A member server that does not exist, at create and at add.
    let message = gw
        .post(
            "/api/groups",
            &json!({"group_id": "ghostly", "members": [{"id": "ghost"}]}),
        )
        .assert_error(404, "McpServerNotFoundError");
    assert!(message.contains("`ghost`"), "{message}");
    gw.post("/api/groups/pool/members", &json!({"member_id": "ghost"}))
        .assert_error(404, "McpServerNotFoundError");

    // Duplicate ids: another group's, a server's.
    for id in ["pool", "filed", "s1"] {
        let message = gw
            .post("/api/groups", &json!({"group_id": id}))
            .assert_error(409, "GroupAlreadyExistsError");
        assert!(message.contains(&format!("`{id}`")), "{message}");
    }
    gw.post("/api/groups/pool/members", &json!({"member_id": "s2"}))
        .assert_error(409, "GroupMemberAlreadyExistsError");

    // Bad strategy, min_healthy above the members, malformed JSON, wrong types.
    let bad_bodies = [
        (r#"{"group_id": "g", "strategy": "fastest"}"#, "strategy"),
        (
            r#"{"group_id": "g", "min_healthy": 2, "members": [{"id": "s1"}]}"#,
            "min_healthy 2 is larger than the 1 member(s)",
        ),
        (r#"{"group_id": "g", "min_healthy": 0}"#, "min_healthy"),
        (r#"{"group_id": "g", "strategy": "#, "not valid JSON"),
        (r#"{"group_id": "g", "min_healthy": "two"}"#, "min_healthy"),
        (r#"{"group_id": ["g"]}"#, "group_id"),
        (r#"{"group_id": "g", "members": "s1"}"#, "members"),
        (
            r#"{"group_id": "g", "members": [{"id": "s1", "weight": "3"}]}"#,
            "members[0].weight",
        ),
    ];
    for (body, expected) in bad_bodies {
        let message = gw
            .post_raw("/api/groups", body)
            .assert_error(422, "ValidationError");
        assert!(message.contains(expected), "{body}: {message}");
    }
    let message = gw
        .put("/api/groups/pool", &json!({"min_healthy": 2}))
        .assert_error(422, "ValidationError");
    assert!(message.contains("larger than the 1 member(s)"), "{message}");
    gw.put("/api/groups/pool", &json!({"strategy": "sticky"}))
        .assert_error(422, "ValidationError");
    gw.post_raw("/api/groups/pool/members", "{\"member_id\": ")
        .assert_error(422, "ValidationError");
    gw.post(
        "/api/groups/pool/members",
        &json!({"member_id": "s1", "weight": "heavy"}),
    )
    .assert_error(422, "ValidationError");

    // The configuration file's group changes only with the file.
    gw.put("/api/groups/filed", &json!({"strategy": "random"}))
        .assert_error(409, "ConflictError");
    gw.delete("/api/groups/filed")
        .assert_error(409, "ConflictError");
    gw.post("/api/groups/filed/members", &json!({"member_id": "s2"}))
        .assert_error(409, "ConflictError");
    gw.delete("/api/groups/filed/members/s1")
        .assert_error(409, "ConflictError");

    // Servers and groups share one namespace.
    for id in ["pool", "filed"] {
        gw.post(
            "/api/mcp_servers",
            &json!({"mcp_server_id": id, "mode": "subprocess", "command": [fixture_binary().display().to_string()]}),
        )
        .assert_error(409, "McpServerAlreadyExistsError");
    }
    // A member server cannot be deleted while it is a member; the answer names the group.
    let extra = gw.post(
        "/api/mcp_servers",
        &json!({"mcp_server_id": "extra", "mode": "subprocess", "command": [fixture_binary().display().to_string()]}),
    );
    assert_eq!(extra.status, 201, "{}", extra.text);
    let added = gw.post("/api/groups/pool/members", &json!({"member_id": "extra"}));
    assert_eq!(added.status, 201, "{}", added.text);
    let message = gw
        .delete("/api/mcp_servers/extra")
        .assert_error(409, "ConflictError");
    assert!(message.contains("group `pool`"), "{message}");
    assert_eq!(gw.delete("/api/groups/pool/members/extra").status, 200);
    assert_eq!(gw.delete("/api/mcp_servers/extra").status, 200);

    // Nothing that was refused changed anything.
    let list = gw.get("/api/groups").json();
    let summary: Vec<(String, String, Vec<String>)> = list["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|group| {
            (
                group["group_id"].as_str().unwrap().to_owned(),
                group["strategy"].as_str().unwrap().to_owned(),
                member_ids(group),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (
                "filed".to_owned(),
                "round_robin".to_owned(),
                vec!["s1".to_owned()]
            ),
            (
                "pool".to_owned(),
                "priority".to_owned(),
                vec!["s2".to_owned()]
            ),
        ]
    );
    assert_eq!(gw.get("/api/groups/").json(), list);
}
