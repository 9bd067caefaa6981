//! Scanning a real directory: what becomes a candidate, what is skipped, and what is reported
//! as a reason instead of vanishing.

use std::path::Path;
use std::time::Duration;

use mcpgw_discovery::{DiscoveredCandidate, DiscoverySource};
use mcpgw_discovery_files::{FilesystemSource, MAX_FILE_SIZE};
use serde_json::{Value, json};

fn source(directory: &Path) -> FilesystemSource {
    FilesystemSource::new(directory, Duration::from_millis(100))
}

fn write(directory: &Path, name: &str, text: &str) {
    std::fs::write(directory.join(name), text).expect("write a definitions file");
}

async fn scan(directory: &Path) -> Vec<DiscoveredCandidate> {
    source(directory)
        .scan()
        .await
        .expect("the directory can be scanned")
}

fn names(candidates: &[DiscoveredCandidate]) -> Vec<&str> {
    candidates.iter().map(|c| c.name.as_str()).collect()
}

fn definition(candidate: &DiscoveredCandidate) -> Value {
    match &candidate.definition {
        Ok(definition) => Value::Object(definition.clone()),
        Err(reason) => panic!("`{}` has no definition: {reason}", candidate.name),
    }
}

fn reason(candidate: &DiscoveredCandidate) -> &str {
    match &candidate.definition {
        Err(reason) => reason,
        Ok(definition) => panic!(
            "`{}` was expected to carry a reason, not {definition:?}",
            candidate.name
        ),
    }
}

fn location(directory: &Path, name: &str) -> String {
    format!("file {}", directory.join(name).display())
}

#[tokio::test]
async fn both_shapes_are_read_in_the_order_of_file_names() {
    let directory = tempfile::tempdir().expect("a temp directory");
    let dir = directory.path();
    write(
        dir,
        "solo.yml",
        "mode: remote\nendpoint: https://example.test/mcp\n",
    );
    write(
        dir,
        "many.yaml",
        "mcp_servers:\n  math: {mode: subprocess, command: [python3, -m, math_server]}\n  \
         box: {mode: docker, image: \"repo/img:tag\"}\n",
    );

    let found = scan(dir).await;

    assert_eq!(names(&found), ["math", "box", "solo"]);
    assert_eq!(found[0].location, location(dir, "many.yaml"));
    assert_eq!(found[1].location, location(dir, "many.yaml"));
    assert_eq!(found[2].location, location(dir, "solo.yml"));
    assert_eq!(
        definition(&found[0]),
        json!({"mode": "subprocess", "command": ["python3", "-m", "math_server"]})
    );
    assert_eq!(
        definition(&found[1]),
        json!({"mode": "docker", "image": "repo/img:tag"})
    );
    assert_eq!(
        definition(&found[2]),
        json!({"mode": "remote", "endpoint": "https://example.test/mcp"})
    );
}

#[tokio::test]
async fn an_empty_directory_has_no_candidates() {
    let directory = tempfile::tempdir().expect("a temp directory");
    assert_eq!(scan(directory.path()).await, Vec::new());
}

#[tokio::test]
async fn broken_files_and_definitions_become_candidates_with_reasons() {
    let directory = tempfile::tempdir().expect("a temp directory");
    let dir = directory.path();
    write(dir, "broken.yaml", "mcp_servers:\n  a: {mode: subprocess\n");
    write(
        dir,
        "mixed.yaml",
        "mcp_servers:\n  fine: {mode: subprocess, command: [srv]}\n  listed: [subprocess]\n",
    );
    write(dir, "neither.yaml", "command: [srv]\n");

    let found = scan(dir).await;

    assert_eq!(names(&found), ["broken", "fine", "listed", "neither"]);
    let broken = reason(&found[0]);
    assert!(
        broken.starts_with(&format!(
            "{} is not valid YAML at line ",
            location(dir, "broken.yaml")
        )),
        "{broken}"
    );
    assert_eq!(
        definition(&found[1]),
        json!({"mode": "subprocess", "command": ["srv"]})
    );
    let listed = reason(&found[2]);
    assert!(listed.contains("is a sequence, not a mapping"), "{listed}");
    assert!(
        reason(&found[3]).contains("add a `mode` key"),
        "{}",
        reason(&found[3])
    );
}

#[tokio::test]
async fn hidden_files_editor_leftovers_and_other_entries_are_ignored() {
    let directory = tempfile::tempdir().expect("a temp directory");
    let dir = directory.path();
    let definition_text = "mode: subprocess\ncommand: [srv]\n";
    write(dir, "real.yaml", definition_text);
    for ignored in [
        ".hidden.yaml",
        ".real.yaml.swp",
        "real.yaml.swp",
        "real.yaml~",
        "#real.yaml#",
        "notes.txt",
        "README",
    ] {
        write(dir, ignored, "this: is: not: yaml: [\n");
    }
    std::os::unix::fs::symlink("nobody@host.1234", dir.join(".#real.yaml"))
        .expect("an editor lock link");
    std::fs::create_dir(dir.join("nested.yaml")).expect("a subdirectory");
    write(&dir.join("nested.yaml"), "inner.yaml", definition_text);

    let found = scan(dir).await;

    assert_eq!(names(&found), ["real"]);
    assert_eq!(
        definition(&found[0]),
        json!({"mode": "subprocess", "command": ["srv"]})
    );
}

