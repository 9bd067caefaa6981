#!/usr/bin/env python3
"""A small MCP server made with the official Python SDK (mcp 2.3.0), for end-to-end tests.

    sdk_server.py stdio [--release FILE]
    sdk_server.py http [--host 127.0.0.1] [--port 0] [--release FILE]

Over HTTP it serves Streamable HTTP at /mcp in both protocol eras on one path (2025-11-25 with
initialize and sessions, 2026-07-28 stateless), and prints `listening on http://HOST:PORT/mcp`
on stderr once it accepts connections (port 0 picks a free port). It is the independent
implementation that the gateway's remote (HTTP) upstreams and the client scripts are checked
against, since the reference server-everything speaks only the 2025 era.

Tools:
- `echo {text}`: the text.
- `add {a, b}`: the sum, as text and as structured content `{"result": a + b}`.
- `sleep {ms}`: sleeps, reporting progress 0, 1, 2, 3 of total 4 when asked; writes
  `sdk_server sleep cancelled` on stderr when cancelled.
- `fail {message}`: a tool-level error (`isError: true`) with the message.
- `add_tool {name}`: registers a tool `name` (answering its own name) and announces the change:
  to every `subscriptions/listen` stream (2026-07-28) and on the calling session (2025 era).
- `ask_model {prompt}`: asks the client's model (`sampling/createMessage`) and answers
  `the model said: TEXT`.
- `ask_user {question}`: asks the user (`elicitation/create`, a form with one `answer` string)
  and answers `the user said: ANSWER`, or `the user chose ACTION`; writes
  `sdk_server ask_user failed: ERROR` on stderr when the request fails, and
  `sdk_server ask_user cancelled` when the call is cancelled while it waits.
- `roots`: the client's roots (`roots/list`), their URIs separated by spaces.
- `log_and_echo {message}`: logs the message at `info` and at `debug`, then answers it.
- `announce_lists`: announces that its prompts and its resources changed (2025 era).
- `trace_context`: the trace context the call carried, as structured content
  `{"meta_traceparent", "meta_tracestate", "header_traceparent", "header_tracestate"}` (each
  empty when absent): from the request's `_meta` and, over HTTP, from its headers.

`--release FILE` reads, at start, a JSON object that stands for a new release of the server:
`{"descriptions": {"TOOL": "TEXT"}, "added_tools": ["NAME"]}` gives tools other descriptions and
adds tools (each answering its own name), so that a test can change what the server lists
between two starts without changing how it is started.

Prompts:
- `ask_topic`: asks the user for a topic (`elicitation/create`, a form with one `answer`
  string) while the prompt is got, and answers `Write about TOPIC.`
"""

from __future__ import annotations

import argparse
import json
import socket
import sys

import anyio
import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

server = MCPServer(name="mcpgw-sdk-test-server", log_level="WARNING")


@server.tool(description="Returns the text it is given.")
def echo(text: str) -> str:
    return text


@server.tool(description="Adds two numbers.")
def add(a: float, b: float) -> dict[str, float]:
    return {"result": a + b}


@server.tool(description="Sleeps for ms milliseconds, reporting progress; stops when cancelled.")
async def sleep(ms: int, ctx: Context) -> str:
    steps = 4
    try:
        for step in range(steps):
            await ctx.report_progress(step, steps)
            await anyio.sleep(ms / 1000 / steps)
    except anyio.get_cancelled_exc_class():
        print("sdk_server sleep cancelled", file=sys.stderr, flush=True)
        raise
    return f"slept {ms} ms"


@server.tool(description="Always answers a tool-level error with the given message.")
def fail(message: str) -> str:
    raise ToolError(message)


@server.tool(description="Registers a new tool with the given name and announces the change.")
async def add_tool(name: str, ctx: Context) -> str:
    def answer_own_name() -> str:
        return name

    server.add_tool(answer_own_name, name=name, description=f"Answers {name}.")
    await ctx.notify_tools_changed()
    session = ctx.request_context.session
    if hasattr(session, "send_tool_list_changed"):
        try:
            await session.send_tool_list_changed()
        except Exception as error:  # noqa: BLE001 - the 2026 wire has no session to notify
            print(f"sdk_server: no session notification ({error})", file=sys.stderr, flush=True)
    return f"added {name}"


