//! A throwaway Redis server for tests: `redis-server` on a free loopback port, keeping nothing
//! on disk, stopped when dropped.
//!
//! It needs the `redis-server` binary (Debian's `redis-server` package), looked for in
//! `MCPGW_TEST_REDIS_SERVER`, else on `PATH`, else `/usr/bin/redis-server`. Without it,
//! [`TempRedis::start`] panics with what to install: a test that needs Redis never passes without
//! one.
//!
//! Each test takes a database of its own ([`TempRedis::fresh_database`]; the server has
//! [`TempRedis::DATABASES`] of them), so that tests sharing one server ([`TempRedis::shared`])
//! never see each other's keys. A test of what happens when Redis goes away uses a server of
//! its own and [`TempRedis::stop`]s it, then [`TempRedis::start_again`]s it on the same port.
//! [`TempRedis::query`] sends a command behind the back of the code under test, to look at or
//! change what it keeps.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// How long the server gets to accept connections.
const START_PATIENCE: Duration = Duration::from_secs(30);
/// How long one command of [`TempRedis::query`] may take.
const QUERY_TIMEOUT: Duration = Duration::from_secs(10);

/// A running Redis server of one's own.
pub struct TempRedis {
    binary: PathBuf,
    port: u16,
    running: Mutex<Option<Incarnation>>,
    next_database: AtomicU32,
}

/// One run of the server: the shell that watches it, and the directory of its log (which the
/// shell removes when the server is gone).
struct Incarnation {
    shell: Child,
    directory: PathBuf,
}

impl std::fmt::Debug for TempRedis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TempRedis")
            .field("port", &self.port)
            .field("running", &self.is_running())
            .finish_non_exhaustive()
    }
}

/// A reply of the Redis protocol, as [`TempRedis::query`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedisReply {
    Status(String),
    Error(String),
    Integer(i64),
    /// A bulk string; `None` is Redis's nil.
    Bulk(Option<Vec<u8>>),
    /// `None` is a nil array.
    Array(Option<Vec<RedisReply>>),
}

impl RedisReply {
    /// The integer of an integer reply; panics, saying what came, for any other.
    pub fn integer(&self) -> i64 {
        match self {
            RedisReply::Integer(value) => *value,
            other => panic!("expected an integer reply, got {other:?}"),
        }
    }

    /// The bulk strings of an array reply (nil ones left out); panics for any other reply.
    pub fn bulk_strings(&self) -> Vec<Vec<u8>> {
        match self {
            RedisReply::Array(Some(items)) => items
                .iter()
                .filter_map(|item| match item {
                    RedisReply::Bulk(bytes) => bytes.clone(),
                    other => panic!("expected bulk strings in the array, got {other:?}"),
                })
                .collect(),
            other => panic!("expected an array reply, got {other:?}"),
        }
    }
}

impl TempRedis {
    /// How many databases the server has, for [`TempRedis::fresh_database`].
    pub const DATABASES: u32 = 1024;

    /// Starts a server on a free loopback port, with no password, no snapshots and no append
    /// only file. Panics, saying why, when it cannot.
    pub fn start() -> Self {
        let redis = Self {
            binary: binary(),
            port: free_port(),
            running: Mutex::new(None),
            next_database: AtomicU32::new(0),
        };
        redis.start_again();
        redis
    }

