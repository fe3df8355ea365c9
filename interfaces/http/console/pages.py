"""The console's pages: Jinja2 templates rendered from the read models; each form posts to the same application
command the JSON API calls, and a refused form is shown again with the error beside its field. No JavaScript
needed (console.js only adds a copy button)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Generic

import falcon
from jinja2 import Environment, PackageLoader, select_autoescape
from marshmallow import ValidationError

from application.proxy_services import ProxyServices
from domain.merchant import MerchantConflictError, MerchantError, UnknownObjectError
from domain.money import usdc
from domain.networks import NETWORKS, KeyEnv
from interfaces.http.console import chart
from interfaces.http.console.api import BadCredentials, Login, delist, own_listings
from interfaces.http.console.collaborators import Account, C, Catalog, Overview, Passwords, mount
from interfaces.http.console.formats import moment, money, network_name, plural
from interfaces.http.console.security import Throttled
from projections.catalog import search_resources
from projections.catalog_search import CursorError, Key, fingerprint, query_problem
from projections.key_use import with_last_use

STATIC = Path(__file__).parent / "static"
SEARCH_PAGE = 20  # results per page of the Discovery page's catalog search


def templates() -> Environment:
    env = Environment(loader=PackageLoader("interfaces.http.console", "templates"),
                      autoescape=select_autoescape(["html"]), trim_blocks=True, lstrip_blocks=True)
    env.globals.update(usdc=usdc, plural=plural, money=money, network_name=network_name)
    env.filters["moment"] = moment
    return env


def form_of(req: falcon.Request) -> dict[str, str]:
    media = req.get_media(default_when_empty={}) or {}
    return {k: (v[-1] if isinstance(v, list) else str(v)) for k, v in media.items()} if isinstance(media, dict) else {}


def refusal(failure: Exception) -> tuple[str, dict[str, str], str]:
    """(status, field errors, page-level problem) of a refused form."""
    if isinstance(failure, ValidationError):
        messages = failure.messages if isinstance(failure.messages, dict) else {}
        return falcon.HTTP_400, {k: " ".join(map(str, v)) if isinstance(v, list) else str(v)
                                 for k, v in messages.items()}, ""
    assert isinstance(failure, MerchantError)
    status = (falcon.HTTP_404 if isinstance(failure, UnknownObjectError) else
              falcon.HTTP_409 if isinstance(failure, MerchantConflictError) else falcon.HTTP_400)
    if failure.field and failure.field not in ("prefix", "id", "token"):
        return status, {failure.field: str(failure)}, ""
    return status, {}, str(failure)


NOTICES = {
    "revoked": "The key is revoked: requests with it are refused from now on.",
    "enabled": "Capability enabled.",
    "disabled": "Capability disabled.",
    "added": "Domain added: publish the record below, then press Verify.",
    "removed": "Domain removed.",
    "discovery": "Discovery setting saved.",
    "delisted": "The listing is removed from the catalog.",
    "confirmed": "The catalog shows what you confirmed.",
}


class Page(Generic[C]):
    """Base of the page resources: renders a template with the session and the navigation. It has no responders:
    each page defines its own, taking its route's parameters (`/payments/{payment_id}`), so no subclass changes a
    base's responder signature, and a URL whose class defines no `on_get` (a form's target: log out, revoke,
    delete, ...) is a 405 with Allow rather than a page rendered without its parameters."""

    template = ""
    title = ""
    active = ""
    notices: Mapping[str, str] = NOTICES  # ?done=<name> after a command: the line shown on the page it lands on

    def __init__(self, c: C, env: Environment) -> None:
        self._c, self._env = c, env

    def render(self, req: falcon.Request, resp: falcon.Response, status: str = falcon.HTTP_200,
               **context: Any) -> None:
        context.setdefault("errors", {})
        context.setdefault("form", {})
        resp.status, resp.content_type = status, falcon.MEDIA_HTML
        resp.text = self._env.get_template(self.template).render(
            session=req.context.session, title=self.title, active=self.active, **context)

    def notice(self, req: falcon.Request) -> str | None:
        done = req.get_param("done")
        return self.notices.get(done) if done else None


class ContextPage(Page[C]):
    """A page of a URL without parameters (`/keys`, `/domains`, ...): GET renders its `context`, and a refused
    form is shown again with it."""

    def context(self, req: falcon.Request) -> dict[str, Any]:
        return {}

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.render(req, resp, notice=self.notice(req), **self.context(req))

    def refused(self, req: falcon.Request, resp: falcon.Response, failure: Exception, form: dict[str, str]) -> None:
        status, errors, problem = refusal(failure)
        self.render(req, resp, status, errors=errors, problem=problem, form=form, **self.context(req))


class LoginPage(Page[Login]):
    route = "/login"
    public = csrf_exempt = True
    template, title = "login.html", "Log in"

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        if req.context.session is not None:
            raise falcon.HTTPSeeOther("/")
        self.render(req, resp, email="")

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        form = form_of(req)
        try:
            self._c(req, resp, form.get("email", ""), form.get("password", ""))
        except BadCredentials:
            return self.render(req, resp, falcon.HTTP_401, email=form.get("email", ""),
                               problem="Wrong email or password.")
        except Throttled as throttled:
            resp.set_header("Retry-After", str(throttled.retry_after))
            return self.render(req, resp, falcon.HTTP_429, email=form.get("email", ""),
                               problem=f"Too many failed logins. Try again in {throttled.retry_after} seconds.")
        raise falcon.HTTPSeeOther("/")


class LogoutPage(Page[Login]):
    route = "/logout"
    public = True

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        self._c.logout(req, resp)
        raise falcon.HTTPSeeOther("/login")


class LogoutEverywherePage(LogoutPage):
    """Ends every session of this login, in every browser and on every host."""

    route = "/logout-everywhere"
    public = False

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        self._c.logout(req, resp, everywhere=True)
        raise falcon.HTTPSeeOther("/login")


class PasswordPage(Page[Passwords]):
    route = "/password"
    public = csrf_exempt = True  # the one-time token in the form is the proof
    template, title = "password.html", "Set your password"

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.render(req, resp, token=req.get_param("token") or "")

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        form = form_of(req)
        try:
            email = self._c.merchants.set_password_with_token(form.get("token", ""), form.get("password", ""))
        except MerchantError as refused:
            status, errors, problem = refusal(refused)
            if refused.field == "token":
                errors = {"token": str(refused)}
            return self.render(req, resp, status, token=form.get("token", ""), errors=errors, problem=problem)
        self._c.sessions.end_all(email)  # a new password ends every session of the login
        self.render(req, resp, done=True)


class OverviewPage(ContextPage[Overview]):
    """Today's figures and the last payments, from the payments read model (projections/payment_list.py); the
    settled USDC of today and the charts from the payment_volume read model (projections/payment_volume.py)."""
    route = "/"

    template, title, active = "overview.html", "Overview", "/"

    def context(self, req: falcon.Request) -> dict[str, Any]:
        merchant_id, view = req.context.session.merchant_id, self._c.payment_list
        volume = self._c.volume(req.context.session.merchant)  # the merchant's services by name
        now = datetime.now(UTC)
        today = view.get_day(merchant_id, now.strftime("%Y-%m-%d")) if view is not None else None
        charts = [chart.chart(volume, merchant_id, span, now) for span in (chart.DAY, chart.HOUR)] \
            if volume is not None else []
        return {
            "today": {"verifies": today.verifies, "settles": today.settles} if today else None,
            # today's settled USDC: the last column of the daily chart, so the tile and the chart never disagree
            "settled_today": charts[0].columns[-1].settled if charts else None,
            "payments": (last := view.get_page(merchant_id=merchant_id, limit=10).items if view is not None else None),
            "services": volume.get_services([p.payment_id for p in last]) if volume is not None and last else {},
            "active_keys": sum(1 for k in self._c.accounts.list_keys(merchant_id) if not k.revoked_at),
            "fee_payers": self._c.fee_payers(), "charts": charts, "books": self._c.books(),
        }


class KeysPage(ContextPage[Account]):
    route, template, title, active = "/keys", "keys.html", "API keys", "/keys"

    def __init__(self, c: Account, env: Environment, proxies: ProxyServices) -> None:
        super().__init__(c, env)
        self._proxies = proxies  # the services a new key may be scoped to

    def context(self, req: falcon.Request) -> dict[str, Any]:
        services = self._proxies.list_services(req.context.session.merchant)
        keys = self._c.accounts.list_keys(req.context.session.merchant_id)
        return {"keys": with_last_use(keys, self._c.key_uses),
                "services": [{"id": str(x.id), "name": x.name, "slug": x.slug} for x in services],
                "service_names": {str(x.id): f"{x.name} ({x.slug})" for x in services}}

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        form, s = form_of(req), req.context.session
        try:
            env = form.get("env", "")
            if env not in {e.value for e in KeyEnv}:
                raise MerchantError("choose test or live", field="env")
            api_key, _ = self._c.merchants.create_key(s.merchant, KeyEnv(env), label=form.get("label", ""),
                                                      service=form.get("service", ""))
        except MerchantError as failure:
            return self.refused(req, resp, failure, form)
        self.render(req, resp, falcon.HTTP_201, new_key=api_key, **self.context(req))


class KeyRevokePage(Page[Account]):
    route = "/keys/{prefix}/revoke"

    def on_post(self, req: falcon.Request, resp: falcon.Response, prefix: str) -> None:
        s = req.context.session
        if self._c.accounts.get_merchant_key(s.merchant_id, prefix) is None:
            raise UnknownObjectError(f"no key {prefix}", field="prefix")
        self._c.merchants.revoke_key(prefix, s.merchant)
        raise falcon.HTTPSeeOther("/keys?done=revoked")


class CapabilitiesPage(ContextPage[Account]):
    route, template, title, active = "/capabilities", "capabilities.html", "Capabilities", "/capabilities"

    def context(self, req: falcon.Request) -> dict[str, Any]:
        served = self._c.merchants.settings.served_networks
        networks = [{"caip2": n.caip2, "name": n.name, "served": n.caip2 in served} for n in NETWORKS.values()]
        networks.sort(key=lambda n: (not n["served"], n["name"]))
        return {"capabilities": self._c.accounts.list_capabilities(req.context.session.merchant_id),
                "networks": networks}

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        form, s = form_of(req), req.context.session
        try:
            enabled = self._c.merchants.enable_capability(s.merchant, form.get("network", ""),
                                                          form.get("asset", "").strip() or None,
                                                          form.get("scheme", "exact"))
        except MerchantError as failure:
            return self.refused(req, resp, failure, form)
        notice = "Capability enabled." + "".join(f" Warning: {w}." for w in enabled.warnings)
        self.render(req, resp, falcon.HTTP_201, notice=notice, **self.context(req))


class CapabilityDisablePage(Page[Account]):
    route = "/capabilities/{cap_id}/disable"

    def on_post(self, req: falcon.Request, resp: falcon.Response, cap_id: str) -> None:
        self._c.merchants.disable_capability(req.context.session.merchant, cap_id)
        raise falcon.HTTPSeeOther("/capabilities?done=disabled")


def domains_context(c: Account, req: falcon.Request) -> dict[str, Any]:
    """What the domains page shows: its GET, and the answer of a command on one domain, render it."""
    return {"domains": c.accounts.list_domains(req.context.session.merchant_id)}


class DomainsPage(ContextPage[Account]):
    route, template, title, active = "/domains", "domains.html", "Domains", "/domains"

    def context(self, req: falcon.Request) -> dict[str, Any]:
        return domains_context(self._c, req)

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        form = form_of(req)
        try:
            self._c.merchants.add_domain(req.context.session.merchant, form.get("domain", ""))
        except MerchantError as failure:
            return self.refused(req, resp, failure, form)
        raise falcon.HTTPSeeOther("/domains?done=added")


class DomainActionPage(Page[Account]):
    """POST /domains/{domain}/verify|remove: one command; a conflict (not verifiable yet, still in use) is a 409 on
    the domains page."""

    route, template, title, active = "/domains/{domain}/{action}", "domains.html", "Domains", "/domains"

    def on_post(self, req: falcon.Request, resp: falcon.Response, domain: str, action: str) -> None:
        command = {"verify": self._c.merchants.verify_domain, "remove": self._c.merchants.remove_domain}.get(action)
        if command is None:
            raise falcon.HTTPNotFound()
        try:
            command(req.context.session.merchant, domain)
        except MerchantConflictError as failure:
            problem = f"{domain} is not verified yet: {failure}" if action == "verify" else str(failure)
            return self.render(req, resp, falcon.HTTP_409, problem=problem, **domains_context(self._c, req))
        if action == "remove":
            raise falcon.HTTPSeeOther("/domains?done=removed")
        self.render(req, resp, notice=f"{domain} is verified.", **domains_context(self._c, req))


class DiscoveryPage(ContextPage[Account]):
    route, template, title, active = "/discovery", "discovery.html", "Discovery", "/discovery"

    def __init__(self, c: Account, env: Environment, catalog: Catalog) -> None:
        super().__init__(c, env)
        self._catalog = catalog

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        context = self.context(req)
        self.render(req, resp, context.pop("status", falcon.HTTP_200), notice=self.notice(req), **context)

    def context(self, req: falcon.Request) -> dict[str, Any]:
        merchant_id = req.context.session.merchant_id
        merchant = self._c.accounts.get_merchant(merchant_id)
        return {"enabled": bool(merchant and merchant.discovery_enabled),
                "listings": own_listings(self._catalog, merchant_id), **self._search(req)}

    def _search(self, req: falcon.Request) -> dict[str, Any]:
        """The catalog searched as `GET /discovery/search` searches it (the same rule, ranking and cursor)."""
        query = (req.get_param("query") or "").strip()
        if not query or self._catalog.catalog is None:
            return {"query": query}
        problem = query_problem(query)
        if problem:
            return {"query": query, "search_error": problem}
        searched = fingerprint(query, "console")
        cursor = req.get_param("cursor")
        try:
            after = Key.from_token(cursor, searched, self._catalog.cursor_key) if cursor is not None else None
        except CursorError as bad:  # the API's rule and code, shown beside the field with the same 400
            return {"query": query, "search_error": f"invalid_cursor: cursor: {bad}", "status": falcon.HTTP_400}
        page = search_resources(self._catalog.catalog, query, limit=SEARCH_PAGE, after=after)
        return {"query": query, "results": page.items,
                "next": page.cursor.token(searched, self._catalog.cursor_key) if page.cursor else None}

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        enabled = form_of(req).get("enabled")
        if enabled not in ("true", "false"):
            raise MerchantError("enabled must be true or false", field="enabled")
        self._c.merchants.set_discovery(req.context.session.merchant, enabled == "true")
        raise falcon.HTTPSeeOther("/discovery?done=discovery")


class DelistPage(Page[Catalog]):
    route = "/listings/{listing_id}/delist"

    def on_post(self, req: falcon.Request, resp: falcon.Response, listing_id: str) -> None:
        delist(self._c, req.context.session.merchant_id, listing_id)
        raise falcon.HTTPSeeOther("/discovery?done=delisted")


class Favicon:
    """`/favicon.ico` for browsers that ask for it whatever the page says: the icon shipped in static/."""

    route, public = "/favicon.ico", True

    def __init__(self, *_: Any) -> None:
        pass

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        raise falcon.HTTPMovedPermanently("/static/favicon.svg")


def add_routes(app: falcon.App, login: Login, account: Account, catalog: Catalog, *, passwords: Passwords,
               overview: Overview, proxies: ProxyServices) -> None:
    env = templates()
    mount(app, (Favicon,))
    mount(app, (LoginPage, LogoutPage, LogoutEverywherePage), login, env)
    mount(app, (PasswordPage,), passwords, env)
    mount(app, (OverviewPage,), overview, env)
    mount(app, (KeysPage,), account, env, proxies)
    mount(app, (KeyRevokePage, CapabilitiesPage, CapabilityDisablePage, DomainsPage, DomainActionPage), account, env)
    mount(app, (DiscoveryPage,), account, env, catalog)
    mount(app, (DelistPage,), catalog, env)
    app.add_static_route("/static", str(STATIC))
