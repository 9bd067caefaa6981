//! A throwaway PostgreSQL server for tests: `initdb` into a temporary directory, `postgres` on a
//! free loopback port, stopped and removed when dropped.
//!
//! It needs the PostgreSQL server binaries (Debian's `postgresql` package; the project's test
//! script installs it). They are looked for in `MCPGW_TEST_POSTGRES_BIN`, else the newest
//! `/usr/lib/postgresql/*/bin`, else on `PATH`. PostgreSQL refuses to run as root, so under
//! root the server runs as the `postgres` user (made by that package) through `setpriv`.
//! Without the binaries, [`TempPostgres::start`] panics with what to install: a test that
//! needs a database never passes without one.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How long the server gets to accept connections.
const START_PATIENCE: Duration = Duration::from_secs(60);

/// A running PostgreSQL server of one's own. Each test takes a database of its own with
/// [`TempPostgres::fresh_database`].
pub struct TempPostgres {
    directory: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    child: Option<Child>,
    next_database: AtomicU32,
}

impl std::fmt::Debug for TempPostgres {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TempPostgres")
            .field("port", &self.port)
            .field("directory", &self.directory.path())
            .finish_non_exhaustive()
    }
}

impl TempPostgres {
    /// Initializes a cluster in a temporary directory and starts it on a free loopback port,
    /// trusting every local connection (user `postgres`, no password). Panics, saying why,
    /// when it cannot.
    pub fn start() -> Self {
        let bin = binaries();
        let as_postgres_user = running_as_root();
        let directory = tempfile::Builder::new()
            .prefix("mcpgw-postgres-")
            .tempdir()
            .unwrap_or_else(|error| panic!("cannot make a directory for PostgreSQL: {error}"));
        let data = directory.path().join("data");
        if as_postgres_user {
            run_checked(
                Command::new("chown")
                    .arg("postgres:postgres")
                    .arg(directory.path()),
                "chown the PostgreSQL directory to the postgres user",
            );
        }
        let mut initdb = command(&bin.join("initdb"), as_postgres_user);
        initdb.arg("-D").arg(&data).args([
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--no-sync",
        ]);
        run_checked(&mut initdb, "initdb");
        let port = free_port();
        let log = std::fs::File::create(directory.path().join("server.log"))
            .unwrap_or_else(|error| panic!("cannot create PostgreSQL's log file: {error}"));
        if as_postgres_user {
            run_checked(
                Command::new("chown")
                    .arg("postgres:postgres")
                    .arg(directory.path().join("server.log")),
                "chown PostgreSQL's log file",
            );
        }
        // The server runs under a shell that stops it (and removes its directory) as soon as
        // its standard input closes: when this value is dropped, and also when the test process
        // ends without dropping it (a server shared by a whole test binary), so no test run
        // leaves a server behind.
        let mut server = command(&bin.join("postgres"), as_postgres_user);
        server
            .arg("-D")
            .arg(&data)
            .arg("-p")
            .arg(port.to_string())
            .arg("-k")
            .arg(directory.path())
            .args([
                "-c",
                "listen_addresses=127.0.0.1",
                // A test database is thrown away: no fsync, and plenty of connections for
                // several gateway replicas at once.
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
                "-c",
                "max_connections=300",
            ]);
        let mut words: Vec<String> = vec![server.get_program().to_string_lossy().into_owned()];
        words.extend(
            server
                .get_args()
                .map(|arg| arg.to_string_lossy().into_owned()),
        );
        let script = format!(
            "{} 2>>\"$1/server.log\" & server=$!\n\
             read -r _ignored\n\
             kill -QUIT \"$server\" 2>/dev/null\n\
             wait \"$server\"\n\
             rm -rf \"$1\"\n",
            words
                .iter()
                .map(|word| shell_quote(word))
                .collect::<Vec<_>>()
                .join(" ")
        );
        let child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg("mcpgw-postgres")
            .arg(directory.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap_or_else(|error| {
                panic!("cannot start {}: {error}", bin.join("postgres").display())
            });
        let mut postgres = Self {
            directory,
            bin,
            port,
            child: Some(child),
            next_database: AtomicU32::new(0),
        };
        postgres.wait_until_ready();
        postgres
    }

    /// One server for the whole test process, started on first use and stopped when the process
    /// ends. Tests that share it take a database each ([`TempPostgres::fresh_database`]).
    pub fn shared() -> &'static TempPostgres {
        static SHARED: std::sync::OnceLock<TempPostgres> = std::sync::OnceLock::new();
        SHARED.get_or_init(TempPostgres::start)
    }

