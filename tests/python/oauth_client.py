#!/usr/bin/env python3
"""An MCP client that signs in with OAuth, made with the official Python SDK (mcp 2.3.0), for
end-to-end tests of the gateway as an OAuth resource server.

    oauth_client.py --url http://127.0.0.1:PORT/mcp [--login alice] [--scope "mcp:tools"]
                    [--call TOOL [--arguments JSON]] [--redirect-uri http://127.0.0.1:9/callback]
                    [--protocol 2025-11-25|2026-07-28|auto] [--timeout SECONDS]
    oauth_client.py --url http://127.0.0.1:PORT/mcp --expect-status N [--bearer TOKEN]

The first form runs the SDK's whole authorization flow (`OAuthClientProvider` on the streamable
HTTP client): the 401 and its WWW-Authenticate challenge, protected resource metadata, the
authorization server's metadata, dynamic registration as a public native client
(`token_endpoint_auth_method: none`, grant types authorization_code and refresh_token), the
authorization code with PKCE and the resource indicator, then the MCP session with the token.
The browser's part is played here without a browser: the authorization URL gets
`login_hint=LOGIN` (the test authorization server, tests/node/oidc_provider.mjs, signs that
account in and consents for it), and its redirects are followed, cookies kept, until one points
at the redirect URI; its `code`, `state` and `iss` go to the SDK as the callback would. Nothing
listens on the redirect URI. `--scope` replaces the scope the SDK chose (from the challenge, the
resource's metadata or the authorization server's) in the authorization request.

Then it initializes, lists the tools, optionally calls one, and prints one JSON object:

    {"tools": [names], "call": CallToolResult as JSON | {"error": {code, message, data}} | null,
     "token": {"scope": granted scope, "requested_scope": scope of the authorization request,
               "claims": the access token's JWT payload, not verified (null if not a JWT)},
     "flow": [[METHOD, URL, STATUS], ...]}

`flow` lists every HTTP request the client made, in order, to the gateway and to the
authorization server alike (STATUS null when no answer came). No token is ever printed.

The second form sends one plain POST of an `initialize` request, with `Authorization: Bearer
TOKEN` when --bearer is given, and prints

    {"status": N, "www_authenticate": "..." | null, "body": JSON | text | null, "flow": [...]}

Any failure (the flow, the connection, a status other than --expect-status) prints
`{"error": "<type>: <message>", "flow": [...]}` on stdout (with the answer's fields in the
second form) and exits 1; a bad command line exits 2.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import sys
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import anyio
import httpx2
import mcp_types as types
from mcp.client import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from mcp.shared.exceptions import MCPError

CLIENT_INFO = types.Implementation(name="mcpgw-e2e-oauth-client", version="1.0.0")
PROTOCOL_MODES = {"2025-11-25": "legacy", "2026-07-28": "2026-07-28", "auto": "auto"}
# Redirects followed at the authorization server before giving up (login and consent take four).
MAX_AUTHORIZATION_HOPS = 20
REDIRECT_STATUSES = {301, 302, 303, 307, 308}
LATEST_HANDSHAKE_PROTOCOL = "2025-11-25"


class UsageError(Exception):
    """A command line that cannot be run; reported on stderr with exit code 2."""


class AuthorizationFailed(Exception):
    """The authorization server ended the authorization request without a code."""


class UnexpectedStatus(Exception):
    """--expect-status named another status than the one answered."""


# --- Every request, in order ------------------------------------------------------------------


class RecordingTransport(httpx2.AsyncBaseTransport):
    """Notes [METHOD, URL, STATUS] of every request it carries, in the order they are sent."""

    def __init__(self, flow: list[list[Any]]) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self._flow = flow

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        entry: list[Any] = [request.method, str(request.url), None]
        self._flow.append(entry)
        response = await self._inner.handle_async_request(request)
        entry[2] = response.status_code
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


# --- The SDK's OAuth provider, with a headless browser ------------------------------------------


class InMemoryTokenStorage:
    """The SDK's TokenStorage, kept for this run only."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


def _without_query(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def _with_query_values(url: str, values: dict[str, str]) -> str:
    parts = urlsplit(url)
    query = [(name, value) for name, value in parse_qsl(parts.query, keep_blank_values=True) if name not in values]
    query.extend(values.items())
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), parts.fragment))


