//! Reading the configuration file: its text as on disk, or an error that names it.

use mcpgw_config::ConfigFile;
use mcpgw_config_file::{FileConfig, MIN_WATCH_INTERVAL};
use std::time::Duration;

#[tokio::test]
async fn read_answers_the_whole_text_as_on_disk() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("gateway.yaml");
    let text = "mcp_servers:\n  math:\n    mode: subprocess\n    command: [echo, \"é\"]\n";
    std::fs::write(&path, text).unwrap();
    let file = FileConfig::new(&path);

    assert_eq!(file.read().await.unwrap(), text);

    std::fs::write(&path, "mcp_servers: {}\n").unwrap();
    assert_eq!(file.read().await.unwrap(), "mcp_servers: {}\n");
}

#[tokio::test]
async fn display_name_is_the_path_as_given() {
    let file = FileConfig::new("configs/../gateway.yaml");
    assert_eq!(file.display_name(), "configs/../gateway.yaml");
}

#[tokio::test]
async fn reading_a_missing_file_names_it_and_the_reason() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("absent.yaml");
    let file = FileConfig::new(&path);

    let error = file.read().await.unwrap_err().0;

    assert!(error.contains(&path.display().to_string()), "{error}");
    assert!(error.contains("No such file or directory"), "{error}");
    assert!(
        error.starts_with("cannot read the configuration file"),
        "{error}"
    );
}

#[tokio::test]
async fn reading_a_file_that_is_not_utf8_says_so_and_names_it() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("latin1.yaml");
    std::fs::write(&path, b"name: caf\xe9\n").unwrap();
    let file = FileConfig::new(&path);

    let error = file.read().await.unwrap_err().0;

    assert!(error.contains(&path.display().to_string()), "{error}");
    assert!(error.contains("not valid UTF-8"), "{error}");
    assert!(error.contains("offset 9"), "{error}");
}

#[tokio::test]
async fn reading_a_directory_is_an_error_not_a_panic() {
    let directory = tempfile::tempdir().unwrap();
    let file = FileConfig::new(directory.path());

    let error = file.read().await.unwrap_err().0;

    assert!(
        error.contains(&directory.path().display().to_string()),
        "{error}"
    );
    assert!(error.contains("Is a directory"), "{error}");
}

#[test]
fn the_watch_interval_defaults_to_a_second_and_is_never_below_the_minimum() {
    let file = FileConfig::new("gateway.yaml");
    assert_eq!(file.watch_interval(), Duration::from_secs(1));

    let file = file.with_watch_interval(Duration::from_millis(1));
    assert_eq!(file.watch_interval(), MIN_WATCH_INTERVAL);

    let mut file = file;
    file.set_watch_interval(Duration::from_millis(250));
    assert_eq!(file.watch_interval(), Duration::from_millis(250));
}
