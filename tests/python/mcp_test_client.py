"""The shared engine of the end-to-end tests' MCP client scripts (http_client.py, stdio_client.py).

It drives one MCP connection made with the official Python SDK (mcp 2.3.0) through a fixed
sequence of operations chosen on the command line, and prints one JSON object on stdout that a
Rust test asserts on:

    {"protocol": "2025-11-25", "session_id": "..." | null, "server_info": {...},
     "server_capabilities": {...}, "discover": {...} (2026-07-28 only),
     "tools": ["echo", ...], "tool_objects": [{name, description, inputSchema, ...}], "tool_pages": 1,
     "calls": [{"name", "arguments", "is_error", "content": [blocks], "structured",
                "error": null | {"code", "message", "data"}, "progress": [values],
                "progress_events": [{"progress", "total", "message"}], "elapsed_ms",
                "cancelled", and with cancel_after_ms: "ended_promptly", "responsive_after_cancel"}],
     "list_changed": null | n, "list_changed_trigger": null | {call}, "list_changed_listener": {...},
     "tools_after_list_changed": null | [names], "notifications": [methods], "transport_errors": [],
     "subscription": null | {"error": null | {"code", "message"}, "updates": [URIs announced]},
     "asked": [{"method", "text"}] (what the server asked the client: sampling, elicitation, roots),
     "logs": [{"level", "data"}] (the log messages the client got),
     "session_end": null | HTTP status of the DELETE that ended the session (HTTP, 2025 era),
     "client_warnings": [what the SDK logged at WARNING or above, closing included]}

Exit codes: 0 answered, 1 failed (connection, protocol), 2 bad command line, 3 --timeout passed.

Anything that is not the server's answer (a connection that fails, a timeout, a bad argument)
goes to stderr and exits non-zero, so a test can never mistake a broken run for an answer. A
JSON-RPC error answered to a tools/call is an answer: it is recorded in that call's "error".

The protocol era is chosen, never guessed: 2025-11-25 runs the initialize handshake (sessions);
2026-07-28 is the stateless era, checked with a real server/discover probe; auto is the SDK's
default negotiation.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.client import Client
from mcp.shared.exceptions import MCPError

PROTOCOL_CHOICES = ("2025-11-25", "2026-07-28", "auto")
MODERN_PROTOCOL = "2026-07-28"
TOOL_LIST_PAGE_LIMIT = 100
CLIENT_INFO = types.Implementation(name="mcpgw-e2e-test-client", version="1.0.0")


class UsageError(Exception):
    """A command line that cannot be run; reported on stderr with exit code 2."""


@dataclass
class CallSpec:
    name: str
    arguments: dict[str, Any]
    progress: bool = False
    cancel_after_ms: int | None = None


@dataclass
class TransportProbe:
    """What the transport lets the engine see beyond the SDK's API (HTTP only)."""

    session_id: Callable[[], str | None] = lambda: None
    # Set once the standalone GET stream that carries server notifications of the 2025 era is
    # open (or known to be refused), so that a test only changes the tool list after the client
    # can hear about it.
    notification_stream_ready: anyio.Event | None = None
    notification_stream_state: Callable[[], str] = lambda: "not-applicable"
    # The status the server answered to the DELETE that ended the session, once the client
    # has closed; None when no session was ended that way.
    session_end: Callable[[], int | None] = lambda: None


