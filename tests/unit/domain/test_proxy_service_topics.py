"""Stored events name their class by topic (`module:qualname`): the topics the proxy service's events were stored
under must still resolve, to the classes that replay them, wherever the code moves."""

import pytest
from eventsourcing.utils import get_topic, resolve_topic

from domain.proxy_service import Delivery, MerchantServices, ProxyService

STORED = {
    "domain.proxy_service:ProxyService": ProxyService,
    "domain.proxy_service:MerchantServices": MerchantServices,
    "domain.proxy_service:Delivery": Delivery,
    **{f"domain.proxy_service:ProxyService.{name}": getattr(ProxyService, name) for name in (
        "Created", "Renamed", "BaseUrlChanged", "Activated", "Deactivated", "UpstreamAuthSet",
        "UpstreamAuthCleared", "BodyLimitSet", "CookiesPassed", "RouteAdded", "RouteRemoved", "Deleted", "KindChosen",
        "ToolPriced", "ToolUnpriced")},
    **{f"domain.proxy_service:MerchantServices.{name}": getattr(MerchantServices, name) for name in (
        "Started", "ServiceAdded", "ServiceRemoved")},
    "domain.proxy_service:Delivery.Committed": Delivery.Committed,
}


@pytest.mark.parametrize("topic", sorted(STORED))
def test_stored_topics_resolve_to_the_classes_that_replay_them(topic: str) -> None:
    assert resolve_topic(topic) is STORED[topic]
    assert get_topic(STORED[topic]) == topic
