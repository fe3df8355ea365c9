"""README.md's sandbox commands, run from the README's own text against `paywarden up --demo --json`, in a fresh
virtualenv (the Quick start's `pip install -e .`, then the README's `pip install -e '.[client]'`)."""

from __future__ import annotations

import json
import re
import shlex
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import ROOT

README = (ROOT / "README.md").read_text()


def sandbox_section() -> str:
    return README[README.index("## The sandbox"):README.index("## Command line")]


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", sandbox_section(), re.S)


def block_with(language: str, needle: str) -> str:
    found = [b for b in blocks(language) if needle in b]
    assert len(found) == 1, f"the sandbox section has no single {language} block with {needle!r}"
    return found[0]


def in_venv(line: str, venv: Path) -> list[str]:
    """A README command line, `.venv/bin/` being the test's fresh virtualenv."""
    return shlex.split(line.replace(".venv/bin/", f"{venv}/bin/"))


@pytest.fixture(scope="module")
def client_venv(fresh_venv) -> Path:
    """The README's install line for the payment example, in the fresh virtualenv (from the clone's folder)."""
    setup = block_with("sh", "up --demo --json > up.json")
    install = next(line for line in setup.splitlines() if "pip install" in line)
    assert install.strip() == ".venv/bin/pip install -q -e '.[client]'"
    subprocess.run(in_venv(install, fresh_venv), cwd=ROOT, check=True, timeout=900)
    return fresh_venv


@pytest.fixture
def up_json(stack, tmp_path) -> Path:
    """What `paywarden up --demo --json > up.json` leaves in the folder: the stack's one JSON line."""
    (tmp_path / "up.json").write_text(json.dumps(stack.info) + "\n")
    return tmp_path


def test_up_json_gives_absolute_paths_and_names_the_data_directory(stack):
    assert Path(stack["data_dir"]) == stack.data_dir.resolve()
    paths = [stack["payer_keypair_path"], stack["pay_to_keypair_path"], stack["data_dir"],
             *stack["fee_payer_keypair_paths"]]
    for path in paths:
        assert Path(path).is_absolute() and Path(path).exists(), path
    assert stack["database_url"] == f"sqlite://{stack['data_dir']}"


def test_the_readme_payment_example_runs_as_written_and_the_catalog_then_lists_the_demo(client_venv, stack,
                                                                                          up_json):
    paid = subprocess.run([str(client_venv / "bin" / "python"), "-c", block_with("python", "x402ClientSync")],
                          cwd=up_json, capture_output=True, text=True, timeout=120)
    assert paid.returncode == 0, paid.stderr
    status, _, body = paid.stdout.partition(" ")
    assert status == "200" and "sunny" in body, paid.stdout

    # The listing appears once the projection worker has followed the payment (payments → listings → catalog).
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with sqlite3.connect(stack.data_dir / "catalog.db") as db:
            if db.execute("SELECT count(*) FROM catalog_listings WHERE resource = ?",
                          (stack["demo_url"],)).fetchone()[0]:
                break
        time.sleep(0.2)
    catalog_line = next(line for line in block_with("sh", "/discovery/resources").splitlines() if line.strip())
    listed = subprocess.run(in_venv(catalog_line, client_venv), cwd=up_json, capture_output=True, text=True,
                            timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert stack["demo_url"] in listed.stdout and "Today's weather" in listed.stdout, listed.stdout


def test_the_readme_bench_lines_give_only_200s(stack, fresh_venv, up_json):
    lines = [line for line in block_with("sh", "bench --up up.json").splitlines() if line.strip()]
    assert "merchant set-rate-limit sandbox" in lines[0]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(up_json), "PAYWARDEN_DATA_DIR": str(stack.data_dir)}
    raised = subprocess.run(in_venv(lines[0], fresh_venv), cwd=up_json, env=env, capture_output=True, text=True,
                            timeout=120)
    assert raised.returncode == 0, raised.stderr
    # More than the default limit of 100 a minute, so the figures are all 200s only because of the line above.
    bench = in_venv(lines[1].replace("--requests 1000", "--requests 150"), fresh_venv) + ["--json"]
    done = subprocess.run(bench, cwd=up_json, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["answers"] == {"200 valid": 150}, report
