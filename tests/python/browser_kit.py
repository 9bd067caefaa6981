"""The browser kit of the web console's tests: Debian's chromium, headless, driven by selenium.

A console scenario is a script of tests/python/ run with the venv .venv-browser/ (made by
scripts/install-test-deps.sh) and PYTHONPATH=tests/python, as

    SCENARIO.py --screenshots DIR [ARGS...]

It imports this module, writes a `main(scenario)` and ends with `run_scenario(main)`:

    from browser_kit import axe_violations, new_driver, run_scenario, wait_for_text

    def main(scenario):
        driver = new_driver()
        driver.get(scenario.args[0] + "/ui/")
        wait_for_text(driver, "h1", "Servers")
        violations = axe_violations(driver)
        scenario.check("the servers page has no serious accessibility problem",
                       violations == [], violations)
        scenario.screenshot(driver, "servers")

    run_scenario(main)

`run_scenario` prints exactly one JSON line on stdout when the scenario ends,
`{"ok": true, "checks": [...], "screenshots": [...]}` or
`{"ok": false, "error": "...", "checks": [...], "screenshots": [...]}` (the checks that passed
before the failure, and a screenshot named `failure` of the last open browser), and exits 1 when
the scenario failed. Whatever else the scenario prints goes to stderr, so that stdout holds that
line alone.

Nothing is injected inline into a page: the console sends `Content-Security-Policy: script-src
'self'`, so the kit runs its scripts (axe-core among them) through WebDriver, which that policy
does not govern.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import re
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

REPOSITORY_ROOT = Path(__file__).resolve().parents[2]
INSTALL_SCRIPT = "scripts/install-test-deps.sh"
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
AXE_SCRIPT = REPOSITORY_ROOT / "tests/node/node_modules/axe-core/axe.min.js"

PHONE_SIZE = (390, 844)
DESKTOP_SIZE = (1280, 800)
AXE_IMPACTS = ("minor", "moderate", "serious", "critical")
DEFAULT_WAIT_SECONDS = 10.0
# axe-core checks a page of the console in well under a second; a hung run must still end.
AXE_RUN_SECONDS = 60
EXCERPT_CHARACTERS = 400

try:
    from selenium import webdriver
    from selenium.common.exceptions import (
        InvalidSelectorException,
        StaleElementReferenceException,
        WebDriverException,
    )
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
except ImportError as missing:  # run with another Python than the venv's
    raise ImportError(
        f"selenium is missing ({missing}): run the scenarios with .venv-browser/bin/python, "
        f"which {INSTALL_SCRIPT} makes"
    ) from missing


class BrowserKitError(Exception):
    """Something the kit could not do, said so that the reader knows what to fix."""


# --- Drivers ----------------------------------------------------------------------------------

# Every driver that new_driver started and quit_driver has not yet ended, oldest first, with its
# profile directory; run_scenario ends the ones a scenario leaves open, and so does the exit.
_open_drivers: list[tuple[Any, Path]] = []
# The console entries read so far from each driver: WebDriver hands each entry out only once.
_console_entries: dict[int, list[dict[str, Any]]] = {}


def _require_executable(path: Path, package: str) -> None:
    if not path.is_file():
        raise BrowserKitError(
            f"{path} is missing: run {INSTALL_SCRIPT}, which installs Debian's {package} package"
        )
    if not path.stat().st_mode & 0o111:
        raise BrowserKitError(f"{path} is not executable: reinstall Debian's {package} package")


def new_driver(width: int = DESKTOP_SIZE[0], height: int = DESKTOP_SIZE[1]):
    """Starts headless chromium with a fresh profile and a viewport of `width` x `height` pixels.

    The browser keeps what the pages log on their console (see `console_errors`). End it with
    `quit_driver`, or let `run_scenario` end it.
    """
    _require_size(width, height)
    _require_executable(CHROMIUM, "chromium")
    _require_executable(CHROMEDRIVER, "chromium-driver")
    profile = Path(tempfile.mkdtemp(prefix="mcpgw-browser-profile-"))
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in (
        # Headless as root: no sandbox, no GPU, and /tmp rather than a small /dev/shm.
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        # Nothing but the pages under test reaches the network.
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        f"--user-data-dir={profile}",
        f"--window-size={width},{height}",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        driver = webdriver.Chrome(
            options=options, service=Service(executable_path=str(CHROMEDRIVER))
        )
    except WebDriverException as error:
        shutil.rmtree(profile, ignore_errors=True)
        raise BrowserKitError(
            f"chromium did not start under {CHROMEDRIVER}: {_first_line(error.msg)} "
            f"(chromium and chromium-driver must be of one version: run {INSTALL_SCRIPT})"
        ) from error
    _open_drivers.append((driver, profile))
    _console_entries[id(driver)] = []
    try:
        _set_viewport(driver, width, height)
    except Exception:
        quit_driver(driver)
        raise
    return driver


def quit_driver(driver) -> None:
    """Ends the browser and removes its profile. Ending one twice does nothing."""
    for index, (open_driver, profile) in enumerate(_open_drivers):
        if open_driver is driver:
            del _open_drivers[index]
            _console_entries.pop(id(driver), None)
            with contextlib.suppress(WebDriverException):
                driver.quit()
            shutil.rmtree(profile, ignore_errors=True)
            return


def _quit_all() -> None:
    while _open_drivers:
        quit_driver(_open_drivers[-1][0])


atexit.register(_quit_all)


def _require_size(width: int, height: int) -> None:
    for name, value in (("width", width), ("height", height)):
        if isinstance(value, bool) or not isinstance(value, int) or not 100 <= value <= 10000:
            raise ValueError(
                f"a viewport {name} is a whole number of pixels from 100 to 10000, got {value!r}"
            )


def _set_viewport(driver, width: int, height: int) -> None:
    """Sizes the window so that the page's viewport (window.innerWidth x innerHeight) is exactly
    `width` x `height`: a headless window still keeps some of its height for the browser's frame."""
    _require_size(width, height)
    driver.set_window_size(width, height)
    inner_width, inner_height = driver.execute_script(
        "return [window.innerWidth, window.innerHeight]"
    )
    # The frame's share is measured after each resize, and a busy machine can report the
    # viewport before the resize settled: correct by what is measured, a few times.
    for attempt in range(4):
        if (inner_width, inner_height) == (width, height):
            break
        if attempt:
            time.sleep(0.1 * attempt)
        window = driver.get_window_size()
        outer_width, outer_height = window["width"], window["height"]
        driver.set_window_size(
            outer_width + width - inner_width, outer_height + height - inner_height
        )
        inner_width, inner_height = driver.execute_script(
            "return [window.innerWidth, window.innerHeight]"
        )
    if (inner_width, inner_height) != (width, height):
        raise BrowserKitError(
            f"chromium would not show a {width}x{height} viewport"
            f" (it shows {inner_width}x{inner_height})"
        )


