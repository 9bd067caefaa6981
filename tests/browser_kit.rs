//! The browser kit of the web console's tests, proved on pages that are wrong on purpose: headless
//! chromium driven by selenium (`tests/python/browser_kit.py`), axe-core inside each page, the
//! phone-width check, the console's errors, screenshots, and the scenario protocol that
//! `support::browser::run_browser_scenario` reads.

mod support;

use serde_json::Value;
use support::browser::run_browser_scenario;

const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

fn strings(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {value}"))
        .iter()
        .map(|item| {
            item.as_str()
                .unwrap_or_else(|| panic!("not a string: {item}"))
        })
        .collect()
}

fn assert_png(path: &str) {
    let bytes = std::fs::read(path)
        .unwrap_or_else(|error| panic!("cannot read screenshot {path}: {error}"));
    assert!(
        bytes.starts_with(PNG_SIGNATURE),
        "{path} is not a PNG file ({} bytes)",
        bytes.len()
    );
}

/// The bad input: a page with an `<img>` without alt text and an `<input>` without a label, a
/// page with a 2000-pixel-wide block at a 390-pixel phone width, a script file that calls
/// `console.error` (beside a log and a warning that must not count), an inline script that the
/// page's Content-Security-Policy refuses, and a wait for text that never comes. The kit must
/// find each of them, and nothing on the clean page, whose favicon.ico is missing too.
#[test]
fn browser_kit_finds_what_it_should() {
    let answer = run_browser_scenario("browser_selftest.py", &[], &[]);
    assert_eq!(answer["ok"], Value::Bool(true), "{answer}");
    let checks = strings(&answer["checks"]);
    for wanted in [
        "axe finds nothing on the clean page",
        "the clean page logs no error",
        "the screenshot is a 1280-pixel-wide PNG",
        "a wait that times out names the page and quotes its text",
        "the clean page fits a phone",
        "the wide page overflows a phone",
        "axe finds image-alt (critical) on the broken page",
        "axe finds the unlabeled field (label, critical)",
        "axe names the offending elements",
        "a console.error from a script file is reported, and nothing else",
        "a script the policy refuses is reported",
    ] {
        assert!(
            checks.contains(&wanted),
            "the self-test did not pass {wanted:?}: {answer}"
        );
    }
    let screenshots = strings(&answer["screenshots"]);
    assert_eq!(screenshots.len(), 2, "{answer}");
    for path in &screenshots {
        assert!(
            path.contains("/console-screenshots/browser_kit/browser_kit_finds_what_it_should/"),
            "{path} is not in this test's screenshot directory"
        );
        assert_png(path);
    }
}

/// The bad input: a scenario whose check fails on purpose. The kit must save a screenshot
/// named `failure`, answer `ok: false` with the error and the checks that passed before it, and
/// exit non-zero; `run_browser_scenario` must then panic with all of that in its message.
#[test]
fn a_failed_scenario_panics_with_its_answer_and_a_failure_screenshot() {
    let outcome = std::panic::catch_unwind(|| {
        run_browser_scenario("browser_selftest.py", &["fail".to_owned()], &[])
    });
    let payload = outcome.expect_err("a failed scenario must panic");
    let message = payload
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_else(|| panic!("the panic carried no message"));
    assert!(
        message.contains("failed:") && message.contains("this check fails on purpose"),
        "the panic does not carry the scenario's error:\n{message}"
    );
    assert!(
        message.contains("the clean page opened"),
        "the panic does not list the checks that passed:\n{message}"
    );
    let answer: Value = message
        .lines()
        .find_map(|line| {
            serde_json::from_str::<Value>(line)
                .ok()
                .filter(Value::is_object)
        })
        .unwrap_or_else(|| panic!("the panic does not carry the scenario's JSON line:\n{message}"));
    assert_eq!(answer["ok"], Value::Bool(false), "{answer}");
    let screenshots = strings(&answer["screenshots"]);
    let failure = screenshots
        .iter()
        .find(|path| path.ends_with("/failure.png"))
        .unwrap_or_else(|| panic!("no failure screenshot: {answer}"));
    assert_png(failure);
}

/// The bad input: a scenario name with a directory in it, and a scenario that does not exist.
/// Both are refused with a message that says where scenarios live, before anything starts.
#[test]
fn a_scenario_is_named_by_its_file_in_tests_python() {
    for (script, expected) in [
        ("../browser_selftest.py", "is named by its file name"),
        ("no_such_scenario.py", "no browser scenario"),
    ] {
        let outcome = std::panic::catch_unwind(|| run_browser_scenario(script, &[], &[]));
        let payload = outcome.expect_err("a bad scenario name must panic");
        let message = payload
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default();
        assert!(
            message.contains(expected),
            "{script}: expected {expected:?} in the panic, got {message:?}"
        );
    }
}