@server.tool(description="Asks the client's model to complete the prompt and answers what it said.")
async def ask_model(prompt: str, ctx: Context) -> str:
    message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))
    result = await ctx.session.create_message(
        messages=[message], max_tokens=64, related_request_id=ctx.request_id
    )
    content = result.content if isinstance(result.content, list) else [result.content]
    text = " ".join(block.text for block in content if isinstance(block, types.TextContent))
    return f"the model said: {text}"


class Answer(BaseModel):
    answer: str


@server.tool(description="Asks the user a question and answers what they said.")
async def ask_user(question: str, ctx: Context) -> str:
    try:
        result = await ctx.elicit(question, Answer)
    except anyio.get_cancelled_exc_class():
        print("sdk_server ask_user cancelled", file=sys.stderr, flush=True)
        raise
    except Exception as error:
        print(f"sdk_server ask_user failed: {error}", file=sys.stderr, flush=True)
        raise
    if result.action == "accept" and result.data is not None:
        return f"the user said: {result.data.answer}"
    return f"the user chose {result.action}"


@server.tool(description="Lists the client's roots.")
async def roots(ctx: Context) -> str:
    listed = await ctx.session.list_roots()
    return " ".join(str(root.uri) for root in listed.roots)


@server.tool(description="Logs the message at info and at debug level, then answers it.")
async def log_and_echo(message: str, ctx: Context) -> str:
    await ctx.info(f"info: {message}")
    await ctx.debug(f"debug: {message}")
    return message


@server.tool(description="Announces that the server's prompts and resources changed.")
async def announce_lists(ctx: Context) -> str:
    session = ctx.request_context.session
    await session.send_prompt_list_changed()
    await session.send_resource_list_changed()
    return "announced"


@server.tool(description="Answers the trace context the call carried in its _meta and HTTP headers.")
def trace_context(ctx: Context) -> dict[str, str]:
    meta = ctx.request_context.meta or {}
    request = ctx.request_context.request
    headers = getattr(request, "headers", None) or {}
    return {
        "meta_traceparent": str(meta.get("traceparent", "")),
        "meta_tracestate": str(meta.get("tracestate", "")),
        "header_traceparent": headers.get("traceparent", ""),
        "header_tracestate": headers.get("tracestate", ""),
    }


@server.prompt(description="Asks the user for a topic, then writes the prompt about it.")
async def ask_topic(ctx: Context) -> str:
    result = await ctx.elicit("Which topic?", Answer)
    if result.action == "accept" and result.data is not None:
        return f"Write about {result.data.answer}."
    return f"the user chose {result.action}"


async def serve_http(host: str, port: int) -> None:
    import uvicorn

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))
    listener.listen(128)
    bound_port = listener.getsockname()[1]
    app = server.streamable_http_app(host=host)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    http_server = uvicorn.Server(config)

    async def announce_when_started() -> None:
        while not http_server.started:
            await anyio.sleep(0.01)
        print(f"listening on http://{host}:{bound_port}/mcp", file=sys.stderr, flush=True)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(announce_when_started)
        await http_server.serve(sockets=[listener])


def apply_release(path: str) -> None:
    """Changes the tools as the release file says (see the module's documentation)."""
    with open(path, encoding="utf-8") as file:
        release = json.load(file)
    for name, description in release.get("descriptions", {}).items():
        function = globals()[name]
        server.remove_tool(name)
        server.add_tool(function, name=name, description=description)
    for name in release.get("added_tools", []):

        def answer_own_name(name: str = name) -> str:
            return name

        server.add_tool(answer_own_name, name=name, description=f"Answers {name}.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("transport", choices=("stdio", "http"))
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--release", help="a JSON file of changed descriptions and added tools")
    options = parser.parse_args()
    if options.release:
        apply_release(options.release)
    if options.transport == "stdio":
        server.run("stdio")
    else:
        anyio.run(serve_http, options.host, options.port)


if __name__ == "__main__":
    main()
