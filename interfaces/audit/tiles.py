"""The audit log read as C2SP `tlog-tiles`: its checkpoint (with the witnesses' cosignatures), hash tiles and entry
bundles, for the API's read-only path (`/audit/log/…`) and for the files of an export.

Everything served is bounded by the newest signed checkpoint: a tile or bundle exists once that checkpoint's tree
holds its last hash. Full tiles and bundles never change (the log is append-only), so they are cached here and
answered with long-lived caching headers; the checkpoint changes with every signature.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path

from domain import tiles
from domain.tiles import Tile, TileError
from interfaces.audit.log import AuditLog
from interfaces.config import Config

CACHED_TILES = 512  # full hash tiles (8 KiB each) and bundles kept in memory per process


class NoCheckpointError(LookupError):
    """The log has signed no checkpoint yet."""


class TileSource:
    """Reads the log's tiles from its view (leaf hashes) and bundles from the event stores (entries)."""

    def __init__(self, config: Config | None = None, audit: AuditLog | None = None) -> None:
        self._config, self._audit = config, audit
        self._lock = threading.Lock()
        self._cache: OrderedDict[Tile, bytes] = OrderedDict()

    def _log(self) -> AuditLog:
        with self._lock:
            if self._audit is None:
                if self._config is None:
                    raise RuntimeError("a TileSource needs a configuration or an open audit log")
                self._audit = AuditLog.open(self._config)
            return self._audit

    def checkpoint(self) -> tuple[int, str]:
        """(size, note) of the newest checkpoint, the witnesses' cosignature lines appended to its signatures."""
        view = self._log().view
        latest = view.latest_checkpoint()
        if latest is None:
            raise NoCheckpointError("the audit log has signed no checkpoint yet")
        size, note = latest
        return size, note + "".join(line + "\n" for line in view.cosignatures(size))

    def read(self, path: str) -> bytes:
        """The tile or entry bundle at `path` (below the log's prefix); TileError when the newest checkpoint's tree
        has no such tile."""
        tile = tiles.parse_path(path)
        size, _ = self.checkpoint()
        if tile.leaves_needed() > size:  # a partial tile of a smaller tree stays served, as its full tile is
            raise TileError(f"the log's newest checkpoint (size {size}) has no {tile.path()}")
        if (cached := self._cached(tile)) is not None:
            return cached
        data = self._bundle(tile) if tile.level is None else b"".join(
            tiles.tile_hashes(tile, self._log().view.leaves_between))
        if not tile.partial:
            self._keep(tile, data)
        return data

    def _bundle(self, tile: Tile) -> bytes:
        audit = self._log()
        first = tile.first_leaf()
        entries = audit.view.entries_between(first, first + tile.width)
        lines = audit.entry_lines(entries)
        missing = [f"{a}/{p}" for (_, a, p, _), line in zip(entries, lines, strict=True) if line is None]
        if missing:
            raise TileError(f"events in the log are gone from the event store: {', '.join(missing[:5])}")
        return tiles.bundle([line for line in lines if line is not None])

    def _cached(self, tile: Tile) -> bytes | None:
        with self._lock:
            data = self._cache.get(tile)
            if data is not None:
                self._cache.move_to_end(tile)
            return data

    def _keep(self, tile: Tile, data: bytes) -> None:
        with self._lock:
            self._cache[tile] = data
            while len(self._cache) > CACHED_TILES:
                self._cache.popitem(last=False)

    def write(self, out: Path) -> int:
        """Write the newest checkpoint and every tile and bundle of its tree under `out` in the tlog-tiles layout
        (`checkpoint`, `tile/…`), as a static web server would serve them; return the tree size."""
        size, note = self.checkpoint()
        for tile in tiles.tiles_of(size):
            target = out / tile.path()
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(self.read(tile.path()))
        (out / "checkpoint").write_text(note)
        return size

    def close(self) -> None:
        with self._lock:
            if self._audit is not None and self._config is not None:
                self._audit.close()
                self._audit = None
