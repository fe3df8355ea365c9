"""Rate limits as docs/architecture.md#the-interface-contract states them, on the embedded default and on
PostgreSQL + Redis: a budget per API key (not per merchant), the merchant's override per key, and failed
authentication limited per client IP."""

from __future__ import annotations

from contextlib import ExitStack

import pytest
from prometheus_client import REGISTRY

from domain.networks import KeyEnv
from tests.conftest import Gateway, make_gateway
from tests.faults import PrivateRedis

LIMIT = 5  # small budgets keep the tests fast; the 100/minute default is tested in test_facilitator_http.py
UNKNOWN = "Bearer pw_test_" + "Z" * 40


@pytest.fixture(params=["embedded", "postgres+redis", "postgres+redis over a unix socket"])
def limited(request, tmp_path, sandbox) -> Gateway:
    with ExitStack() as stack:
        stores = {}
        if request.param != "embedded":
            redis_url = (stack.enter_context(PrivateRedis(tmp_path, unix=True)).url if "unix" in request.param
                         else request.getfixturevalue("redis_url"))
            stores = {"database_url": request.getfixturevalue("postgres_url"), "redis_url": redis_url}
        gateway = make_gateway(tmp_path, sandbox, rate_limit_per_key=f"{LIMIT}/minute",
                               rate_limit_per_ip=f"{LIMIT}/minute", trusted_proxies=("10.0.0.0/8",), **stores)
        stack.callback(gateway.container.close)
        yield gateway


def key(gateway: Gateway, merchant: str = "acme") -> dict[str, str]:
    api_key, _ = gateway.container.merchants.create_key(merchant, KeyEnv.TEST)
    return {"Authorization": f"Bearer {api_key}"}


def statuses(gateway: Gateway, headers: dict[str, str], count: int, **options) -> list[int]:
    return [gateway.client.simulate_get("/supported", headers=headers, **options).status_code for _ in range(count)]


def test_two_keys_of_one_merchant_each_have_their_own_budget(limited):
    second = key(limited)
    limited.container.merchants.register("globex")
    globex = key(limited, "globex")
    assert statuses(limited, limited.headers, LIMIT + 1) == [200] * LIMIT + [429]
    assert statuses(limited, second, LIMIT + 1) == [200] * LIMIT + [429]
    assert statuses(limited, globex, 1) == [200]
    assert limited.post("/verify", limited.body()).status_code == 429  # one budget for verify, settle, supported


def test_the_merchants_override_applies_to_each_of_its_keys(limited):
    limited.container.merchants.set_rate_limit("acme", LIMIT + 3)
    second = key(limited)
    assert statuses(limited, limited.headers, LIMIT + 4) == [200] * (LIMIT + 3) + [429]
    assert statuses(limited, second, LIMIT + 4) == [200] * (LIMIT + 3) + [429]


def auth_rejections() -> float:
    return REGISTRY.get_sample_value("paywarden_rate_limit_rejections_total",
                                     {"scope": "auth", "route": "/supported"}) or 0.0


@pytest.mark.parametrize("bad", [UNKNOWN, "Bearer pw_test_short", "Basic dXNlcjpwYXNz"])
def test_a_flood_of_bad_keys_from_one_ip_gets_429_and_then_even_a_good_key_from_it_does(limited, bad):
    before = auth_rejections()
    flood = {"Authorization": bad}
    assert statuses(limited, flood, LIMIT, remote_addr="203.0.113.5") == [401] * LIMIT
    limited_answer = limited.client.simulate_get("/supported", headers=flood, remote_addr="203.0.113.5")
    assert limited_answer.status_code == 429 and limited_answer.json["error"] == "rate_limited"
    assert 1 <= int(limited_answer.headers["Retry-After"]) <= 60
    # A right guess from that address is not told apart from a wrong one.
    assert statuses(limited, limited.headers, 1, remote_addr="203.0.113.5") == [429]
    assert statuses(limited, flood, 1, remote_addr="198.51.100.20") == [401]  # another address is unaffected
    assert statuses(limited, limited.headers, 1, remote_addr="198.51.100.20") == [200]
    assert auth_rejections() - before == 2


def test_good_keys_do_not_spend_the_failed_authentication_budget(limited):
    other = key(limited)
    assert statuses(limited, limited.headers, LIMIT) + statuses(limited, other, LIMIT) == [200] * (2 * LIMIT)
    assert statuses(limited, {"Authorization": UNKNOWN}, LIMIT) == [401] * LIMIT


