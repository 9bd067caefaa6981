#!/usr/bin/env python3
"""An MCP client over Streamable HTTP, made with the official Python SDK, for end-to-end tests.

    http_client.py URL [--protocol 2025-11-25|2026-07-28|auto] [--header 'Name: value']...
                   [--call NAME ARGS_JSON]... [--call-spec JSON]... [--progress]
                   [--list-changed-wait SECONDS [--list-changed-count N] [--ready-file PATH]
                    [--list-changed-trigger NAME ARGS_JSON]]
                   [--no-list] [--timeout SECONDS]

Prints one JSON object on stdout (see mcp_test_client.py); exits non-zero with the error on
stderr when the run fails.
"""

from __future__ import annotations

import argparse
from typing import Any

import anyio
import httpx2
from mcp.client.streamable_http import streamable_http_client

from mcp_test_client import TransportProbe, UsageError, add_operation_arguments, main


def _parse_header(raw: str) -> tuple[str, str]:
    name, separator, value = raw.partition(":")
    if not separator or not name.strip():
        raise UsageError(f"--header takes 'Name: value', got: {raw}")
    return name.strip(), value.strip()


def build_transport(options: argparse.Namespace) -> tuple[Any, TransportProbe]:
    headers = dict(_parse_header(raw) for raw in options.header)
    seen = {"session_id": None, "get_stream": "not-opened", "session_end": None}
    stream_ready = anyio.Event()

    async def watch_response(response: httpx2.Response) -> None:
        session_id = response.headers.get("mcp-session-id")
        if session_id:
            seen["session_id"] = session_id
        if response.request.method == "GET":
            # The 2025 era's standalone stream for server notifications: 200 opens it, 405 says
            # the server has none; either way the client's listening state is now known.
            seen["get_stream"] = "open" if response.status_code == 200 else f"http {response.status_code}"
            stream_ready.set()
        elif response.request.method == "DELETE":
            # Closing the client ends its session with a DELETE.
            seen["session_end"] = response.status_code

    http_client = httpx2.AsyncClient(
        headers=headers,
        timeout=httpx2.Timeout(options.timeout, read=options.timeout),
        event_hooks={"response": [watch_response]},
    )
    transport = streamable_http_client(options.url, http_client=http_client)

    class OwningTransport:
        """Closes the HTTP client after the transport (the SDK leaves a given client open)."""

        async def __aenter__(self):
            await http_client.__aenter__()
            return await transport.__aenter__()

        async def __aexit__(self, *exc_info):
            try:
                return await transport.__aexit__(*exc_info)
            finally:
                await http_client.__aexit__(None, None, None)

    probe = TransportProbe(
        session_id=lambda: seen["session_id"],
        notification_stream_ready=stream_ready,
        notification_stream_state=lambda: seen["get_stream"],
        session_end=lambda: seen["session_end"],
    )
    return OwningTransport(), probe


def parser() -> argparse.ArgumentParser:
    result = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    result.add_argument("url", help="the MCP endpoint, e.g. http://127.0.0.1:8000/mcp")
    result.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="an HTTP header on every request (e.g. 'Authorization: Bearer KEY'); repeatable",
    )
    add_operation_arguments(result)
    return result


if __name__ == "__main__":
    main(build_transport, parser())