def phone_width(driver) -> None:
    """A phone's viewport: 390 x 844 pixels."""
    _set_viewport(driver, *PHONE_SIZE)


def desktop(driver) -> None:
    """A desktop viewport: 1280 x 800 pixels."""
    _set_viewport(driver, *DESKTOP_SIZE)


def page_widths(driver) -> dict[str, int]:
    """The width of the page's content (`scroll_width`) and of the viewport (`inner_width`)."""
    scroll_width, inner_width = driver.execute_script(
        "const page = document.scrollingElement || document.documentElement;"
        "return [page.scrollWidth, window.innerWidth];"
    )
    return {"scroll_width": scroll_width, "inner_width": inner_width}


def no_horizontal_overflow(driver) -> bool:
    """Whether the page fits the viewport's width, so that nobody has to scroll sideways (one
    pixel of rounding allowed)."""
    widths = page_widths(driver)
    return widths["scroll_width"] <= widths["inner_width"] + 1


# --- What a page logged -----------------------------------------------------------------------


def console_errors(driver) -> list[dict[str, Any]]:
    """The errors the browser logged since it started, oldest first, as
    `{"source", "message"}`: uncaught exceptions (`javascript`), `console.error` (`console-api`),
    refused scripts and styles (`security`, the Content-Security-Policy's refusals) and failed
    loads (`network`). The browser's own request for /favicon.ico is left out: a missing icon
    is no error of a page's."""
    entries = _console_entries.get(id(driver))
    if entries is None:
        raise BrowserKitError("console_errors takes a driver from new_driver that is still open")
    entries.extend(driver.get_log("browser"))
    return [
        {"source": entry.get("source", ""), "message": entry.get("message", "")}
        for entry in entries
        if entry.get("level") == "SEVERE" and not _is_favicon_failure(entry)
    ]


