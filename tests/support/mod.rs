//! Shared helpers of the end-to-end tests: start the real `mcpgw` binary on a free port
//! with a temporary data directory, talk to it over HTTP, and stop it with a signal.

#![allow(dead_code)]

pub mod browser;
pub mod engine;
pub mod peers;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The gateway binary cargo built for these tests.
pub fn gateway_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_mcpgw"))
}

/// The fixture MCP server of the testkit, built on first use when it is missing or stale.
pub fn fixture_binary() -> PathBuf {
    mcpgw_fixtures::fixture::fixture_server_binary()
}

/// A running gateway process. Dropping it kills the process.
pub struct RunningGateway {
    pub child: Child,
    pub base_url: String,
    pub data_dir: tempfile::TempDir,
    pub config_path: Option<PathBuf>,
    stderr: Arc<Mutex<Vec<String>>>,
    agent: ureq::Agent,
}

pub struct GatewayBuilder {
    config: Option<String>,
    data_dir: Option<tempfile::TempDir>,
    env: Vec<(String, String)>,
    host: String,
    args: Vec<String>,
}

impl GatewayBuilder {
    pub fn config(mut self, yaml: &str) -> Self {
        self.config = Some(yaml.to_owned());
        self
    }

    /// Reuses a data directory (to test what survives a restart).
    pub fn data_dir(mut self, dir: tempfile::TempDir) -> Self {
        self.data_dir = Some(dir);
        self
    }

    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// Listens on `host` instead of 127.0.0.1 (`0.0.0.0` needs authentication on, or
    /// [`GatewayBuilder::arg`] `--unsafe-no-auth`).
    pub fn host(mut self, host: &str) -> Self {
        host.clone_into(&mut self.host);
        self
    }

    /// One more command-line argument.
    pub fn arg(mut self, arg: &str) -> Self {
        self.args.push(arg.to_owned());
        self
    }

    pub fn start(self) -> RunningGateway {
        let data_dir = self
            .data_dir
            .unwrap_or_else(|| tempfile::tempdir().unwrap());
        let mut command = Command::new(gateway_binary());
        command
            .args(["--http", "--host", &self.host, "--port", "0"])
            .args(&self.args)
            .arg("--data-dir")
            .arg(data_dir.path())
            .current_dir(data_dir.path())
            .env("MCP_LOG", "info")
            // Most suites send bursts of requests from one address to test other things; the
            // rate-limit suite turns limiting on with `.env("MCP_RATE_LIMIT_RPS", ..)`.
            .env("MCP_RATE_LIMIT_RPS", "0")
            .env_remove("MCP_CONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let config_path = self.config.map(|yaml| {
            let path = data_dir.path().join("gateway.yaml");
            std::fs::write(&path, yaml).unwrap();
            path
        });
        if let Some(path) = &config_path {
            command.arg("--config").arg(path);
        }
        for (key, value) in &self.env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("the gateway binary starts");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let (address_sender, address_receiver) = std::sync::mpsc::channel();
        {
            let stderr = stderr.clone();
            let pipe = child.stderr.take().unwrap();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines() {
                    let Ok(line) = line else { break };
                    if let Some(address) = line.strip_prefix("listening on ") {
                        let _ = address_sender.send(address.trim().to_owned());
                    }
                    stderr.lock().unwrap().push(line);
                }
            });
        }
        let base_url = match address_receiver.recv_timeout(Duration::from_secs(30)) {
            Ok(address) => address,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "the gateway did not print its address; stderr:\n{}",
                    stderr.lock().unwrap().join("\n")
                );
            }
        };
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .new_agent();
        RunningGateway {
            child,
            base_url,
            data_dir,
            config_path,
            stderr,
            agent,
        }
    }
}

