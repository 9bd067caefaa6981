//! The registry's rules, driven scan by scan with explicit times.

use std::time::Duration;

use mcpgw_core::{LaunchSpec, ServerId, ServerOrigin, Timestamp};
use serde_json::{Map, Value, json};

use crate::*;

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_unix_micros(1_700_000_000_000_000 + seconds * 1_000_000)
}

fn source(id: &str, mode: DiscoveryMode, grace_s: u64) -> SourceDefinition {
    let mut config = Map::new();
    config.insert(REMOVAL_GRACE_KEY.to_owned(), json!(grace_s));
    SourceDefinition {
        source_id: id.to_owned(),
        source_type: "docker".to_owned(),
        mode,
        enabled: true,
        config,
        origin: SourceOrigin::Config,
    }
}

fn definition(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

fn docker(name: &str, image: &str) -> DiscoveredCandidate {
    DiscoveredCandidate {
        name: name.to_owned(),
        location: format!("container {name}"),
        definition: Ok(definition(json!({"mode": "docker", "image": image}))),
    }
}

fn nothing_taken(_: &ServerId) -> bool {
    false
}

fn id(name: &str) -> ServerId {
    ServerId::parse(name).unwrap()
}

#[test]
fn a_new_valid_candidate_waits_as_pending_with_its_definition() {
    let mut registry = DiscoveryRegistry::new();
    let dock = source("dock", DiscoveryMode::Additive, 0);
    let outcome = registry.apply_scan(&dock, vec![docker("web", "img:1")], at(0), &nothing_taken);
    assert_eq!(
        (outcome.found, outcome.pending, outcome.quarantined),
        (1, 1, 0)
    );
    assert_eq!(outcome.newly_pending, vec!["web".to_owned()]);
    let pending = registry.pending();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].name, "web");
    assert_eq!(pending[0].source_id, "dock");
    assert_eq!(pending[0].mode, "docker");
    assert_eq!(pending[0].discovered_at, at(0));
    assert_eq!(pending[0].definition["image"], json!("img:1"));
    assert!(!pending[0].replaces_approved);

    // The same candidate again is not news, and keeps its discovery time.
    let again = registry.apply_scan(&dock, vec![docker("web", "img:1")], at(5), &nothing_taken);
    assert!(again.newly_pending.is_empty());
    assert_eq!(registry.pending()[0].discovered_at, at(0));
}

#[test]
fn invalid_candidates_are_quarantined_with_the_reason() {
    // Bad input: an id with a space, an id with "__", a docker definition without its image,
    // an unknown mode, a group, and a candidate the source could not read at all.
    let mut registry = DiscoveryRegistry::new();
    let dock = source("dock", DiscoveryMode::Additive, 0);
    let candidates = vec![
        docker("bad name", "img"),
        docker("a__b", "img"),
        DiscoveredCandidate {
            name: "noimage".into(),
            location: "c".into(),
            definition: Ok(definition(json!({"mode": "docker"}))),
        },
        DiscoveredCandidate {
            name: "weird".into(),
            location: "c".into(),
            definition: Ok(definition(json!({"mode": "teleport"}))),
        },
        DiscoveredCandidate {
            name: "pool".into(),
            location: "c".into(),
            definition: Ok(definition(json!({"mode": "group", "members": []}))),
        },
        DiscoveredCandidate {
            name: "broken".into(),
            location: "c".into(),
            definition: Err("label mcp.gateway.port must be a number".into()),
        },
    ];
    let outcome = registry.apply_scan(&dock, candidates, at(0), &nothing_taken);
    assert_eq!(
        (outcome.found, outcome.pending, outcome.quarantined),
        (6, 0, 6)
    );
    let reasons: std::collections::BTreeMap<String, String> = registry
        .quarantined()
        .into_iter()
        .map(|entry| {
            assert_eq!(entry.source_id, "dock");
            assert_eq!(entry.quarantined_at, at(0));
            (entry.name, entry.reason)
        })
        .collect();
    assert!(
        reasons["bad name"].contains("not a valid mcp server id"),
        "{reasons:?}"
    );
    assert!(
        reasons["a__b"].contains("not a valid mcp server id"),
        "{reasons:?}"
    );
    assert!(reasons["noimage"].contains("image"), "{reasons:?}");
    assert!(reasons["weird"].contains("mode"), "{reasons:?}");
    assert!(reasons["pool"].contains("group"), "{reasons:?}");
    assert_eq!(reasons["broken"], "label mcp.gateway.port must be a number");
    assert!(registry.pending().is_empty());
}

