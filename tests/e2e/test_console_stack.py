"""`paywarden up` serves the merchant console beside the API, and `up --json` gives its login."""

from __future__ import annotations

import httpx


def test_up_prints_a_console_login_that_works_and_shows_the_sandbox_key(stack):
    console = stack["console_url"]
    assert console.startswith("http://127.0.0.1:")
    login = httpx.post(f"{console}/api/v1/session", timeout=30,
                       json={"email": stack["console_email"], "password": stack["console_password"]})
    assert login.status_code == 200, login.text
    cookies, csrf = login.cookies, login.json()["csrfToken"]
    me = httpx.get(f"{console}/api/v1/me", cookies=cookies, timeout=10).json()
    assert me["merchant"] == stack["merchant"] and me["email"] == stack["console_email"]
    keys = httpx.get(f"{console}/api/v1/keys", cookies=cookies, timeout=10).json()["keys"]
    assert stack["api_key"][:16] in {k["prefix"] for k in keys}
    assert stack["api_key"] not in str(keys)
    # localhost is pre-verified for the sandbox merchant, so a local backend can be proxied
    domains = httpx.get(f"{console}/api/v1/domains", cookies=cookies, timeout=10).json()["domains"]
    assert [(d["domain"], d["status"], d["method"]) for d in domains] == [("localhost", "verified", "sandbox")]
    # the pages are served too, and an unsafe request without the token is refused
    assert "Log in" in httpx.get(f"{console}/login", timeout=10).text
    refused = httpx.post(f"{console}/api/v1/keys", cookies=cookies, json={"env": "test"}, timeout=10)
    assert refused.status_code == 403
    created = httpx.post(f"{console}/api/v1/keys", cookies=cookies, json={"env": "test"}, timeout=10,
                         headers={"X-CSRF-Token": csrf})
    assert created.status_code == 201
    # the API answers on its own port, not the console's routes
    assert httpx.get(f"{stack['base_url']}/api/v1/me", timeout=10).status_code == 404
    supported = httpx.get(f"{stack['base_url']}/supported", timeout=10,
                          headers={"Authorization": f"Bearer {created.json()['key']}"})
    assert supported.status_code == 200
