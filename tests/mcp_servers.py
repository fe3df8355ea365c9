"""MCP servers for the tests, built with the `mcp` SDK (2.x) on its Streamable HTTP transport, served by uvicorn
from a background thread: a merchant's server that knows nothing of payments (JSON or `text/event-stream`
answers), and the adapter that lets `x402.mcp`'s client drive the SDK's client session.

`x402.mcp.x402MCPClient` calls `call_tool(params, read_timeout_seconds=timedelta)` with one dict and reads the
result's `content`, `isError`, `structuredContent` and `_meta` attributes; the `mcp` 2.x session takes the name,
arguments and `meta` apart and answers a pydantic model whose `_meta` is `meta`: `SessionAdapter` is those few lines.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult

from tests.faults import free_port


class Upstream:
    """A plain MCP server: `get_weather` and `get_forecast` (to be priced), `broken` (always a tool error),
    `echo` (free); `calls` counts each tool's runs."""

    def __init__(self, json_response: bool) -> None:
        self.calls: dict[str, int] = {}
        server = MCPServer("weather")

        @server.tool(description="The weather in a city, now")
        async def get_weather(city: str, ctx: Context) -> str:
            self.calls["get_weather"] = self.calls.get("get_weather", 0) + 1
            await ctx.report_progress(1, 2, "looking at the sky")
            return f"sunny in {city}"

        @server.tool(description="Tomorrow's weather in a city")
        async def get_forecast(city: str, ctx: Context) -> str:
            self.calls["get_forecast"] = self.calls.get("get_forecast", 0) + 1
            await ctx.report_progress(1, 2, "asking tomorrow")
            await asyncio.sleep(1.5)  # a slow tool: its progress is worth seeing before its result
            return f"rain in {city} tomorrow"

        @server.tool(description="A tool that always fails")
        def broken() -> str:
            self.calls["broken"] = self.calls.get("broken", 0) + 1
            raise RuntimeError("the sky is out of order")

        @server.tool(description="Says it back")
        def echo(text: str) -> str:
            self.calls["echo"] = self.calls.get("echo", 0) + 1
            return text

        self.app = server.streamable_http_app(json_response=json_response)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"


@contextmanager
def serving(app: Any, port: int) -> Iterator[None]:
    """An ASGI app on 127.0.0.1:`port` for the block."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError(f"the MCP server on port {port} did not start")
        time.sleep(0.05)
    try:
        yield
    finally:
        server.should_exit = True
        thread.join(timeout=10)


class SessionAdapter:
    """The `mcp` 2.x ClientSession as `x402.mcp`'s client calls it (one dict of params)."""

    def __init__(self, session: Any, on_progress: Callable[..., Any] | None = None) -> None:
        self._session, self._on_progress = session, on_progress

    async def call_tool(self, params: dict[str, Any], read_timeout_seconds: Any = None, **_: Any) -> Any:
        answer = await self._session.call_tool(
            params["name"], params.get("arguments"),
            read_timeout_seconds=read_timeout_seconds.total_seconds() if read_timeout_seconds else None,
            progress_callback=self._on_progress, meta=params.get("_meta"))
        return SimpleNamespace(content=[c.model_dump(by_alias=True, exclude_none=True) for c in answer.content],
                               isError=bool(answer.is_error), structuredContent=answer.structured_content,
                               _meta=answer.meta or {})

    async def list_tools(self) -> Any:
        return await self._session.list_tools()


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


class OwnPaidServer:
    """A merchant's own paid MCP server: x402's MCP payment wrapper around a tool, its facilitator Paywarden
    (`HTTPFacilitatorClientSync` with the merchant's API key), its Bazaar MCP extension declared.

    x402's `create_payment_wrapper` decorator is written for `mcp` 1.x's FastMCP; with `mcp` 2.x the same payment
    logic is x402's framework-neutral `create_payment_wrapper_sync` (handler `(args, extra)`, the request's
    `_meta` in `extra`), bridged to an `MCPServer` tool in a few lines here."""

    def __init__(self, facilitator_url: str, api_key: str, network: str, pay_to: str, price: int,
                 port: int | None = None) -> None:
        from x402 import x402ResourceServerSync
        from x402.extensions.bazaar import DeclareMcpDiscoveryConfig, declare_mcp_discovery_extension
        from x402.http import HTTPFacilitatorClientSync
        from x402.mcp import ResourceInfo, SyncPaymentWrapperConfig, create_payment_wrapper_sync
        from x402.mechanisms.svm.exact import ExactSvmServerScheme
        from x402.schemas import ResourceConfig

        from tests.e2e.x402_merchants import paywarden_headers

        facilitator = HTTPFacilitatorClientSync({"url": facilitator_url, "create_headers": paywarden_headers(api_key)})
        resource_server = x402ResourceServerSync(facilitator)
        resource_server.register("solana:*", ExactSvmServerScheme())
        resource_server.initialize()
        accepts = resource_server.build_payment_requirements(ResourceConfig(
            scheme="exact", pay_to=pay_to, price=f"${price / 1_000_000}", network=network))
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        schema = {"type": "object", "properties": {"symbol": {"type": "string"}}, "required": ["symbol"]}
        paid = create_payment_wrapper_sync(resource_server, SyncPaymentWrapperConfig(
            accepts=accepts, resource=ResourceInfo(url=self.url, description="A premium stock quote"),
            extensions=declare_mcp_discovery_extension(DeclareMcpDiscoveryConfig(
                tool_name="premium_quote", description="A premium stock quote", input_schema=schema,
                transport="streamable-http"))))
        handler = paid(lambda args, _: {"content": [{"type": "text", "text": f"{args['symbol']}: 42.00"}]})
        self.runs = 0
        server = MCPServer("quotes")

        @server.tool(description="A premium stock quote")
        def premium_quote(symbol: str, ctx: Context) -> CallToolResult:
            self.runs += 1
            meta = dict(ctx.request_context.meta or {})
            done = handler({"symbol": symbol}, {"_meta": meta, "toolName": "premium_quote"})
            return CallToolResult(content=done.content, isError=done.is_error,
                                  structuredContent=done.structured_content, _meta=done.meta or None)

        self.app = server.streamable_http_app(json_response=True)
