"""The console's pages for proxy services and their routes: each form posts to the same `ProxyServices` command the
JSON API calls (services.py); a refused form is shown again with the error beside its field."""

from __future__ import annotations

from typing import Any

import falcon
from jinja2 import Environment

from application.proxy_services import ServiceNotFoundError
from domain.errors import DomainError
from domain.proxy_service import ProxyServiceConflictError, ProxyServiceError
from domain.routes import RoutePatternError
from domain.slugs import SlugError
from interfaces.http.console.collaborators import ServicePages, default_pay_to, mount
from interfaces.http.console.pages import Page, form_of, templates
from interfaces.http.console.representation import route_json, service_json
from interfaces.http.console.route_form import route_terms

NOTICES = {
    "created": "Service created: requests to its gateway URL are now charged and forwarded.",
    "saved": "Saved.", "activated": "The service takes traffic again.",
    "deactivated": "The service is inactive: its gateway URL answers 503 and forwards nothing.",
    "deleted": "Service deleted.", "route-added": "Route added.", "route-deleted": "Route deleted.",
    "tool-priced": "Tool priced: its calls are now paid.", "tool-unpriced": "The tool is free again.",
}


def _refusal(failure: DomainError) -> tuple[str, dict[str, str], str]:
    if isinstance(failure, ServiceNotFoundError):
        raise falcon.HTTPNotFound()
    status = falcon.HTTP_409 if isinstance(failure, ProxyServiceConflictError) else falcon.HTTP_400
    field = getattr(failure, "field", None) or ("path" if isinstance(failure, RoutePatternError) else
                                                "slug" if isinstance(failure, SlugError) else None)
    return (status, {field: str(failure)}, "") if field and field != "routeId" else (status, {}, str(failure))


class _ServicePage(Page[ServicePages]):
    active, notices = "/services", NOTICES

    def __init__(self, c: ServicePages, env: Environment) -> None:
        super().__init__(c, env)
        self._proxies = c.proxies

    def merchant(self, req: falcon.Request) -> str:
        return req.context.session.merchant

    def refused(self, req: falcon.Request, resp: falcon.Response, failure: DomainError, form: dict[str, str],
                **context: Any) -> None:
        status, errors, problem = _refusal(failure)
        self.render(req, resp, status, errors=errors, problem=problem, form=form, **context)


class ServicesPage(_ServicePage):
    route, template, title = "/services", "services.html", "Services"

    def context(self, req: falcon.Request) -> dict[str, Any]:
        merchant = self.merchant(req)
        services = [service_json(s, self._c.proxy_url) for s in self._proxies.list_services(merchant)]
        # The sandbox merchant's `localhost` is among them (pre-verified by `up`): no other merchant's is.
        domains = list(self._c.accounts.list_verified_domains(req.context.session.merchant_id))
        return {"services": services, "domains": domains, "sandbox": self._proxies.sandbox}

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.render(req, resp, notice=self.notice(req), **self.context(req))

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        form = form_of(req)
        auth = (form["auth_header"], form.get("auth_value", "")) if form.get("auth_header") else None
        try:
            port = int(form["port"]) if form.get("port") else None
            service = self._proxies.create_service(self.merchant(req), form.get("name", ""), form.get("domain") or None,
                                                   form.get("subdomain", ""), form.get("path_suffix", ""), port,
                                                   upstream_auth=auth, kind=form.get("kind") or "http")
        except ValueError:
            return self.refused(req, resp, ProxyServiceError("a port is a number", field="port"), form,
                                **self.context(req))
        except DomainError as failure:
            form.pop("auth_value", None)  # a credential is never echoed back into the page
            return self.refused(req, resp, failure, form, **self.context(req))
        raise falcon.HTTPSeeOther(f"/services/{service.id}?done=created")


class _OneServicePage(_ServicePage):
    """Base of the pages under `/services/{service_id}`: the service page's template and context, which a refused
    form of any of them renders; each defines its own responders."""

    template, title = "service.html", "Service"

    def context_of(self, req: falcon.Request, service_id: str) -> dict[str, Any]:
        merchant = self.merchant(req)
        service = self._proxies.get_service(merchant, service_id)
        context = {"service": service_json(service, self._c.proxy_url),
                   "routes": [route_json(r) for r in service.routes.values()],
                   "default_pay_to": default_pay_to(self._proxies, merchant, self._c.sandbox_wallet) or ""}
        if service.kind == "mcp":
            from interfaces.http.console.tool_pages import tool_rows

            context.update(tool_rows(self._c, service))
        return context


