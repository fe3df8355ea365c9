"""The audit log follower's leaf of a stored event is `LogEntry.from_stored(...).leaf()`, byte for byte, whether
it takes the standard library's encoder (plain ASCII states without fractions) or RFC 8785's own."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.log_entry import EntryError, LogEntry
from interfaces.audit.log import leaf_of

RECEIVED = (b'{"originator_topic":"domain.payment:Payment","timestamp":{"_type_":"datetime_iso","_data_":'
            b'"2026-11-23T19:00:00.123456+00:00"},"amount":18446744073709551615,"client_id":"merchant:x",'
            b'"extensions":{"bazaar":{"info":{"tags":["a","b"],"nested":[{"z":null,"a":true,"m":false}]}}},'
            b'"resource":{"url":"https://x.example/item?q=\\"1\\"&t=\\t","description":"line\\nbreak\\u0001"}}')


def both(state: bytes, application: str = "payments") -> tuple[bytes, bytes]:
    args = (application, 17, "6f1c0a3e-0000-4000-8000-000000000001", 2, "domain.payment:Payment.Approved", state)
    return leaf_of(*args), LogEntry.from_stored(*args).leaf()


@pytest.mark.parametrize("state", [
    RECEIVED,
    b'{"price":0.01,"big":1e21,"small":1e-7,"whole":2.0}',  # numbers RFC 8785 writes its own way
    b'{"description":"caf\\u00e9 \xe2\x82\xac","emoji":"\xf0\x9f\x98\x80"}',  # not ASCII
    b'{"\xee\x80\x80":1,"\xf0\x9f\x98\x80":2,"a":3}',  # names whose UTF-16 order differs from code points
    b'{"a":-0,"b":[],"c":{},"d":"\\u007f\\u001f"}',
])
def test_the_leaf_is_the_log_entrys(state):
    fast, reference = both(state)
    assert fast == reference


@pytest.mark.parametrize("state", [b"\x00garbage", b'{"a":NaN}', b'{"a":"\\ud800"}', b"\xff\xfe"])
def test_a_state_the_log_entry_refuses_is_refused_alike(state):
    with pytest.raises(EntryError):
        LogEntry.from_stored("payments", 9, "x", 1, "t", state).leaf()
    with pytest.raises(EntryError):
        leaf_of("payments", 9, "x", 1, "t", state)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70) | st.floats(allow_nan=False,
                                                                                         allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_any_json_state_gives_the_log_entrys_leaf(value):
    state = json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")
    try:
        reference = LogEntry.from_stored("payments", 1, "x", 1, "t", state).leaf()
    except EntryError:
        with pytest.raises(EntryError):
            leaf_of("payments", 1, "x", 1, "t", state)
        return
    assert leaf_of("payments", 1, "x", 1, "t", state) == reference