def _is_favicon_failure(entry: dict[str, Any]) -> bool:
    return (
        entry.get("source") == "network"
        and re.search(r"/favicon\.ico\b", entry.get("message", "")) is not None
    )


# --- Accessibility ----------------------------------------------------------------------------

_axe_source: str | None = None

_AXE_RUN = """
const done = arguments[arguments.length - 1];
window.axe.run(document, {resultTypes: ['violations']}).then(
  (results) => done({violations: results.violations.map((violation) => ({
    id: violation.id,
    impact: violation.impact,
    help: violation.help,
    nodes: violation.nodes.map((node) => ({
      target: node.target
        .map((part) => Array.isArray(part) ? part.join(' >>> ') : String(part))
        .join(' | '),
      html: node.html,
    })),
  }))}),
  (error) => done({error: String(error && error.stack || error)}),
);
"""


def axe_violations(
    driver, impacts: Iterable[str] = ("critical", "serious")
) -> list[dict[str, Any]]:
    """Runs axe-core on the current document and answers its violations of those impacts, as
    `{"id", "impact", "help", "nodes": [{"target", "html"}]}` (a node's target is its CSS selector;
    frames and shadow roots are joined with ' | ' and ' >>> ')."""
    wanted = tuple(impacts)
    if (
        isinstance(impacts, str)
        or not wanted
        or any(impact not in AXE_IMPACTS for impact in wanted)
    ):
        raise ValueError(f"impacts are some of {', '.join(AXE_IMPACTS)}, got {impacts!r}")
    global _axe_source
    if _axe_source is None:
        if not AXE_SCRIPT.is_file():
            raise BrowserKitError(
                f"{AXE_SCRIPT} is missing: run {INSTALL_SCRIPT}, which installs axe-core with npm"
            )
        _axe_source = AXE_SCRIPT.read_text(encoding="utf-8")
    if not driver.execute_script("return typeof window.axe === 'object' && window.axe !== null"):
        driver.execute_script(_axe_source)
        if not driver.execute_script(
            "return typeof window.axe === 'object' && typeof window.axe.run === 'function'"
        ):
            raise BrowserKitError(f"axe-core did not load into {driver.current_url}")
    driver.set_script_timeout(AXE_RUN_SECONDS)
    answer = driver.execute_async_script(_AXE_RUN)
    if not isinstance(answer, dict) or "violations" not in answer:
        raise BrowserKitError(f"axe-core failed on {driver.current_url}: {answer!r}")
    return [violation for violation in answer["violations"] if violation["impact"] in wanted]


# --- Pictures ---------------------------------------------------------------------------------

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def screenshot(driver, directory: str | Path, name: str) -> str:
    """Saves what the viewport shows as DIRECTORY/NAME.png (the directory is made if missing)
    and answers its path. NAME is letters, digits, '.', '_' and '-'."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name.endswith(".png"):
        raise ValueError(
            "a screenshot's name is at most 100 letters, digits, '.', '_' and '-', without .png,"
            f" got {name!r}"
        )
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    path.write_bytes(driver.get_screenshot_as_png())
    return str(path)


# --- Waiting ----------------------------------------------------------------------------------


def _page_excerpt(driver) -> str:
    try:
        text = driver.execute_script("return document.body ? document.body.innerText : ''") or ""
    except WebDriverException as error:
        return f"(the page's text could not be read: {_first_line(error.msg)})"
    text = " ".join(text.split())
    if len(text) > EXCERPT_CHARACTERS:
        text = text[:EXCERPT_CHARACTERS] + "..."
    return text or "(no text)"


def _wait(driver, css: str, timeout: float, matches: Callable[[Any], bool], wanted: str):
    if not isinstance(css, str) or not css.strip():
        raise ValueError(f"a CSS selector is a non-empty string, got {css!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 600:
        raise ValueError(f"a timeout is a number of seconds from 0 to 600, got {timeout!r}")
    deadline = time.monotonic() + timeout
    while True:
        try:
            for element in driver.find_elements(By.CSS_SELECTOR, css):
                if matches(element):
                    return element
        except StaleElementReferenceException:
            pass  # The page changed under the search: look again.
        except InvalidSelectorException as error:
            raise ValueError(f"{css!r} is not a CSS selector: {_first_line(error.msg)}") from error
        if time.monotonic() >= deadline:
            raise BrowserKitError(
                f"waited {timeout:g} s for {wanted} on {driver.current_url};"
                f" the page reads: {_page_excerpt(driver)}"
            )
        time.sleep(0.05)


def wait_for(driver, css: str, timeout: float = DEFAULT_WAIT_SECONDS):
    """Waits until an element matches `css` and answers the first one."""
    return _wait(driver, css, timeout, lambda element: True, f"an element {css!r}")


def wait_for_text(driver, css: str, text: str, timeout: float = DEFAULT_WAIT_SECONDS):
    """Waits until an element that matches `css` shows `text` (a part of its visible text) and
    answers it."""
    if not isinstance(text, str) or not text:
        raise ValueError(f"the text to wait for is a non-empty string, got {text!r}")
    return _wait(
        driver,
        css,
        timeout,
        lambda element: text in element.text,
        f"{text!r} in an element {css!r}",
    )


# --- The scenario protocol --------------------------------------------------------------------


class CheckFailed(AssertionError):
    """A scenario's check that did not hold."""