@dataclass
class HeadlessBrowser:
    """Plays the user's browser: opens the authorization URL, lets the authorization server's
    redirects run their course (its login and consent finish by themselves), and catches the
    final redirect to the client's redirect URI, which nothing serves."""

    redirect_uri: str
    login: str
    scope: str | None
    flow: list[list[Any]]
    timeout: float
    requested_scope: str | None = None
    result: AuthorizationCodeResult | None = None
    failure: BaseException | None = None

    async def open(self, authorization_url: str) -> None:
        try:
            await self._open(authorization_url)
        except BaseException as error:
            self.failure = error
            raise

    async def _open(self, authorization_url: str) -> None:
        extra = {"login_hint": self.login}
        if self.scope is not None:
            extra["scope"] = self.scope
        url = _with_query_values(authorization_url, extra)
        self.requested_scope = dict(parse_qsl(urlsplit(url).query)).get("scope")
        target = _without_query(self.redirect_uri)
        async with httpx2.AsyncClient(
            transport=RecordingTransport(self.flow),
            follow_redirects=False,
            timeout=self.timeout,
        ) as browser:
            for _ in range(MAX_AUTHORIZATION_HOPS):
                response = await browser.get(url)
                location = response.headers.get("location")
                if response.status_code not in REDIRECT_STATUSES or not location:
                    raise AuthorizationFailed(
                        f"the authorization server answered {response.status_code} at {_without_query(url)} "
                        f"instead of redirecting: {response.text[:300]}"
                    )
                url = str(response.url.join(location))
                if _without_query(url) == target:
                    self._land(url)
                    return
        raise AuthorizationFailed(f"no redirect to {self.redirect_uri} after {MAX_AUTHORIZATION_HOPS} hops")

    def _land(self, url: str) -> None:
        answer = dict(parse_qsl(urlsplit(url).query))
        if "error" in answer:
            description = answer.get("error_description")
            raise AuthorizationFailed(answer["error"] + (f" ({description})" if description else ""))
        if "code" not in answer:
            raise AuthorizationFailed(f"the redirect to {self.redirect_uri} carries no code")
        self.result = AuthorizationCodeResult(code=answer["code"], state=answer.get("state"), iss=answer.get("iss"))

    async def callback(self) -> AuthorizationCodeResult:
        if self.result is None:
            raise AuthorizationFailed("the authorization request gave no code")
        result, self.result = self.result, None
        return result


