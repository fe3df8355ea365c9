"""The API's one JSON reader, on an endpoint that is not verify or settle: strict JSON, a depth limit, and the
{"error", "message"} body shape for every refusal."""

from __future__ import annotations

import falcon
import pytest
from falcon import testing

from interfaces.http.common.body import MAX_JSON_DEPTH, depth, parse_json, read_json
from interfaces.http.facilitator import errors


class Echo:
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"read": read_json(req)}


@pytest.fixture
def client() -> testing.TestClient:
    app = falcon.App()
    app.add_route("/echo", Echo())
    errors.register(app)
    return testing.TestClient(app)


def post(client: testing.TestClient, raw: bytes, **headers: str) -> testing.Result:
    return client.simulate_post("/echo", body=raw, headers={"Content-Type": "application/json", **headers})


@pytest.mark.parametrize("raw", [b'{"a": NaN}', b'{"a": Infinity}', b'{"a": -Infinity}', b'{"a": [1e999]}',
                                 b'{"a": -1E+400}'])
def test_numbers_json_does_not_have_are_invalid_payload(client, raw):
    result = post(client, raw)
    assert result.status_code == 400 and result.json["error"] == "invalid_payload"
    assert "not valid JSON" in result.json["message"]


def test_ordinary_numbers_still_read():
    assert parse_json(b'{"a": 1.5e3, "b": -0.0, "c": 12345678901234567890, "d": 1e308}') == {
        "a": 1500.0, "b": -0.0, "c": 12345678901234567890, "d": 1e308}


def nested(levels: int) -> bytes:
    return b'{"a":' * (levels - 1) + b"[]" + b"}" * (levels - 1)


def test_the_depth_limit_is_64_nested_arrays_and_objects(client):
    assert depth(parse_json(nested(MAX_JSON_DEPTH))) == MAX_JSON_DEPTH == 64
    assert post(client, nested(MAX_JSON_DEPTH)).status_code == 200
    too_deep = post(client, nested(MAX_JSON_DEPTH + 1))
    assert too_deep.status_code == 400 and too_deep.json["error"] == "invalid_payload"
    assert "deeper than 64" in too_deep.json["message"]


def test_brackets_in_strings_count_toward_the_walk_not_the_depth(client):
    shallow = b'{"a": "' + b"[{" * 100 + b'", "b": [[{}]]}'
    assert depth(parse_json(shallow)) == 4 and post(client, shallow).status_code == 200
    padded = nested(MAX_JSON_DEPTH + 1)[:-1] + b', "s": "' + b"[" * 10 + b'"}'  # the walk still finds 65
    assert post(client, padded).json["error"] == "invalid_payload"


@pytest.mark.parametrize("raw", [b"[" * 60_000, b'{"a":' * 13_000, b"[" * 30_000 + b"]" * 30_000])
def test_nesting_far_past_the_recursion_limit_is_400_not_500(client, raw):
    result = post(client, raw)
    assert result.status_code == 400 and result.json["error"] == "invalid_payload"


def test_a_chunked_body_on_a_server_that_does_not_terminate_the_stream_is_411(client):
    result = post(client, b"", **{"Transfer-Encoding": "chunked"})
    assert result.status_code == 411 and result.json["error"] == "invalid_payload"


def test_an_empty_body_without_length_is_not_json(client):
    result = post(client, b"")
    assert result.status_code == 400 and result.json["error"] == "invalid_payload"


@pytest.mark.parametrize(("raw", "text"), [
    (b'{"a": "\\ud800"}', False), (b'{"a": "x\\uDFFFy"}', False), (b'{"a": "\xed\xa0\x80"}', False),  # raw bytes
    (b'{"a": "\\u00e9 \\"q\\" \\\\ud800"}', True),  # escapes, and an escaped backslash before "ud800": text
    (b'{"a": "\\ud83d\\ude00"}', True), (b'{"a": "\xf0\x9f\x98\x80 \xc3\xa9"}', True), (b'{"a": "plain"}', True),
])
def test_a_lone_surrogate_escaped_or_raw_is_invalid_payload_and_any_other_text_reads(client, raw, text):
    answer = post(client, raw)
    assert (answer.status_code, answer.json.get("error")) == ((200, None) if text else (400, "invalid_payload"))
