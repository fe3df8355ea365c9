"""Webhooks in the console: the JSON API under /api/v1/webhooks and the pages /webhooks and /webhooks/{id}.

Both call `interfaces.runtime.webhook_service.WebhookService` (the CLI's commands too). The signing secret is
answered only by create and rotate; another merchant's endpoint is a 404 like an unknown one. Errors: a refused
URL or event list is 400 `{"error": code, "message", "field"}` with the rule's code (`https_required`,
`private_address`, `invalid_url`, `invalid_events`, `unresolvable`); an unknown endpoint or delivery is 404
`webhook_not_found`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import falcon
from jinja2 import Environment
from marshmallow import Schema, ValidationError, fields, validate

from domain.webhook import EVENT_TYPES, WebhookError
from interfaces.http.console.api import body, session_of
from interfaces.http.console.collaborators import mount
from interfaces.http.console.pages import ContextPage, Page, form_of
from interfaces.runtime.webhook_service import WebhookService


class CreateSchema(Schema):
    url = fields.String(required=True, validate=validate.Length(min=1, max=2048))
    events = fields.List(fields.String(validate=validate.Length(max=64)), required=True,
                         validate=validate.Length(min=1, max=len(EVENT_TYPES)))


class PatchSchema(Schema):
    url = fields.String(validate=validate.Length(min=1, max=2048))
    events = fields.List(fields.String(validate=validate.Length(max=64)),
                         validate=validate.Length(min=1, max=len(EVENT_TYPES)))
    enabled = fields.Boolean(truthy={True}, falsy={False})


class ReplaySchema(Schema):
    since = fields.AwareDateTime(required=True, default_timezone=UTC)
    endpoint = fields.String(load_default=None, validate=validate.Length(max=64))


# -- the JSON API ---------------------------------------------------------------------------------------------------


class _Api:
    """A resource of the webhooks API: it answers from the webhook commands alone."""

    route = ""

    def __init__(self, webhooks: WebhookService) -> None:
        self._webhooks = webhooks


class WebhooksResource(_Api):
    route = "/api/v1/webhooks"

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"webhooks": self._webhooks.list(session_of(req).merchant)}

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        s, command = session_of(req), body(req, CreateSchema())
        resp.status, resp.media = falcon.HTTP_201, self._webhooks.create(s.merchant, command["url"],
                                                                           command["events"])


class WebhookResource(_Api):
    route = "/api/v1/webhooks/{endpoint_id}"

    def on_get(self, req: falcon.Request, resp: falcon.Response, endpoint_id: str) -> None:
        resp.media = self._webhooks.get(session_of(req).merchant, endpoint_id)

    def on_patch(self, req: falcon.Request, resp: falcon.Response, endpoint_id: str) -> None:
        s, command = session_of(req), body(req, PatchSchema())
        resp.media = self._webhooks.update(s.merchant, endpoint_id, **command)

    def on_delete(self, req: falcon.Request, resp: falcon.Response, endpoint_id: str) -> None:
        self._webhooks.delete(session_of(req).merchant, endpoint_id)
        resp.status = falcon.HTTP_204


class RotateResource(_Api):
    route = "/api/v1/webhooks/{endpoint_id}/rotate"

    def on_post(self, req: falcon.Request, resp: falcon.Response, endpoint_id: str) -> None:
        resp.media = self._webhooks.rotate(session_of(req).merchant, endpoint_id)


class TestEventResource(_Api):
    route = "/api/v1/webhooks/{endpoint_id}/test"

    def on_post(self, req: falcon.Request, resp: falcon.Response, endpoint_id: str) -> None:
        resp.status, resp.media = falcon.HTTP_202, self._webhooks.test(session_of(req).merchant, endpoint_id)


class DeliveriesResource(_Api):
    route = "/api/v1/webhooks/{endpoint_id}/deliveries"

    def on_get(self, req: falcon.Request, resp: falcon.Response, endpoint_id: str) -> None:
        limit = req.get_param_as_int("limit", min_value=1, max_value=200) or 50
        resp.media = {"deliveries": self._webhooks.deliveries(session_of(req).merchant, endpoint_id, limit)}


class ResendResource(_Api):
    route = "/api/v1/webhooks/{endpoint_id}/deliveries/{msg_id}/resend"

    def on_post(self, req: falcon.Request, resp: falcon.Response, endpoint_id: str, msg_id: str) -> None:
        resp.status = falcon.HTTP_202
        resp.media = self._webhooks.resend(session_of(req).merchant, endpoint_id, msg_id)


class ReplayResource(_Api):
    route = "/api/v1/webhooks/replay"

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        s, command = session_of(req), body(req, ReplaySchema())
        resp.media = self._webhooks.replay(s.merchant, command["endpoint"], command["since"].timestamp())


# -- the pages ------------------------------------------------------------------------------------------------------


def when(seconds: float | None) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if seconds else "—"


def events_of(req: falcon.Request) -> list[str]:
    media = req.get_media(default_when_empty={}) or {}
    chosen = media.get("events", []) if isinstance(media, dict) else []
    return [chosen] if isinstance(chosen, str) else list(chosen)


NOTICES = {"saved": "Saved.", "enabled": "Endpoint enabled: deliveries resume.",
           "disabled": "Endpoint disabled: nothing is sent to it until you enable it.",
           "test": "A webhook.test event is queued: it appears below once sent.",
           "resent": "The message will be sent again now.", "deleted": "Endpoint deleted.",
           "replayed": "Failed deliveries will be sent again now."}


class WebhooksPage(ContextPage[WebhookService]):
    route, template, title, active = "/webhooks", "webhooks.html", "Webhooks", "/webhooks"
    notices = NOTICES

    def context(self, req: falcon.Request) -> dict[str, Any]:
        return {"endpoints": self._c.list(req.context.session.merchant), "event_types": EVENT_TYPES,
                "chosen": ["payment.confirmed", "payment.failed"]}

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        form, events = form_of(req), events_of(req)
        try:
            created = self._c.create(req.context.session.merchant, form.get("url", ""), events)
        except WebhookError as refused:
            status = falcon.HTTP_400
            self.render(req, resp, status, errors={refused.field or "url": refused.message}, form=form,
                        **{**self.context(req), "chosen": events})
            return
        self.render(req, resp, falcon.HTTP_201, new_secret=created["secret"], new_id=created["id"],
                    notice="Endpoint added. Copy its signing secret now: it is shown once.", **self.context(req))


class _EndpointPage(Page[WebhookService]):
    """Base of the pages under `/webhooks/{endpoint_id}`: the endpoint page's template and context, which the
    answer of a command on the endpoint renders; each defines its own responders."""

    template, title, active = "webhook.html", "Webhook endpoint", "/webhooks"
    notices = NOTICES

    def endpoint_context(self, req: falcon.Request, endpoint_id: str) -> dict[str, Any]:
        merchant = req.context.session.merchant
        endpoint = self._c.get(merchant, endpoint_id)
        deliveries = self._c.deliveries(merchant, endpoint_id, 50)
        for d in deliveries:
            d["created"], d["next"] = when(d["createdAt"]), when(d["nextAttemptAt"])
            for a in d["attempts"]:
                a["when"] = when(a["at"])
        return {"endpoint": endpoint, "deliveries": deliveries, "event_types": EVENT_TYPES,
                "chosen": endpoint["events"]}


class WebhookPage(_EndpointPage):
    route = "/webhooks/{endpoint_id}"

    def on_get(self, req: falcon.Request, resp: falcon.Response, endpoint_id: str) -> None:
        self.render(req, resp, notice=self.notice(req), **self.endpoint_context(req, endpoint_id))

    def on_post(self, req: falcon.Request, resp: falcon.Response, endpoint_id: str) -> None:
        form, events = form_of(req), events_of(req)
        try:
            self._c.update(req.context.session.merchant, endpoint_id, url=form.get("url") or None,
                                    events=events or None)
        except WebhookError as refused:
            if refused.code == "webhook_not_found":
                raise
            context = self.endpoint_context(req, endpoint_id)
            self.render(req, resp, falcon.HTTP_400, errors={refused.field or "url": refused.message},
                        form=form, **{**context, "chosen": events or context["chosen"]})
            return
        raise falcon.HTTPSeeOther(f"/webhooks/{endpoint_id}?done=saved")


class WebhookActionPage(_EndpointPage):
    """POST /webhooks/{id}/{action}: enable, disable, test, rotate, delete (each one command, then back)."""
    route = "/webhooks/{endpoint_id}/{action}"

    def on_post(self, req: falcon.Request, resp: falcon.Response, endpoint_id: str, action: str) -> None:
        merchant = req.context.session.merchant
        if action in ("enable", "disable"):
            self._c.update(merchant, endpoint_id, enabled=action == "enable")
            raise falcon.HTTPSeeOther(f"/webhooks/{endpoint_id}?done={action}d")
        if action == "test":
            try:
                self._c.test(merchant, endpoint_id)
            except WebhookError as refused:
                if refused.code != "test_pending":
                    raise
                self.render(req, resp, falcon.HTTP_409, problem=refused.message,
                            **self.endpoint_context(req, endpoint_id))
                return
            raise falcon.HTTPSeeOther(f"/webhooks/{endpoint_id}?done=test")
        if action == "delete":
            self._c.delete(merchant, endpoint_id)
            raise falcon.HTTPSeeOther("/webhooks?done=deleted")
        if action == "rotate":
            secret = self._c.rotate(merchant, endpoint_id)["secret"]
            self.render(req, resp, new_secret=secret, notice="New signing secret: copy it now, it is shown once. "
                        "The previous one keeps signing for 24 hours.", **self.endpoint_context(req, endpoint_id))
            return
        raise falcon.HTTPNotFound()


class ResendPage(_EndpointPage):
    route = "/webhooks/{endpoint_id}/deliveries/{msg_id}/resend"

    def on_post(self, req: falcon.Request, resp: falcon.Response, endpoint_id: str, msg_id: str) -> None:
        self._c.resend(req.context.session.merchant, endpoint_id, msg_id)
        raise falcon.HTTPSeeOther(f"/webhooks/{endpoint_id}?done=resent")


class ReplayPage(_EndpointPage):
    route = "/webhooks/{endpoint_id}/replay"

    def on_post(self, req: falcon.Request, resp: falcon.Response, endpoint_id: str) -> None:
        form = form_of(req)
        try:
            since = ReplaySchema().load({"since": form.get("since", "")})["since"]
        except ValidationError:
            context = self.endpoint_context(req, endpoint_id)
            self.render(req, resp, falcon.HTTP_400, errors={"since": "a time such as 2026-11-23T12:00"}, form=form,
                        **context)
            return
        self._c.replay(req.context.session.merchant, endpoint_id, since.timestamp())
        raise falcon.HTTPSeeOther(f"/webhooks/{endpoint_id}?done=replayed")


def add_routes(app: falcon.App, webhooks: WebhookService, env: Environment, *, sandbox: bool) -> None:
    mount(app, (WebhooksResource, ReplayResource, WebhookResource, RotateResource, TestEventResource,
                DeliveriesResource, ResendResource), webhooks)
    env.globals["sandbox"] = sandbox  # the URL field says what the sandbox also allows (http://localhost)
    mount(app, (WebhooksPage, WebhookPage, ReplayPage, ResendPage, WebhookActionPage), webhooks, env)