class _WarningRecorder(logging.Handler):
    """Keeps what the SDK logs at WARNING or above (a failed session termination, say), so that
    it reaches the JSON output instead of vanishing on stderr."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(f"{record.name}: {record.getMessage()}")


def _parse_json_object(raw: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as error:
        raise UsageError(f"{what} is not valid JSON ({error}): {raw}") from error
    if not isinstance(value, dict):
        raise UsageError(f"{what} must be a JSON object, got: {raw}")
    return value


class _AppendCall(argparse.Action):
    """Keeps --call and --call-spec in one list, in command-line order."""

    def __call__(self, parser, namespace, values, option_string=None):
        calls = getattr(namespace, "calls", None) or []
        if option_string == "--call":
            name, raw_arguments = values
            calls.append(CallSpec(name=name, arguments=_parse_json_object(raw_arguments, f"--call {name} arguments")))
        else:
            spec = _parse_json_object(values, "--call-spec")
            unknown = set(spec) - {"name", "arguments", "progress", "cancel_after_ms"}
            if "name" not in spec or unknown:
                raise UsageError(
                    "--call-spec takes {\"name\", \"arguments\"?, \"progress\"?, \"cancel_after_ms\"?}"
                    + (f"; unknown keys: {sorted(unknown)}" if unknown else "")
                )
            arguments = spec.get("arguments") or {}
            if not isinstance(arguments, dict):
                raise UsageError("--call-spec arguments must be a JSON object")
            calls.append(
                CallSpec(
                    name=str(spec["name"]),
                    arguments=arguments,
                    progress=bool(spec.get("progress", False)),
                    cancel_after_ms=spec.get("cancel_after_ms"),
                )
            )
        namespace.calls = calls


def add_operation_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--protocol",
        choices=PROTOCOL_CHOICES,
        default="auto",
        help="2025-11-25: initialize handshake and sessions; 2026-07-28: stateless, checked with "
        "server/discover; auto: the SDK's negotiation (default)",
    )
    parser.add_argument(
        "--call",
        nargs=2,
        metavar=("NAME", "ARGS_JSON"),
        action=_AppendCall,
        dest="calls",
        help="call a tool with a JSON object of arguments; repeatable, run in order",
    )
    parser.add_argument(
        "--call-spec",
        metavar="JSON",
        action=_AppendCall,
        dest="calls",
        help='a call as {"name", "arguments", "progress": bool, "cancel_after_ms": N}; repeatable',
    )
    parser.add_argument(
        "--get-prompt",
        metavar="NAME",
        action="append",
        default=[],
        help="after the calls, get this prompt (no arguments); its messages' texts, or its error, "
        "are in prompts; repeatable",
    )
    parser.add_argument(
        "--progress",
        action="store_true",
        help="ask for progress on every call (records the progress values received)",
    )
    parser.add_argument(
        "--list-changed-wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="after the calls, listen for notifications/tools/list_changed this long",
    )
    parser.add_argument(
        "--list-changed-count",
        type=int,
        default=None,
        metavar="N",
        help="stop listening as soon as N list_changed notifications arrived",
    )
    parser.add_argument(
        "--list-changed-trigger",
        nargs=2,
        metavar=("NAME", "ARGS_JSON"),
        default=None,
        help="once listening, call this tool (one that changes the tool list); its result is in "
        "list_changed_trigger",
    )
    parser.add_argument(
        "--listen-lists",
        action="store_true",
        help="2026-07-28: the subscriptions/listen stream also asks for prompt and resource list "
        "changes; every event's type is in list_changed_listener.events",
    )
    parser.add_argument(
        "--listen-resource",
        action="append",
        metavar="URI",
        default=[],
        help="2026-07-28: the subscriptions/listen stream also asks for this resource's updates",
    )
    parser.add_argument(
        "--ready-file",
        type=Path,
        default=None,
        help="written once the client listens for list_changed, so a test knows when to change the tools",
    )
    parser.add_argument(
        "--subscribe",
        metavar="URI",
        default=None,
        help="after the calls, subscribe to this resource, wait for its "
        "notifications/resources/updated (up to 10 s), then unsubscribe; the URIs announced are "
        "in subscription.updates",
    )
    parser.add_argument(
        "--sampling-reply",
        metavar="TEXT",
        default=None,
        help="declare sampling and answer every sampling/createMessage with TEXT",
    )
    parser.add_argument(
        "--elicitation-reply",
        metavar="TEXT",
        default=None,
        help="declare elicitation and accept every elicitation/create with {\"answer\": TEXT}",
    )
    parser.add_argument(
        "--elicitation-hang",
        metavar="PATH",
        type=Path,
        default=None,
        help="declare elicitation, write PATH when asked, and never answer (the test kills the client)",
    )
    parser.add_argument(
        "--root",
        action="append",
        default=[],
        metavar="URI",
        help="declare roots and list URI among them; repeatable",
    )
    parser.add_argument(
        "--log-level",
        metavar="LEVEL",
        default=None,
        help="send logging/setLevel LEVEL after connecting (2025 era); the messages are in logs",
    )
    parser.add_argument(
        "--linger",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="after everything else, keep the connection open this long (notifications still arrive)",
    )
    parser.add_argument(
        "--no-list",
        action="store_true",
        help="skip tools/list before the calls (the 2026-07-28 SDK still lists a tool it must call)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="deadline of the whole run (default 30)",
    )


def _dump(model: Any) -> Any:
    if model is None:
        return None
    if hasattr(model, "model_dump"):
        return model.model_dump(by_alias=True, mode="json", exclude_none=True)
    return model


async def _list_all_tools(client: Client) -> tuple[list[types.Tool], int]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for page_number in range(1, TOOL_LIST_PAGE_LIMIT + 1):
        page = await client.list_tools(cursor=cursor, cache_mode="bypass")
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return tools, page_number
    raise RuntimeError(f"tools/list still had a next cursor after {TOOL_LIST_PAGE_LIMIT} pages")


async def _run_call(client: Client, spec: CallSpec, ask_progress: bool, deadline: float) -> dict[str, Any]:
    progress_events: list[dict[str, Any]] = []

    async def record_progress(progress: float, total: float | None, message: str | None) -> None:
        progress_events.append({"progress": progress, "total": total, "message": message})

    wants_progress = ask_progress or spec.progress or spec.cancel_after_ms is not None
    entry: dict[str, Any] = {
        "name": spec.name,
        "arguments": spec.arguments,
        "is_error": None,
        "content": None,
        "structured": None,
        "error": None,
        "cancelled": False,
    }
    started = time.monotonic()
    remaining = max(deadline - started, 0.1)
    cancel_after = spec.cancel_after_ms / 1000.0 if spec.cancel_after_ms is not None else remaining
    with anyio.move_on_after(cancel_after) as cancel_scope:
        try:
            result = await client.call_tool(
                spec.name,
                spec.arguments,
                read_timeout_seconds=remaining,
                progress_callback=record_progress if wants_progress else None,
            )
            entry["is_error"] = bool(result.is_error)
            entry["content"] = [_dump(block) for block in result.content]
            entry["structured"] = result.structured_content
        except MCPError as error:
            entry["error"] = {"code": error.code, "message": error.message, "data": error.data}
    ended = time.monotonic()
    entry["elapsed_ms"] = round((ended - started) * 1000)
    entry["progress"] = [event["progress"] for event in progress_events]
    entry["progress_events"] = progress_events
    if spec.cancel_after_ms is not None:
        entry["cancel_after_ms"] = spec.cancel_after_ms
        if cancel_scope.cancelled_caught:
            entry["cancelled"] = True
            # The call was abandoned at the deadline: "promptly" means control came back within a
            # second of it, not after the tool ran to its end.
            entry["ended_promptly"] = (ended - started) <= cancel_after + 1.0
            # A round trip after the cancellation proves the connection still serves requests,
            # and (requests being written in order) that the cancellation left the client.
            try:
                await client.list_tools(cache_mode="bypass")
                entry["responsive_after_cancel"] = True
            except MCPError as error:
                entry["responsive_after_cancel"] = False
                entry["error_after_cancel"] = {"code": error.code, "message": error.message}
    elif cancel_scope.cancelled_caught:
        raise TimeoutError(f"tools/call {spec.name} got no answer before the run's deadline")
    return entry


async def _listen_legacy(
    client: Client,
    options: argparse.Namespace,
    probe: TransportProbe,
    notifications: list[str],
    deadline: float,
) -> dict[str, Any]:
    """2025 era: list_changed arrives as a plain notification, counted by the message handler."""
    if probe.notification_stream_ready is not None:
        with anyio.move_on_after(5.0):
            await probe.notification_stream_ready.wait()
    start_index = len(notifications)
    _write_ready_file(options.ready_file)
    trigger = await _run_trigger(client, options, deadline)
    with anyio.move_on_after(options.list_changed_wait):
        while True:
            received = notifications[start_index:].count("notifications/tools/list_changed")
            if options.list_changed_count is not None and received >= options.list_changed_count:
                break
            await anyio.sleep(0.02)
    return {
        "count": notifications[start_index:].count("notifications/tools/list_changed"),
        "notification_stream": probe.notification_stream_state(),
        "trigger": trigger,
    }


async def _run_trigger(client: Client, options: argparse.Namespace, deadline: float) -> dict[str, Any] | None:
    if options.list_changed_trigger is None:
        return None
    name, raw_arguments = options.list_changed_trigger
    spec = CallSpec(name=name, arguments=_parse_json_object(raw_arguments, "--list-changed-trigger arguments"))
    return await _run_call(client, spec, False, deadline)


async def _listen_modern(client: Client, options: argparse.Namespace, deadline: float) -> dict[str, Any]:
    """2026-07-28: list_changed is a subscriptions/listen stream, acknowledged before it counts."""
    received = 0
    events: list[str] = []
    async with client.listen(
        tools_list_changed=True,
        prompts_list_changed=options.listen_lists,
        resources_list_changed=options.listen_lists,
        resource_subscriptions=options.listen_resource,
    ) as subscription:
        _write_ready_file(options.ready_file)
        trigger = await _run_trigger(client, options, deadline)
        with anyio.move_on_after(options.list_changed_wait):
            async for event in subscription:
                events.append(type(event).__name__)
                if type(event).__name__ == "ToolsListChanged" or options.listen_lists or options.listen_resource:
                    received += 1
                    if options.list_changed_count is not None and received >= options.list_changed_count:
                        break
        honored = _dump(getattr(subscription, "honored", None))
    return {
        "count": received,
        "notification_stream": "subscriptions/listen",
        "honored": honored,
        "trigger": trigger,
        "events": events,
    }


async def _get_prompt(client: Client, name: str) -> dict[str, Any]:
    """One prompts/get: the texts of its messages, or the JSON-RPC error."""
    try:
        result = await client.get_prompt(name)
    except MCPError as error:
        return {"name": name, "error": {"code": error.code, "message": error.message}, "texts": []}
    texts = [getattr(message.content, "text", None) for message in result.messages]
    return {"name": name, "error": None, "texts": texts}


async def _subscribe(client: Client, uri: str, updated_uris: list[str]) -> dict[str, Any]:
    """2025 era: subscribe, wait for the resource's first update, unsubscribe."""
    try:
        await client.subscribe_resource(uri)
    except MCPError as error:
        return {"error": {"code": error.code, "message": error.message}, "updates": []}
    with anyio.move_on_after(10.0):
        while uri not in updated_uris:
            await anyio.sleep(0.02)
    updates = list(updated_uris)
    await client.unsubscribe_resource(uri)
    return {"error": None, "updates": updates}