def test_failed_authentication_is_counted_per_forwarded_client_behind_a_trusted_proxy_only(limited):
    flood = {"Authorization": UNKNOWN, "X-Forwarded-For": "198.51.100.7"}
    proxy = {"remote_addr": "10.0.0.2"}
    assert statuses(limited, flood, LIMIT + 1, **proxy) == [401] * LIMIT + [429]
    assert statuses(limited, {**flood, "X-Forwarded-For": "198.51.100.8"}, 1, **proxy) == [401]
    # An untrusted peer cannot escape the limit by writing a new X-Forwarded-For on every request.
    spoofed = [limited.client.simulate_get("/supported", remote_addr="203.0.113.9", headers={
        "Authorization": UNKNOWN, "X-Forwarded-For": f"192.0.2.{n}"}).status_code for n in range(LIMIT + 1)]
    assert spoofed == [401] * LIMIT + [429]


def test_a_missing_key_where_the_anonymous_identity_is_off_counts_as_a_failure(tmp_path, sandbox):
    gateway = make_gateway(tmp_path, sandbox, anonymous=False, rate_limit_per_ip=f"{LIMIT}/minute")
    try:
        assert statuses(gateway, {}, LIMIT + 1) == [401] * LIMIT + [429]
    finally:
        gateway.container.close()


@pytest.mark.redis
def test_the_one_round_trip_admission_is_exact_and_writes_only_keys_of_our_own(redis_url):
    from concurrent.futures import ThreadPoolExecutor

    import redis

    from interfaces.http.common.ratelimit import RateLimited, RateLimiter

    limiter = RateLimiter(redis_url, "20/minute", f"{LIMIT}/minute")

    def admitted(key_id: str, address: str = "198.51.100.1", per_minute: int | None = None) -> bool:
        try:
            limiter.admit_key(address, key_id, per_minute)
            return True
        except RateLimited as limited:
            assert limited.scope == "key" and 1 <= limited.retry_after <= 60
            return False

    with ThreadPoolExecutor(16) as pool:  # racing requests of one key: exactly its budget passes
        assert sum(pool.map(admitted, ["k1"] * 50)) == 20
    assert admitted("k2")  # another key has its own budget
    limiter.check_key("k2", None)  # the key's check without the authentication counts in the same window
    assert sum(admitted("k2") for _ in range(20)) == 18
    for _ in range(LIMIT):  # the IP spends its failed-authentication budget: even a good key is refused
        limiter.auth_failed("198.51.100.1")
    with pytest.raises(RateLimited) as refused:
        limiter.admit_key("198.51.100.1", "k3", None)
    assert refused.value.scope == "auth" and 59 <= refused.value.retry_after <= 60
    with pytest.raises(RateLimited):
        limiter.check_auth_failures("198.51.100.1")
    assert sum(admitted("k3", "198.51.100.2") for _ in range(21)) == 20  # the refused request took nothing of k3
    assert [admitted("k4", "198.51.100.2", 3) for _ in range(4)] == [True, True, True, False]  # an override
    keys = redis.Redis.from_url(redis_url).keys("*")
    assert keys and all(k.startswith(b"paywarden:window:") for k in keys), keys  # none in `limits`' layout


@pytest.mark.redis
def test_a_unix_socket_redis_url_serves_verify_and_the_consoles_login_throttle(tmp_path, sandbox, postgres_url):
    """`unix:///path?db=N` is a Redis URL the configuration accepts; the `limits` library names it `redis+unix`,
    and before it was translated every worker exited at start-up ("unknown storage scheme")."""
    from interfaces.http.console.security import LoginThrottle, Throttled

    with PrivateRedis(tmp_path, unix=True) as server:
        gateway = make_gateway(tmp_path, sandbox, database_url=postgres_url, redis_url=server.url)
        try:
            body = gateway.body()
            first = gateway.post("/verify", body)
            assert first.status_code == 200 and first.json["isValid"] is True
            assert gateway.post("/verify", body).json == first.json  # the replay, through the same Redis
        finally:
            gateway.container.close()
        throttle = LoginThrottle(server.url)
        for _ in range(5):
            throttle.attempt("owner@acme.test", "198.51.100.7")
        with pytest.raises(Throttled):
            throttle.attempt("owner@acme.test", "198.51.100.7")
