"""The console's pages for an `mcp` service's tool prices: its service page lists the tools its MCP server offers
(`tools/list`, asked through the proxy's outbound rules: `ServicePages.mcp_tools`) with their prices; a tool is
priced (its description and input schema copied from the server's list) or made free again. Each form posts to
the same `ProxyServices` command the CLI calls; a refused form is shown again with the error beside its field."""

from __future__ import annotations

from typing import Any

import falcon

from application.proxy_services import ServiceNotFoundError
from domain.errors import DomainError
from domain.money import AmountError, is_usdc, parse_usdc, usdc
from domain.proxy_service import ProxyService, ProxyServiceError
from interfaces.http.console.collaborators import ServicePages, mount
from interfaces.http.console.pages import form_of, templates
from interfaces.http.console.service_pages import _OneServicePage


def tool_rows(c: ServicePages, service: ProxyService) -> dict[str, Any]:
    """The service page's tools: the server's list (or why it could not be asked) and the priced ones."""
    priced = [{"name": t.name, "price": str(t.price), "priceUsdc": usdc(t.price, grouped=False)
               if is_usdc(t.network, t.asset) else None, "asset": t.asset, "payTo": t.pay_to,
               "description": t.description} for t in service.tools.values()]
    listed: list[dict[str, Any]] = []
    problem = ""
    if c.mcp_tools is not None:
        try:
            listed = [{"name": t["name"], "description": str(t.get("description") or ""),
                       "priced": t["name"] in service.tools} for t in c.mcp_tools(service)]
        except DomainError as failed:
            problem = str(failed)
    return {"priced_tools": priced, "upstream_tools": listed, "tools_problem": problem}


class ToolsPage(_OneServicePage):
    route = "/services/{service_id}/tools"

    def on_post(self, req: falcon.Request, resp: falcon.Response, service_id: str) -> None:
        form, merchant = form_of(req), self.merchant(req)
        try:
            service = self._proxies.get_service(merchant, service_id)
            listed = self._c.mcp_tools(service) if self._c.mcp_tools else None
            terms = {"description": form["description"]} if form.get("description") else {}
            try:
                price = parse_usdc(form.get("price", ""))
            except AmountError as refused:
                raise ProxyServiceError(str(refused), field="price") from None
            self._proxies.price_tool(merchant, service_id, name=form.get("tool", ""), price=price,
                                     pay_to=form.get("pay_to", ""), network_id=form.get("network") or None,
                                     listed=listed, **terms)
        except ServiceNotFoundError:
            raise falcon.HTTPNotFound() from None
        except DomainError as failure:
            return self.refused(req, resp, failure, form, **self.context_of(req, service_id))
        raise falcon.HTTPSeeOther(f"/services/{service_id}?done=tool-priced")


class ToolUnpricePage(_OneServicePage):
    route = "/services/{service_id}/tools/{name}/unprice"

    def on_post(self, req: falcon.Request, resp: falcon.Response, service_id: str, name: str) -> None:
        try:
            self._proxies.unprice_tool(self.merchant(req), service_id, name)
        except (ServiceNotFoundError, ProxyServiceError):
            raise falcon.HTTPNotFound() from None
        raise falcon.HTTPSeeOther(f"/services/{service_id}?done=tool-unpriced")


def add_routes(app: falcon.App, c: ServicePages) -> None:
    mount(app, (ToolsPage, ToolUnpricePage), c, templates())