class ServicePage(_OneServicePage):
    route = "/services/{service_id}"

    def on_get(self, req: falcon.Request, resp: falcon.Response, service_id: str) -> None:
        try:
            context = self.context_of(req, service_id)
        except ServiceNotFoundError:
            raise falcon.HTTPNotFound() from None
        self.render(req, resp, notice=self.notice(req), **context)

    def on_post(self, req: falcon.Request, resp: falcon.Response, service_id: str) -> None:
        """The edit form: name and base URL (a new base URL regenerates the slug); upstream auth set or cleared."""
        form, merchant, proxies = form_of(req), self.merchant(req), self._proxies
        try:
            current = proxies.get_service(merchant, service_id)
            if form.get("name") and form["name"] != current.name:
                proxies.rename(merchant, service_id, form["name"])
            port = int(form["port"]) if form.get("port") else current.base.port
            proxies.change_base_url(merchant, service_id, form.get("domain") or current.base.domain,
                                    form.get("subdomain", ""), form.get("path_suffix", ""), port)
            if form.get("clear_auth"):
                proxies.clear_upstream_auth(merchant, service_id)
            elif form.get("auth_header") and form.get("auth_value"):
                proxies.set_upstream_auth(merchant, service_id, form["auth_header"], form["auth_value"])
        except ServiceNotFoundError:
            raise falcon.HTTPNotFound() from None
        except (DomainError, ValueError) as failure:
            form.pop("auth_value", None)
            error = failure if isinstance(failure, DomainError) else ProxyServiceError("a port is a number",
                                                                                        field="port")
            return self.refused(req, resp, error, form, **self.context_of(req, service_id))
        raise falcon.HTTPSeeOther(f"/services/{service_id}?done=saved")


class ServiceActivePage(_ServicePage):
    route = "/services/{service_id}/active"

    def on_post(self, req: falcon.Request, resp: falcon.Response, service_id: str) -> None:
        active = form_of(req).get("active") == "on"
        try:
            self._proxies.set_active(self.merchant(req), service_id, active)
        except ServiceNotFoundError:
            raise falcon.HTTPNotFound() from None
        raise falcon.HTTPSeeOther(f"/services/{service_id}?done={'activated' if active else 'deactivated'}")


class ServiceDeletePage(_OneServicePage):
    route = "/services/{service_id}/delete"

    def on_post(self, req: falcon.Request, resp: falcon.Response, service_id: str) -> None:
        try:
            self._proxies.delete_service(self.merchant(req), service_id)
        except ServiceNotFoundError:
            raise falcon.HTTPNotFound() from None
        except DomainError as failure:
            return self.refused(req, resp, failure, {}, **self.context_of(req, service_id))
        raise falcon.HTTPSeeOther("/services?done=deleted")


class RoutesPage(_OneServicePage):
    route = "/services/{service_id}/routes"

    def on_post(self, req: falcon.Request, resp: falcon.Response, service_id: str) -> None:
        form = form_of(req)
        try:
            terms = route_terms(form, production=not self._c.sandbox)
            self._proxies.add_route(self.merchant(req), service_id, method=form.get("method") or "GET",
                                    path=form.get("path", ""), pay_to=form.get("pay_to", ""),
                                    network_id=form.get("network") or None, **terms)
        except ServiceNotFoundError:
            raise falcon.HTTPNotFound() from None
        except DomainError as failure:
            if isinstance(failure, ProxyServiceError) and failure.field == "accessSeconds":  # the form's name for it
                failure.field = "access_seconds"
            return self.refused(req, resp, failure, form, **self.context_of(req, service_id))
        raise falcon.HTTPSeeOther(f"/services/{service_id}?done=route-added")


class RouteDeletePage(_ServicePage):
    route = "/services/{service_id}/routes/{route_id}/delete"

    def on_post(self, req: falcon.Request, resp: falcon.Response, service_id: str, route_id: str) -> None:
        try:
            self._proxies.remove_route(self.merchant(req), service_id, route_id)
        except ServiceNotFoundError:
            raise falcon.HTTPNotFound() from None
        except ProxyServiceError:
            raise falcon.HTTPNotFound() from None
        raise falcon.HTTPSeeOther(f"/services/{service_id}?done=route-deleted")


def add_routes(app: falcon.App, c: ServicePages) -> None:
    mount(app, (ServicesPage, ServicePage, ServiceActivePage, ServiceDeletePage, RoutesPage, RouteDeletePage), c,
          templates())

