"""One stored event as an entry of the audit log: its recorded fields with its application name and position.

An entry is the RFC 8785 encoding of `{"application", "position", "originator_id", "originator_version",
"topic", "state"}`, where `state` is the event's recorded state exactly as stored (eventsourcing's JSON,
including its `_type_`/`_data_` markers for UUIDs and times), read generically: no event class is needed, so
entries of events whose classes change later still hash the same. The Merkle leaf is `leaf_hash(entry)`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from domain.canonical import CanonicalError, canonical
from domain.merkle import leaf_hash


class EntryError(ValueError):
    """A stored event or an exported line that is not a well-formed, canonical log entry."""


@dataclass(frozen=True)
class LogEntry:
    application: str
    position: int
    originator_id: str
    originator_version: int
    topic: str
    state: Any

    @property
    def where(self) -> str:
        """How a report names it: `payments/17`."""
        return f"{self.application}/{self.position}"

    def encoded(self) -> bytes:
        try:
            return canonical({
                "application": self.application, "position": self.position, "originator_id": self.originator_id,
                "originator_version": self.originator_version, "topic": self.topic, "state": self.state,
            })
        except CanonicalError as bad:
            raise EntryError(f"{self.where}: {bad}") from None

    def leaf(self) -> bytes:
        return leaf_hash(self.encoded())

    @classmethod
    def from_stored(cls, application: str, position: int, originator_id: Any, originator_version: int,
                    topic: str, state: bytes) -> LogEntry:
        """From a stored event's columns; a state that is not JSON is an error naming the event."""
        try:
            decoded = json.loads(state.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise EntryError(f"{application}/{position}: the stored state is not JSON") from None
        return cls(application, int(position), str(originator_id), int(originator_version), topic, decoded)

    @classmethod
    def from_line(cls, line: bytes) -> LogEntry:
        """From one exported line, which must be exactly its own canonical encoding."""
        try:
            d = json.loads(line.decode("utf-8"))
            entry = cls(d["application"], d["position"], d["originator_id"], d["originator_version"], d["topic"],
                         d["state"])
        except (UnicodeDecodeError, ValueError, KeyError, TypeError):
            raise EntryError("not a log entry") from None
        if set(d) != {"application", "position", "originator_id", "originator_version", "topic", "state"} or not (
                isinstance(entry.position, int) and isinstance(entry.originator_version, int)):
            raise EntryError(f"{entry.where}: not a log entry")
        if entry.encoded() != line:
            raise EntryError(f"{entry.where}: the line is not in canonical form")
        return entry