@dataclass
class Scenario:
    """What a scenario gets: its arguments, where its screenshots go, and what it proved so far."""

    screenshots_dir: Path
    args: list[str]
    checks: list[str] = field(default_factory=list)
    screenshots: list[str] = field(default_factory=list)

    def check(self, name: str, holds: bool, detail: Any = "") -> None:
        """Records the check `name` when `holds`; otherwise ends the scenario with `detail`
        (printed as JSON when it is not a string, such as axe's violations)."""
        if not holds:
            shown = detail if isinstance(detail, str) else json.dumps(detail, indent=1, default=str)
            raise CheckFailed(f"check failed: {name}" + (f": {shown}" if shown else ""))
        self.checks.append(name)

    def screenshot(self, driver, name: str) -> str:
        """A screenshot of the viewport in the scenario's screenshot directory, listed in its
        answer."""
        path = screenshot(driver, self.screenshots_dir, name)
        self.screenshots.append(path)
        return path


def _first_line(text: Any) -> str:
    lines = str(text or "").strip().splitlines()
    return lines[0] if lines else "(no message)"


def _arguments(argv: list[str]) -> tuple[Path, list[str]]:
    """`--screenshots DIR` first, then the scenario's own arguments."""
    if len(argv) < 2 or argv[0] != "--screenshots" or not argv[1]:
        raise BrowserKitError(
            f"usage: {Path(sys.argv[0]).name} --screenshots DIR [ARGS...], got {argv!r}"
        )
    return Path(argv[1]), argv[2:]


def run_scenario(main: Callable[[Scenario], Any], argv: list[str] | None = None) -> None:
    """Runs `main(scenario)`, prints the scenario's JSON line, and exits (0 when it passed)."""
    answer: dict[str, Any]
    scenario: Scenario | None = None
    with contextlib.redirect_stdout(sys.stderr):
        try:
            directory, args = _arguments(sys.argv[1:] if argv is None else argv)
            scenario = Scenario(screenshots_dir=directory, args=args)
            main(scenario)
            answer = {"ok": True, "checks": scenario.checks, "screenshots": scenario.screenshots}
        except BaseException as error:  # every way out is reported, Ctrl-C too
            traceback.print_exc(file=sys.stderr)
            answer = {
                "ok": False,
                "error": f"{type(error).__name__}: {error}",
                "checks": scenario.checks if scenario else [],
                "screenshots": scenario.screenshots if scenario else [],
            }
            if scenario is not None and _open_drivers:
                try:
                    answer["screenshots"].append(
                        screenshot(_open_drivers[-1][0], scenario.screenshots_dir, "failure")
                    )
                except Exception as picture_error:  # the first error is what counts
                    print(f"no failure screenshot: {picture_error}", file=sys.stderr)
        finally:
            _quit_all()
    print(json.dumps(answer), flush=True)
    sys.exit(0 if answer["ok"] else 1)
