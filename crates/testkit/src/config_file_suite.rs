//! What every [`ConfigFile`] promises, as tests that every implementation must pass.
//!
//! An adapter crate runs the whole suite against its own implementation with one line in its
//! tests:
//!
//! ```text
//! mcpgw_testkit::config_file_contract_suite!(|path| MyConfigFile::open(path));
//! ```
//!
//! The port is the configuration file on disk, so the suite works on real files: each case
//! makes a temporary directory, writes the file there with the standard library and asks
//! `$open` for a [`ConfigFile`] of that path (`$open` is a closure or function from `&Path` to
//! the implementation). Each case is also a public `async fn` taking that function, for callers
//! that need to run one case by hand. There is no in-memory implementation here: what the port
//! promises is about the file and the backups next to it, which only a real file shows.
//!
//! The cases check what the port's documentation promises:
//! - `read` answers the whole text as it is on disk at the call, and fails for a missing file;
//!   `display_name` is the path as given;
//! - `backup(keep)` copies the file to `<file>.bak1` after moving `.bak1`..`.bak{keep-1}` one
//!   step up, drops what would go beyond `.bak{keep}`, answers the path of `.bak1`, never
//!   touches the file itself and leaves nothing else behind; a backup file is whole or absent
//!   even to someone reading it while backups are made; a directory that cannot be written is
//!   an error that names it and leaves the backups there as they were;
//! - `changed` completes when the file's size or modification time moved since the last `read`
//!   (also when that happened before `changed` was called, and when an editor replaced the file
//!   by a rename), once per change, and not at all while nothing happens to the file (a backup
//!   is not a change of it).
//!
//! `changed` is watched for [`QUIET_FOR`] to show that it does not complete and given
//! [`NOTICED_WITHIN`] to complete: an implementation that polls must look at the file at least
//! every quarter of a second in the suite.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

use mcpgw_config::ConfigFile;
use tempfile::TempDir;

/// How long `changed` is watched to show that it does not complete: three looks of an
/// implementation that polls every quarter of a second.
pub const QUIET_FOR: Duration = Duration::from_millis(750);

/// How long a change may take to be reported.
pub const NOTICED_WITHIN: Duration = Duration::from_secs(5);

/// Expands to one `#[tokio::test]` per case of the [`ConfigFile`] contract. `$open` is a
/// closure or function from the file's `&Path` to a fresh implementation; the file may not
/// exist yet when it is called.
///
/// The tests use `#[tokio::test(flavor = "multi_thread")]`, so the invoking crate needs
/// `tokio` with the `macros`, `rt`, `rt-multi-thread` and `time` features among its
/// dev-dependencies. The test functions are named after the cases and defined in the invoking
/// module: to run the suite against two implementations in one crate, invoke it in two
/// modules. The case about an unwritable directory makes it unwritable also for root, with the
/// immutable attribute (`chattr` of e2fsprogs) when the permission bits are not enough.
#[macro_export]
macro_rules! config_file_contract_suite {
    ($open:expr $(,)?) => {
        $crate::__config_file_contract_case!($open, read_answers_the_whole_text_as_it_is_now);
        $crate::__config_file_contract_case!($open, reading_a_missing_file_is_an_error);
        $crate::__config_file_contract_case!($open, display_name_is_the_path_as_given);
        $crate::__config_file_contract_case!(
            $open,
            backup_copies_the_file_to_bak1_and_answers_its_path
        );
        $crate::__config_file_contract_case!($open, backups_rotate_and_keep_the_newest);
        $crate::__config_file_contract_case!($open, keeping_one_backup_replaces_it);
        $crate::__config_file_contract_case!($open, a_backup_appears_whole_or_not_at_all);
        $crate::__config_file_contract_case!(
            $open,
            an_unwritable_directory_fails_the_backup_naming_it
        );
        $crate::__config_file_contract_case!($open, a_change_after_a_read_is_reported_once);
        $crate::__config_file_contract_case!($open, a_change_between_read_and_watching_is_reported);
        $crate::__config_file_contract_case!(
            $open,
            a_same_size_rewrite_with_a_new_modification_time_is_reported
        );
        $crate::__config_file_contract_case!($open, replacing_the_file_by_a_rename_is_reported);
        $crate::__config_file_contract_case!($open, a_backup_is_not_a_change_of_the_file);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __config_file_contract_case {
    ($open:expr, $case:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $case() {
            $crate::config_file_suite::$case($open).await;
        }
    };
}

// ----- helpers ------------------------------------------------------------------------------

/// A temporary directory with `gateway.yaml` in it, holding `text`.
fn directory_with_file(text: &str) -> (TempDir, PathBuf) {
    let directory = tempfile::tempdir().expect("a temporary directory");
    let path = directory.path().join("gateway.yaml");
    std::fs::write(&path, text).expect("writing the configuration file");
    (directory, path)
}

/// `<path>.bak{index}`.
fn backup_path(path: &Path, index: usize) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".bak{index}"));
    PathBuf::from(name)
}

