"""The tools an `mcp` service's MCP server offers, asked as any MCP client asks: `initialize`, then `tools/list`
(every page), then the session ended; under the proxy's outbound rules and with the service's upstream auth.

The CLI (`paywarden tool list --upstream`, `tool price`) and the console's service page show them to choose from;
pricing a tool copies its description and input schema from here, for the payment-required answer's discovery
metadata.
"""

from __future__ import annotations

import json
from typing import Any

from application.proxy_services import ProxyServices
from domain.proxy_service import ProxyService, ProxyServiceError
from interfaces.adapters.outbound import OutboundClient, OutboundError
from interfaces.http.proxy import jsonrpc

PROTOCOL_VERSION = "2025-11-25"
MAX_PAGES = 20
MAX_ANSWER_BYTES = 4 * 1024 * 1024


class UpstreamToolsError(ProxyServiceError):
    """The MCP server could not be asked for its tools (unreachable, refused, or not speaking MCP)."""


def upstream_tools(outbound: OutboundClient, proxies: ProxyServices, service: ProxyService) -> list[dict[str, Any]]:
    """Each tool as the server lists it (`name`, `description`, `inputSchema`, ...)."""
    session = _Session(outbound, service.base_url, proxies.upstream_auth(service))
    try:
        session.request("initialize", {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                                       "clientInfo": {"name": "paywarden", "version": "1"}})
        session.notify("notifications/initialized")
        tools: list[dict[str, Any]] = []
        cursor = None
        for _ in range(MAX_PAGES):
            page = session.request("tools/list", {"cursor": cursor} if cursor else {})
            tools.extend(t for t in page.get("tools") or [] if isinstance(t, dict) and isinstance(t.get("name"), str))
            cursor = page.get("nextCursor")
            if not isinstance(cursor, str) or not cursor:
                break
        return tools
    finally:
        session.close()


class _Session:
    def __init__(self, outbound: OutboundClient, url: str, auth: tuple[str, str] | None) -> None:
        self._outbound, self._url, self._auth = outbound, url, auth
        self._session_id: str | None = None
        self._version: str | None = None
        self._next = 0

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._next += 1
        answer = self._post({"jsonrpc": "2.0", "id": self._next, "method": method, "params": params})
        if not isinstance(answer, dict) or not isinstance(answer.get("result"), dict):
            problem = answer.get("error") if isinstance(answer, dict) else None
            raise UpstreamToolsError(f"the MCP server answered {method} with {problem or 'no result'}")
        if method == "initialize":
            self._version = str(answer["result"].get("protocolVersion") or PROTOCOL_VERSION)
        return answer["result"]

    def notify(self, method: str) -> None:
        self._post({"jsonrpc": "2.0", "method": method})

    def close(self) -> None:
        if self._session_id:
            try:
                self._outbound.request("DELETE", self._url, self._headers()).close()
            except OutboundError:
                pass  # the server ends an idle session itself

    def _headers(self) -> list[tuple[str, str]]:
        headers = [("Accept", "application/json, text/event-stream"), ("Content-Type", "application/json"),
                   ("Accept-Encoding", "identity")]
        if self._session_id:
            headers.append(("Mcp-Session-Id", self._session_id))
        if self._version:
            headers.append(("MCP-Protocol-Version", self._version))
        if self._auth:
            headers.append(self._auth)
        return headers

    def _post(self, message: dict[str, Any]) -> Any:
        try:
            response = self._outbound.request("POST", self._url, self._headers(), jsonrpc.dumps(message))
            self._session_id = response.header("Mcp-Session-Id") or self._session_id
            kind = (response.header("Content-Type") or "").split(";")[0].strip().lower()
            if response.status >= 400:
                response.close()
                raise UpstreamToolsError(f"the MCP server answered {message['method']} with HTTP {response.status}")
            if "id" not in message:
                response.close()
                return None
            if kind == "text/event-stream":
                for event in jsonrpc.events(response.stream(), MAX_ANSWER_BYTES):
                    if jsonrpc.answers(found := event.message(), message["id"]):
                        response.close()
                        return found
                raise UpstreamToolsError(f"the MCP server's stream ended without answering {message['method']}")
            return json.loads(response.read(MAX_ANSWER_BYTES))
        except OutboundError as failed:
            raise UpstreamToolsError(f"the MCP server did not answer: {failed}") from None
        except ValueError as bad:
            raise UpstreamToolsError(f"the MCP server's answer is not JSON-RPC: {bad}") from None