/// Makes a key with `mcpgw auth create-key` in `data_dir`; answers the raw key.
pub fn cli_key(data_dir: &std::path::Path, principal: &str, role: Option<&str>) -> String {
    let mut command = Command::new(gateway_binary());
    command
        .args([
            "auth",
            "create-key",
            "--principal",
            principal,
            "--name",
            "e2e",
        ])
        .arg("--data-dir")
        .arg(data_dir)
        .stdin(Stdio::null());
    if let Some(role) = role {
        command.args(["--role", role]);
    }
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

/// Starts the gateway (HTTP on a free port, a fresh data directory) with the configuration
/// `yaml` if given and the environment `env`, expects it to refuse to start, and answers what
/// it wrote on stderr. Fails when it starts, or takes longer than 20 s to give up.
#[track_caller]
pub fn start_fails(yaml: Option<&str>, env: &[(&str, &str)]) -> String {
    start_fails_with(&["--host", "127.0.0.1"], yaml, env)
}

/// As [`start_fails`], with `args` (such as `--host 0.0.0.0 --unsafe-no-auth`) instead of
/// `--host 127.0.0.1`. A gateway that starts after all is stopped, and the test fails.
#[track_caller]
pub fn start_fails_with(args: &[&str], yaml: Option<&str>, env: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut command = Command::new(gateway_binary());
    command
        .args(["--http", "--port", "0"])
        .args(args)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .env_remove("MCP_CONFIG")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(yaml) = yaml {
        let path = dir.path().join("gateway.yaml");
        std::fs::write(&path, yaml).unwrap();
        command.arg("--config").arg(path);
    }
    let started = Instant::now();
    let mut child = command.spawn().expect("the gateway binary starts");
    let mut pipe = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut pipe, &mut text);
        text
    });
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = reader.join().unwrap();
    match status {
        Some(status) => assert!(
            !status.success(),
            "the gateway exited successfully with {args:?}, {yaml:?} and {env:?}: {stderr}"
        ),
        None => panic!(
            "the gateway started with {args:?}, {yaml:?} and {env:?} and was still running \
             after 20 s; stderr:\n{stderr}"
        ),
    }
    stderr
}

pub fn gateway() -> GatewayBuilder {
    GatewayBuilder {
        config: None,
        data_dir: None,
        env: Vec::new(),
        host: "127.0.0.1".to_owned(),
        args: Vec::new(),
    }
}

/// An HTTP answer: status, headers of interest and the body as JSON (or text).
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub content_type: String,
    pub text: String,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text)
            .unwrap_or_else(|error| panic!("not JSON ({error}): {}", self.text))
    }

    /// Asserts the API's error envelope and returns its message.
    #[track_caller]
    pub fn assert_error(&self, status: u16, error: &str) -> String {
        assert_eq!(self.status, status, "body: {}", self.text);
        assert!(
            self.content_type.starts_with("application/json"),
            "{}",
            self.content_type
        );
        let body = self.json();
        assert_eq!(body["error"], error, "body: {body}");
        assert_eq!(body["status_code"], status, "body: {body}");
        let message = body["message"].as_str().expect("a message").to_owned();
        assert!(!message.is_empty());
        message
    }
}

