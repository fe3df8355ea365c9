"""The auditor's view of the logged-in merchant's payments: the JSON API (`GET /api/v1/payments`,
`GET /api/v1/payments/{id}`, the CSV `GET /api/v1/payments/export`) and the pages `/payments` and `/payments/{id}`.

Both read the payments read model (`projections/payment_list.py`), never an aggregate: the list filtered by state,
network and date and paged newest first by a keyset cursor, and a payment with its event timeline. Another
merchant's payment is a 404 like an unknown one.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from urllib.parse import urlencode

import falcon
from jinja2 import Environment
from marshmallow import RAISE, Schema, ValidationError, fields, validate, validates_schema

from domain.networks import MAINNET, NETWORKS
from interfaces.http.console.api import session_of
from interfaces.http.console.collaborators import PaymentViews, Resource, mount
from interfaces.http.console.pages import Page
from projections.payment_export import export_csv
from projections.payment_list import MAX_PAGE, STATES, PaymentListView, PaymentPage, PaymentRow, timestamp

STATE_NAMES = tuple(STATES.values())
DEFAULT_PAGE = 50


class Moment(fields.Field):
    """A date (`2026-11-23`, a whole UTC day) or a date-time with its offset (`2026-11-23T10:00:00Z`; without an
    offset it is UTC). Loaded as (the instant, whether a whole day was given)."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> tuple[datetime, bool]:
        if not isinstance(value, str) or len(value) > 40:
            raise ValidationError("not a date (YYYY-MM-DD) or an ISO 8601 date-time")
        try:
            if len(value) == 10:
                moment, whole_day = datetime.combine(date.fromisoformat(value), time(), UTC), True
            else:
                moment, whole_day = datetime.fromisoformat(value), False
                moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
        except (ValueError, OverflowError):
            raise ValidationError("not a date (YYYY-MM-DD) or an ISO 8601 date-time") from None
        if not 1970 <= moment.year <= 9998:  # a day later must still be a date
            raise ValidationError("out of range: years 1970 to 9998")
        return moment, whole_day


class Cursor(fields.Field):
    """The opaque position after which the next page starts: the last row's (received_at, payment id)."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> tuple[str, str]:
        try:
            position = json.loads(base64.urlsafe_b64decode(value.encode() + b"=" * (-len(value) % 4)))
        except (AttributeError, ValueError, binascii.Error):
            raise ValidationError("not a cursor of this list (use nextCursor as given)") from None
        if not (isinstance(position, list) and len(position) == 2 and all(isinstance(p, str) for p in position)):
            raise ValidationError("not a cursor of this list (use nextCursor as given)")
        return position[0], position[1]


def cursor_of(row: PaymentRow) -> str:
    return base64.urlsafe_b64encode(json.dumps([row.received_at, row.payment_id]).encode()).decode().rstrip("=")


class ExportQuerySchema(Schema):
    """The export's filters: `from` is inclusive; `to` is exclusive, and a date there includes that whole day."""

    class Meta:
        unknown = RAISE

    state = fields.String(validate=validate.OneOf(STATE_NAMES))
    since = Moment(data_key="from")
    until = Moment(data_key="to")

    @validates_schema
    def _ordered(self, data: dict[str, Any], **kwargs: Any) -> None:
        if "since" in data and "until" in data and _until(data["until"]) <= data["since"][0]:
            raise ValidationError("must be later than from", "to")


class PaymentsQuerySchema(ExportQuerySchema):
    """The list's filters: the export's, a network, and a page (`limit`, and the `cursor` of the one before)."""

    network = fields.String(validate=validate.OneOf(NETWORKS))
    cursor = Cursor()
    limit = fields.Integer(load_default=DEFAULT_PAGE, validate=validate.Range(1, MAX_PAGE))


def _until(value: tuple[datetime, bool]) -> datetime:
    moment, whole_day = value
    return moment + timedelta(days=1) if whole_day else moment


def query(req: falcon.Request, schema: Schema | None = None) -> dict[str, Any]:
    """The validated filters of a request (empty form fields mean "any")."""
    params = {k: (v[-1] if isinstance(v, list) else v) for k, v in req.params.items() if v not in ("", [])}
    return (schema or PaymentsQuerySchema()).load(params)


def explorer_url(network_id: str, signature: str | None, sandbox: bool) -> str | None:
    """The transaction on the Solana Explorer: mainnet, and devnet unless devnet is this sandbox's own localnet
    (whose transactions the public devnet has never seen)."""
    if not signature:
        return None
    if network_id == MAINNET.caip2:
        return f"https://explorer.solana.com/tx/{signature}"
    if network_id in NETWORKS and not sandbox:
        return f"https://explorer.solana.com/tx/{signature}?cluster=devnet"
    return None


def described(row: PaymentRow, service: tuple[str, str] | None) -> dict[str, Any]:
    """A payment on the wire, with what it paid for (`service`, `resource`: null when unknown)."""
    return {**row.as_dict(), "service": service[0] if service else None,
            "resource": (service[1] or None) if service else None}


def services_of(c: PaymentViews, merchant: str, rows: list[PaymentRow]) -> dict[str, tuple[str, str]]:
    """(service, resource URL) of each row, from the payment_volume read model; a proxy service by its name."""
    volume = c.volume(merchant)
    return volume.get_services([r.payment_id for r in rows]) if volume is not None and rows else {}


