"""The one-command stack, started as a newcomer would: `paywarden up` from a fresh virtualenv.

The session's stack runs on free ports with its own data directory; the tests drive it over HTTP only.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.faults import free_port

ROOT = Path(__file__).resolve().parents[2]


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the group into the test's id
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (setup.cfg's addopts) the e2e tests run one at a time, in one worker (`--dist loadgroup`),
    beside the other worker's tests: the fresh virtualenv is made once and the session's stack started once
    (`test_stack.py`'s SIGINT stops it after the tests that share it: a group keeps collection order), and no two
    stacks compete for the two cores while a test holds a stop or a retry to a time bound."""
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.xdist_group("e2e"))


@pytest.fixture(scope="session")
def fresh_venv(tmp_path_factory) -> Path:
    """A new virtualenv with only what `pip install .` brings (the README's first command)."""
    home = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=True).create(home)
    python = home / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "-e", str(ROOT)], check=True, timeout=900)
    return home


class Stack:
    def __init__(self, process: subprocess.Popen, info: dict, data_dir: Path) -> None:
        self.process, self.info, self.data_dir = process, info, data_dir

    def __getitem__(self, name: str):
        return self.info[name]

    def stop(self) -> int:
        self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout=60)


def start_stack(paywarden: Path, data_dir: Path) -> Stack:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAYWARDEN_")}
    env["PAYWARDEN_DATA_DIR"] = str(data_dir)
    argv = [str(paywarden), "up", "--json", "--demo", "--port", str(free_port()), "--rpc-port", str(free_port()),
            "--demo-port", str(free_port()), "--proxy-port", str(free_port()), "--demo-backend-port", str(free_port()),
            "--console-port", str(free_port())]
    process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=sys.stderr, text=True)
    line = process.stdout.readline()
    if not line:
        process.kill()
        pytest.fail(f"paywarden up printed nothing and exited with {process.wait()}")
    return Stack(process, json.loads(line), data_dir)


@pytest.fixture(scope="session")
def stack(fresh_venv, tmp_path_factory):
    stack = start_stack(fresh_venv / "bin" / "paywarden", tmp_path_factory.mktemp("stack"))
    yield stack
    if stack.process.poll() is None:
        stack.stop()


@pytest.fixture
def postgres_url(empty_postgres_url):
    """An empty database: a stack started on PostgreSQL creates its schema, its processes at once, as an operator's
    first start does (tests/conftest.py's `postgres_url` copies one whose schema is made)."""
    return empty_postgres_url