impl RunningGateway {
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base_url, path)
    }

    /// The address it listens on, `HOST:PORT`.
    pub fn address(&self) -> &str {
        self.base_url
            .strip_prefix("http://")
            .unwrap_or(&self.base_url)
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.address()
            .rsplit_once(':')
            .and_then(|(_, port)| port.parse().ok())
            .expect("the address ends with a port")
    }

    fn answer(response: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Answer {
        let mut response = response.expect("the gateway answers");
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let text = response.body_mut().read_to_string().unwrap_or_default();
        Answer {
            status,
            content_type,
            text,
        }
    }

    pub fn get(&self, path: &str) -> Answer {
        Self::answer(self.agent.get(&self.url(path)).call())
    }

    pub fn delete(&self, path: &str) -> Answer {
        Self::answer(self.agent.delete(&self.url(path)).call())
    }

    pub fn post(&self, path: &str, body: &Value) -> Answer {
        Self::answer(self.agent.post(&self.url(path)).send_json(body))
    }

    pub fn post_empty(&self, path: &str) -> Answer {
        Self::answer(self.agent.post(&self.url(path)).send_empty())
    }

    pub fn post_raw(&self, path: &str, body: &str) -> Answer {
        Self::answer(
            self.agent
                .post(&self.url(path))
                .header("content-type", "application/json")
                .send(body),
        )
    }

    pub fn put(&self, path: &str, body: &Value) -> Answer {
        Self::answer(self.agent.put(&self.url(path)).send_json(body))
    }

    /// One JSON-RPC request to `/mcp` in the stateless 2026-07-28 era: a POST with the era's
    /// headers and `_meta`, no `initialize`, no session. Answers the JSON-RPC response (with
    /// `result` or `error`), whether it came as JSON or as a server-sent event.
    pub fn mcp_request(&self, method: &str, mut params: Value) -> Value {
        const PROTOCOL: &str = "2026-07-28";
        params["_meta"] = serde_json::json!({
            "io.modelcontextprotocol/protocolVersion": PROTOCOL,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "mcpgw-e2e", "version": "0"},
        });
        let name = params["name"].as_str().map(str::to_owned);
        let body =
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let mut request = self
            .agent
            .post(&self.url("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", PROTOCOL)
            .header("mcp-method", method);
        if let Some(name) = &name {
            request = request.header("mcp-name", name);
        }
        let answer = Self::answer(request.send_json(&body));
        assert_eq!(answer.status, 200, "{method}: {answer:?}");
        if answer.content_type.starts_with("text/event-stream") {
            // Each message of the stream is one `data:` line of JSON; priming events and
            // notifications carry no `id`.
            answer
                .text
                .lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
                .find(|message| message.get("id").is_some())
                .unwrap_or_else(|| panic!("{method}: no answer in the event stream: {answer:?}"))
        } else {
            answer.json()
        }
    }

    /// `tools/call` over `/mcp` (see [`RunningGateway::mcp_request`]); answers the JSON-RPC
    /// response.
    pub fn mcp_call_tool(&self, name: &str, arguments: Value) -> Value {
        self.mcp_request(
            "tools/call",
            serde_json::json!({"name": name, "arguments": arguments}),
        )
    }

    /// The names `tools/list` on `/mcp` answers, following `nextCursor` over every page.
    pub fn mcp_tool_names(&self) -> Vec<String> {
        let mut names = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let params = match &cursor {
                Some(cursor) => serde_json::json!({"cursor": cursor}),
                None => serde_json::json!({}),
            };
            let answer = self.mcp_request("tools/list", params);
            let result = &answer["result"];
            let tools = result["tools"]
                .as_array()
                .unwrap_or_else(|| panic!("tools/list answered {answer}"));
            names.extend(
                tools
                    .iter()
                    .filter_map(|tool| tool["name"].as_str().map(str::to_owned)),
            );
            match result["nextCursor"].as_str() {
                Some(next) if !next.is_empty() => cursor = Some(next.to_owned()),
                _ => return names,
            }
        }
    }

    /// Everything the gateway wrote on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().join("\n")
    }

    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).unwrap()
    }

    /// Sends `signal` and waits (bounded) for the process to exit; returns its status.
    pub fn signal_and_wait(&mut self, signal: i32, within: Duration) -> std::process::ExitStatus {
        send_signal(self.pid(), signal);
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the gateway did not exit within {within:?}; stderr:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Polls `GET path` until `check` accepts the JSON body, or fails after `within`.
    #[track_caller]
    pub fn wait_for(&self, path: &str, within: Duration, check: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + within;
        loop {
            let answer = self.get(path);
            if answer.status == 200 {
                let body = answer.json();
                if check(&body) {
                    return body;
                }
                assert!(
                    Instant::now() < deadline,
                    "condition not met in {within:?}: {body}"
                );
            } else {
                assert!(Instant::now() < deadline, "GET {path}: {answer:?}");
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}

impl Drop for RunningGateway {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            send_signal(self.pid(), libc::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if self.child.try_wait().ok().flatten().is_some() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub fn send_signal(pid: i32, signal: i32) {
    // SAFETY: kill(2) with a pid and a signal number has no memory-safety preconditions.
    #[allow(unsafe_code)]
    let result = unsafe { libc::kill(pid, signal) };
    assert!(result == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH));
}

/// Whether a process with this pid exists and is not a zombie.
pub fn process_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            // The state follows the parenthesised command name.
            let state = stat
                .rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().chars().next());
            !matches!(state, Some(Some('Z')) | None)
        }
        Err(_) => false,
    }
}

/// Every live descendant of `pid`, found through /proc.
pub fn descendants(pid: i32) -> Vec<i32> {
    let Ok(pid) = u32::try_from(pid) else {
        return Vec::new();
    };
    mcpgw_fixtures::processes::descendants(pid)
        .into_iter()
        .filter_map(|entry| i32::try_from(entry.pid).ok())
        .filter(|pid| process_alive(*pid))
        .collect()
}

/// A YAML snippet for a fixture server with extra fixture arguments.
pub fn fixture_server_yaml(id: &str, extra_args: &[&str]) -> String {
    let mut command = vec![format!("\"{}\"", fixture_binary().display())];
    command.extend(extra_args.iter().map(|arg| format!("\"{arg}\"")));
    format!(
        "  {id}:\n    mode: subprocess\n    command: [{}]\n",
        command.join(", ")
    )
}

/// An answer read off the wire by [`raw_exchange`]: the status, the head's headers (names
/// lowercase) and the body (de-chunked) as text.
#[derive(Debug)]
pub struct RawAnswer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl RawAnswer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    /// Asserts the API's error envelope with `status` and `error`; answers its message.
    #[track_caller]
    pub fn assert_error(&self, status: u16, error: &str) -> String {
        Answer {
            status: self.status,
            content_type: self.header("content-type").unwrap_or_default().to_owned(),
            text: self.body.clone(),
        }
        .assert_error(status, error)
    }
}

