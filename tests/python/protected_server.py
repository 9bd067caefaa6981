#!/usr/bin/env python3
"""An MCP server that accepts only OAuth access tokens minted for it, made with the official Python
SDK (mcp 2.3.0), for end-to-end tests of the gateway calling remote upstreams on a user's behalf.

    protected_server.py --issuer http://127.0.0.1:P --resource http://127.0.0.1:Q/mcp --port Q
                        [--host 127.0.0.1] [--record FILE] [--bind-sessions]

It serves Streamable HTTP at /mcp in both protocol eras on one path (2025-11-25 with initialize
and sessions, 2026-07-28 stateless), like sdk_server.py, and prints
`listening on http://HOST:PORT/mcp` on stderr once it accepts connections. Port 0 picks a free
port (the line names it), but the tokens' audience is `--resource`, so a test that needs the two
to agree picks the port first. It exits with status 0 on SIGTERM or SIGINT.

Every HTTP request, whatever its path and method, must carry `Authorization: Bearer JWT`, a JWT
access token (RFC 9068) that:
- is signed with RS256 by a key of the issuer's key set (its `jwks_uri`, found in
  `ISSUER/.well-known/openid-configuration`; fetched at the first request and again whenever a
  token names a key it does not hold, so a restarted issuer's fresh key is picked up),
- has the header `typ` `at+jwt` (an ID token is not an access token),
- has `iss` equal to `--issuer`, an `aud` that is or contains `--resource` (compared exactly, as
  the issuer spells its resource URIs), an `exp` not passed, and a `sub`.
Any other request is answered 401 with `WWW-Authenticate: Bearer error="invalid_token",
error_description="REASON"` and the body `{"error": "invalid_token", "error_description":
"REASON"}`, and never reaches the MCP server.

By default sessions belong to no one: a session opened with one token is served with any other
valid token. With `--bind-sessions` a session belongs to the subject (`sub`) of the token that
opened it (the `initialize` request answered with its `Mcp-Session-Id`), as a careful server
binds sessions to users: any later request naming that session (POST, the GET event stream,
DELETE) whose valid token has another subject is answered 403 with the body `{"error":
"session_subject_mismatch", "error_description": "REASON"}` and never reaches the MCP server.

With `--record FILE`, one JSON line per HTTP request is appended to FILE once it is answered (when
its answer starts, or its refusal is sent):

    {"method": "POST", "path": "/mcp", "rpc": ["tools/call"] | null,
     "authorization": "Bearer" | null, "sub", "aud", "act", "scope", "client_id", "groups",
     "valid": true | false, "reason": null | "REASON", "session": "ID" | null,
     "refused": null | "REASON"}

`rpc` lists the JSON-RPC methods of a POST's body (null for other methods or a body that is not
JSON-RPC); `authorization` is the scheme of the Authorization header as sent, null when the
request had none. The claims are those of the token the request carried, read whether or not it
was valid (all null when it carried none or it is not a JWT); the token itself is never written.
`session` is the MCP session the request belongs to: the `Mcp-Session-Id` it named, or for the
request that opened a session the id its answer assigned (null for neither). `refused` says why
`--bind-sessions` refused a valid token on its session (null otherwise). Grouping the lines by
`session` tells which subjects each session saw.

Tools:
- `whoami`: the claims of the token that authorized this very request (not the session's first
  one), as text: JSON `{"sub", "aud", "act", "scope", "groups", "client_id"}`.
- `echo {text}`: the text.
- `sleep {seconds}`: waits that long (at most 60 s), then answers `slept`; keeps a call in flight.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2
import jwt
from mcp.server.mcpserver import Context, MCPServer
from starlette.datastructures import Headers

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# The key under which the gate leaves a request's verified claims in its ASGI scope's state,
# where the tool handlers find them through the request the SDK hands them.
CLAIMS_STATE_KEY = "protected_server_claims"
# The claims the record and `whoami` report.
RECORDED_CLAIMS = ("sub", "aud", "act", "scope", "client_id", "groups")
WHOAMI_CLAIMS = ("sub", "aud", "act", "scope", "groups", "client_id")
ACCESS_TOKEN_TYPES = ("at+jwt", "application/at+jwt")
# A token naming an unknown key makes the key set be fetched again, at most this often.
KEY_REFRESH_INTERVAL_S = 1.0
# How long open responses (SSE streams) may keep the server from stopping.
GRACEFUL_SHUTDOWN_S = 2

server = MCPServer(name="mcpgw-protected-test-server", log_level="WARNING")


def request_claims(ctx: Context) -> dict[str, Any]:
    """The verified claims of the token that authorized the HTTP request carrying this message."""
    request = ctx.request_context.request
    state = getattr(request, "scope", {}).get("state") or {}
    claims = state.get(CLAIMS_STATE_KEY)
    if not isinstance(claims, dict):
        raise RuntimeError("this request carries no verified token")
    return claims


@server.tool(description="Answers the claims of the access token that authorized this request.")
async def whoami(ctx: Context) -> str:
    claims = request_claims(ctx)
    return json.dumps({name: claims.get(name) for name in WHOAMI_CLAIMS})


@server.tool(description="Returns the text it is given.")
def echo(text: str) -> str:
    return text


# The longest `sleep` a call may ask for.
MAX_SLEEP_S = 60.0


@server.tool(description="Waits the given number of seconds (at most 60), then answers `slept`.")
async def sleep(seconds: float) -> str:
    await anyio.sleep(max(0.0, min(seconds, MAX_SLEEP_S)))
    return "slept"


# --- Token verification ----------------------------------------------------------------------


class TokenRejected(Exception):
    """A token that does not authorize a request here; the message says why."""


class IssuerKeys:
    """The issuer's signing keys, found through its discovery document and kept by key id."""

    def __init__(self, issuer: str) -> None:
        self.issuer = issuer
        self.jwks_uri: str | None = None
        self.keys: dict[str, Any] = {}
        self.fetched_at = 0.0
        self.lock = anyio.Lock()

    async def key_for(self, kid: str | None) -> Any:
        if kid is None:
            raise TokenRejected("the token's header names no key (kid)")
        if kid not in self.keys:
            async with self.lock:
                if kid not in self.keys and time.monotonic() - self.fetched_at >= KEY_REFRESH_INTERVAL_S:
                    await self.refresh()
        key = self.keys.get(kid)
        if key is None:
            raise TokenRejected(f"no key of the issuer's key set has the id {kid!r}")
        return key

    async def refresh(self) -> None:
        try:
            async with httpx2.AsyncClient(timeout=10) as http:
                if self.jwks_uri is None:
                    discovery = await http.get(f"{self.issuer}/.well-known/openid-configuration")
                    discovery.raise_for_status()
                    metadata = discovery.json()
                    if metadata.get("issuer") != self.issuer:
                        raise TokenRejected(f"the discovery document names the issuer {metadata.get('issuer')!r}")
                    self.jwks_uri = metadata["jwks_uri"]
                answer = await http.get(self.jwks_uri)
                answer.raise_for_status()
                keys: dict[str, Any] = {}
                for jwk in answer.json().get("keys", []):
                    if jwk.get("kty") != "RSA" or jwk.get("use", "sig") != "sig" or "kid" not in jwk:
                        continue
                    keys[jwk["kid"]] = jwt.PyJWK(jwk, algorithm="RS256").key
        except TokenRejected:
            raise
        except Exception as error:  # noqa: BLE001 - an unreachable issuer or a bad key set refuses the token
            raise TokenRejected(f"cannot fetch the issuer's key set: {type(error).__name__}: {error}") from error
        self.keys = keys
        self.fetched_at = time.monotonic()