#[test]
fn approval_yields_a_discovery_server_and_rescans_leave_it_alone() {
    let mut registry = DiscoveryRegistry::new();
    let dock = source("dock", DiscoveryMode::Additive, 0);
    registry.apply_scan(&dock, vec![docker("web", "img:1")], at(0), &nothing_taken);
    let approval = registry.approval("web").unwrap();
    assert_eq!(approval.source_id, "dock");
    assert!(!approval.replaces_approved);
    assert_eq!(
        approval.spec.origin,
        ServerOrigin::Discovery {
            source_id: "dock".into()
        }
    );
    assert!(
        matches!(&approval.spec.launch, LaunchSpec::Docker { image, network, .. } if image == "img:1" && network == "none")
    );
    // Nothing changes until the approval is confirmed.
    assert_eq!(registry.pending().len(), 1);
    registry.confirm_approval(&approval);
    assert!(registry.pending().is_empty());
    assert!(registry.is_approved(&id("web")));

    // The server now exists; the source's own server is not "taken".
    let taken = |server: &ServerId| server.as_str() == "web";
    let outcome = registry.apply_scan(&dock, vec![docker("web", "img:1")], at(5), &taken);
    assert_eq!((outcome.pending, outcome.quarantined), (0, 0));
    assert!(outcome.newly_pending.is_empty());
}

#[test]
fn a_changed_definition_of_an_approved_server_waits_for_approval_again() {
    let mut registry = DiscoveryRegistry::new();
    let dock = source("dock", DiscoveryMode::Additive, 0);
    registry.apply_scan(&dock, vec![docker("web", "img:1")], at(0), &nothing_taken);
    let approval = registry.approval("web").unwrap();
    registry.confirm_approval(&approval);
    let taken = |server: &ServerId| server.as_str() == "web";

    let outcome = registry.apply_scan(&dock, vec![docker("web", "img:2")], at(5), &taken);
    assert_eq!(outcome.newly_pending, vec!["web".to_owned()]);
    let pending = registry.pending();
    assert!(pending[0].replaces_approved);
    assert_eq!(pending[0].definition["image"], json!("img:2"));
    let second = registry.approval("web").unwrap();
    assert!(second.replaces_approved);
    registry.confirm_approval(&second);

    // Back to the first definition: pending again, since the running one is now img:2.
    registry.apply_scan(&dock, vec![docker("web", "img:1")], at(9), &taken);
    assert_eq!(registry.pending().len(), 1);
}

#[test]
fn a_rejection_holds_until_the_definition_changes() {
    let mut registry = DiscoveryRegistry::new();
    let dock = source("dock", DiscoveryMode::Additive, 0);
    registry.apply_scan(&dock, vec![docker("web", "img:1")], at(0), &nothing_taken);
    let rejection = registry.reject("web", at(1)).unwrap();
    assert_eq!(rejection.source_id, "dock");
    assert_eq!(rejection.rejected_at, at(1));
    assert!(registry.pending().is_empty());

    let outcome = registry.apply_scan(&dock, vec![docker("web", "img:1")], at(2), &nothing_taken);
    assert_eq!(outcome.pending, 0);
    assert!(outcome.rejections_cleared.is_empty());

    // A registry that only knows the stored rejection (after a restart) decides the same.
    let mut restarted = DiscoveryRegistry::new();
    restarted.restore_rejection(rejection);
    restarted.apply_scan(&dock, vec![docker("web", "img:1")], at(3), &nothing_taken);
    assert!(restarted.pending().is_empty());

    let changed = restarted.apply_scan(&dock, vec![docker("web", "img:2")], at(4), &nothing_taken);
    assert_eq!(changed.newly_pending, vec!["web".to_owned()]);
    assert_eq!(
        changed.rejections_cleared,
        vec![("dock".to_owned(), "web".to_owned())]
    );
}

