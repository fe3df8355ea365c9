"""`paywarden serve` runs the webhook worker beside gunicorn (and `paywarden up` runs `serve`): an endpoint created
from the CLI hears a test event without anyone starting a worker by hand; after SIGTERM no worker is left."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from interfaces.cli.main import main
from tests.faults import free_port, wait_until
from tests.webhook_receiver import start_receiver


@pytest.mark.slow
def test_serve_starts_the_webhook_worker_and_stops_it(tmp_path, monkeypatch, capsys):
    receiver, server = start_receiver(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAYWARDEN_")}
    env.update(PAYWARDEN_DATA_DIR=str(tmp_path), PAYWARDEN_WEBHOOK_CA_FILE=receiver.ca_file)
    for name in [k for k in os.environ if k.startswith("PAYWARDEN_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PAYWARDEN_DATA_DIR", str(tmp_path))
    assert main(["merchant", "create", "acme"]) == 0
    assert main(["webhooks", "create", "--merchant", "acme", "--url", receiver.url, "--events", "payment.confirmed",
                 "--json"]) == 0
    created = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    receiver.secrets.append(created["secret"])
    serve = subprocess.Popen([sys.executable, "-m", "interfaces.cli.main", "serve",
                              "--bind", f"127.0.0.1:{free_port()}"],
                             env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    try:
        assert main(["webhooks", "test", "--merchant", "acme", created["id"]]) == 0
        [delivery] = receiver.wait_for(1, timeout=60)
        assert delivery.payload["type"] == "webhook.test" and delivery.verified_with == receiver.secrets
        workers = subprocess.run(["pgrep", "-f", "-s", str(serve.pid), "interfaces.cli.main webhooks"],
                                 capture_output=True, text=True).stdout.split()
        assert len(workers) == 1
    finally:
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(60) == 0
        server.shutdown()
        server.server_close()

    def left() -> list[str]:
        return subprocess.run(["pgrep", "-s", str(serve.pid)], capture_output=True, text=True).stdout.split()

    wait_until(lambda: left() == [], timeout=5, what="no process left in serve's session")
