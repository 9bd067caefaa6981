#!/usr/bin/env python3
"""The browser kit's own scenario: proves that browser_kit.py finds what it should, on small pages
served from 127.0.0.1 under the console's Content-Security-Policy (no inline script or style).

    browser_selftest.py --screenshots DIR [fail]

The pages:
- /clean.html: a page with a language, a title, a heading, a main landmark and a labelled field;
  axe-core finds nothing on it at any impact, and it fits a phone's width.
- /broken.html: an <img> without alt text and an <input> without a label; axe-core must report
  `image-alt` and `label`, both critical.
- /wide.html: the clean page with a 2000-pixel-wide block (its width from a stylesheet file); it
  must overflow a phone's width.
- /logs.html: loads /logs.js, which writes one `console.error` (and a `console.log` and a
  `console.warn`, which are no errors); the error, and only it, must be reported.
- /inline.html: an inline script, which the policy refuses; the refusal must be reported.

With `fail`, the scenario opens the clean page, passes one check and then fails one on purpose:
the failure path of the protocol (the `failure` screenshot, `ok: false`, exit 1).
"""

from __future__ import annotations

import http.server
import struct
import tempfile
import threading
from pathlib import Path

from browser_kit import (
    AXE_IMPACTS,
    BrowserKitError,
    Scenario,
    axe_violations,
    console_errors,
    desktop,
    new_driver,
    no_horizontal_overflow,
    page_widths,
    phone_width,
    quit_driver,
    run_scenario,
    wait_for,
    wait_for_text,
)

POLICY = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'"

HEAD = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
{extra}
</head>
"""

PAGES = {
    "clean.html": HEAD.format(title="A clean page", extra="")
    + """<body>
<main>
<h1>Servers</h1>
<p id="intro">Every server the gateway knows, with its state.</p>
<label for="filter">Filter</label>
<input id="filter" type="text">
</main>
</body>
</html>
""",
    "broken.html": HEAD.format(title="A broken page", extra="")
    + """<body>
<main>
<h1>Broken</h1>
<img id="logo" src="/pixel.svg">
<input id="unlabeled" type="text">
</main>
</body>
</html>
""",
    "wide.html": HEAD.format(title="A wide page", extra='<link rel="stylesheet" href="/wide.css">')
    + """<body>
<main>
<h1>Wide</h1>
<div class="wide">Two thousand pixels of table.</div>
</main>
</body>
</html>
""",
    "wide.css": ".wide { width: 2000px; }\n",
    "logs.html": HEAD.format(title="A page that logs", extra='<script src="/logs.js"></script>')
    + """<body>
<main>
<h1>Logs</h1>
</main>
</body>
</html>
""",
    "logs.js": """console.log("mcpgw-selftest-log");
console.warn("mcpgw-selftest-warning");
console.error("mcpgw-selftest-error");
""",
    "inline.html": HEAD.format(
        title="An inline script", extra="<script>document.title = 'ran';</script>"
    )
    + """<body>
<main>
<h1>Inline</h1>
</main>
</body>
</html>
""",
    "pixel.svg": '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10">'
    '<rect width="10" height="10"/></svg>\n',
}

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class PolicyHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the pages with the console's Content-Security-Policy, and keeps quiet."""

    def end_headers(self) -> None:
        self.send_header("Content-Security-Policy", POLICY)
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, format: str, *args) -> None:  # the base class names it `format`
        pass


