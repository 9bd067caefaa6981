//! The web console's browser scenarios: Python scripts of `tests/python/` that drive Debian's
//! chromium headless through selenium with `tests/python/browser_kit.py`, run with the venv
//! `.venv-browser/` that `scripts/install-test-deps.sh` makes.
//!
//! A scenario prints one JSON line on stdout, `{"ok": true, "checks": [...], "screenshots":
//! [...]}` or `{"ok": false, "error": "...", "checks": [...], "screenshots": [...]}`, and exits
//! non-zero when it failed. Nothing here skips: a missing venv or script is a panic that says
//! what to run, and a failed scenario is a panic that carries all it printed.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::peers::repository_root;

/// A scenario that has not ended by then is killed, with the browsers it started.
const SCENARIO_DEADLINE: Duration = Duration::from_secs(300);

thread_local! {
    /// How many times this test ran each scenario so far: the second run of one gets a
    /// screenshot directory of its own.
    static RUNS: RefCell<HashMap<String, usize>> = RefCell::new(HashMap::new());
}

/// Runs `.venv-browser/bin/python tests/python/SCRIPT --screenshots DIR ARGS...` with
/// `PYTHONPATH=tests/python` and `env` added to the environment, and answers the JSON object of
/// its last stdout line. `DIR` is made fresh under `target/console-screenshots/`, named after the
/// test binary, the test and the script (`browser_kit/<test>/browser_selftest`, then
/// `browser_selftest-2` for a second run in the same test), so a failed run's pictures stay to
/// be looked at.
///
/// Panics, with everything the scenario printed on stdout and stderr, when the venv or the
/// script is missing, the scenario does not end within 300 s (it is killed, with the browsers
/// it started), it exits non-zero, it prints no JSON object line, or that object's `ok` is not
/// `true`.
#[track_caller]
pub fn run_browser_scenario(script: &str, args: &[String], env: &[(&str, String)]) -> Value {
    let root = repository_root();
    let python = root.join(".venv-browser/bin/python");
    assert!(
        python.is_file(),
        "the browser venv is missing ({} does not exist): run scripts/install-test-deps.sh",
        python.display()
    );
    assert!(
        !script.is_empty() && !script.contains('/') && script.ends_with(".py"),
        "a browser scenario is named by its file name in tests/python/, such as \
         browser_selftest.py, got {script:?}"
    );
    let script_path = root.join("tests/python").join(script);
    assert!(
        script_path.is_file(),
        "no browser scenario {} (the scenarios live in tests/python/)",
        script_path.display()
    );
    let screenshots = screenshot_dir(&root, script.trim_end_matches(".py"));

    use std::os::unix::process::CommandExt;
    let mut command = Command::new(&python);
    command
        .arg(&script_path)
        .arg("--screenshots")
        .arg(&screenshots)
        .args(args)
        .current_dir(&root)
        .env("PYTHONPATH", root.join("tests/python"))
        .env("PYTHONUNBUFFERED", "1")
        // Its own process group, so that a timeout ends chromedriver and chromium with it.
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (key, value) in env {
        command.env(key, value);
    }
    let description = format!("{script} {}", args.join(" "));
    let mut child = command
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start the browser scenario {description}: {error}"));
    let stdout = drain(child.stdout.take().expect("stdout is piped"));
    let stderr = drain(child.stderr.take().expect("stderr is piped"));
    let group = i32::try_from(child.id()).expect("a process id fits an i32");

    let deadline = Instant::now() + SCENARIO_DEADLINE;
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for the scenario") {
            break Some(status);
        }
        if Instant::now() >= deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // Whatever the scenario left running (a browser it never quit, or all of them after the
    // deadline) ends with its process group.
    kill_group(group);
    if status.is_none() {
        let _ = child.wait();
    }
    let collect = |receiver: mpsc::Receiver<String>| {
        receiver
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_else(|_| "(the pipe stayed open after the scenario ended)".to_owned())
    };
    let (stdout, stderr) = (collect(stdout), collect(stderr));
    let printed = format!("stdout:\n{stdout}\nstderr:\n{stderr}");

    let Some(status) = status else {
        panic!(
            "the browser scenario {description} did not end within {SCENARIO_DEADLINE:?} and was \
             killed\n{printed}"
        );
    };
    let answer = stdout.lines().rev().find_map(|line| {
        serde_json::from_str::<Value>(line.trim())
            .ok()
            .filter(|value| value.get("ok").is_some())
    });
    let Some(answer) = answer else {
        panic!(
            "the browser scenario {description} printed no JSON line with \"ok\" ({})\n{printed}",
            describe_exit(status)
        );
    };
    if answer["ok"] != Value::Bool(true) {
        panic!(
            "the browser scenario {description} failed: {}\nchecks passed: {}\nscreenshots: {}\n{printed}",
            answer["error"], answer["checks"], answer["screenshots"]
        );
    }
    assert!(
        status.success(),
        "the browser scenario {description} answered ok but ended with {}\n{printed}",
        describe_exit(status)
    );
    answer
}

/// `TARGET/console-screenshots/BINARY/TEST/STEM[-N]`, removed and made anew.
fn screenshot_dir(root: &Path, stem: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(|dir| root.join(dir))
        .unwrap_or_else(|| root.join("target"));
    let thread = std::thread::current();
    let test = match thread.name() {
        Some(name) if name != "main" => name.replace("::", "-"),
        _ => "main".to_owned(),
    };
    let run = RUNS.with(|runs| {
        let mut runs = runs.borrow_mut();
        let count = runs.entry(stem.to_owned()).or_insert(0);
        *count += 1;
        *count
    });
    let folder = if run == 1 {
        stem.to_owned()
    } else {
        format!("{stem}-{run}")
    };
    let dir = target
        .join("console-screenshots")
        .join(env!("CARGO_CRATE_NAME"))
        .join(test)
        .join(folder);
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .unwrap_or_else(|error| panic!("cannot empty {}: {error}", dir.display()));
    }
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|error| panic!("cannot make {}: {error}", dir.display()));
    dir
}

/// Reads a pipe to its end on a thread, so that a chatty scenario never blocks on a full pipe.
fn drain(mut pipe: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        let _ = sender.send(String::from_utf8_lossy(&bytes).into_owned());
    });
    receiver
}

fn kill_group(group: i32) {
    // SAFETY: kill(2) on the process group of our own child has no memory-safety preconditions.
    #[allow(unsafe_code)]
    unsafe {
        libc::kill(-group, libc::SIGKILL);
    }
}

fn describe_exit(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        _ => "an unknown exit".to_owned(),
    }
}
