"""The ProxyServices application: merchants' services behind the transparent proxy, their routes and slugs.

Every command loads what it touches, asks the aggregates, and saves everything in ONE `save(...)`: a service
with its slug claim (and the released old claim on a base-URL edit) and the merchant's service list. A slug is
unique because its claim's id is derived from it: a second claim of the same slug fails in the event store, and
the command tries the next candidate.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import fields
from typing import Any, Protocol

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.persistence import IntegrityError, JSONTranscoder, Transcoding
from eventsourcing.system import Leader

from domain.mcp_tools import KIND_MCP, ToolPrice, check_kind, listed_terms
from domain.merchant import Merchant
from domain.networks import SCHEME_EXACT, network
from domain.proxy_service import (
    BaseUrl,
    MerchantServices,
    ProxyService,
    ProxyServiceConflictError,
    ProxyServiceError,
    Route,
    build_base_url,
    localhost_refusal,
    services_index_id,
)
from domain.routes import matches, normalize_path
from domain.slugs import SlugClaim, SlugError, candidates, check_slug, slug_claim_id

SLUG_ATTEMPTS = 20
# A service is loaded on every proxied request: a snapshot every this many events bounds what a load replays,
# however often the service is edited (docs/performance.md, "A proxied request's load of its service").
SNAPSHOT_EVERY = 50


class Secrets(Protocol):
    """Encrypts the merchant's upstream credentials before they go into an event; decrypts for forwarding."""

    def encrypt(self, plaintext: str) -> str: ...

    def decrypt(self, ciphertext: str) -> str: ...


class MerchantDirectory(Protocol):
    """The Merchant aggregate of a merchant name (the Merchants application)."""

    def get_merchant(self, name: str) -> Merchant: ...


class ServiceNotFoundError(ProxyServiceError):
    """No such service (another merchant's service is just as unknown)."""


class SlugTakenError(ProxyServiceConflictError):
    """A custom slug another service holds."""


class _FrozenTranscoding(Transcoding):
    """A frozen dataclass of the service's state, in its snapshots: its fields by name, and back."""

    def encode(self, obj: Any) -> dict[str, Any]:
        return {f.name: getattr(obj, f.name) for f in fields(obj)}

    def decode(self, data: dict[str, Any]) -> Any:
        return self.type(**data)


class _BaseUrlTranscoding(_FrozenTranscoding):
    type, name = BaseUrl, "proxy_base_url"


class _RouteTranscoding(_FrozenTranscoding):
    type, name = Route, "proxy_route"


class _ToolPriceTranscoding(_FrozenTranscoding):
    type, name = ToolPrice, "proxy_tool_price"


