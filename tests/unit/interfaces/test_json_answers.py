"""The API's answers are written by one JSON encoder made once (`JSON_ANSWERS`), byte for byte as falcon's default
JSON handler writes them."""

from __future__ import annotations

import falcon
import falcon.media
import pytest

from interfaces.http.facilitator.app import JSON_ANSWERS

MEDIA = [
    {"isValid": True, "payer": "56CHWJVmJRJv2KxV4HVc4tdy53gZdgnravhQvhxKTqRp"},
    {"isValid": False, "invalidReason": "invalid_payload", "invalidMessage": "montant « 1 € » \u2028 \"quoted\"\n"},
    {"success": False, "errorReason": "settlement_pending", "transaction": None, "nested": [1, 2.5, {"a": []}]},
    {"error": "rate_limited", "message": "😀 astral", "big": 2**70, "nan": float("nan")},
    [], "text", 0,
]


@pytest.mark.parametrize("media", MEDIA)
def test_an_answer_is_the_bytes_falcons_default_handler_writes(media):
    assert JSON_ANSWERS.serialize(media, falcon.MEDIA_JSON) == \
        falcon.media.JSONHandler().serialize(media, falcon.MEDIA_JSON)


@pytest.mark.parametrize(("media", "error"), [({"set": {1}}, TypeError), ({"lone": "\ud83d"}, UnicodeEncodeError)])
def test_an_unwritable_answer_fails_as_with_falcons_default_handler(media, error):
    for handler in (JSON_ANSWERS, falcon.media.JSONHandler()):
        with pytest.raises(error):
            handler.serialize(media, falcon.MEDIA_JSON)
