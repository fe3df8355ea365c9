"""The audit log as C2SP `tlog-tiles` (https://c2sp.org/tlog-tiles): tile paths, widths and hashes, entry bundles.

A tile is 256 consecutive Merkle tree hashes at one level: level 0 holds leaf hashes, level `l` the hashes of the
full tiles of level `l - 1` (each the root of 256**l leaves). The rightmost tiles of a tree are partial: the tile at
level `l` of a tree of size `s` has `floor(s / 256**l) mod 256` hashes. A tile's index is written in 3-digit path
elements, all but the last prefixed with `x` (1234067 is `x001/x234/067`); a partial tile's path ends `.p/<width>`.
An entry bundle holds the entries whose leaf hashes a level-0 tile holds, each as a big-endian uint16 length and the
entry's bytes. Pure functions: the hashes come from a caller's reader of leaf hashes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from domain import merkle

HEIGHT = 8
WIDTH = 1 << HEIGHT  # hashes in a full tile
MAX_LEVEL = 63
MAX_ENTRY_BYTES = 0xFFFF  # an entry bundle's uint16 length prefix

LeafReader = Callable[[int, int], Sequence[bytes]]  # (start, end) -> the leaf hashes start .. end - 1


class TileError(ValueError):
    """A tile path that names no tile of this log (malformed, or beyond the tree)."""


@dataclass(frozen=True)
class Tile:
    """Tile `index` of `level` (`level` None: the entry bundle of level-0 tile `index`), `width` hashes wide."""

    level: int | None
    index: int
    width: int = WIDTH

    @property
    def partial(self) -> bool:
        return self.width < WIDTH

    def path(self) -> str:
        kind = "entries" if self.level is None else str(self.level)
        return f"tile/{kind}/{encode_index(self.index)}" + (f".p/{self.width}" if self.partial else "")

    @property
    def hash_level(self) -> int:
        """The level whose hashes the tile (or the bundle's level-0 tile) holds."""
        return 0 if self.level is None else self.level

    def first_leaf(self) -> int:
        """The index of the first leaf the tile spans."""
        return self.index << (HEIGHT * (self.hash_level + 1))

    def leaves_needed(self) -> int:
        """The tree size from which this tile exists: its last hash's subtree is complete."""
        return self.first_leaf() + (self.width << (HEIGHT * self.hash_level))


def encode_index(index: int) -> str:
    """`1234067` -> `x001/x234/067`."""
    if index < 0:
        raise TileError("a tile index is not negative")
    groups = []
    while True:
        groups.append(f"{index % 1000:03d}")
        index //= 1000
        if not index:
            break
    return "/".join([f"x{g}" for g in reversed(groups[1:])] + [groups[0]])


_PATH = re.compile(r"tile/(entries|0|[1-9][0-9]?)/((?:x[0-9]{3}/)*)([0-9]{3})(?:\.p/([1-9][0-9]{0,2}))?")


def parse_path(path: str) -> Tile:
    """The tile a path below the log's prefix names (`tile/0/x001/234.p/17`); TileError when it names none."""
    found = _PATH.fullmatch(path)
    if found is None:
        raise TileError(f"not a tile path: {path[:80]!r}")
    kind, prefix, last, width = found.groups()
    digits = "".join(g[1:] for g in prefix.split("/") if g) + last
    if len(digits) > 21:
        raise TileError("tile index out of range")
    level = None if kind == "entries" else int(kind)
    if level is not None and level > MAX_LEVEL:
        raise TileError(f"tile level {level} is over {MAX_LEVEL}")
    if width is not None and not 1 <= int(width) < WIDTH:
        raise TileError(f"a partial tile is 1 to {WIDTH - 1} hashes wide")
    tile = Tile(level, int(digits), WIDTH if width is None else int(width))
    if tile.path() != path:  # one path per tile: no leading zeros, no `x` groups of zero
        raise TileError(f"not the canonical path of its tile: {path[:80]!r}")
    return tile


def width_at(level: int, index: int, size: int) -> int:
    """How many hashes tile `index` of `level` has in a tree of `size` leaves (0: none yet)."""
    complete = size >> (HEIGHT * level)  # the level's complete nodes
    return max(0, min(WIDTH, complete - index * WIDTH))


def tiles_of(size: int) -> list[Tile]:
    """Every tile (full and the rightmost partial ones) and every entry bundle of a tree of `size` leaves."""
    found: list[Tile] = []
    level = 0
    while size >> (HEIGHT * level):
        nodes = size >> (HEIGHT * level)
        for index in range((nodes + WIDTH - 1) // WIDTH):
            found.append(Tile(level, index, width_at(level, index, size)))
            if level == 0:
                found.append(Tile(None, index, width_at(0, index, size)))
        level += 1
    return found


def tile_hashes(tile: Tile, read_leaves: LeafReader) -> list[bytes]:
    """The hashes of `tile` (a hash tile, or the level-0 tile of a bundle): each the root of the 256**level
    leaves below it, which `read_leaves` gives."""
    per_hash = 1 << (HEIGHT * tile.hash_level)
    start = tile.first_leaf()
    if tile.hash_level == 0:
        leaves = list(read_leaves(start, start + tile.width))
        if len(leaves) != tile.width:
            raise TileError(f"the log has no tile {tile.path()} yet")
        return leaves
    hashes = []
    for i in range(tile.width):  # each hash: the root of the 256**level leaves below it, read at once
        first = start + i * per_hash
        below = read_leaves(first, first + per_hash)
        if len(below) != per_hash:
            raise TileError(f"the log has no tile {tile.path()} yet")
        hashes.append(merkle.root(below))
    return hashes


def bundle(entries: Sequence[bytes]) -> bytes:
    """An entry bundle: each entry as a big-endian uint16 length and its bytes."""
    out = bytearray()
    for entry in entries:
        if len(entry) > MAX_ENTRY_BYTES:
            raise TileError(f"an entry of {len(entry)} bytes does not fit a bundle's uint16 length")
        out += len(entry).to_bytes(2, "big") + entry
    return bytes(out)
