"""The console's JSON API for proxy services and their routes (docs/proxy.md), beside the console's own resources.

`POST /api/v1/services` `{"name","kind"? ("http" or "mcp"),"domain"?,"subdomain"?,"pathSuffix"?,"port"?
(sandbox localhost),"upstreamAuth"?:{"header","value"}}` → 201 `{"id","name","type":"Proxy","kind","baseUrl","slug",
"gatewayUrl","active",…}`;
`GET /api/v1/services[/{id}]`; `PATCH /api/v1/services/{id}` with any of name, active, domain, subdomain,
pathSuffix, port, upstreamAuth (null clears it), bodyLimit, passCookies; `DELETE /api/v1/services/{id}` (409
while routes exist); `POST|GET /api/v1/services/{id}/routes` (a route's price as `priceUsdc`, "0.007", or as before
`price` in atomic units, "7000"; answered with both), `DELETE /api/v1/services/{id}/routes/{routeId}`. The
upstream credential is write-only: answers say only which header carries one.
"""

from __future__ import annotations

from typing import Any

import falcon
from marshmallow import Schema, ValidationError, fields, post_load, validate, validates_schema

from application.proxy_services import ProxyServices
from domain.money import AmountError, parse_usdc
from interfaces.http.console.api import body, session_of
from interfaces.http.console.collaborators import mount
from interfaces.http.console.representation import route_json, service_json


class UpstreamAuthSchema(Schema):
    header = fields.String(required=True, validate=validate.Length(1, 64))
    value = fields.String(required=True, validate=validate.Length(1, 4096))


class ServiceSchema(Schema):
    name = fields.String(validate=validate.Length(1, 100))
    domain = fields.String(validate=validate.Length(1, 253))
    subdomain = fields.String(validate=validate.Length(0, 253))
    pathSuffix = fields.String(validate=validate.Length(0, 512))  # noqa: N815 - the wire name
    port = fields.Integer(validate=validate.Range(1, 65535), allow_none=True)
    upstreamAuth = fields.Nested(UpstreamAuthSchema, allow_none=True)  # noqa: N815
    active = fields.Boolean()
    bodyLimit = fields.Integer(validate=validate.Range(1, 10 * 1024 * 1024))  # noqa: N815
    passCookies = fields.Boolean()  # noqa: N815


class NewServiceSchema(ServiceSchema):
    kind = fields.String(load_default="http", validate=validate.OneOf(("http", "mcp")))  # chosen once (docs/mcp.md)

    @validates_schema
    def _named(self, data: dict[str, Any], **_: Any) -> None:
        if "name" not in data:
            raise ValidationError("a service needs a name", "name")


class PricedSchema(Schema):
    """What a route and a tool are priced with (tools_api.py prices tools with the same fields)."""

    # The price in USDC ("0.007", at most 6 decimals) or, as before, in atomic units ("7000"): exactly one.
    priceUsdc = fields.String(validate=validate.Length(1, 40))  # noqa: N815 - the wire name
    price = fields.String(validate=validate.Regexp(r"^[1-9][0-9]{0,15}$", error="a whole number of atomic units"))
    payTo = fields.String(required=True, validate=validate.Length(32, 44))  # noqa: N815
    network = fields.String(validate=validate.Length(1, 100))
    asset = fields.String(validate=validate.Length(32, 44))
    description = fields.String(validate=validate.Length(0, 500))
    maxTimeoutSeconds = fields.Integer(validate=validate.Range(1, 3600))  # noqa: N815

    @validates_schema
    def _priced(self, data: dict[str, Any], **_: Any) -> None:
        if ("price" in data) == ("priceUsdc" in data):
            raise ValidationError("give the price once: priceUsdc (in USDC) or price (in atomic units)", "priceUsdc")
        if "priceUsdc" in data:
            try:
                parse_usdc(data["priceUsdc"])
            except AmountError as refused:
                raise ValidationError(str(refused), "priceUsdc") from None

    @post_load
    def _atomic(self, data: dict[str, Any], **_: Any) -> dict[str, Any]:
        data["price"] = parse_usdc(data.pop("priceUsdc")) if "priceUsdc" in data else int(data["price"])
        return data


class RouteSchema(PricedSchema):
    method = fields.String(load_default="GET", validate=validate.Length(1, 7))
    path = fields.String(required=True, validate=validate.Length(1, 512))
    mimeType = fields.String(validate=validate.Length(0, 100))  # noqa: N815
    settle = fields.String(validate=validate.OneOf(("after", "before")))
    access = fields.String(validate=validate.OneOf(("per-request", "once-paid")))
    accessSeconds = fields.Integer(allow_none=True)  # noqa: N815 - the wire name; checked by the route's rules
    bazaar = fields.Dict()


