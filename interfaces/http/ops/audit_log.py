"""The audit log as C2SP `tlog-tiles` (https://c2sp.org/tlog-tiles), read-only and public: `GET /audit/log/checkpoint`
(the newest signed checkpoint with its witnesses' cosignatures), `GET /audit/log/tile/<L>/<N>[.p/<W>]` (hash tiles)
and `GET /audit/log/tile/entries/<N>[.p/<W>]` (entry bundles). Any standard tlog client proves inclusion and
consistency from them without our code (docs/audit.md). No auth, no rate limit: full tiles never change and are
cached by whoever fetches them.
"""

from __future__ import annotations

from typing import Protocol

import falcon

from interfaces.http.common.errors import WireError

PREFIX = "/audit/log"
IMMUTABLE = ["public", "max-age=31536000", "immutable"]


class TileReader(Protocol):
    def checkpoint(self) -> tuple[int, str]: ...  # (size, signed note); LookupError before the first checkpoint

    def read(self, path: str) -> bytes: ...  # a tile or bundle below the prefix; ValueError when there is none


class CheckpointResource:
    def __init__(self, reader: TileReader) -> None:
        self._reader = reader

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        try:
            _, note = self._reader.checkpoint()
        except LookupError:
            raise WireError("no_checkpoint", falcon.HTTP_404, "the audit log has signed no checkpoint yet") from None
        resp.content_type = "text/plain; charset=utf-8"
        resp.text = note
        resp.cache_control = ["public", "max-age=5"]  # mutable: the spec asks for no caching beyond a few seconds


class TileResource:
    def __init__(self, reader: TileReader) -> None:
        self._reader = reader

    def on_get(self, req: falcon.Request, resp: falcon.Response, path: str) -> None:
        try:
            data = self._reader.read("tile/" + path)
        except LookupError:
            raise WireError("no_checkpoint", falcon.HTTP_404, "the audit log has signed no checkpoint yet") from None
        except ValueError as missing:
            raise WireError("no_such_tile", falcon.HTTP_404, str(missing)) from None
        resp.content_type = "application/octet-stream"
        resp.data = data
        # a partial tile of a given width never changes either: the log is append-only
        resp.cache_control = IMMUTABLE


def mount(app: falcon.App, reader: TileReader) -> None:
    app.add_route(f"{PREFIX}/checkpoint", CheckpointResource(reader))
    app.add_route(PREFIX + "/tile/{path:path}", TileResource(reader))