/// Every entry of `directory`, sorted, so that a case sees anything left behind.
fn entries(directory: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(directory)
        .expect("listing the directory")
        .map(|entry| {
            entry
                .expect("a directory entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

fn read_text(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_else(|error| panic!("reading {}: {error}", path.display()))
}

async fn reports_a_change_within(file: &dyn ConfigFile, wait: Duration) -> bool {
    tokio::time::timeout(wait, file.changed()).await.is_ok()
}

async fn assert_reported(file: &dyn ConfigFile, what: &str) {
    assert!(
        reports_a_change_within(file, NOTICED_WITHIN).await,
        "{what} was not reported within {NOTICED_WITHIN:?}"
    );
}

async fn assert_quiet(file: &dyn ConfigFile, what: &str) {
    assert!(
        !reports_a_change_within(file, QUIET_FOR).await,
        "`changed` completed {what}"
    );
}

/// Makes a directory unwritable for the life of the guard, also for root: the permission bits
/// first, then the immutable attribute, which root does not bypass. It fails the test when
/// neither works rather than let a case pass on a directory that is still writable.
pub struct UnwritableDirectory {
    path: PathBuf,
    immutable: bool,
}

impl UnwritableDirectory {
    /// Takes the write permission on `path` away until the guard is dropped.
    pub fn new(path: &Path) -> Self {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o555))
            .expect("taking the write permission away");
        let mut guard = Self {
            path: path.to_path_buf(),
            immutable: false,
        };
        if Self::writable(path) {
            let status = std::process::Command::new("chattr")
                .arg("+i")
                .arg(path)
                .status()
                .expect("running chattr (e2fsprogs) to make a directory unwritable for root");
            assert!(
                status.success(),
                "chattr +i {} failed: run the suite as a user other than root, or on a \
                 filesystem with the immutable attribute",
                path.display()
            );
            guard.immutable = true;
        }
        assert!(
            !Self::writable(path),
            "{} is still writable",
            path.display()
        );
        guard
    }

    fn writable(path: &Path) -> bool {
        let probe = path.join(".probe");
        let created = std::fs::write(&probe, "").is_ok();
        let _ = std::fs::remove_file(probe);
        created
    }
}

impl Drop for UnwritableDirectory {
    fn drop(&mut self) {
        use std::os::unix::fs::PermissionsExt as _;
        if self.immutable {
            let _ = std::process::Command::new("chattr")
                .arg("-i")
                .arg(&self.path)
                .status();
        }
        let _ = std::fs::set_permissions(&self.path, std::fs::Permissions::from_mode(0o755));
    }
}

// ----- the cases ----------------------------------------------------------------------------

pub async fn read_answers_the_whole_text_as_it_is_now<F: ConfigFile>(open: impl Fn(&Path) -> F) {
    let text = "mcp_servers:\n  math:\n    mode: subprocess\n    command: [echo, \"é ✓\"]\n";
    let (_directory, path) = directory_with_file(text);
    let file = open(&path);
    assert_eq!(file.read().await.unwrap(), text);
    // Read again after a rewrite: the text of now, not of the first read.
    std::fs::write(&path, "mcp_servers: {}\n").unwrap();
    assert_eq!(file.read().await.unwrap(), "mcp_servers: {}\n");
    // Whole, however long: a file larger than any read buffer.
    let long: String = (0..40_000).map(|line| format!("# line {line}\n")).collect();
    std::fs::write(&path, &long).unwrap();
    assert_eq!(file.read().await.unwrap(), long);
}

pub async fn reading_a_missing_file_is_an_error<F: ConfigFile>(open: impl Fn(&Path) -> F) {
    let (directory, path) = directory_with_file("version: 1\n");
    let absent = directory.path().join("absent.yaml");
    let file = open(&absent);
    let answer = file.read().await;
    assert!(answer.is_err(), "a missing file was read as {answer:?}");
    // A file that goes away after it was read is missing too.
    let file = open(&path);
    file.read().await.unwrap();
    std::fs::remove_file(&path).unwrap();
    let answer = file.read().await;
    assert!(answer.is_err(), "a removed file was read as {answer:?}");
}

pub async fn display_name_is_the_path_as_given<F: ConfigFile>(open: impl Fn(&Path) -> F) {
    let (_directory, path) = directory_with_file("version: 1\n");
    assert_eq!(open(&path).display_name(), path.display().to_string());
    // As given, not resolved: the file need not exist for its name to be shown.
    let relative = Path::new("configs/../gateway.yaml");
    assert_eq!(open(relative).display_name(), "configs/../gateway.yaml");
}

pub async fn backup_copies_the_file_to_bak1_and_answers_its_path<F: ConfigFile>(
    open: impl Fn(&Path) -> F,
) {
    let (directory, path) = directory_with_file("mcp_servers: {}\n");
    let file = open(&path);
    let answered = file.backup(5).await.unwrap();
    assert_eq!(answered, backup_path(&path, 1).display().to_string());
    assert_eq!(read_text(Path::new(&answered)), "mcp_servers: {}\n");
    assert_eq!(
        read_text(&path),
        "mcp_servers: {}\n",
        "the file is untouched"
    );
    assert_eq!(
        entries(directory.path()),
        ["gateway.yaml", "gateway.yaml.bak1"],
        "nothing but the backup is left behind"
    );
}

pub async fn backups_rotate_and_keep_the_newest<F: ConfigFile>(open: impl Fn(&Path) -> F) {
    let (directory, path) = directory_with_file("version: 1\n");
    let file = open(&path);
    for version in 1..=7 {
        std::fs::write(&path, format!("version: {version}\n")).unwrap();
        let answered = file.backup(5).await.unwrap();
        assert_eq!(answered, backup_path(&path, 1).display().to_string());
    }
    // `.bak1` is the newest; versions 1 and 2 went beyond `.bak5`.
    for (index, version) in (1..=5).zip((3..=7).rev()) {
        assert_eq!(
            read_text(&backup_path(&path, index)),
            format!("version: {version}\n"),
            ".bak{index}"
        );
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
    assert_eq!(read_text(&path), "version: 7\n");
}

pub async fn keeping_one_backup_replaces_it<F: ConfigFile>(open: impl Fn(&Path) -> F) {
    let (directory, path) = directory_with_file("version: 1\n");
    let file = open(&path);
    file.backup(1).await.unwrap();
    std::fs::write(&path, "version: 2\n").unwrap();
    file.backup(1).await.unwrap();
    assert_eq!(read_text(&backup_path(&path, 1)), "version: 2\n");
    assert_eq!(
        entries(directory.path()),
        ["gateway.yaml", "gateway.yaml.bak1"]
    );
}

pub async fn a_backup_appears_whole_or_not_at_all<F: ConfigFile>(open: impl Fn(&Path) -> F) {
    // Large versions of one byte each, so that a reader can tell a whole one from a part. A
    // backup written in place is seen half-written by the reader most of the time, not always;
    // one written whole and renamed never is.
    const SIZE: usize = 4 * 1024 * 1024;
    const VERSIONS: u8 = 20;
    let version = |index: u8| vec![b'a' + index; SIZE];
    let (_directory, path) = directory_with_file("");
    std::fs::write(&path, version(0)).unwrap();
    let file = open(&path);
    file.backup(2).await.unwrap();

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let stop = stop.clone();
        let watched = [backup_path(&path, 1), backup_path(&path, 2)];
        std::thread::spawn(move || {
            let mut reads = 0_u64;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                for backup in &watched {
                    // Absent for a moment is allowed; a part of a version is not.
                    let Ok(content) = std::fs::read(backup) else {
                        continue;
                    };
                    // Versions are written whole, so a length and three samples tell them
                    // apart from a part of one, cheaply enough to look often.
                    let whole = content.len() == SIZE
                        && (b'a'..b'a' + VERSIONS).contains(&content[0])
                        && content[SIZE / 2] == content[0]
                        && content[SIZE - 1] == content[0];
                    assert!(
                        whole,
                        "{} was read while a backup was made and held {} bytes that are not \
                         one whole version",
                        backup.display(),
                        content.len()
                    );
                    reads += 1;
                }
            }
            reads
        })
    };
    for index in 1..VERSIONS {
        std::fs::write(&path, version(index)).unwrap();
        file.backup(2).await.unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let reads = reader
        .join()
        .unwrap_or_else(|_| panic!("a reader saw a backup that was not whole"));
    assert!(reads > 0, "the reader never read a backup");
    assert_eq!(
        std::fs::read(backup_path(&path, 1)).unwrap(),
        version(VERSIONS - 1)
    );
    assert_eq!(
        std::fs::read(backup_path(&path, 2)).unwrap(),
        version(VERSIONS - 2)
    );
}

pub async fn an_unwritable_directory_fails_the_backup_naming_it<F: ConfigFile>(
    open: impl Fn(&Path) -> F,
) {
    let directory = tempfile::tempdir().expect("a temporary directory");
    let config_directory = directory.path().join("etc");
    std::fs::create_dir(&config_directory).unwrap();
    let path = config_directory.join("gateway.yaml");
    std::fs::write(&path, "version: 2\n").unwrap();
    std::fs::write(backup_path(&path, 1), "version: 1\n").unwrap();
    let file = open(&path);
    let unwritable = UnwritableDirectory::new(&config_directory);

    let error = file
        .backup(5)
        .await
        .expect_err("a backup into a directory that cannot be written")
        .0;
    drop(unwritable);

    assert!(
        error.contains(&config_directory.display().to_string()),
        "the error names the directory {}: {error}",
        config_directory.display()
    );
    assert_eq!(
        entries(&config_directory),
        ["gateway.yaml", "gateway.yaml.bak1"]
    );
    assert_eq!(read_text(&backup_path(&path, 1)), "version: 1\n");
    assert_eq!(read_text(&path), "version: 2\n");
}

pub async fn a_change_after_a_read_is_reported_once<F: ConfigFile>(open: impl Fn(&Path) -> F) {
    let (_directory, path) = directory_with_file("version: 1\n");
    let file = open(&path);
    file.read().await.unwrap();
    assert_quiet(&file, "while nothing was written").await;

    std::fs::write(&path, "version: 22\n").unwrap();
    assert_reported(&file, "a write").await;
    // Reported once, whether the caller reads the new text or not.
    assert_quiet(&file, "twice for one write").await;
    assert_eq!(file.read().await.unwrap(), "version: 22\n");
    assert_quiet(&file, "after the written text was read").await;

    std::fs::write(&path, "version: 333\n").unwrap();
    assert_reported(&file, "a second write").await;
    assert_quiet(&file, "twice for the second write").await;
}

pub async fn a_change_between_read_and_watching_is_reported<F: ConfigFile>(
    open: impl Fn(&Path) -> F,
) {
    let (_directory, path) = directory_with_file("version: 1\n");
    let file = open(&path);
    file.read().await.unwrap();
    // Written before anyone waits on `changed`: it is still a change since the read.
    std::fs::write(&path, "version: 22\n").unwrap();
    assert_reported(&file, "a write made before `changed` was called").await;
}

pub async fn a_same_size_rewrite_with_a_new_modification_time_is_reported<F: ConfigFile>(
    open: impl Fn(&Path) -> F,
) {
    let (_directory, path) = directory_with_file("version: 1\n");
    let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
    let file = open(&path);
    file.read().await.unwrap();

    std::fs::write(&path, "version: 2\n").unwrap();
    // Ten seconds on, so that no filesystem's time resolution hides the move.
    let later = modified + Duration::from_secs(10);
    File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(later)
        .unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 11);
    assert_eq!(std::fs::metadata(&path).unwrap().modified().unwrap(), later);
    assert_reported(&file, "a rewrite of the same size").await;
}

pub async fn replacing_the_file_by_a_rename_is_reported<F: ConfigFile>(open: impl Fn(&Path) -> F) {
    let (directory, path) = directory_with_file("version: 1\n");
    let file = open(&path);
    file.read().await.unwrap();
    // What many editors do on save: write a new file next to it and rename it over the old.
    let saved = directory.path().join(".gateway.yaml.swp");
    std::fs::write(&saved, "version: 1\nmcp_servers: {}\n").unwrap();
    std::fs::rename(&saved, &path).unwrap();
    assert_reported(&file, "a file replaced by a rename").await;
    assert_eq!(file.read().await.unwrap(), "version: 1\nmcp_servers: {}\n");
    assert_quiet(&file, "after the replaced file was read").await;
}

pub async fn a_backup_is_not_a_change_of_the_file<F: ConfigFile>(open: impl Fn(&Path) -> F) {
    let (_directory, path) = directory_with_file("version: 1\n");
    let before = std::fs::metadata(&path).unwrap();
    let file = open(&path);
    file.read().await.unwrap();
    for _ in 0..3 {
        file.backup(5).await.unwrap();
    }
    assert_quiet(&file, "after backups, which do not change the file").await;
    let after = std::fs::metadata(&path).unwrap();
    assert_eq!(
        (after.len(), after.modified().ok()),
        (before.len(), before.modified().ok()),
        "the file is untouched by a backup"
    );
    assert_eq!(read_text(&path), "version: 1\n");
}