#[test]
fn authoritative_sources_withdraw_missing_servers_after_the_grace_period() {
    let mut registry = DiscoveryRegistry::new();
    let dock = source("dock", DiscoveryMode::Authoritative, 10);
    registry.apply_scan(&dock, vec![docker("web", "img:1")], at(0), &nothing_taken);
    let approval = registry.approval("web").unwrap();
    registry.confirm_approval(&approval);
    let taken = |server: &ServerId| server.as_str() == "web";

    // Gone at 20 s: the grace period starts.
    assert!(
        registry
            .apply_scan(&dock, vec![], at(20), &taken)
            .withdrawn
            .is_empty()
    );
    // Back at 25 s: the clock resets.
    assert!(
        registry
            .apply_scan(&dock, vec![docker("web", "img:1")], at(25), &taken)
            .withdrawn
            .is_empty()
    );
    assert!(
        registry
            .apply_scan(&dock, vec![], at(30), &taken)
            .withdrawn
            .is_empty()
    );
    assert!(
        registry
            .apply_scan(&dock, vec![], at(39), &taken)
            .withdrawn
            .is_empty()
    );
    let outcome = registry.apply_scan(&dock, vec![], at(40), &taken);
    assert_eq!(outcome.withdrawn, vec![id("web")]);
    assert!(!registry.is_approved(&id("web")));
}

#[test]
fn additive_sources_never_withdraw_anything() {
    let mut registry = DiscoveryRegistry::new();
    let dock = source("dock", DiscoveryMode::Additive, 0);
    registry.apply_scan(&dock, vec![docker("web", "img:1")], at(0), &nothing_taken);
    let approval = registry.approval("web").unwrap();
    registry.confirm_approval(&approval);
    for seconds in [10, 1_000, 100_000] {
        assert!(
            registry
                .apply_scan(&dock, vec![], at(seconds), &nothing_taken)
                .withdrawn
                .is_empty()
        );
    }
    assert!(registry.is_approved(&id("web")));
}

#[test]
fn names_already_in_use_are_quarantined_rather_than_shadowed() {
    let mut registry = DiscoveryRegistry::new();
    let dock = source("dock", DiscoveryMode::Additive, 0);
    let files = source("files", DiscoveryMode::Additive, 0);
    let taken = |server: &ServerId| server.as_str() == "math";
    registry.apply_scan(&dock, vec![docker("math", "img")], at(0), &taken);
    assert!(registry.quarantined()[0].reason.contains("already exists"));

    // Two sources proposing one name: the first keeps it.
    registry.apply_scan(&dock, vec![docker("web", "img")], at(1), &nothing_taken);
    registry.apply_scan(&files, vec![docker("web", "other")], at(2), &nothing_taken);
    assert_eq!(registry.pending().len(), 1);
    assert_eq!(registry.pending()[0].source_id, "dock");
    let clash = registry
        .quarantined()
        .into_iter()
        .find(|entry| entry.source_id == "files")
        .unwrap();
    assert!(
        clash.reason.contains("also discovered by source `dock`"),
        "{}",
        clash.reason
    );

    // One source reporting a name twice keeps the first.
    let twice = registry.apply_scan(
        &files,
        vec![docker("dup", "a"), docker("dup", "b")],
        at(3),
        &nothing_taken,
    );
    assert_eq!((twice.pending, twice.quarantined), (1, 1));
}

#[test]
fn what_a_source_no_longer_reports_leaves_pending_and_quarantine() {
    let mut registry = DiscoveryRegistry::new();
    let dock = source("dock", DiscoveryMode::Additive, 0);
    registry.apply_scan(
        &dock,
        vec![docker("web", "img"), docker("bad name", "img")],
        at(0),
        &nothing_taken,
    );
    assert_eq!(
        (registry.pending().len(), registry.quarantined().len()),
        (1, 1)
    );
    assert_eq!(registry.counts(), (1, 1));
    let outcome = registry.apply_scan(&dock, vec![], at(1), &nothing_taken);
    assert_eq!((outcome.pending, outcome.quarantined), (0, 0));
    assert_eq!(registry.counts(), (0, 0));
    assert!(registry.pending().is_empty() && registry.quarantined().is_empty());
}