#[tokio::test]
async fn a_symlink_to_a_definitions_file_is_read_and_a_dangling_one_is_reported() {
    let directory = tempfile::tempdir().expect("a temp directory");
    let elsewhere = tempfile::tempdir().expect("a temp directory");
    let dir = directory.path();
    write(
        elsewhere.path(),
        "target.yaml",
        "mode: remote\nendpoint: https://e.test/mcp\n",
    );
    std::os::unix::fs::symlink(
        elsewhere.path().join("target.yaml"),
        dir.join("linked.yaml"),
    )
    .expect("a symlink");
    std::os::unix::fs::symlink(
        elsewhere.path().join("missing.yaml"),
        dir.join("ghost.yaml"),
    )
    .expect("a dangling symlink");

    let found = scan(dir).await;

    assert_eq!(names(&found), ["ghost", "linked"]);
    let ghost = reason(&found[0]);
    assert!(
        ghost.starts_with(&format!("cannot read {}", location(dir, "ghost.yaml"))),
        "{ghost}"
    );
    assert_eq!(
        definition(&found[1]),
        json!({"mode": "remote", "endpoint": "https://e.test/mcp"})
    );
}

#[tokio::test]
async fn a_file_above_the_size_limit_is_a_candidate_with_a_reason() {
    let directory = tempfile::tempdir().expect("a temp directory");
    let dir = directory.path();
    let mut huge = String::from("mode: subprocess\ndescription: \"");
    huge.push_str(&"x".repeat(usize::try_from(MAX_FILE_SIZE).expect("fits")));
    huge.push_str("\"\n");
    write(dir, "huge.yaml", &huge);

    let found = scan(dir).await;

    assert_eq!(names(&found), ["huge"]);
    let reason = reason(&found[0]);
    assert!(
        reason.contains(&format!(
            "has {} bytes, more than the {MAX_FILE_SIZE}",
            huge.len()
        )),
        "{reason}"
    );
}

#[tokio::test]
async fn a_file_that_is_not_utf8_is_a_candidate_with_a_reason() {
    let directory = tempfile::tempdir().expect("a temp directory");
    let dir = directory.path();
    std::fs::write(
        dir.join("latin1.yaml"),
        b"mode: subprocess\ndescription: caf\xe9\n",
    )
    .expect("write a file");

    let found = scan(dir).await;

    assert_eq!(names(&found), ["latin1"]);
    assert!(
        reason(&found[0]).contains("is not UTF-8 text"),
        "{}",
        reason(&found[0])
    );
}

#[tokio::test]
async fn a_name_defined_twice_is_reported_on_the_second_file_naming_the_first() {
    let directory = tempfile::tempdir().expect("a temp directory");
    let dir = directory.path();
    write(dir, "math.yaml", "mode: subprocess\ncommand: [math]\n");
    write(
        dir,
        "others.yaml",
        "mcp_servers:\n  math: {mode: remote, endpoint: https://e.test/mcp}\n  \
         time: {mode: subprocess, command: [time]}\n",
    );

    let found = scan(dir).await;

    assert_eq!(names(&found), ["math", "math", "time"]);
    assert_eq!(
        definition(&found[0]),
        json!({"mode": "subprocess", "command": ["math"]})
    );
    assert_eq!(found[1].location, location(dir, "others.yaml"));
    let duplicate = reason(&found[1]);
    assert!(
        duplicate.contains(&format!(
            "is already defined in {}",
            location(dir, "math.yaml")
        )),
        "{duplicate}"
    );
    assert!(found[2].definition.is_ok());
}

#[tokio::test]
async fn a_missing_directory_is_an_error_naming_it_until_it_appears() {
    let parent = tempfile::tempdir().expect("a temp directory");
    let dir = parent.path().join("later");
    let source = source(&dir);

    let error = source.scan().await.expect_err("a missing directory");
    assert_eq!(
        error.0,
        format!(
            "directory {} does not exist; create it, or set config.path of this source to the \
             directory that holds the server definitions",
            dir.display()
        )
    );

    std::fs::create_dir(&dir).expect("create the directory");
    write(&dir, "a.yaml", "mode: subprocess\n");
    let found = source.scan().await.expect("the directory now exists");
    assert_eq!(names(&found), ["a"]);
}

#[tokio::test]
async fn a_path_that_is_a_file_is_an_error_naming_it() {
    let directory = tempfile::tempdir().expect("a temp directory");
    let file = directory.path().join("defs.yaml");
    write(directory.path(), "defs.yaml", "mode: subprocess\n");

    let error = source(&file).scan().await.expect_err("not a directory");

    assert!(
        error
            .0
            .starts_with(&format!("{} is not a directory;", file.display())),
        "{}",
        error.0
    );
}