@dataclass
class Verdict:
    claims: dict[str, Any] | None  # what the token says, verified or not (None: not a JWT)
    valid: bool
    reason: str | None


class TokenVerifier:
    def __init__(self, issuer: str, resource: str) -> None:
        self.issuer = issuer
        self.resource = resource
        self.keys = IssuerKeys(issuer)

    async def check(self, token: str) -> Verdict:
        try:
            claims = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError as error:
            return Verdict(None, False, f"the token is not a JWT: {error}")
        if not isinstance(claims, dict):
            return Verdict(None, False, "the token's payload is not a JSON object")
        try:
            verified = await self.verify(token, claims)
        except TokenRejected as error:
            return Verdict(claims, False, str(error))
        return Verdict(verified, True, None)

    async def verify(self, token: str, claims: dict[str, Any]) -> dict[str, Any]:
        header = jwt.get_unverified_header(token)
        if header.get("alg") != "RS256":
            raise TokenRejected(f"the token is signed with {header.get('alg')!r}, not RS256")
        if str(header.get("typ", "")).lower() not in ACCESS_TOKEN_TYPES:
            raise TokenRejected(f"the token's type is {header.get('typ')!r}, not at+jwt")
        key = await self.keys.key_for(header.get("kid"))
        try:
            return jwt.decode(
                token,
                key,
                algorithms=["RS256"],
                audience=self.resource,
                issuer=self.issuer,
                options={"require": ["exp", "iat", "iss", "aud", "sub"]},
            )
        except jwt.ExpiredSignatureError as error:
            raise TokenRejected(f"the token expired at {claims.get('exp')}") from error
        except jwt.InvalidAudienceError as error:
            raise TokenRejected(f"the token's audience {claims.get('aud')!r} is not {self.resource}") from error
        except jwt.InvalidIssuerError as error:
            raise TokenRejected(f"the token's issuer {claims.get('iss')!r} is not {self.issuer}") from error
        except jwt.InvalidSignatureError as error:
            raise TokenRejected("the token's signature does not verify") from error
        except jwt.PyJWTError as error:
            raise TokenRejected(f"invalid token: {error}") from error