#[test]
fn a_candidate_that_becomes_invalid_moves_from_pending_to_quarantine() {
    let mut registry = DiscoveryRegistry::new();
    let dock = source("dock", DiscoveryMode::Additive, 0);
    registry.apply_scan(&dock, vec![docker("web", "img")], at(0), &nothing_taken);
    let broken = DiscoveredCandidate {
        name: "web".into(),
        location: "c".into(),
        definition: Err("label mcp.gateway.mode must be stdio or http".into()),
    };
    let outcome = registry.apply_scan(&dock, vec![broken], at(1), &nothing_taken);
    assert_eq!((outcome.pending, outcome.quarantined), (0, 1));
    assert_eq!(outcome.newly_quarantined.len(), 1);
    // Quarantined again for the same reason is not news.
    let broken = DiscoveredCandidate {
        name: "web".into(),
        location: "c".into(),
        definition: Err("label mcp.gateway.mode must be stdio or http".into()),
    };
    let again = registry.apply_scan(&dock, vec![broken], at(2), &nothing_taken);
    assert!(again.newly_quarantined.is_empty());
    assert_eq!(registry.quarantined()[0].quarantined_at, at(1));
}

#[test]
fn unknown_names_are_not_found() {
    let mut registry = DiscoveryRegistry::new();
    assert_eq!(
        registry.approval("ghost"),
        Err(DiscoveryError::CandidateNotFound("ghost".into()))
    );
    assert_eq!(
        registry.reject("ghost", at(0)),
        Err(DiscoveryError::CandidateNotFound("ghost".into()))
    );
}

#[test]
fn forgetting_a_source_drops_what_it_found_and_its_rejections() {
    let mut registry = DiscoveryRegistry::new();
    let dock = source("dock", DiscoveryMode::Additive, 0);
    registry.apply_scan(
        &dock,
        vec![
            docker("web", "img"),
            docker("db", "img"),
            docker("bad name", "img"),
        ],
        at(0),
        &nothing_taken,
    );
    registry.reject("db", at(1)).unwrap();
    let dropped = registry.forget_source("dock");
    assert_eq!(dropped, vec![("dock".to_owned(), "db".to_owned())]);
    assert!(registry.pending().is_empty() && registry.quarantined().is_empty());
}

#[test]
fn a_deleted_approved_server_is_offered_again() {
    let mut registry = DiscoveryRegistry::new();
    let dock = source("dock", DiscoveryMode::Additive, 0);
    registry.apply_scan(&dock, vec![docker("web", "img")], at(0), &nothing_taken);
    let approval = registry.approval("web").unwrap();
    registry.confirm_approval(&approval);
    registry.retain_approved(&|_| false);
    registry.apply_scan(&dock, vec![docker("web", "img")], at(1), &nothing_taken);
    assert_eq!(registry.pending().len(), 1);
    assert!(!registry.pending()[0].replaces_approved);
}

#[test]
fn source_settings_are_checked_and_secrets_masked() {
    let mut dock = source("dock", DiscoveryMode::Additive, 5);
    assert_eq!(dock.removal_grace(), Duration::from_secs(5));
    assert_eq!(dock.validate_common(), Ok(()));
    // Bad input: an id with a slash, a negative and a textual grace period.
    dock.source_id = "a/b".into();
    assert!(dock.validate_common().unwrap_err().contains("source id"));
    dock.source_id = "dock".into();
    for bad in [json!(-1), json!("10"), json!(100_000)] {
        dock.config.insert(REMOVAL_GRACE_KEY.into(), bad.clone());
        assert!(
            dock.validate_common()
                .unwrap_err()
                .contains(REMOVAL_GRACE_KEY),
            "{bad}"
        );
    }
    dock.config.remove(REMOVAL_GRACE_KEY);
    assert_eq!(dock.removal_grace(), DEFAULT_REMOVAL_GRACE);

    let config = definition(json!({
        "socket_path": "/run/docker.sock",
        "api_token": "s3cret",
        "nested": {"password": "p", "path": "/x"},
    }));
    let masked = masked_config(&config);
    assert_eq!(masked["socket_path"], json!("/run/docker.sock"));
    assert_eq!(masked["api_token"], json!("***"));
    assert_eq!(masked["nested"]["password"], json!("***"));
    assert_eq!(masked["nested"]["path"], json!("/x"));
}
