"""Every log record of the test run, checked for API keys: the test that logs one fails, and so does the run.

Installed from `tests/conftest.py`. The detector formats each record with the JSON formatter the service uses,
*without* its masking, and searches the whole line (message, extra fields, traceback) for `pw_live_`/`pw_test_`
followed by 40 characters: it tests that no code logs a key, not that the formatter hides one.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from interfaces.runtime.observability import JsonFormatter

API_KEY = re.compile(r"pw_(live|test)_[A-Za-z0-9]{40}")


class LeakDetector(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.lines: list[str] = []  # every record of the run, as the JSON line it would be without masking
        self.leaks: list[str] = []
        self._formatter = JsonFormatter(redact=False)
        self._expected: list[str] | None = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self._formatter.format(record)
        except Exception as failure:  # a record the service's formatter cannot write is a finding too
            line = f"unformattable record {record.name}: {failure!r}"
            self.leaks.append(line)
        self.lines.append(line)
        if API_KEY.search(line):
            (self.leaks if self._expected is None else self._expected).append(line)

    @contextmanager
    def expecting_leaks(self) -> Iterator[list[str]]:
        """For the detector's own test: leaks inside the block are collected here instead of failing the run."""
        self._expected = caught = []
        try:
            yield caught
        finally:
            self._expected = None


DETECTOR = LeakDetector()


def install() -> None:
    """(Re)attach the detector: a test that calls `logging.config.dictConfig` replaces the root's handlers."""
    root = logging.getLogger()
    if DETECTOR not in root.handlers:
        root.addHandler(DETECTOR)
    if root.level > logging.INFO or root.level == logging.NOTSET:
        root.setLevel(logging.INFO)
    logging.getLogger("paywarden").setLevel(logging.DEBUG)


def pytest_configure(config: pytest.Config) -> None:
    install()


@pytest.fixture(autouse=True)
def no_api_key_in_logs() -> Iterator[None]:
    install()
    before = len(DETECTOR.leaks)
    yield
    install()
    leaked = DETECTOR.leaks[before:]
    if leaked:
        pytest.fail("an API key reached the logs:\n" + "\n".join(leaked[:5]), pytrace=False)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if DETECTOR.leaks:
        print(f"\n{len(DETECTOR.leaks)} log record(s) of this run carry an API key, e.g. {DETECTOR.leaks[0][:300]}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