    /// One server for the whole test process, started on first use and stopped when the process
    /// ends. Tests that share it take a database each ([`TempRedis::fresh_database`]) and never
    /// stop it.
    pub fn shared() -> &'static TempRedis {
        static SHARED: OnceLock<TempRedis> = OnceLock::new();
        SHARED.get_or_init(TempRedis::start)
    }

    /// The loopback port the server listens on, across [`TempRedis::stop`] and
    /// [`TempRedis::start_again`].
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL of `database` on this server.
    pub fn url(&self, database: u32) -> String {
        format!("redis://127.0.0.1:{}/{database}", self.port)
    }

    /// A database no one else has taken, empty, and its URL.
    pub fn fresh_database(&self) -> (u32, String) {
        let database = self.next_database.fetch_add(1, Ordering::Relaxed);
        assert!(
            database < Self::DATABASES,
            "all {} databases of the test Redis server are taken",
            Self::DATABASES
        );
        (database, self.url(database))
    }

    /// Whether the server runs now.
    pub fn is_running(&self) -> bool {
        self.incarnation().is_some()
    }

    /// Kills the server at once, as a crash would: connections drop, and nothing it held is
    /// kept. Does nothing when it is not running.
    pub fn stop(&self) {
        let stopped = self.incarnation().take();
        if let Some(incarnation) = stopped {
            incarnation.end();
        }
    }

    /// Starts the server (again) on its port, empty. Panics when it runs already, or does not
    /// start.
    pub fn start_again(&self) {
        let mut running = self.incarnation();
        assert!(running.is_none(), "the test Redis server runs already");
        let directory = tempfile::Builder::new()
            .prefix("mcpgw-redis-")
            .tempdir()
            .unwrap_or_else(|error| panic!("cannot make a directory for Redis: {error}"))
            .keep();
        let log = directory.join("server.log");
        std::fs::File::create(&log)
            .unwrap_or_else(|error| panic!("cannot create Redis's log file: {error}"));
        let words = [
            self.binary.to_string_lossy().into_owned(),
            "--port".to_owned(),
            self.port.to_string(),
            "--bind".to_owned(),
            "127.0.0.1".to_owned(),
            "--save".to_owned(),
            String::new(),
            "--appendonly".to_owned(),
            "no".to_owned(),
            "--databases".to_owned(),
            Self::DATABASES.to_string(),
            "--dir".to_owned(),
            directory.to_string_lossy().into_owned(),
        ];
        // The server runs under a shell that kills it (and removes its directory) as soon as
        // the shell's standard input closes: when this value stops it or is dropped, and also
        // when the test process ends without dropping it (a server shared by a whole test
        // binary), so no test run leaves a server behind.
        let script = format!(
            "{} >>\"$1/server.log\" 2>&1 & server=$!\n\
             read -r _ignored\n\
             kill -KILL \"$server\" 2>/dev/null\n\
             wait \"$server\"\n\
             rm -rf \"$1\"\n",
            words
                .iter()
                .map(|word| shell_quote(word))
                .collect::<Vec<_>>()
                .join(" ")
        );
        let shell = Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg("mcpgw-redis")
            .arg(&directory)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start {}: {error}", self.binary.display()));
        let mut incarnation = Incarnation { shell, directory };
        if let Err(problem) = wait_until_ready(self.port, &mut incarnation) {
            let log = read_log(&incarnation.directory);
            incarnation.end();
            panic!("{problem}; Redis's log:\n{log}");
        }
        *running = Some(incarnation);
    }

    /// The server's log so far, for a failing test's message; empty when it is not running.
    pub fn log(&self) -> String {
        self.incarnation()
            .as_ref()
            .map(|incarnation| read_log(&incarnation.directory))
            .unwrap_or_default()
    }

    /// Sends one command (its words, binary safe) to `database` on a connection of its own and
    /// answers the reply. Panics when the server cannot be reached or the reply cannot be read.
    pub fn query(&self, database: u32, command: &[&[u8]]) -> RedisReply {
        let address = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        let stream = TcpStream::connect_timeout(&address, QUERY_TIMEOUT)
            .unwrap_or_else(|error| panic!("cannot reach the test Redis server: {error}"));
        stream
            .set_read_timeout(Some(QUERY_TIMEOUT))
            .and_then(|()| stream.set_write_timeout(Some(QUERY_TIMEOUT)))
            .unwrap_or_else(|error| panic!("cannot set timeouts on a Redis connection: {error}"));
        let mut writer = stream
            .try_clone()
            .unwrap_or_else(|error| panic!("cannot use a Redis connection: {error}"));
        let mut reader = BufReader::new(stream);
        let select = database.to_string();
        let mut request = encode(&[b"SELECT", select.as_bytes()]);
        request.extend(encode(command));
        writer
            .write_all(&request)
            .unwrap_or_else(|error| panic!("cannot send a command to Redis: {error}"));
        let selected = read_reply(&mut reader);
        assert_eq!(
            selected,
            RedisReply::Status("OK".to_owned()),
            "SELECT {database}"
        );
        read_reply(&mut reader)
    }

    fn incarnation(&self) -> MutexGuard<'_, Option<Incarnation>> {
        self.running
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Drop for TempRedis {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Incarnation {
    /// Closes the shell's standard input, which makes it kill the server and remove the
    /// directory, and waits for that.
    fn end(mut self) {
        drop(self.shell.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.shell.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.shell.kill();
        let _ = self.shell.wait();
    }
}

/// Waits until the server on `port` answers `PING`; an error says why it never did.
fn wait_until_ready(port: u16, incarnation: &mut Incarnation) -> Result<(), String> {
    let started = Instant::now();
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    loop {
        if let Ok(Some(status)) = incarnation.shell.try_wait() {
            return Err(format!("Redis exited at start ({status})"));
        }
        if let Ok(mut stream) = TcpStream::connect_timeout(&address, Duration::from_millis(200)) {
            let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
            let mut answer = [0_u8; 7];
            let ponged = stream.write_all(b"PING\r\n").is_ok()
                && stream.read_exact(&mut answer).is_ok()
                && &answer == b"+PONG\r\n";
            if ponged {
                return Ok(());
            }
        }
        if started.elapsed() > START_PATIENCE {
            return Err(format!(
                "Redis did not answer PING on port {port} within {START_PATIENCE:?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn read_log(directory: &Path) -> String {
    std::fs::read_to_string(directory.join("server.log")).unwrap_or_default()
}

/// `command` as a request of the Redis protocol: an array of bulk strings.
fn encode(command: &[&[u8]]) -> Vec<u8> {
    let mut request = format!("*{}\r\n", command.len()).into_bytes();
    for word in command {
        request.extend(format!("${}\r\n", word.len()).into_bytes());
        request.extend_from_slice(word);
        request.extend_from_slice(b"\r\n");
    }
    request
}

fn read_line(reader: &mut impl BufRead) -> String {
    let mut line = Vec::new();
    reader
        .read_until(b'\n', &mut line)
        .unwrap_or_else(|error| panic!("cannot read Redis's reply: {error}"));
    assert!(
        line.ends_with(b"\r\n"),
        "Redis's reply ended early: {line:?}"
    );
    line.truncate(line.len() - 2);
    String::from_utf8(line).unwrap_or_else(|error| panic!("a reply line is not UTF-8: {error}"))
}

fn read_length(text: &str) -> i64 {
    text.parse()
        .unwrap_or_else(|_| panic!("Redis sent `{text}` where a number belongs"))
}

fn read_reply(reader: &mut impl BufRead) -> RedisReply {
    let line = read_line(reader);
    let (kind, rest) = line.split_at(1.min(line.len()));
    match kind {
        "+" => RedisReply::Status(rest.to_owned()),
        "-" => RedisReply::Error(rest.to_owned()),
        ":" => RedisReply::Integer(read_length(rest)),
        "$" => {
            let Ok(length) = usize::try_from(read_length(rest)) else {
                return RedisReply::Bulk(None);
            };
            let mut bytes = vec![0_u8; length + 2];
            reader
                .read_exact(&mut bytes)
                .unwrap_or_else(|error| panic!("cannot read a bulk string from Redis: {error}"));
            bytes.truncate(length);
            RedisReply::Bulk(Some(bytes))
        }
        "*" => {
            let Ok(count) = usize::try_from(read_length(rest)) else {
                return RedisReply::Array(None);
            };
            RedisReply::Array(Some((0..count).map(|_| read_reply(reader)).collect()))
        }
        _ => panic!("Redis sent a reply of an unknown kind: {line:?}"),
    }
}

/// `word` quoted for `sh`.
fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', "'\\''"))
}

/// Where `redis-server` is.
fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("MCPGW_TEST_REDIS_SERVER") {
        return PathBuf::from(path);
    }
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|dir| dir.join("redis-server"))
        .find(|candidate| candidate.is_file());
    let fallback = PathBuf::from("/usr/bin/redis-server");
    on_path
        .or_else(|| fallback.is_file().then_some(fallback))
        .unwrap_or_else(|| {
            panic!(
                "redis-server was not found in MCPGW_TEST_REDIS_SERVER, on PATH or at \
                 /usr/bin/redis-server: install Debian's `redis-server` package \
                 (apt-get install -y redis-server)"
            )
        })
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .unwrap_or_else(|error| panic!("cannot find a free loopback port: {error}"))
}

#[cfg(test)]
mod tests {
    use super::{RedisReply, TempRedis};

    #[test]
    fn a_server_answers_keeps_databases_apart_and_comes_back_empty_on_its_port() {
        let redis = TempRedis::start();
        let port = redis.port();
        let (first, url) = redis.fresh_database();
        assert_eq!(url, format!("redis://127.0.0.1:{port}/{first}"));
        let (second, _) = redis.fresh_database();
        assert_ne!(first, second);

        // Bad input for the protocol: a key with a space, a newline and a NUL byte.
        let key: &[u8] = b"odd key\r\nwith\0bytes";
        assert_eq!(
            redis.query(first, &[b"SET", key, b"v"]),
            RedisReply::Status("OK".to_owned())
        );
        assert_eq!(
            redis.query(first, &[b"GET", key]),
            RedisReply::Bulk(Some(b"v".to_vec()))
        );
        assert_eq!(redis.query(second, &[b"GET", key]), RedisReply::Bulk(None));
        assert_eq!(
            redis.query(first, &[b"KEYS", b"*"]).bulk_strings(),
            [key.to_vec()]
        );
        assert_eq!(redis.query(first, &[b"DBSIZE"]).integer(), 1);
        assert!(matches!(
            redis.query(first, &[b"NO-SUCH-COMMAND"]),
            RedisReply::Error(message) if message.contains("unknown command")
        ));

        redis.stop();
        assert!(!redis.is_running());
        assert!(
            std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
            "nothing listens once it is stopped"
        );
        redis.start_again();
        assert_eq!(redis.port(), port);
        assert_eq!(
            redis.query(first, &[b"DBSIZE"]).integer(),
            0,
            "nothing is kept"
        );
    }
}
