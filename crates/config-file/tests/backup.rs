//! Backups: `.bak1` newest, rotated up to `keep`, each whole, and clear errors when they cannot
//! be written.

use std::path::{Path, PathBuf};

use mcpgw_config::ConfigFile;
use mcpgw_config_file::{FileConfig, MAX_BACKUPS};

fn backup_path(path: &Path, index: usize) -> PathBuf {
    PathBuf::from(format!("{}.bak{index}", path.display()))
}

/// Every entry of the directory, sorted, to prove that nothing else (a temporary file, a
/// stray backup) was left behind.
fn entries(directory: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(directory)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn backup_copies_the_current_file_to_bak1_and_answers_its_path() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("gateway.yaml");
    std::fs::write(&path, "mcp_servers: {}\n").unwrap();
    let file = FileConfig::new(&path);

    let answered = file.backup(5).await.unwrap();

    assert_eq!(answered, backup_path(&path, 1).display().to_string());
    assert_eq!(
        std::fs::read_to_string(&answered).unwrap(),
        "mcp_servers: {}\n"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "mcp_servers: {}\n");
    assert_eq!(
        entries(directory.path()),
        ["gateway.yaml", "gateway.yaml.bak1"]
    );
}

#[cfg(unix)]
#[tokio::test]
async fn a_backup_is_no_more_readable_than_the_file() {
    use std::os::unix::fs::PermissionsExt;
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("gateway.yaml");
    std::fs::write(&path, "auth: {}\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();

    let answered = FileConfig::new(&path).backup(5).await.unwrap();

    let mode = std::fs::metadata(answered).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[tokio::test]
async fn six_backups_keep_the_newest_five_in_order() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("gateway.yaml");
    let file = FileConfig::new(&path);

    for version in 1..=6 {
        std::fs::write(&path, format!("version: {version}\n")).unwrap();
        file.backup(5).await.unwrap();
    }

    assert_eq!(
        entries(directory.path()),
        [
            "gateway.yaml",
            "gateway.yaml.bak1",
            "gateway.yaml.bak2",
            "gateway.yaml.bak3",
            "gateway.yaml.bak4",
            "gateway.yaml.bak5",
        ]
    );
    for index in 1..=5 {
        let content = std::fs::read_to_string(backup_path(&path, index)).unwrap();
        assert_eq!(content, format!("version: {}\n", 7 - index), ".bak{index}");
    }
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "version: 6\n");
}

#[tokio::test]
async fn keeping_one_backup_replaces_it() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("gateway.yaml");
    let file = FileConfig::new(&path);

    for version in 1..=3 {
        std::fs::write(&path, format!("version: {version}\n")).unwrap();
        file.backup(1).await.unwrap();
    }

    assert_eq!(
        entries(directory.path()),
        ["gateway.yaml", "gateway.yaml.bak1"]
    );
    let newest = std::fs::read_to_string(backup_path(&path, 1)).unwrap();
    assert_eq!(newest, "version: 3\n");
}

#[tokio::test]
async fn keeping_no_backup_or_too_many_is_a_clear_error() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("gateway.yaml");
    std::fs::write(&path, "mcp_servers: {}\n").unwrap();
    let file = FileConfig::new(&path);

    let error = file.backup(0).await.unwrap_err().0;
    assert!(error.contains("keep at least 1"), "{error}");
    assert!(error.contains(&path.display().to_string()), "{error}");

    let error = file.backup(MAX_BACKUPS + 1).await.unwrap_err().0;
    assert!(error.contains("above the limit of 100"), "{error}");

    assert_eq!(entries(directory.path()), ["gateway.yaml"]);
}

#[tokio::test]
async fn backing_up_a_missing_file_is_a_clear_error_that_leaves_backups_alone() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("gateway.yaml");
    std::fs::write(backup_path(&path, 1), "old\n").unwrap();
    let file = FileConfig::new(&path);

    let error = file.backup(5).await.unwrap_err().0;

    assert!(error.contains(&path.display().to_string()), "{error}");
    assert!(error.contains("No such file or directory"), "{error}");
    assert_eq!(entries(directory.path()), ["gateway.yaml.bak1"]);
    assert_eq!(
        std::fs::read_to_string(backup_path(&path, 1)).unwrap(),
        "old\n"
    );
}

#[tokio::test]
async fn a_directory_in_the_place_of_bak1_fails_the_backup_and_is_named() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("gateway.yaml");
    std::fs::write(&path, "mcp_servers: {}\n").unwrap();
    // A non-empty directory: renaming a file over it fails for root too.
    std::fs::create_dir(backup_path(&path, 1)).unwrap();
    std::fs::write(backup_path(&path, 1).join("inside"), "x").unwrap();
    let file = FileConfig::new(&path);

    let error = file.backup(1).await.unwrap_err().0;

    let bak1 = backup_path(&path, 1).display().to_string();
    assert!(error.contains(&format!("to {bak1}")), "{error}");
    assert!(error.contains("is a file, not a directory"), "{error}");
    assert!(
        error.contains(&directory.path().display().to_string()),
        "{error}"
    );
    // The temporary copy is gone and the configuration file untouched.
    assert_eq!(
        entries(directory.path()),
        ["gateway.yaml", "gateway.yaml.bak1"]
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "mcp_servers: {}\n");
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn an_unwritable_directory_fails_the_backup_naming_it() {
    let directory = tempfile::tempdir().unwrap();
    let config_directory = directory.path().join("etc");
    std::fs::create_dir(&config_directory).unwrap();
    let path = config_directory.join("gateway.yaml");
    std::fs::write(&path, "mcp_servers: {}\n").unwrap();
    std::fs::write(backup_path(&path, 1), "old\n").unwrap();
    let file = FileConfig::new(&path);
    let _unwritable = mcpgw_testkit::config_file_suite::UnwritableDirectory::new(&config_directory);

    let error = file.backup(5).await.unwrap_err().0;

    assert!(
        error.contains(&format!(
            "into the directory {}",
            config_directory.display()
        )),
        "{error}"
    );
    assert!(
        error.contains("check the directory's permissions"),
        "{error}"
    );
    assert_eq!(
        entries(&config_directory),
        ["gateway.yaml", "gateway.yaml.bak1"]
    );
    assert_eq!(
        std::fs::read_to_string(backup_path(&path, 1)).unwrap(),
        "old\n"
    );
}