# A Leader: each save prompts the followers it leads, the read models of its log in the commanding process, before
# the command returns (projections/read_your_writes.py).
class ProxyServices(Leader[uuid.UUID]):
    snapshotting_intervals = {ProxyService: SNAPSHOT_EVERY}

    def register_transcodings(self, transcoder: JSONTranscoder) -> None:
        super().register_transcodings(transcoder)
        transcoder.register(_BaseUrlTranscoding())
        transcoder.register(_RouteTranscoding())
        transcoder.register(_ToolPriceTranscoding())

    def __init__(self, env: Mapping[str, str] | None = None, *, merchants: MerchantDirectory | None = None,
                 secrets: Secrets | None = None, sandbox: bool = True,
                 domains: Callable[[Merchant], Iterable[str]] = Merchant.verified_domains,
                 own_ports: frozenset[int] = frozenset()) -> None:
        """`own_ports`: Paywarden's own listeners on this host, which no localhost service may name."""
        super().__init__(env)
        self._merchants, self._secrets, self._sandbox, self._domains = merchants, secrets, sandbox, domains
        self._own_ports = own_ports

    @property
    def sandbox(self) -> bool:
        """Sandbox mode: `http://localhost:<port>` services are allowed."""
        return self._sandbox

    # -- services -----------------------------------------------------------------------------------------

    def create_service(self, merchant: str, name: str, domain: str | None = None, subdomain: str = "",
                       path_suffix: str = "", port: int | None = None,
                       upstream_auth: tuple[str, str] | None = None, slug: str | None = None,
                       token: str | None = None, kind: str = "http") -> ProxyService:
        """`kind`: `http` (priced routes) or `mcp` (an MCP server; priced tools, docs/mcp.md)."""
        check_kind(kind)
        base = self._base_url(merchant, domain, subdomain, path_suffix, port)
        token = token or uuid.uuid4().hex
        new_id = str(ProxyService.create_id(merchant, token))
        for _ in range(SLUG_ATTEMPTS):
            if (created := self._load(new_id)) is not None:
                return created  # a retried create with the same token
            claim, chosen = self._claim(base, new_id, slug, name)
            service = ProxyService.create(merchant, token, name, base, chosen)
            service.choose_kind(kind)
            if upstream_auth is not None:
                service.set_upstream_auth(upstream_auth[0], self._encrypt(upstream_auth[1]))
            index = self._index(merchant)
            index.add(str(service.id))
            try:
                self.save(service, claim, index)
                return service
            except IntegrityError:
                if slug is not None and self._owner(slug) not in (None, str(service.id)):
                    raise SlugTakenError(f"slug {slug} is taken", field="slug") from None
                continue  # another create took the slug or touched the list; try again with fresh state
        raise ProxyServiceConflictError("could not claim a slug; try again")

    def change_base_url(self, merchant: str, service_id: str, domain: str | None = None, subdomain: str = "",
                        path_suffix: str = "", port: int | None = None) -> ProxyService:
        """A new base URL regenerates the slug; the old one is released and stops routing at once."""
        for _ in range(SLUG_ATTEMPTS):
            service = self.get_service(merchant, service_id)
            service_id = str(service.id)  # given by its slug, perhaps
            base = self._base_url(merchant, domain, subdomain, path_suffix, port)
            if base == service.base:
                return service
            claim, chosen = self._claim(base, service_id, None, service.name)
            old = self._claim_of(service.slug) if chosen != service.slug else None
            if old is not None and old.owner == service_id:
                old.release()
            service.change_base_url(base, chosen)
            try:
                self.save(*[a for a in (service, claim, old) if a is not None])
                return service
            except IntegrityError:
                continue
        raise ProxyServiceConflictError("could not claim a slug; try again")

    def rename(self, merchant: str, service_id: str, name: str) -> ProxyService:
        return self._change(merchant, service_id, lambda s: s.rename(name))

    def set_active(self, merchant: str, service_id: str, active: bool) -> ProxyService:
        return self._change(merchant, service_id, lambda s: s.set_active(active))

    def set_upstream_auth(self, merchant: str, service_id: str, header: str, value: str) -> ProxyService:
        if not isinstance(value, str) or not 1 <= len(value) <= 4096 or not value.isprintable():
            raise ProxyServiceError("the upstream auth value is 1 to 4096 printable characters",
                                    field="upstreamAuth")
        return self._change(merchant, service_id, lambda s: s.set_upstream_auth(header, self._encrypt(value)))

    def clear_upstream_auth(self, merchant: str, service_id: str) -> ProxyService:
        return self._change(merchant, service_id, lambda s: s.clear_upstream_auth())

    def set_body_limit(self, merchant: str, service_id: str, limit: int) -> ProxyService:
        return self._change(merchant, service_id, lambda s: s.set_body_limit(limit))

    def set_pass_cookies(self, merchant: str, service_id: str, enabled: bool) -> ProxyService:
        return self._change(merchant, service_id, lambda s: s.set_pass_cookies(enabled))

    def delete_service(self, merchant: str, service_id: str) -> None:
        service = self.get_service(merchant, service_id)
        service_id = str(service.id)  # given by its slug, perhaps
        service.delete()
        claim = self._claim_of(service.slug)
        if claim is not None and claim.owner == service_id:
            claim.release()
        index = self._index(merchant)
        if service_id in index.service_ids:
            index.remove(service_id)
        self.save(*[a for a in (service, claim, index) if a is not None])

    # -- routes -------------------------------------------------------------------------------------------

    def add_route(self, merchant: str, service_id: str, *, method: str, path: str, price: int, pay_to: str,
                  network_id: str | None = None, asset: str | None = None, **terms: Any) -> Route:
        service = self.get_service(merchant, service_id)
        chosen_network, chosen_asset = self._capability(merchant, network_id, asset)
        route = Route.checked(id=uuid.uuid4().hex[:16], method=method, path=path, price=price, network=chosen_network,
                              asset=chosen_asset, pay_to=pay_to, **terms)
        service.add_route(route)
        self.save(service)
        return route

    def remove_route(self, merchant: str, service_id: str, route_id: str) -> None:
        self._change(merchant, service_id, lambda s: s.remove_route(route_id))

    # -- an mcp service's tools ------------------------------------------------------------------------------

    def price_tool(self, merchant: str, service_id: str, *, name: str, price: int, pay_to: str,
                   network_id: str | None = None, asset: str | None = None,
                   listed: Iterable[Mapping[str, Any]] | None = None, **terms: Any) -> ToolPrice:
        """Price a tool of an `mcp` service by name (terms: `description`, `max_timeout_seconds`,
        `input_schema`); pricing a priced tool again replaces its price. `listed`: the tools the service's MCP
        server lists (`tools/list`; None when it was not asked): the tool must be one of them, and its description
        (its first 500 characters) and input schema are the price's unless `terms` give them."""
        service = self.get_service(merchant, service_id)
        chosen_network, chosen_asset = self._capability(merchant, network_id, asset)
        if listed is not None:
            terms = {**listed_terms(listed, name), **terms}
        tool = ToolPrice.checked(name=name, price=price, network=chosen_network, asset=chosen_asset, pay_to=pay_to,
                                 **terms)
        service.price_tool(tool)
        self.save(service)
        return tool

    def unprice_tool(self, merchant: str, service_id: str, name: str) -> None:
        """The tool is free again (its calls pass through unpaid)."""
        self._change(merchant, service_id, lambda s: s.unprice_tool(name))

    @staticmethod
    def tool_price(service: ProxyService, name: object) -> ToolPrice | None:
        """The price of a `tools/call` of `name` on the service, or None when the call passes free."""
        if service.kind != KIND_MCP or not isinstance(name, str):
            return None
        return service.tools.get(name)

    # -- queries ------------------------------------------------------------------------------------------

    def get_service(self, merchant: str, service_id: str) -> ProxyService:
        """The merchant's live service whose id or current slug is `service_id`: every command naming a service
        takes either (the CLI's `--service`, the console API's path)."""
        service = self._load(service_id) or self.get_by_slug(service_id.lower())
        if service is None or service.merchant != merchant or service.deleted:
            raise ServiceNotFoundError(f"no service {service_id} (give one of your services' id or slug)",
                                       field="id")
        return service

    def list_services(self, merchant: str) -> list[ProxyService]:
        index = self._load_index(merchant)
        found = [self._load(i) for i in (index.service_ids if index else [])]
        return [s for s in found if s is not None and not s.deleted]

    def wallet_of(self, merchant: str) -> str | None:
        """The merchant's wallet as its routes name it: the payTo of the last route of its newest service with
        routes; None while it has none (the route forms' default pay-to)."""
        for service in reversed(self.list_services(merchant)):
            if service.routes:
                return list(service.routes.values())[-1].pay_to
        return None

    def services_on_domain(self, merchant_uuid: str, domain: str) -> int:
        """The console's `DomainUsage` port: how many of the merchant's live services have their base URL on
        `domain` (a verified domain cannot be removed while one does)."""
        try:
            index: MerchantServices = self.repository.get(services_index_id(merchant_uuid))
        except AggregateNotFoundError:
            return 0
        found = [self._load(i) for i in index.service_ids]
        return sum(1 for s in found if s is not None and not s.deleted and s.base.domain == domain.lower())

    def service_id_for(self, merchant: str, ref: str) -> str | None:
        """The console's `DomainUsage` port, for scoped keys: the id of the merchant's live service whose id or
        current slug is `ref`."""
        service = self._load(ref) or self.get_by_slug(ref.lower())
        if not isinstance(service, ProxyService) or service.merchant != merchant or service.deleted:
            return None
        return str(service.id)

    def get_by_slug(self, slug: str) -> ProxyService | None:
        owner = self._owner(slug)
        service = self._load(owner) if owner else None
        return service if service is not None and not service.deleted and service.slug == slug else None

    def verified_domains_of(self, merchant: str) -> set[str]:
        """The merchant's verified domains now (from the Merchant aggregate, not a read model)."""
        return self._verified(merchant)

    def match(self, service: ProxyService, method: str, raw_path: str) -> Route | None:
        """The service's first route (in creation order) whose method and pattern match, as the SDK matches."""
        path = normalize_path(raw_path)
        return next((r for r in service.routes.values() if matches(r.method, r.path, method, path)), None)

    def upstream_auth(self, service: ProxyService) -> tuple[str, str] | None:
        if service.auth_header is None or service.auth_ciphertext is None or self._secrets is None:
            return None
        return service.auth_header, self._secrets.decrypt(service.auth_ciphertext)

    # -- steps --------------------------------------------------------------------------------------------

    def _base_url(self, merchant: str, domain: str | None, subdomain: str, path_suffix: str,
                  port: int | None) -> BaseUrl:
        verified = self._verified(merchant)
        if not domain:
            if len(verified) != 1:
                raise ProxyServiceError("choose one of your verified domains" if verified else
                                        "verify a domain first: a service's base URL is on a verified domain",
                                        field="domain")
            domain = next(iter(verified))
        base = build_base_url(domain, subdomain, path_suffix, port, sandbox=self._sandbox)
        if base.domain not in verified:  # localhost too: only the sandbox merchant's is (pre-)verified
            raise ProxyServiceError(f"{base.domain} is not a verified domain of yours", field="domain")
        if (refused := localhost_refusal(base, self._own_ports)) is not None:
            raise ProxyServiceError(refused, field="port")
        return base

    def _verified(self, merchant: str) -> set[str]:
        if self._merchants is None:
            return set()
        return {d.lower() for d in self._domains(self._merchants.get_merchant(merchant))}

    def _capability(self, merchant: str, network_id: str | None, asset: str | None) -> tuple[str, str]:
        enabled = sorted(self._merchants.get_merchant(merchant).capabilities if self._merchants else set())
        usable = [(n, a) for n, scheme, a in enabled if scheme == SCHEME_EXACT
                  and (network_id is None or n == network_id) and (asset is None or a == asset)]
        if network_id is not None and network(network_id) is None:
            raise ProxyServiceError(f"network {network_id} is not one Paywarden serves", field="network")
        if not usable:
            raise ProxyServiceError("enable a capability (network, exact, asset) for this network and asset first",
                                    field="network" if asset is None else "asset")
        if len({n for n, _ in usable}) > 1:
            raise ProxyServiceError("you have several networks enabled: choose one", field="network")
        return usable[0]

    def _claim(self, base: BaseUrl, service_id: str, custom: str | None, name: str) -> tuple[SlugClaim, str]:
        """The first slug of the service's name or base URL (or the custom one) that is free or already this
        service's: a new claim, a released one re-claimed, or the service's own (so a base-URL edit keeps a slug
        made from the name)."""
        options: Iterable[str] = [check_slug(custom)] if custom is not None else candidates(base.host, name)
        for slug in options:
            existing = self._claim_of(slug)
            if existing is None:
                return SlugClaim(slug=slug, service_id=service_id), slug
            if existing.owner == service_id:
                return existing, slug
            if existing.free:
                existing.reclaim(service_id)
                return existing, slug
            if custom is not None:
                raise SlugTakenError(f"slug {slug} is taken", field="slug")
        raise SlugError("no slug available")  # unreachable: candidates are endless

    def _owner(self, slug: str) -> str | None:
        claim = self._claim_of(slug)
        return claim.owner if claim is not None else None

    def _claim_of(self, slug: str) -> SlugClaim | None:
        try:
            return self.repository.get(slug_claim_id(slug))
        except AggregateNotFoundError:
            return None

    def _change(self, merchant: str, service_id: str, change: Callable[[ProxyService], None]) -> ProxyService:
        service = self.get_service(merchant, service_id)
        change(service)
        self.save(service)
        return service

    def _index(self, merchant: str) -> MerchantServices:
        return self._load_index(merchant) or MerchantServices(merchant=merchant)

    def _load_index(self, merchant: str) -> MerchantServices | None:
        try:
            return self.repository.get(MerchantServices.create_id(merchant))
        except AggregateNotFoundError:
            return None

    def _load(self, service_id: str) -> ProxyService | None:
        try:
            return self.repository.get(uuid.UUID(str(service_id)))
        except (AggregateNotFoundError, ValueError):
            return None

    def _encrypt(self, value: str) -> str:
        if self._secrets is None:
            raise ProxyServiceError("upstream auth needs PAYWARDEN_SECRET_KEY", field="upstreamAuth")
        return self._secrets.encrypt(value)