def _write_ready_file(path: Path | None) -> None:
    if path is not None:
        path.write_text("listening\n")


async def run_operations(
    transport: AbstractAsyncContextManager[Any],
    options: argparse.Namespace,
    probe: TransportProbe,
) -> dict[str, Any]:
    deadline = time.monotonic() + options.timeout
    notifications: list[str] = []
    updated_uris: list[str] = []
    transport_errors: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, Exception):
            transport_errors.append(f"{type(message).__name__}: {message}")
        elif hasattr(message, "method"):
            notifications.append(message.method)
            if message.method == "notifications/resources/updated":
                updated_uris.append(str(message.params.uri))

    mode = {"2025-11-25": "legacy", "2026-07-28": MODERN_PROTOCOL, "auto": "auto"}[options.protocol]
    output: dict[str, Any] = {}
    asked: list[dict[str, Any]] = []
    logs: list[dict[str, Any]] = []
    callbacks = _relay_callbacks(options, asked, logs)
    warnings = _WarningRecorder()
    logging.getLogger().addHandler(warnings)
    with anyio.fail_after(options.timeout):
        async with Client(
            transport,
            mode=mode,
            cache=None,
            client_info=CLIENT_INFO,
            message_handler=on_message,
            read_timeout_seconds=options.timeout,
            # 2026-07-28 has no logging/setLevel: each request names the level in its _meta.
            log_level=options.log_level if options.protocol == MODERN_PROTOCOL else None,
            **callbacks,
        ) as client:
            if options.log_level is not None and options.protocol != MODERN_PROTOCOL:
                await client.set_logging_level(options.log_level)
            discover: dict[str, Any] | None = None
            if options.protocol == MODERN_PROTOCOL:
                # Adopting 2026-07-28 sends nothing; a real server/discover proves the server
                # speaks the stateless era and tells what it is.
                raw_discover = await client.session.send_discover(MODERN_PROTOCOL)
                client.session.adopt(types.DiscoverResult.model_validate(raw_discover))
                discover = raw_discover
            output["protocol"] = client.protocol_version
            output["session_id"] = probe.session_id()
            output["server_info"] = _dump(client.server_info)
            output["server_capabilities"] = _dump(client.server_capabilities)
            if discover is not None:
                output["discover"] = discover
            if options.no_list:
                output["tools"] = None
                output["tool_objects"] = None
            else:
                tools, pages = await _list_all_tools(client)
                output["tools"] = [tool.name for tool in tools]
                output["tool_objects"] = [_dump(tool) for tool in tools]
                output["tool_pages"] = pages
            output["calls"] = [
                await _run_call(client, spec, options.progress, deadline) for spec in (options.calls or [])
            ]
            output["prompts"] = [await _get_prompt(client, name) for name in options.get_prompt]
            output["list_changed"] = None
            output["tools_after_list_changed"] = None
            output["list_changed_trigger"] = None
            if options.list_changed_wait > 0:
                if client.protocol_version == MODERN_PROTOCOL:
                    listened = await _listen_modern(client, options, deadline)
                else:
                    listened = await _listen_legacy(client, options, probe, notifications, deadline)
                output["list_changed"] = listened.pop("count")
                output["list_changed_trigger"] = listened.pop("trigger")
                output["list_changed_listener"] = listened
                tools, _ = await _list_all_tools(client)
                output["tools_after_list_changed"] = [tool.name for tool in tools]
            output["subscription"] = None
            if options.subscribe is not None:
                output["subscription"] = await _subscribe(client, options.subscribe, updated_uris)
            if options.linger > 0:
                await anyio.sleep(options.linger)
            # Read once more: a 2025-era session id is known after initialize, and stays.
            output["session_id"] = probe.session_id()
            output["notifications"] = notifications
            output["transport_errors"] = transport_errors
            output["asked"] = asked
            output["logs"] = logs
    # Closing the client ends its session: what the server answered, and what the SDK said.
    output["session_end"] = probe.session_end()
    output["client_warnings"] = warnings.messages
    return output


