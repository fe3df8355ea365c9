"""The service scopes read model: each proxy service's slug, path suffix, kind, routes and priced tools, for keys
scoped to it.

A request with a scoped key reads its service here (one round trip) and never replays a ProxyService; so does
`GET /supported?service=<slug>`. Follows the ProxyServices log. Each route is kept whole (the `RouteAdded` event's
route, as JSON) and read back as the aggregate's own `Route`; each priced tool likewise (the `ToolPriced` event's
tool, read back as a `ToolPrice`; priced again, it keeps its place). A view of an earlier shape (without the
services' kind and the tools, or with a route's terms in columns of their own) is rebuilt from the event store
(projections/reshape.py).
"""

from __future__ import annotations

import json
from functools import singledispatchmethod
from typing import Any

from eventsourcing.persistence import Tracking
from eventsourcing.postgres import PostgresTrackingRecorder
from eventsourcing.projection import Projection
from eventsourcing.sqlite import SQLiteTrackingRecorder
from eventsourcing.utils import get_topic

from application.proxy_services import ProxyServices
from domain.mcp_tools import KIND_HTTP, ToolPrice
from domain.proxy_service import ProxyService, Route
from domain.scopes import ServiceScope
from projections.reshape import ReshapedView, Shape


class ServiceScopesView(ReshapedView):
    tables = (
        "CREATE TABLE IF NOT EXISTS service_scopes_services (service_id TEXT PRIMARY KEY, merchant TEXT NOT NULL, "
        "slug TEXT NOT NULL, path_suffix TEXT NOT NULL, deleted BOOLEAN NOT NULL, kind TEXT NOT NULL)",
        "CREATE INDEX IF NOT EXISTS service_scopes_slug ON service_scopes_services (slug)",
        "CREATE TABLE IF NOT EXISTS service_scopes_routes (service_id TEXT NOT NULL, route_id TEXT NOT NULL, "
        "position BIGINT NOT NULL, route TEXT NOT NULL, PRIMARY KEY (service_id, route_id))",
        "CREATE TABLE IF NOT EXISTS service_scopes_tools (service_id TEXT NOT NULL, name TEXT NOT NULL, "
        "position BIGINT NOT NULL, tool TEXT NOT NULL, PRIMARY KEY (service_id, name))",
    )
    # Every earlier shape lacks the services' kind (the first also kept a route's terms in columns of their own).
    shape = Shape(ProxyServices.name, ("service_scopes_services", "kind"),
                  ("service_scopes_services", "service_scopes_routes", "service_scopes_tools"))

    def get_scope(self, service_id: str) -> ServiceScope | None:
        """A live service with its routes and tools in the order they were added (one round trip); None if
        deleted or unknown."""
        rows = self.rows(
            # every column named: PostgreSQL's rows are read by column name
            "SELECT 'service' AS row_kind, slug, path_suffix, deleted, kind, NULL AS body, 0 AS position "
            "FROM service_scopes_services WHERE service_id = ? UNION ALL "
            "SELECT 'route', NULL, NULL, NULL, NULL, route, position FROM service_scopes_routes "
            "WHERE service_id = ? UNION ALL "
            "SELECT 'tool', NULL, NULL, NULL, NULL, tool, position FROM service_scopes_tools WHERE service_id = ? "
            "ORDER BY position", (service_id, service_id, service_id),
        )
        service = next((r for r in rows if r[0] == "service"), None)
        if service is None or service[3]:
            return None
        routes = tuple(Route(**json.loads(r[5])) for r in rows if r[0] == "route")
        tools = tuple(ToolPrice(**json.loads(r[5])) for r in rows if r[0] == "tool")
        return ServiceScope(service_id, service[1], service[2], routes, tools, service[4])

    def get_scope_by_slug(self, slug: str) -> tuple[str, ServiceScope] | None:
        """(merchant name, service) of the live service holding `slug`."""
        rows = self.rows("SELECT service_id, merchant FROM service_scopes_services WHERE slug = ? AND NOT deleted",
                         (slug,))
        scope = self.get_scope(rows[0][0]) if rows else None
        return (rows[0][1], scope) if scope is not None else None


class SqliteServiceScopesView(ServiceScopesView, SQLiteTrackingRecorder):
    pass


class PostgresServiceScopesView(ServiceScopesView, PostgresTrackingRecorder):
    paramstyle = "format"


class ServiceScopesProjection(Projection[ServiceScopesView]):
    """The proxy services and routes scoped keys are checked against."""

    name = "service_scopes"
    topics = tuple(get_topic(cls) for cls in (
        ProxyService.Created, ProxyService.BaseUrlChanged, ProxyService.RouteAdded, ProxyService.RouteRemoved,
        ProxyService.Deleted, ProxyService.KindChosen, ProxyService.ToolPriced, ProxyService.ToolUnpriced,
    ))

    @singledispatchmethod
    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        with self.view.tracked(tracking):
            pass

    @process_event.register
    def _(self, e: ProxyService.Created, tracking: Tracking) -> None:
        with self.view.tracked(tracking) as c:
            c.execute("INSERT INTO service_scopes_services VALUES (?, ?, ?, ?, ?, ?)",
                      (str(e.originator_id), e.merchant, e.slug, e.path_suffix, False, KIND_HTTP))

    @process_event.register
    def _(self, e: ProxyService.KindChosen, tracking: Tracking) -> None:
        with self.view.tracked(tracking) as c:
            c.execute("UPDATE service_scopes_services SET kind = ? WHERE service_id = ?",
                      (e.kind, str(e.originator_id)))

    @process_event.register
    def _(self, e: ProxyService.BaseUrlChanged, tracking: Tracking) -> None:
        with self.view.tracked(tracking) as c:
            c.execute("UPDATE service_scopes_services SET slug = ?, path_suffix = ? WHERE service_id = ?",
                      (e.slug, e.path_suffix, str(e.originator_id)))

    @process_event.register
    def _(self, e: ProxyService.RouteAdded, tracking: Tracking) -> None:
        with self.view.tracked(tracking) as c:
            c.execute("INSERT INTO service_scopes_routes VALUES (?, ?, ?, ?)",
                      (str(e.originator_id), e.route["id"], tracking.notification_id,
                       json.dumps(e.route, sort_keys=True)))

    @process_event.register
    def _(self, e: ProxyService.RouteRemoved, tracking: Tracking) -> None:
        with self.view.tracked(tracking) as c:
            c.execute("DELETE FROM service_scopes_routes WHERE service_id = ? AND route_id = ?",
                      (str(e.originator_id), e.route_id))

    @process_event.register
    def _(self, e: ProxyService.ToolPriced, tracking: Tracking) -> None:
        with self.view.tracked(tracking) as c:
            c.execute("INSERT INTO service_scopes_tools VALUES (?, ?, ?, ?) ON CONFLICT (service_id, name) "
                      "DO UPDATE SET tool = excluded.tool",
                      (str(e.originator_id), e.tool["name"], tracking.notification_id,
                       json.dumps(e.tool, sort_keys=True)))

    @process_event.register
    def _(self, e: ProxyService.ToolUnpriced, tracking: Tracking) -> None:
        with self.view.tracked(tracking) as c:
            c.execute("DELETE FROM service_scopes_tools WHERE service_id = ? AND name = ?",
                      (str(e.originator_id), e.name))

    @process_event.register
    def _(self, e: ProxyService.Deleted, tracking: Tracking) -> None:
        with self.view.tracked(tracking) as c:
            c.execute("UPDATE service_scopes_services SET deleted = ? WHERE service_id = ?",
                      (True, str(e.originator_id)))