def serve(directory: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    for name, text in PAGES.items():
        (directory / name).write_text(text, encoding="utf-8")

    def handler(*args, **kwargs):
        return PolicyHandler(*args, directory=str(directory), **kwargs)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host, port = server.server_address[:2]
    return server, f"http://{host}:{port}"


def png_size(path: str) -> tuple[int, int] | None:
    """The width and height of a PNG file, or None when the file is no PNG."""
    data = Path(path).read_bytes()
    if len(data) < 24 or not data.startswith(PNG_SIGNATURE) or data[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", data[16:24])


def ids_and_impacts(violations: list[dict]) -> dict[str, str]:
    return {violation["id"]: violation["impact"] for violation in violations}


def selftest(scenario: Scenario, base: str) -> None:
    driver = new_driver()
    check = scenario.check

    # The clean page: nothing at any impact, no console error (the 404 of /favicon.ico is none).
    driver.get(f"{base}/clean.html")
    wait_for_text(driver, "h1", "Servers")
    check(
        "the viewport is 1280 pixels wide",
        page_widths(driver)["inner_width"] == 1280,
        page_widths(driver),
    )
    violations = axe_violations(driver, impacts=AXE_IMPACTS)
    check("axe finds nothing on the clean page", violations == [], violations)
    check("the clean page logs no error", console_errors(driver) == [], console_errors(driver))
    path = scenario.screenshot(driver, "clean-desktop")
    check(
        "the screenshot is a 1280-pixel-wide PNG",
        (png_size(path) or (0, 0))[0] == 1280,
        png_size(path),
    )

    # The waits: one that succeeds, and one whose timeout names the page and quotes its text.
    check(
        "wait_for finds the field", wait_for(driver, "#filter", 2).get_attribute("id") == "filter"
    )
    try:
        wait_for_text(driver, "h1", "Groups", timeout=0.5)
        timed_out = ""
    except BrowserKitError as error:
        timed_out = str(error)
    check(
        "a wait that times out names the page and quotes its text",
        f"{base}/clean.html" in timed_out and "Every server the gateway knows" in timed_out,
        timed_out or "wait_for_text did not time out",
    )

    # The phone: the clean page fits, the wide one does not.
    phone_width(driver)
    check(
        "the phone viewport is 390 pixels wide",
        page_widths(driver)["inner_width"] == 390,
        page_widths(driver),
    )
    check("the clean page fits a phone", no_horizontal_overflow(driver), page_widths(driver))
    path = scenario.screenshot(driver, "clean-phone")
    check(
        "the phone screenshot is a 390-pixel-wide PNG",
        (png_size(path) or (0, 0))[0] == 390,
        png_size(path),
    )
    driver.get(f"{base}/wide.html")
    wait_for_text(driver, "h1", "Wide")
    widths = page_widths(driver)
    check(
        "the wide page overflows a phone",
        not no_horizontal_overflow(driver) and widths["scroll_width"] >= 2000,
        widths,
    )
    desktop(driver)
    check(
        "the desktop viewport is 1280 pixels wide again",
        page_widths(driver)["inner_width"] == 1280,
        page_widths(driver),
    )

    # The broken page: an image without alt text and a field without a label.
    driver.get(f"{base}/broken.html")
    wait_for(driver, "#unlabeled")
    violations = axe_violations(driver)
    found = ids_and_impacts(violations)
    check(
        "axe finds image-alt (critical) on the broken page",
        found.get("image-alt") == "critical",
        violations,
    )
    check(
        "axe finds the unlabeled field (label, critical)",
        found.get("label") == "critical",
        violations,
    )
    targets = {
        violation["id"]: [node["target"] for node in violation["nodes"]] for violation in violations
    }
    check(
        "axe names the offending elements",
        targets.get("image-alt") == ["#logo"] and targets.get("label") == ["#unlabeled"],
        targets,
    )
    only_minor = axe_violations(driver, impacts=("minor",))
    check(
        "axe's answer keeps only the impacts asked for",
        "image-alt" not in ids_and_impacts(only_minor),
        only_minor,
    )

    # The console: an error written by a script file is reported, a log and a warning are not.
    driver.get(f"{base}/logs.html")
    wait_for_text(driver, "h1", "Logs")
    errors = console_errors(driver)
    check(
        "a console.error from a script file is reported, and nothing else",
        len(errors) == 1
        and errors[0]["source"] == "console-api"
        and "mcpgw-selftest-error" in errors[0]["message"]
        and "logs.js" in errors[0]["message"],
        errors,
    )
    quit_driver(driver)

    # A fresh browser starts with an empty console; the policy's refusal of an inline script is
    # reported as an error.
    driver = new_driver()
    driver.get(f"{base}/inline.html")
    wait_for_text(driver, "h1", "Inline")
    errors = console_errors(driver)
    check(
        "a script the policy refuses is reported",
        driver.title == "An inline script"
        and any("Content Security Policy" in error["message"] for error in errors),
        {"title": driver.title, "errors": errors},
    )
    check(
        "a fresh browser has only its own page's errors",
        not any("mcpgw-selftest" in e["message"] for e in errors),
        errors,
    )


def fail_on_purpose(scenario: Scenario, base: str) -> None:
    driver = new_driver()
    driver.get(f"{base}/clean.html")
    wait_for_text(driver, "h1", "Servers")
    scenario.check("the clean page opened", True)
    scenario.check("this check fails on purpose", False, "the page says Servers")


def main(scenario: Scenario) -> None:
    if scenario.args not in ([], ["fail"]):
        raise ValueError(f"browser_selftest.py takes no argument or 'fail', got {scenario.args!r}")
    with tempfile.TemporaryDirectory(prefix="mcpgw-browser-selftest-") as directory:
        server, base = serve(Path(directory))
        try:
            if scenario.args == ["fail"]:
                fail_on_purpose(scenario, base)
            else:
                selftest(scenario, base)
        finally:
            server.shutdown()
            server.server_close()


if __name__ == "__main__":
    run_scenario(main)
