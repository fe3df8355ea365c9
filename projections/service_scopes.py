"""The service scopes read model: each proxy service's slug, path suffix and routes, for keys scoped to it.

A request with a scoped key reads its service here (one round trip) and never replays a ProxyService; so does
`GET /supported?service=<slug>`. Follows the ProxyServices log. Each route is kept whole (the `RouteAdded` event's
route, as JSON) and read back as the aggregate's own `Route`; a view of the earlier shape (the terms in columns of
their own) is rebuilt from the event store (projections/reshape.py).
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
from domain.proxy_service import ProxyService, Route
from domain.scopes import ServiceScope
from projections.reshape import ReshapedView, Shape


class ServiceScopesView(ReshapedView):
    tables = (
        "CREATE TABLE IF NOT EXISTS service_scopes_services (service_id TEXT PRIMARY KEY, merchant TEXT NOT NULL, "
        "slug TEXT NOT NULL, path_suffix TEXT NOT NULL, deleted BOOLEAN NOT NULL)",
        "CREATE INDEX IF NOT EXISTS service_scopes_slug ON service_scopes_services (slug)",
        "CREATE TABLE IF NOT EXISTS service_scopes_routes (service_id TEXT NOT NULL, route_id TEXT NOT NULL, "
        "position BIGINT NOT NULL, route TEXT NOT NULL, PRIMARY KEY (service_id, route_id))",
    )
    shape = Shape(ProxyServices.name, ("service_scopes_routes", "route"),
                  ("service_scopes_services", "service_scopes_routes"))


    def get_scope(self, service_id: str) -> ServiceScope | None:
        """A live service with its routes in creation order (one round trip); None if deleted or unknown."""
        rows = self.rows(
            "SELECT v.service_id, v.slug, v.path_suffix, v.deleted, r.route FROM service_scopes_services v "
            "LEFT JOIN service_scopes_routes r ON r.service_id = v.service_id WHERE v.service_id = ? "
            "ORDER BY r.position", (service_id,),
        )
        if not rows or rows[0][3]:
            return None
        routes = tuple(Route(**json.loads(r[4])) for r in rows if r[4] is not None)
        return ServiceScope(rows[0][0], rows[0][1], rows[0][2], routes)

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
        ProxyService.Deleted,
    ))

    @singledispatchmethod
    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        with self.view.tracked(tracking):
            pass

    @process_event.register
    def _(self, e: ProxyService.Created, tracking: Tracking) -> None:
        with self.view.tracked(tracking) as c:
            c.execute("INSERT INTO service_scopes_services VALUES (?, ?, ?, ?, ?)",
                      (str(e.originator_id), e.merchant, e.slug, e.path_suffix, False))

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
    def _(self, e: ProxyService.Deleted, tracking: Tracking) -> None:
        with self.view.tracked(tracking) as c:
            c.execute("UPDATE service_scopes_services SET deleted = ? WHERE service_id = ?",
                      (True, str(e.originator_id)))