class _Base:
    def __init__(self, proxies: ProxyServices, proxy_url: str) -> None:
        self._proxies, self._proxy_url = proxies, proxy_url

    def _json(self, service: Any) -> dict[str, Any]:
        return service_json(service, self._proxy_url)


class ServicesResource(_Base):
    route = "/api/v1/services"

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        merchant = session_of(req).merchant
        resp.media = {"services": [self._json(s) for s in self._proxies.list_services(merchant)]}

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        merchant, command = session_of(req).merchant, body(req, NewServiceSchema())
        auth = command.get("upstreamAuth")
        service = self._proxies.create_service(
            merchant, command["name"], command.get("domain"), command.get("subdomain") or "",
            command.get("pathSuffix") or "", command.get("port"),
            upstream_auth=(auth["header"], auth["value"]) if auth else None, kind=command["kind"])
        resp.status, resp.media = falcon.HTTP_201, self._json(service)


class ServiceResource(_Base):
    route = "/api/v1/services/{service_id}"

    def on_get(self, req: falcon.Request, resp: falcon.Response, service_id: str) -> None:
        resp.media = self._json(self._proxies.get_service(session_of(req).merchant, service_id))

    def on_patch(self, req: falcon.Request, resp: falcon.Response, service_id: str) -> None:
        merchant, command = session_of(req).merchant, body(req, ServiceSchema())
        proxies = self._proxies
        current = proxies.get_service(merchant, service_id)
        service_id = str(current.id)  # a slug given changes with a base-URL edit
        if "name" in command:
            proxies.rename(merchant, service_id, command["name"])
        if any(k in command for k in ("domain", "subdomain", "pathSuffix", "port")):
            base = current.base
            proxies.change_base_url(merchant, service_id, command.get("domain", base.domain),
                                    command.get("subdomain", base.subdomain) or "",
                                    command.get("pathSuffix", base.path_suffix) or "",
                                    command.get("port", base.port))
        if "upstreamAuth" in command:
            auth = command["upstreamAuth"]
            if auth is None:
                proxies.clear_upstream_auth(merchant, service_id)
            else:
                proxies.set_upstream_auth(merchant, service_id, auth["header"], auth["value"])
        if "bodyLimit" in command:
            proxies.set_body_limit(merchant, service_id, command["bodyLimit"])
        if "passCookies" in command:
            proxies.set_pass_cookies(merchant, service_id, command["passCookies"])
        if "active" in command:
            proxies.set_active(merchant, service_id, command["active"])
        resp.media = self._json(proxies.get_service(merchant, service_id))

    def on_delete(self, req: falcon.Request, resp: falcon.Response, service_id: str) -> None:
        self._proxies.delete_service(session_of(req).merchant, service_id)
        resp.status = falcon.HTTP_204


class RoutesResource(_Base):
    route = "/api/v1/services/{service_id}/routes"

    def on_get(self, req: falcon.Request, resp: falcon.Response, service_id: str) -> None:
        service = self._proxies.get_service(session_of(req).merchant, service_id)
        resp.media = {"routes": [route_json(r) for r in service.routes.values()]}

    def on_post(self, req: falcon.Request, resp: falcon.Response, service_id: str) -> None:
        merchant, command = session_of(req).merchant, body(req, RouteSchema())
        terms = {name: command[wire] for wire, name in (
            ("description", "description"), ("mimeType", "mime_type"), ("maxTimeoutSeconds", "max_timeout_seconds"),
            ("settle", "settle"), ("bazaar", "bazaar"), ("access", "access"), ("accessSeconds", "access_seconds"))
            if wire in command}
        route = self._proxies.add_route(merchant, service_id, method=command["method"], path=command["path"],
                                        price=command["price"], pay_to=command["payTo"],
                                        network_id=command.get("network"), asset=command.get("asset"), **terms)
        resp.status, resp.media = falcon.HTTP_201, route_json(route)


class RouteResource(_Base):
    route = "/api/v1/services/{service_id}/routes/{route_id}"

    def on_delete(self, req: falcon.Request, resp: falcon.Response, service_id: str, route_id: str) -> None:
        self._proxies.remove_route(session_of(req).merchant, service_id, route_id)
        resp.status = falcon.HTTP_204


def add_routes(app: falcon.App, proxies: ProxyServices, proxy_url: str) -> None:
    mount(app, (ServicesResource, ServiceResource, RoutesResource, RouteResource), proxies, proxy_url)