def _jwt_payload(token: str) -> dict[str, Any] | None:
    """The payload of a JWT, read without checking its signature; None if the token is no JWT."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (binascii.Error, ValueError):
        return None
    return payload if isinstance(payload, dict) else None


def _dump(model: Any) -> Any:
    if model is None:
        return None
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


async def run_flow(options: argparse.Namespace, flow: list[list[Any]]) -> dict[str, Any]:
    browser = HeadlessBrowser(
        redirect_uri=options.redirect_uri,
        login=options.login,
        scope=options.scope,
        flow=flow,
        timeout=options.timeout,
    )
    storage = InMemoryTokenStorage()
    auth = OAuthClientProvider(
        server_url=options.url,
        client_metadata=OAuthClientMetadata(
            client_name="mcpgw e2e oauth client",
            redirect_uris=[options.redirect_uri],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
            scope=options.scope,
        ),
        storage=storage,
        redirect_handler=browser.open,
        callback_handler=browser.callback,
    )
    http_client = httpx2.AsyncClient(
        auth=auth,
        transport=RecordingTransport(flow),
        timeout=httpx2.Timeout(options.timeout, read=options.timeout),
    )
    output: dict[str, Any] = {"tools": None, "call": None}
    try:
        with anyio.fail_after(options.timeout):
            async with http_client:
                async with Client(
                    streamable_http_client(options.url, http_client=http_client),
                    mode=PROTOCOL_MODES[options.protocol],
                    cache=None,
                    client_info=CLIENT_INFO,
                    read_timeout_seconds=options.timeout,
                ) as client:
                    listed = await client.list_tools()
                    output["tools"] = [tool.name for tool in listed.tools]
                    if options.call is not None:
                        try:
                            result = await client.call_tool(options.call, options.arguments)
                            output["call"] = _dump(result)
                        except MCPError as error:
                            output["call"] = {"error": {"code": error.code, "message": error.message, "data": error.data}}
    except BaseException:
        # What went wrong in the browser's part is the cause; what the SDK reports is its echo.
        if browser.failure is not None:
            raise browser.failure from None
        raise
    tokens = storage.tokens
    output["token"] = {
        "scope": tokens.scope if tokens else None,
        "requested_scope": browser.requested_scope,
        "claims": _jwt_payload(tokens.access_token) if tokens else None,
    }
    return output


# --- A plain request, for refusals ------------------------------------------------------------


async def probe(options: argparse.Namespace, flow: list[list[Any]]) -> dict[str, Any]:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if options.bearer is not None:
        headers["Authorization"] = f"Bearer {options.bearer}"
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": LATEST_HANDSHAKE_PROTOCOL,
            "capabilities": {},
            "clientInfo": CLIENT_INFO.model_dump(mode="json", exclude_none=True),
        },
    }
    async with httpx2.AsyncClient(transport=RecordingTransport(flow), timeout=options.timeout) as client:
        response = await client.post(options.url, json=initialize, headers=headers)
    body: Any = None
    if response.content:
        try:
            body = response.json()
        except ValueError:
            body = response.text
    answer = {
        "status": response.status_code,
        "www_authenticate": response.headers.get("www-authenticate"),
        "body": body,
    }
    if response.status_code != options.expect_status:
        raise UnexpectedStatus(f"expected status {options.expect_status}, got {response.status_code}", answer)
    return answer


# --- Command line -----------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    result = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    result.add_argument("--url", required=True, help="the MCP endpoint, e.g. http://127.0.0.1:8000/mcp")
    result.add_argument("--login", default="alice", help="the account to sign in as (login_hint; default alice)")
    result.add_argument("--scope", help="the scope to ask for (default: what the SDK chooses)")
    result.add_argument("--call", metavar="TOOL", help="a tool to call after listing the tools")
    result.add_argument("--arguments", default="{}", metavar="JSON", help="the tool's arguments (a JSON object)")
    result.add_argument(
        "--redirect-uri",
        default="http://127.0.0.1:9/callback",
        help="the redirect URI to register and use; nothing needs to listen there",
    )
    result.add_argument(
        "--protocol",
        choices=sorted(PROTOCOL_MODES),
        default="2025-11-25",
        help="2025-11-25: the initialize handshake (default); 2026-07-28: stateless; auto: the SDK's choice",
    )
    result.add_argument("--timeout", type=float, default=30.0, help="deadline of the whole run (default 30)")
    result.add_argument(
        "--expect-status",
        type=int,
        metavar="N",
        help="no OAuth flow: POST one initialize request and expect this HTTP status",
    )
    result.add_argument("--bearer", metavar="TOKEN", help="with --expect-status: the bearer token to send")
    return result


def _describe(error: BaseException) -> str:
    """One line for a failure; the exception groups of task groups are flattened."""
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(_describe(inner) for inner in error.exceptions)
    if isinstance(error, MCPError):
        return f"MCPError: {error.code}: {error.message}"
    if isinstance(error, UnexpectedStatus):
        return f"UnexpectedStatus: {error.args[0]}"
    if isinstance(error, TimeoutError) and not str(error):
        return "TimeoutError: the run did not finish within --timeout"
    return f"{type(error).__name__}: {error}"


def _emit(value: dict[str, Any]) -> None:
    json.dump(value, sys.stdout)
    sys.stdout.write("\n")
    sys.stdout.flush()


def main() -> None:
    try:
        options = parser().parse_args()
        try:
            options.arguments = json.loads(options.arguments)
        except json.JSONDecodeError as error:
            raise UsageError(f"--arguments is not valid JSON ({error})") from error
        if not isinstance(options.arguments, dict):
            raise UsageError("--arguments must be a JSON object")
        if options.bearer is not None and options.expect_status is None:
            raise UsageError("--bearer goes with --expect-status")
    except UsageError as error:
        print(f"usage error: {error}", file=sys.stderr)
        sys.exit(2)

    flow: list[list[Any]] = []
    run = probe if options.expect_status is not None else run_flow
    try:
        output = anyio.run(run, options, flow)
    except BaseException as error:  # noqa: BLE001 - every failure must reach the test as one answer
        failure: dict[str, Any] = {"error": _describe(error)}
        if isinstance(error, UnexpectedStatus):
            failure.update(error.args[1])
        failure["flow"] = flow
        _emit(failure)
        sys.exit(1)
    output["flow"] = flow
    _emit(output)


if __name__ == "__main__":
    main()