/// The value of cookie `name` among an answer's `Set-Cookie`s.
pub fn cookie_value(answer: &RawAnswer, name: &str) -> Option<String> {
    answer
        .headers
        .iter()
        .filter(|(header, _)| header.eq_ignore_ascii_case("set-cookie"))
        .find_map(|(_, value)| {
            let (pair, _) = value.split_once(';').unwrap_or((value, ""));
            let (key, value) = pair.split_once('=')?;
            (key == name).then(|| value.to_owned())
        })
}

/// Signs in to the console with the API key `key` as a browser does (the sign-in page's
/// token, then the key form); answers the session cookie's value.
pub fn console_key_session(gw: &RunningGateway, key: &str) -> String {
    let page = console_request(gw, "GET", "/ui/login", "", None);
    let token = cookie_value(&page, "mcpgw_login").expect("the sign-in page sets its token");
    let answer = console_request(
        gw,
        "POST",
        "/ui/login/key",
        &format!("mcpgw_login={token}"),
        Some(&format!(
            "login_token={token}&next=%2Fui%2Fservers&api_key={key}"
        )),
    );
    assert_eq!(answer.status, 303, "{}", answer.body);
    cookie_value(&answer, "mcpgw_session").expect("a session cookie")
}

/// One request to the web console at `/ui/`: `cookies` as a `Cookie` header, `form` as an
/// urlencoded body; the answer as it came.
pub fn console_request(
    gw: &RunningGateway,
    method: &str,
    path: &str,
    cookies: &str,
    form: Option<&str>,
) -> RawAnswer {
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n",
        gw.address()
    );
    if !cookies.is_empty() {
        request.push_str(&format!("Cookie: {cookies}\r\n"));
    }
    if let Some(form) = form {
        request.push_str(&format!(
            "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n",
            form.len()
        ));
    }
    request.push_str("\r\n");
    request.push_str(form.unwrap_or_default());
    raw_exchange(gw.address(), request.as_bytes())
}

/// Sends `request` byte for byte to `address` (`HOST:PORT`) on a new connection, exactly as
/// written (the caller chooses every header, `Host` and `Connection: close` included), and reads
/// the answer until the gateway closes the connection or 30 s pass. For the browser's view of
/// the gateway: headers a client library would fix up are sent as they are.
pub fn raw_exchange(address: &str, request: &[u8]) -> RawAnswer {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).expect("the gateway accepts");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream
        .write_all(request)
        .expect("the gateway reads the request");
    let mut received = Vec::new();
    let mut buffer = [0_u8; 8192];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => received.extend_from_slice(&buffer[..read]),
            Err(error) => {
                assert!(!received.is_empty(), "no answer from the gateway: {error}");
                break;
            }
        }
        if answer_is_complete(&received) {
            break;
        }
    }
    let split = received
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no complete head: {}", String::from_utf8_lossy(&received)));
    let head = String::from_utf8_lossy(&received[..split]).into_owned();
    let mut body = received[split + 4..].to_vec();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {head}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    if headers
        .iter()
        .any(|(name, value)| name == "transfer-encoding" && value.contains("chunked"))
    {
        body = dechunked(&body);
    }
    RawAnswer {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// Whether `received` holds a whole answer on a connection that may stay open: a head that
/// switches protocols (an accepted WebSocket upgrade), or a head and a body of its declared
/// length. Anything else is read until the gateway closes the connection.
fn answer_is_complete(received: &[u8]) -> bool {
    let Some(split) = received.windows(4).position(|window| window == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&received[..split]).to_ascii_lowercase();
    if head.starts_with("http/1.1 101") {
        return true;
    }
    head.lines()
        .filter_map(|line| line.strip_prefix("content-length:"))
        .filter_map(|length| length.trim().parse::<usize>().ok())
        .any(|length| received.len() - split - 4 >= length)
}

fn dechunked(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(end) = data.windows(2).position(|window| window == b"\r\n") {
        let size_text = String::from_utf8_lossy(&data[..end]);
        let Ok(size) = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
        else {
            break;
        };
        data = &data[end + 2..];
        if size == 0 || data.len() < size {
            out.extend_from_slice(&data[..size.min(data.len())]);
            break;
        }
        out.extend_from_slice(&data[..size]);
        data = &data[(size + 2).min(data.len())..];
    }
    out
}

/// The JSON-RPC answer in the body of a POST to `/mcp`: the body itself when it is JSON, else
/// the first message with an `id` among its Server-Sent Events.
#[track_caller]
pub fn jsonrpc_answer(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|_| {
        body.lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
            .find(|message| message.get("id").is_some())
            .unwrap_or_else(|| panic!("no answer in {body}"))
    })
}