def page_of(view: PaymentListView, merchant_id: str, filters: dict[str, Any]) -> PaymentPage:
    return view.get_page(
        merchant_id=merchant_id, state=filters.get("state"), network=filters.get("network"),
        since=timestamp(filters["since"][0]) if "since" in filters else None,
        until=timestamp(_until(filters["until"])) if "until" in filters else None,
        after=filters.get("cursor"), limit=filters["limit"])


def owned(view: PaymentListView, merchant_id: str, payment_id: str) -> PaymentRow:
    row = view.get_payment(payment_id)
    if row is None or row.merchant_id != merchant_id:
        raise falcon.HTTPNotFound(title="not_found", description=f"no payment {payment_id} of yours")
    return row


# -- the JSON API ---------------------------------------------------------------------------------------------------


class PaymentsResource(Resource[PaymentViews]):
    route = "/api/v1/payments"

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        s, filters = session_of(req), query(req)
        page = page_of(self._c.payment_list, s.merchant_id, filters)
        services = services_of(self._c, s.merchant, page.items)
        resp.media = {"payments": [described(row, services.get(row.payment_id)) for row in page.items],
                      "total": page.total,
                      "nextCursor": cursor_of(page.items[-1]) if page.more else None}


def export_filters(params: dict[str, Any]) -> dict[str, str | None]:
    """`state`, `since`, `until` of the export (read-model values) from `from`/`to`/`state` as the list takes them;
    a ValidationError names the field. The CLI's `payments export` checks its options with this too."""
    filters = ExportQuerySchema().load({k: v for k, v in params.items() if v not in ("", None)})
    return {"state": filters.get("state"),
            "since": timestamp(filters["since"][0]) if "since" in filters else None,
            "until": timestamp(_until(filters["until"])) if "until" in filters else None}


class PaymentsExportResource(Resource[PaymentViews]):
    """The filtered list as CSV (projections/payment_export.py), streamed a page at a time."""

    route = "/api/v1/payments/export"

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        s = session_of(req)
        filters = export_filters({k: (v[-1] if isinstance(v, list) else v) for k, v in req.params.items()})
        since, until = filters["since"], filters["until"]
        view = self._c.payment_list
        resp.content_type = "text/csv; charset=utf-8; header=present"
        # One name per filter: the state (or "all") first, then `from` and `to` as given.
        given = [s.merchant, (filters["state"] or "all").lower(),
                 *(v for v in (req.get_param("from"), req.get_param("to")) if v)]
        name = "-".join(["payments", *(re.sub(r"[^A-Za-z0-9._-]", "_", v) for v in given)])  # nothing a header carries
        resp.set_header("Content-Disposition", f'attachment; filename="{name}.csv"')
        resp.stream = export_csv(view, self._c.volume(s.merchant), s.merchant_id, state=filters["state"],
                                 since=since, until=until)


class PaymentResource(Resource[PaymentViews]):
    route = "/api/v1/payments/{payment_id}"

    def on_get(self, req: falcon.Request, resp: falcon.Response, payment_id: str) -> None:
        view, s = self._c.payment_list, session_of(req)
        row = owned(view, s.merchant_id, payment_id)
        resp.media = {**described(row, services_of(self._c, s.merchant, [row]).get(payment_id)),
                      "events": [e.as_dict() for e in view.get_timeline(payment_id)]}


# -- the pages ------------------------------------------------------------------------------------------------------


def shown(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


class PaymentsPage(Page[PaymentViews]):
    route, template, title, active = "/payments", "payments.html", "Payments", "/payments"

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        form = {k: v for k, v in req.params.items() if isinstance(v, str)}
        context: dict[str, Any] = {"form": form, "states": STATE_NAMES, "networks": list(NETWORKS.values()),
                                   "explorer": lambda network_id, signature: explorer_url(network_id, signature,
                                                                                          self._c.sandbox)}
        try:
            filters = query(req)
        except ValidationError as refused:  # keyed by the wire names (`from`, `to`): shown beside those fields
            errors = {k: " ".join(map(str, v)) for k, v in refused.normalized_messages().items()}
            return self.render(req, resp, falcon.HTTP_400, errors=errors, payments=None, **context)
        s = req.context.session
        page = page_of(self._c.payment_list, s.merchant_id, filters)
        filtered = {k: v for k, v in form.items() if k != "cursor"}
        export = {k: v for k, v in form.items() if k in ("state", "from", "to") and v}
        self.render(req, resp, payments=page.items, total=page.total,
                    services=services_of(self._c, s.merchant, page.items),
                    export_url="/api/v1/payments/export" + (f"?{urlencode(export)}" if export else ""),
                    first_url=f"/payments?{urlencode(filtered)}" if "cursor" in filters else None,
                    next_url=f"/payments?{urlencode({**filtered, 'cursor': cursor_of(page.items[-1])})}"
                    if page.more else None, **context)


class PaymentDetailPage(Page[PaymentViews]):
    route, template, title, active = "/payments/{payment_id}", "payment.html", "Payment", "/payments"

    def on_get(self, req: falcon.Request, resp: falcon.Response, payment_id: str) -> None:
        view = self._c.payment_list
        row = owned(view, req.context.session.merchant_id, payment_id)
        self.render(req, resp, payment=row, events=view.get_timeline(payment_id), shown=shown,
                    service=services_of(self._c, req.context.session.merchant, [row]).get(row.payment_id),
                    explorer=explorer_url(row.network, row.transaction_signature, self._c.sandbox))


def add_routes(app: falcon.App, c: PaymentViews, env: Environment) -> None:
    mount(app, (PaymentsResource, PaymentsExportResource, PaymentResource), c)
    mount(app, (PaymentsPage, PaymentDetailPage), c, env)
