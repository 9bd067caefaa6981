#!/usr/bin/env python3
"""An MCP client over stdio, made with the official Python SDK, for end-to-end tests.

    stdio_client.py [--protocol ...] [--call NAME ARGS_JSON]... [--call-spec JSON]... [--progress]
                    [--list-changed-wait SECONDS [--list-changed-count N] [--ready-file PATH]
                     [--list-changed-trigger NAME ARGS_JSON]]
                    [--no-list] [--timeout SECONDS] [--env NAME=VALUE]... [--cwd DIR]
                    [--server-stderr PATH] -- CMD [ARGS...]

Starts CMD (for the gateway: the mcpgw binary without --http) and talks MCP over its
stdin and stdout. The server's stderr goes to --server-stderr, or to this script's stderr.
Prints one JSON object on stdout (see mcp_test_client.py); exits non-zero with the error on
stderr when the run fails.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from mcp.client.stdio import StdioServerParameters, stdio_client

from mcp_test_client import TransportProbe, UsageError, add_operation_arguments, main


def build_transport(options: argparse.Namespace) -> tuple[Any, TransportProbe]:
    command = list(options.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError("give the server's command after the options, e.g. -- mcpgw --config FILE")
    environment = dict(os.environ)
    for raw in options.env:
        name, separator, value = raw.partition("=")
        if not separator or not name:
            raise UsageError(f"--env takes NAME=VALUE, got: {raw}")
        environment[name] = value
    parameters = StdioServerParameters(
        command=command[0],
        args=command[1:],
        env=environment,
        cwd=str(options.cwd) if options.cwd else None,
    )
    errlog = open(options.server_stderr, "a", encoding="utf-8") if options.server_stderr else sys.stderr  # noqa: SIM115
    return stdio_client(parameters, errlog=errlog), TransportProbe()


def parser() -> argparse.ArgumentParser:
    result = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_operation_arguments(result)
    result.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable for the server; repeatable")
    result.add_argument("--cwd", type=Path, default=None, help="the server's working directory")
    result.add_argument("--server-stderr", type=Path, default=None,
                        help="append the server's stderr to this file instead of this script's stderr")
    result.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD [ARGS...]: the server to start")
    return result


if __name__ == "__main__":
    main(build_transport, parser())
