#!/usr/bin/env python3
"""Follows the README's quick start word for word, in a checkout, and checks every answer.

    readme_quickstart.py CHECKOUT --client-python PYTHON [--port 8000] [--build-timeout SECONDS]

CHECKOUT is a fresh clone of the repository. The script reads CHECKOUT/README.md, runs its run
command (the first `sh` block under "## Quick start") from CHECKOUT, waits for the gateway,
runs each `curl` line of the block after "Then, in another terminal" exactly as written, and
checks each answer against the expectation this script holds for it. Then an MCP client (the
official Python SDK, run by PYTHON, through tests/python/http_client.py) lists the demo's tools
and calls two of them, and the gateway is stopped as a user would stop it (Ctrl-C, SIGINT): it
must exit 0 and leave none of its servers' processes behind.

A `curl` line this script has no expectation for fails the run, naming the line: the README and
this check change together. Exits 0 when everything matched, 1 with the reasons otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent


class Failure(Exception):
    """A step of the quick start did not do what the README promises."""


def sh_blocks(text: str) -> list[tuple[int, str]]:
    """The ```sh blocks of a Markdown text, each with the offset where it starts."""
    return [(m.start(), m.group(1)) for m in re.finditer(r"```sh\n(.*?)```", text, re.S)]


def quick_start(readme: str) -> tuple[str, list[str]]:
    """The run command and the curl lines of the README's quick start."""
    start = readme.find("## Quick start")
    if start < 0:
        raise Failure("README.md has no '## Quick start' section")
    blocks = [(offset, body) for offset, body in sh_blocks(readme) if offset > start]
    if not blocks:
        raise Failure("the quick start has no sh block")
    run_lines = [line for line in blocks[0][1].splitlines() if line.strip()]
    if len(run_lines) != 1:
        raise Failure(f"the quick start's first sh block should be one command, found {run_lines}")
    then = readme.find("Then, in another terminal", start)
    if then < 0:
        raise Failure("the quick start has no 'Then, in another terminal' block")
    after = [body for offset, body in blocks if offset > then]
    if not after:
        raise Failure("no sh block follows 'Then, in another terminal'")
    # A line ending in a backslash continues on the next one, as in the shell.
    joined = re.sub(r"\\\n\s*", " ", after[0])
    curls = [line.strip() for line in joined.splitlines() if line.strip()]
    return run_lines[0], curls


def answer_json(output: str, line: str) -> Any:
    try:
        return json.loads(output)
    except json.JSONDecodeError as error:
        raise Failure(f"`{line}` answered something that is not JSON ({error}): {output[:500]!r}")


def expect_demo_listed(answer: Any) -> None:
    servers = {s.get("mcp_server_id"): s for s in answer.get("mcp_servers", [])}
    if "demo" not in servers:
        raise Failure(f"the demo server is not listed: {answer}")
    if servers["demo"].get("state") != "cold":
        raise Failure(f"the demo server should be cold before its start: {servers['demo']}")


def expect_started(answer: Any) -> None:
    if answer.get("mcp_server_id") != "demo" or answer.get("state") != "ready":
        raise Failure(f"the start should answer the demo server ready: {answer}")


def expect_tools(answer: Any) -> None:
    names = {tool.get("name") for tool in answer.get("tools", [])}
    if not {"echo", "add"} <= names:
        raise Failure(f"the demo's tools should include echo and add: {sorted(names)}")


def expect_logs(answer: Any) -> None:
    if answer.get("mcp_server_id") != "demo" or not isinstance(answer.get("logs"), list):
        raise Failure(f"the logs answer should carry the demo's log lines: {answer}")
    if len(answer["logs"]) > 10:
        raise Failure(f"lines=10 answered {len(answer['logs'])} lines")


def expect_created(answer: Any) -> None:
    if answer != {"mcp_server_id": "time", "created": True}:
        raise Failure(f"the create should answer 201's body for `time`: {answer}")


# Each curl line of the quick start, recognised by its method and path, and what it must answer.
EXPECTATIONS: list[tuple[str, str, Callable[[Any], None]]] = [
    ("GET", "/api/mcp_servers", expect_demo_listed),
    ("POST", "/api/mcp_servers/demo/start", expect_started),
    ("GET", "/api/mcp_servers/demo/tools", expect_tools),
    ("GET", "/api/mcp_servers/demo/logs", expect_logs),
    ("POST", "/api/mcp_servers", expect_created),
]


def expectation_for(line: str) -> Callable[[Any], None]:
    if not line.startswith("curl "):
        raise Failure(f"the quick start's second block has a line that is not a curl: `{line}`")
    method = "POST" if re.search(r"(-X\s*POST|\s-d\s|--data)", line) else "GET"
    match = re.search(r"localhost:\d+(/[^\s'\"?]*)", line)
    if not match:
        raise Failure(f"cannot find the URL of `{line}`")
    for want_method, path, check in EXPECTATIONS:
        if want_method == method and match.group(1) == path:
            return check
    raise Failure(f"no expectation for the README line `{line}` ({method} {match.group(1)}): "
                  "update tests/python/readme_quickstart.py with the README")


def wait_ready(port: int, gateway: subprocess.Popen, deadline: float) -> None:
    url = f"http://127.0.0.1:{port}/health/ready"
    while time.monotonic() < deadline:
        if gateway.poll() is not None:
            raise Failure(f"the run command exited with {gateway.returncode} before the gateway was ready")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.5)
    raise Failure(f"the gateway did not answer {url} with 200 in time")


def descendants(root: int) -> set[int]:
    """Every live process below `root`, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] == "Z":
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    found: set[int] = set()
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.add(child)
            stack.append(child)
    return found


def processes_running(command_part: str) -> list[int]:
    """Live processes whose command line contains `command_part`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if command_part in cmdline and state != "Z":
            found.append(int(entry))
    return found


def run(options: argparse.Namespace) -> list[str]:
    checkout = Path(options.checkout).resolve()
    readme = (checkout / "README.md").read_text()
    run_command, curls = quick_start(readme)
    checks = [(line, expectation_for(line)) for line in curls]
    print(f"readme: run command: {run_command}", flush=True)
    log_path = checkout / "quickstart-gateway.log"
    with open(log_path, "wb") as log:
        gateway = subprocess.Popen(["bash", "-c", f"exec {run_command}" if "&&" not in run_command
                                    else run_command],
                                   cwd=checkout, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    passed: list[str] = []
    try:
        wait_ready(options.port, gateway, time.monotonic() + options.build_timeout)
        passed.append("run command: the gateway is ready")
        for line, check in checks:
            done = subprocess.run(["bash", "-c", line], cwd=checkout, capture_output=True,
                                  text=True, timeout=60)
            if done.returncode != 0:
                raise Failure(f"`{line}` exited {done.returncode}: {done.stderr}")
            check(answer_json(done.stdout, line))
            passed.append(line)
        client = subprocess.run(
            [options.client_python, str(HERE / "http_client.py"),
             f"http://localhost:{options.port}/mcp",
             "--call", "demo__echo", '{"text": "hello from the README"}',
             "--call", "demo__add", '{"a": 2, "b": 3}'],
            capture_output=True, text=True, timeout=60)
        if client.returncode != 0:
            raise Failure(f"the MCP client failed ({client.returncode}): {client.stderr}")
        result = json.loads(client.stdout)
        if not {"demo__echo", "demo__add"} <= set(result["tools"]):
            raise Failure(f"the MCP client should list demo__echo and demo__add: {result['tools']}")
        echo, add = result["calls"]
        echo_text = [block.get("text") for block in echo["content"]]
        if echo["error"] or echo["is_error"] or echo_text != ["hello from the README"]:
            raise Failure(f"demo__echo should answer its text: {echo}")
        add_text = " ".join(str(block.get("text")) for block in add["content"])
        if add["error"] or add["is_error"] or "5" not in add_text:
            raise Failure(f"demo__add 2 + 3 should answer 5: {add}")
        if "Session termination failed" in client.stderr:
            raise Failure(f"the SDK could not end its session: {client.stderr}")
        passed.append("an MCP client (the official Python SDK) lists and calls demo__echo and demo__add")
        # The gateway is the run command's last process: find it and stop it as Ctrl-C would.
        gateway_pids = [pid for pid in processes_running("target/release/mcpgw --http")
                        if pid == gateway.pid or pid in descendants(gateway.pid)]
        if len(gateway_pids) != 1:
            raise Failure(f"expected one gateway process under the run command, found {gateway_pids}")
        gateway_pid = gateway_pids[0]
        servers = descendants(gateway_pid)
        if not servers:
            raise Failure("the started demo server is not a process under the gateway")
        os.kill(gateway_pid, signal.SIGINT)
        try:
            code = gateway.wait(timeout=20)
        except subprocess.TimeoutExpired:
            raise Failure("the gateway did not stop within 20 s of SIGINT")
        if code != 0:
            raise Failure(f"the gateway exited {code} after SIGINT")
        left = [pid for pid in servers if Path(f"/proc/{pid}").exists()
                and Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"]
        if left:
            raise Failure(f"processes of the gateway's servers outlived it: {left}")
        passed.append("Ctrl-C: the gateway exits 0 and leaves no server process behind")
    except Failure:
        print(f"readme: the gateway's output is in {log_path}:", file=sys.stderr)
        sys.stderr.write(log_path.read_text(errors="replace")[-4000:])
        raise
    finally:
        if gateway.poll() is None:
            os.killpg(gateway.pid, signal.SIGKILL)
            gateway.wait()
    return passed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout")
    parser.add_argument("--client-python", required=True)
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--build-timeout", type=float, default=1800)
    options = parser.parse_args()
    try:
        passed = run(options)
    except Failure as failure:
        print(f"readme: FAILED: {failure}", file=sys.stderr)
        return 1
    for step in passed:
        print(f"readme: ok: {step}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
