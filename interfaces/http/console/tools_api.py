"""The console's JSON API for an `mcp` service's tool prices (docs/mcp.md), beside the services and routes API and
under the same session, CSRF and ownership rules (another merchant's service is a 404 like an unknown one).

`GET /api/v1/services/{id}/tools` → `{"tools": [...]}`, the priced tools; with `?upstream=true` also the tools the
service's MCP server lists (`tools/list`, through the proxy's outbound rules) as `"upstream": [{"name",
"description", "priced"}]`, or `"upstream": null` and `"upstreamError"` when it could not be asked.
`PUT /api/v1/services/{id}/tools/{name}` `{"priceUsdc"|"price","payTo","network"?,"asset"?,"description"?,
"maxTimeoutSeconds"?,"inputSchema"?,"upstream"?}` prices a tool (201; 200 when it replaces the tool's price);
`DELETE /api/v1/services/{id}/tools/{name}` makes it free (204; 404 when it is not priced). Each asks the
`ProxyServices` command the CLI and the console's pages ask (`price_tool` with the server's listing, `unprice_tool`).
"""

from __future__ import annotations

from typing import Any

import falcon
from marshmallow import fields

from domain.errors import DomainError
from domain.mcp_tools import KIND_MCP
from domain.proxy_service import ProxyService
from interfaces.http.console.api import body, session_of
from interfaces.http.console.collaborators import Resource, ServiceTools, mount
from interfaces.http.console.representation import tool_json
from interfaces.http.console.services import PricedSchema


class ToolSchema(PricedSchema):
    inputSchema = fields.Dict(allow_none=True)  # noqa: N815 - the wire name; its size checked by the price's rules
    # Ask the MCP server for the tool (it must list it; its description and input schema are the default): `false`
    # prices a tool the server cannot be asked for, without them.
    upstream = fields.Boolean(load_default=True)


class ToolsResource(Resource[ServiceTools]):
    route = "/api/v1/services/{service_id}/tools"

    def on_get(self, req: falcon.Request, resp: falcon.Response, service_id: str) -> None:
        service = self._c.proxies.get_service(session_of(req).merchant, service_id)
        resp.media = {"tools": [tool_json(t) for t in service.tools.values()]}
        if req.get_param_as_bool("upstream", default=False):
            try:
                listed = _listed(self._c, service)
            except DomainError as failed:  # the server out of reach, refusing, or not speaking MCP
                resp.media.update(upstream=None, upstreamError=str(failed))
                return
            if listed is None:
                resp.media.update(upstream=None, upstreamError="an http service has no MCP server to ask")
                return
            resp.media["upstream"] = [{"name": t["name"], "description": str(t.get("description") or ""),
                                       "priced": t["name"] in service.tools} for t in listed]


class ToolResource(Resource[ServiceTools]):
    route = "/api/v1/services/{service_id}/tools/{name}"

    def on_put(self, req: falcon.Request, resp: falcon.Response, service_id: str, name: str) -> None:
        merchant, command = session_of(req).merchant, body(req, ToolSchema())
        service = self._c.proxies.get_service(merchant, service_id)
        terms = {wire_name: command[wire] for wire, wire_name in (
            ("description", "description"), ("maxTimeoutSeconds", "max_timeout_seconds"),
            ("inputSchema", "input_schema")) if wire in command}
        replaced = name in service.tools
        tool = self._c.proxies.price_tool(merchant, service_id, name=name, price=command["price"],
                                          pay_to=command["payTo"], network_id=command.get("network"),
                                          asset=command.get("asset"),
                                          listed=_listed(self._c, service) if command["upstream"] else None, **terms)
        resp.status, resp.media = (falcon.HTTP_200 if replaced else falcon.HTTP_201), tool_json(tool)

    def on_delete(self, req: falcon.Request, resp: falcon.Response, service_id: str, name: str) -> None:
        self._c.proxies.unprice_tool(session_of(req).merchant, service_id, name)
        resp.status = falcon.HTTP_204


def _listed(c: ServiceTools, service: ProxyService) -> list[dict[str, Any]] | None:
    """The tools the service's MCP server lists; None for a service that is not an MCP server's (the command then
    refuses the price for its kind) or when no server can be asked here."""
    if service.kind != KIND_MCP or c.mcp_tools is None:
        return None
    return c.mcp_tools(service)


def add_routes(app: falcon.App, c: ServiceTools) -> None:
    mount(app, (ToolsResource, ToolResource), c)

