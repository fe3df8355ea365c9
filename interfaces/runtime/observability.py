"""Process-wide observability set-up: JSON log lines on stderr, and Prometheus' multiprocess directory.

Every log record becomes one JSON object on one line: `ts`, `level`, `logger`, `message`, the record's `extra`
fields, and `exc` with the traceback when there is one. Secrets never reach the output: API keys
(`pw_live_…`/`pw_test_…`), bearer tokens and long base64 runs (signed transactions) are masked in the final line,
a last line of defence behind the rule that no code logs them at all (which the tests check on the raw records).

Nothing here imports `prometheus_client`: its value class is chosen at import time from
`PROMETHEUS_MULTIPROC_DIR`, which gunicorn's configuration sets before any worker imports the application.
"""

from __future__ import annotations

import json
import logging
import logging.config
import os
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

SECRETS = (
    (re.compile(r"pw_(live|test)_[A-Za-z0-9]{40}"), r"pw_\1_<redacted>"),
    (re.compile(r"(?i)\bbearer\s+[^\s\"',]+"), "Bearer <redacted>"),
    (re.compile(r"[A-Za-z0-9+/]{200,}={0,2}"), "<redacted base64>"),
)
# Attributes every LogRecord has: anything else on a record came from `extra=` and is logged as a field.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "taskName"}


_KEY, _BEARER, _BASE64 = SECRETS
_ENCODE = json.JSONEncoder(default=str, ensure_ascii=False).encode  # json.dumps(…, default=str, ensure_ascii=False)


def redact(text: str) -> str:
    """Each of SECRETS in turn. A key starts with `pw_`, and `bearer` matches (case-insensitively) only ASCII letters,
    so a line without them skips those two patterns (the case-insensitive one is the slowest)."""
    if "pw_" in text:
        text = _KEY[0].sub(_KEY[1], text)
    if "bearer" in text.lower():
        text = _BEARER[0].sub(_BEARER[1], text)
    return _BASE64[0].sub(_BASE64[1], text)


def timestamp(created: float) -> str:
    """A record's `ts`: ISO 8601 UTC to the millisecond."""
    return datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def json_line(fields: dict[str, Any]) -> str:
    """One log line, secrets masked: what `JsonFormatter` writes for a record with these fields."""
    return redact(_ENCODE(fields))


def record_fields(record: logging.LogRecord) -> dict[str, Any]:
    """What one log line holds, before any masking."""
    fields: dict[str, Any] = {
        "ts": timestamp(record.created),
        "level": record.levelname.lower(),
        "logger": record.name,
        "message": record.getMessage(),
    }
    for name, value in vars(record).items():
        if name not in _STANDARD and not name.startswith("_"):
            fields[name] = value
    if record.exc_info:
        fields["exc"] = logging.Formatter().formatException(record.exc_info)
    elif record.exc_text:
        fields["exc"] = record.exc_text
    if record.stack_info:
        fields["stack"] = record.stack_info
    return fields


class JsonFormatter(logging.Formatter):
    """One JSON object per record, secrets masked (`redact=False` only for the tests' leak detector)."""

    def __init__(self, *args: Any, redact: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._redact = redact

    @property
    def redacts(self) -> bool:
        return self._redact

    def format(self, record: logging.LogRecord) -> str:
        line = _ENCODE(record_fields(record))
        return redact(line) if self._redact else line


def logging_config(level: str = "info") -> dict[str, Any]:
    """A `logging.config.dictConfig` dictionary: everything, gunicorn's own logs included, as JSON on stderr."""
    level = level.upper()
    handler = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": JsonFormatter}},
        "handlers": {"stderr": handler},
        "root": {"handlers": ["stderr"], "level": level},
        "loggers": {
            "gunicorn.error": {"handlers": ["stderr"], "level": level, "propagate": False,
                               "qualname": "gunicorn.error"},
            # The API logs each request itself (interfaces/http/common/requestlog.py): gunicorn's access lines
            # are dropped.
            "gunicorn.access": {"handlers": [], "level": "WARNING", "propagate": False,
                                "qualname": "gunicorn.access"},
        },
    }


def configure_logging(level: str | None = None) -> None:
    logging.config.dictConfig(logging_config(level or os.environ.get("PAYWARDEN_LOG_LEVEL", "").strip() or "info"))


# -- Prometheus multiprocess mode -------------------------------------------------------------------------------

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def metrics_dir(data_dir: str | os.PathLike[str], bind: str) -> Path:
    """One directory per listening address, so two servers sharing a data directory never wipe each other's."""
    return Path(data_dir) / "metrics" / re.sub(r"[^A-Za-z0-9.-]+", "_", bind).strip("_")


def prepare_metrics_dir(path: str | os.PathLike[str]) -> Path:
    """Create the directory and drop the files of a previous run (dead workers' counters must not carry over)."""
    directory = Path(path)
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob("*.db"):
        stale.unlink(missing_ok=True)
    return directory


def mark_worker_dead(pid: int) -> None:
    """gunicorn's `child_exit` hook: a dead worker's live gauges stop counting (its counters stay summed)."""
    if os.environ.get(MULTIPROC_ENV):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid)