# --- The gate in front of the MCP server -----------------------------------------------------


class Recorder:
    """Appends one JSON line per request to a file, or does nothing without one."""

    def __init__(self, path: str | None) -> None:
        self.path = path

    def write(self, entry: dict[str, Any]) -> None:
        if self.path is None:
            return
        with open(self.path, "a", encoding="utf-8") as file:
            file.write(json.dumps(entry) + "\n")


def rpc_methods(body: bytes) -> list[str] | None:
    try:
        message = json.loads(body)
    except ValueError:
        return None
    messages = message if isinstance(message, list) else [message]
    if not all(isinstance(item, dict) for item in messages):
        return None
    return [item["method"] for item in messages if isinstance(item.get("method"), str)]


async def read_body(receive: Receive) -> tuple[bytes, bool]:
    """The whole request body, and whether the client left before sending it all."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b"".join(chunks), True
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks), False


def replaying(body: bytes, receive: Receive) -> Receive:
    """A receive channel that hands over the body already read, then the client's own channel."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive_again() -> Message:
        if pending:
            return pending.pop()
        return await receive()

    return receive_again


def header_text(text: str) -> str:
    """Text safe to quote in a WWW-Authenticate parameter."""
    return "".join(char if " " <= char <= "~" and char not in '"\\' else "'" for char in text)


