"""README.md's sandbox commands, run from the README's own text against `paywarden up --demo --json`, in a fresh
virtualenv (the Quick start's `pip install -e .`, then the README's `pip install -e '.[client]'`); and every shell
and Python block of the README and docs/, run as written against the session's one stack (docs/testing.md, "The
README's and the docs' code blocks")."""

from __future__ import annotations

import json
import re
import shlex
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

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


def sandbox_payments(venv: Path, env: dict[str, str], cwd: Path) -> int:
    done = subprocess.run([str(venv / "bin" / "paywarden"), "payments", "export", "--merchant", "sandbox"], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return len(done.stdout.splitlines()) - 1  # the header


def test_the_readme_bench_line_gives_only_200s_in_a_merchant_of_its_own(stack, fresh_venv, up_json):
    lines = [line for line in block_with("sh", "bench --up up.json").splitlines() if line.strip()]
    assert len(lines) == 1, lines
    env = {"PATH": "/usr/bin:/bin", "HOME": str(up_json), "PAYWARDEN_DATA_DIR": str(stack.data_dir)}
    before = sandbox_payments(fresh_venv, env, up_json)
    # More than the default limit of 100 a minute: all 200s because the bench merchant has its own limit.
    bench = in_venv(lines[0].replace("--requests 1000", "--requests 150"), fresh_venv) + ["--json"]
    done = subprocess.run(bench, cwd=up_json, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["answers"] == {"200 valid": 150}, report
    assert "paying as the merchant `bench`" in done.stderr
    # Not one of the 150 landed in the sandbox merchant's books; they are the bench merchant's.
    assert sandbox_payments(fresh_venv, env, up_json) == before
    listed = subprocess.run([str(fresh_venv / "bin" / "paywarden"), "payments", "export", "--merchant", "bench",
                             "--state", "APPROVED"], cwd=up_json, env=env, capture_output=True, text=True,
                            timeout=120)
    assert listed.returncode == 0 and len(listed.stdout.splitlines()) - 1 >= 150, listed.stderr


# -- every README and docs block, as written ---------------------------------------------------------------------

DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "interfaces" / "bench" / "README.md"]
RUNNABLE = {"sh": "sh", "bash": "sh", "shell": "sh", "python": "python"}
SKIP = re.compile(r"<!-- readme-test: skip \((.+)\) -->\n$")
# The ports the blocks are written for (the defaults of `paywarden up`), and where the session's stack listens.
DEFAULT_PORTS = {"base_url": 8402, "rpc_url": 8899, "demo_url": 8403, "console_url": 8404, "proxy_url": 8405,
                 "demo_backend_url": 8406}


def code_blocks() -> list[tuple[str, str, str, str | None]]:
    """(where, language, code, the skip marker's reason or None) of every shell and Python block."""
    found = []
    for path in DOCUMENTS:
        text = path.read_text()
        for match in re.finditer(r"```(\w*)\n(.*?)```", text, re.S):
            if match.group(1) not in RUNNABLE:
                continue
            skip = SKIP.search(text[:match.start()])
            where = f"{path.relative_to(ROOT)}:{text[:match.start()].count(chr(10)) + 1}"
            found.append((where, RUNNABLE[match.group(1)], match.group(2), skip.group(1) if skip else None))
    return found


def test_the_blocks_that_do_not_run_say_why_and_are_few():
    blocks = code_blocks()
    skipped = [(where, reason) for where, _, _, reason in blocks if reason is not None]
    assert all(len(reason) > 20 for _, reason in skipped), skipped
    assert len(skipped) <= 13 and len(blocks) - len(skipped) >= 6, skipped
    markers = sum(len(re.findall(r"^<!-- readme-test: skip", path.read_text(), re.M)) for path in DOCUMENTS)
    assert markers == len(skipped), "a marker not followed by a shell or Python block"


@pytest.fixture(scope="module")
def workdir(stack, tmp_path_factory) -> Path:
    """One folder for every block, holding `up.json` as the README's `up --demo --json > up.json` leaves it."""
    folder = tmp_path_factory.mktemp("blocks")
    (folder / "up.json").write_text(json.dumps(stack.info) + "\n")
    return folder


def as_in_this_stack(code: str, stack) -> str:
    """The block with `.venv/bin/` this interpreter's virtualenv and each default port the session stack's."""
    code = code.replace(".venv/bin/", f"{Path(sys.executable).parent}/")
    for name, port in DEFAULT_PORTS.items():
        code = re.sub(rf"\b{port}\b", str(urlsplit(stack[name]).port), code)
    return code


RUN = [(where, language, code) for where, language, code, reason in code_blocks() if reason is None]


@pytest.mark.parametrize("where, language, code", RUN, ids=[where for where, _, _ in RUN])
def test_every_readme_and_docs_block_runs_as_written(stack, workdir, where, language, code):
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(workdir),
           "PAYWARDEN_DATA_DIR": str(stack.data_dir)}
    code = as_in_this_stack(code, stack)
    argv = ["bash", "-e", "-o", "pipefail", "-c", code] if language == "sh" else [sys.executable, "-c", code]
    done = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{where}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr and "Warning:" not in done.stderr, f"{where}\n{done.stderr[-3000:]}"