def _relay_callbacks(options: argparse.Namespace, asked: list[dict[str, Any]], logs: list[dict[str, Any]]) -> dict[str, Any]:
    """The client callbacks the options ask for; each records what the server asked in `asked`
    ({"method", "text"}) and every log message in `logs` ({"level", "data"})."""
    callbacks: dict[str, Any] = {}

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append({"level": params.level, "data": params.data})

    callbacks["logging_callback"] = on_log
    if options.sampling_reply is not None:

        async def sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
            content = params.messages[0].content if params.messages else None
            text = getattr(content, "text", None)
            asked.append({"method": "sampling/createMessage", "text": text})
            return types.CreateMessageResult(
                role="assistant",
                content=types.TextContent(type="text", text=options.sampling_reply),
                model="mcpgw-e2e-test-model",
            )

        callbacks["sampling_callback"] = sample
    if options.elicitation_reply is not None or options.elicitation_hang is not None:

        async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            asked.append({"method": "elicitation/create", "text": getattr(params, "message", None)})
            if options.elicitation_hang is not None:
                options.elicitation_hang.write_text("asked\n")
                await anyio.sleep_forever()
            return types.ElicitResult(action="accept", content={"answer": options.elicitation_reply})

        callbacks["elicitation_callback"] = elicit
    if options.root:

        async def list_roots(context: Any) -> types.ListRootsResult:
            asked.append({"method": "roots/list", "text": None})
            return types.ListRootsResult(roots=[types.Root(uri=uri) for uri in options.root])

        callbacks["list_roots_callback"] = list_roots
    return callbacks