async def refuse(send: Send, reason: str) -> None:
    body = json.dumps({"error": "invalid_token", "error_description": reason}).encode()
    challenge = f'Bearer error="invalid_token", error_description="{header_text(reason)}"'
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", challenge.encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def forbid(send: Send, reason: str) -> None:
    body = json.dumps({"error": "session_subject_mismatch", "error_description": reason}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 403,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


def response_session(message: Message) -> str | None:
    """The `Mcp-Session-Id` a response's start names, if any."""
    for name, value in message.get("headers", []):
        if name.lower() == b"mcp-session-id":
            return value.decode("latin-1")
    return None


class TokenGate:
    """Lets through only the HTTP requests whose bearer token verifies, recording every one.

    The verified claims ride in the request's ASGI state, so each MCP message sees the token of
    the HTTP request that carried it, whatever session it belongs to. With `bind_sessions`, a
    session serves only the subject whose token opened it.
    """

    def __init__(self, app: ASGIApp, verifier: TokenVerifier, recorder: Recorder, bind_sessions: bool) -> None:
        self.app = app
        self.verifier = verifier
        self.recorder = recorder
        self.bind_sessions = bind_sessions
        # The subject each session was opened by (with `bind_sessions`).
        self.owners: dict[str, Any] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        methods = None
        if scope["method"] == "POST":
            body, disconnected = await read_body(receive)
            if disconnected:
                return
            methods = rpc_methods(body)
            receive = replaying(body, receive)

        authorization = Headers(scope=scope).get("authorization")
        scheme, _, token = (authorization or "").strip().partition(" ")
        token = token.strip()
        if authorization is None:
            verdict = Verdict(None, False, "the request has no Authorization header")
        elif scheme.lower() != "bearer" or not token:
            verdict = Verdict(None, False, "the Authorization header does not carry a Bearer token")
        else:
            verdict = await self.verifier.check(token)

        claims = verdict.claims or {}
        session = Headers(scope=scope).get("mcp-session-id")

        def record(session: str | None, refused: str | None = None) -> None:
            self.recorder.write(
                {
                    "method": scope["method"],
                    "path": scope["path"],
                    "rpc": methods,
                    "authorization": scheme if authorization is not None else None,
                    **{name: claims.get(name) for name in RECORDED_CLAIMS},
                    "valid": verdict.valid,
                    "reason": verdict.reason,
                    "session": session,
                    "refused": refused,
                }
            )

        if not verdict.valid:
            record(session)
            await refuse(send, verdict.reason or "invalid token")
            return
        subject = claims.get("sub")
        if self.bind_sessions and session is not None and session in self.owners:
            owner = self.owners[session]
            if owner != subject:
                reason = f"session {session} belongs to subject {owner!r}, and this token's subject is {subject!r}"
                record(session, reason)
                await forbid(send, reason)
                return
        recorded = False

        async def send_and_record(message: Message) -> None:
            nonlocal recorded
            if message["type"] == "http.response.start" and not recorded:
                recorded = True
                assigned = response_session(message) if session is None else None
                if assigned is not None and self.bind_sessions:
                    self.owners.setdefault(assigned, subject)
                record(session if session is not None else assigned)
            await send(message)

        scope.setdefault("state", {})[CLAIMS_STATE_KEY] = verdict.claims
        try:
            await self.app(scope, receive, send_and_record)
        finally:
            if not recorded:
                record(session)


# --- Serving ---------------------------------------------------------------------------------


async def serve_http(
    host: str, port: int, issuer: str, resource: str, record: str | None, bind_sessions: bool
) -> None:
    import uvicorn

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))
    listener.listen(128)
    bound_port = listener.getsockname()[1]
    app = TokenGate(
        server.streamable_http_app(host=host), TokenVerifier(issuer, resource), Recorder(record), bind_sessions
    )
    config = uvicorn.Config(
        app, log_level="warning", lifespan="on", timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S
    )
    http_server = uvicorn.Server(config)

    # uvicorn handles SIGTERM and SIGINT while it serves, then hands each one it caught back to
    # the handler it found, which would end the process by that signal: this one instead lets the
    # server's shutdown finish and the process exit with status 0, and also stops a server that
    # is signalled before uvicorn took over.
    def stop(signum: int, frame: object) -> None:
        http_server.should_exit = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    async def announce_when_started() -> None:
        while not http_server.started:
            await anyio.sleep(0.01)
        print(f"listening on http://{host}:{bound_port}/mcp", file=sys.stderr, flush=True)

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(announce_when_started)
        await http_server.serve(sockets=[listener])
        tasks.cancel_scope.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--issuer", required=True, help="the authorization server's issuer URL")
    parser.add_argument("--resource", required=True, help="this server's resource URI, the tokens' audience")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--record", help="append one JSON line per HTTP request to this file")
    parser.add_argument(
        "--bind-sessions",
        action="store_true",
        help="serve a session only for the subject of the token that opened it (403 for others)",
    )
    options = parser.parse_args()
    anyio.run(
        serve_http,
        options.host,
        options.port,
        options.issuer.rstrip("/"),
        options.resource,
        options.record,
        options.bind_sessions,
    )


if __name__ == "__main__":
    main()