    /// The loopback port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL of `database` on this server.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// Creates a new, empty database and answers its URL.
    pub fn fresh_database(&self) -> String {
        let number = self.next_database.fetch_add(1, Ordering::Relaxed);
        let name = format!("mcpgw_test_{number}");
        self.create_database(&name);
        self.url(&name)
    }

    /// Creates the database `name` (which must not exist).
    pub fn create_database(&self, name: &str) {
        let mut createdb = Command::new(self.bin.join("createdb"));
        createdb
            .args(["-h", "127.0.0.1", "-U", "postgres", "-p"])
            .arg(self.port.to_string())
            .arg(name);
        run_checked(&mut createdb, "createdb");
    }

    /// Runs `sql` on `database` with `psql` and answers what it printed (unaligned, tuples
    /// only): for tests that look at or change the database behind an adapter's back.
    pub fn psql(&self, database: &str, sql: &str) -> String {
        let mut psql = Command::new(self.bin.join("psql"));
        psql.args(["-h", "127.0.0.1", "-U", "postgres", "-X", "-A", "-t", "-v"])
            .arg("ON_ERROR_STOP=1")
            .arg("-p")
            .arg(self.port.to_string())
            .arg("-d")
            .arg(database)
            .arg("-c")
            .arg(sql);
        run_checked(&mut psql, "psql")
    }

    /// The server's log so far, for a failing test's message.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.directory.path().join("server.log")).unwrap_or_default()
    }

    fn wait_until_ready(&mut self) {
        let started = Instant::now();
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                panic!(
                    "PostgreSQL exited at start ({status}); its log:\n{}",
                    self.log()
                );
            }
            let ready = Command::new(self.bin.join("pg_isready"))
                .args(["-q", "-h", "127.0.0.1", "-p"])
                .arg(self.port.to_string())
                .status()
                .is_ok_and(|status| status.success());
            if ready {
                return;
            }
            if started.elapsed() > START_PATIENCE {
                panic!(
                    "PostgreSQL did not accept connections within {START_PATIENCE:?}; its log:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for TempPostgres {
    fn drop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        // Closing the shell's standard input makes it stop the server and remove the directory.
        drop(child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// `word` quoted for `sh`.
fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', "'\\''"))
}

/// Where the server binaries are.
fn binaries() -> PathBuf {
    if let Some(dir) = std::env::var_os("MCPGW_TEST_POSTGRES_BIN") {
        return PathBuf::from(dir);
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return bin;
    }
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .find(|dir| dir.join("initdb").exists() && dir.join("postgres").exists());
    on_path.unwrap_or_else(|| {
        panic!(
            "the PostgreSQL server binaries (initdb, postgres) were not found in \
             MCPGW_TEST_POSTGRES_BIN, /usr/lib/postgresql/*/bin or on PATH: install Debian's \
             `postgresql` package (scripts/install-test-deps.sh does)"
        )
    })
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|output| String::from_utf8_lossy(&output.stdout).trim() == "0")
}

/// `program`, run as the `postgres` user when `as_postgres_user` (PostgreSQL refuses root).
fn command(program: &Path, as_postgres_user: bool) -> Command {
    if as_postgres_user {
        let mut command = Command::new("setpriv");
        command
            .args([
                "--reuid=postgres",
                "--regid=postgres",
                "--init-groups",
                "--reset-env",
                "--",
            ])
            .arg(program);
        command
    } else {
        Command::new(program)
    }
}

fn run_checked(command: &mut Command, what: &str) -> String {
    let output = command
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|error| panic!("cannot run {what}: {error}"));
    if !output.status.success() {
        panic!(
            "{what} failed ({}): {}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .unwrap_or_else(|error| panic!("cannot find a free loopback port: {error}"))
}
