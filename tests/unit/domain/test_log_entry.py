"""A stored event as an audit-log entry: canonical, generic, and refusing what is not an entry."""

from __future__ import annotations

import pytest

from domain.log_entry import EntryError, LogEntry

STATE = b'{"timestamp": {"_type_": "datetime_iso", "_data_": "2026-11-23T12:00:00+00:00"}, "amount": 1000}'


def test_a_stored_event_becomes_a_canonical_line_that_reads_back_identically():
    entry = LogEntry.from_stored("payments", 7, "6f1c0a3e-0000-4000-8000-000000000001", 1,
                                 "domain.payment:Payment.Received", STATE)
    line = entry.encoded()
    assert line.startswith(b'{"application":"payments","originator_id":"6f1c0a3e-')
    assert b'"state":{"amount":1000,"timestamp":{"_data_":"2026-11-23T12:00:00+00:00"' in line
    assert LogEntry.from_line(line) == entry
    assert entry.where == "payments/7"


def test_one_changed_byte_in_the_recorded_state_changes_the_leaf():
    a = LogEntry.from_stored("payments", 7, "x", 1, "t", STATE)
    b = LogEntry.from_stored("payments", 7, "x", 1, "t", STATE.replace(b"1000", b"1001"))
    assert a.leaf() != b.leaf()


def test_the_same_event_at_another_position_or_application_is_another_leaf():
    a = LogEntry.from_stored("payments", 7, "x", 1, "t", STATE)
    assert a.leaf() != LogEntry.from_stored("payments", 8, "x", 1, "t", STATE).leaf()
    assert a.leaf() != LogEntry.from_stored("merchants", 7, "x", 1, "t", STATE).leaf()


def test_a_stored_state_that_is_not_json_names_its_event():
    with pytest.raises(EntryError, match="payments/9"):
        LogEntry.from_stored("payments", 9, "x", 1, "t", b"\x00garbage")


@pytest.mark.parametrize("line", [
    b'{"application":"payments","position":1}',
    b'{"state":{},"topic":"t","originator_version":1,"originator_id":"x","position":1,"application":"p"}',
    b'{"application":"p","originator_id":"x","originator_version":1,"position":1,"state":{},"topic":"t"} ',
    b'{"application":"p","originator_id":"x","originator_version":1,"position":"1","state":{},"topic":"t"}',
    b"not json",
])
def test_an_exported_line_that_is_not_a_canonical_entry_is_refused(line):
    with pytest.raises(EntryError):
        LogEntry.from_line(line)