def main(build: Callable[[argparse.Namespace], tuple[AbstractAsyncContextManager[Any], TransportProbe]],
         parser: argparse.ArgumentParser) -> None:
    """Parses, runs, prints; every failure ends on stderr with a non-zero exit code."""
    try:
        options = parser.parse_args()
        if options.list_changed_wait <= 0 and (
            options.list_changed_count is not None or options.list_changed_trigger is not None
        ):
            raise UsageError("--list-changed-count and --list-changed-trigger need --list-changed-wait SECONDS")
    except UsageError as error:
        print(f"usage error: {error}", file=sys.stderr)
        sys.exit(2)

    async def run() -> dict[str, Any]:
        transport, probe = build(options)
        return await run_operations(transport, options, probe)

    try:
        output = anyio.run(run)
    except TimeoutError:
        print(f"error: the run did not finish within --timeout {options.timeout} s", file=sys.stderr)
        sys.exit(3)
    except BaseException as error:  # noqa: BLE001 - every failure must reach stderr as one message
        for line in _describe(error):
            print(line, file=sys.stderr)
        sys.exit(1)
    json.dump(output, sys.stdout)
    sys.stdout.write("\n")
    sys.stdout.flush()


def _describe(error: BaseException) -> list[str]:
    """Flattens exception groups (anyio task groups raise them) into readable lines."""
    if isinstance(error, BaseExceptionGroup):
        lines: list[str] = []
        for inner in error.exceptions:
            lines.extend(_describe(inner))
        return lines
    if isinstance(error, MCPError):
        return [f"error: MCP error {error.code}: {error.message} (data: {error.data!r})"]
    if isinstance(error, TimeoutError):
        return [f"error: timed out: {error}"]
    return [f"error: {type(error).__name__}: {error}"]
