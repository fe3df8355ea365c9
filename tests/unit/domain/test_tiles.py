"""The audit log's tiles (C2SP tlog-tiles) read by a client written from the specs alone (tests/tlog_client.py):
paths, widths, every level, inclusion and consistency proofs, on a tree large enough for three levels of tiles."""

from __future__ import annotations

import hashlib

import pytest

from domain import merkle, tiles
from domain.tiles import Tile, TileError
from tests.tlog_client import TlogClient, leaf_hash, verify_consistency, verify_inclusion

SIZE = 70_000  # 273 full level-0 tiles and one of width 112; a full and a partial level-1 tile; level 2 of width 1
ENTRIES = [f"entry {i}".encode() for i in range(SIZE)]
LEAVES = [leaf_hash(e) for e in ENTRIES]


def serve(size: int, served: list[str] | None = None):
    """A fetch over `domain.tiles` for the first `size` leaves, as the API serves them."""
    def fetch(path: str) -> bytes:
        if served is not None:
            served.append(path)
        tile = tiles.parse_path(path)
        assert tile.leaves_needed() <= size, path
        if tile.level is None:
            first = tile.first_leaf()
            return tiles.bundle(ENTRIES[first:first + tile.width])
        return b"".join(tiles.tile_hashes(tile, lambda a, b: LEAVES[a:min(b, size)]))
    return fetch


def test_tile_paths_are_written_and_read_as_the_spec_writes_them():
    assert tiles.encode_index(1234067) == "x001/x234/067"
    assert tiles.encode_index(0) == "000"
    assert tiles.parse_path("tile/0/x001/x234/067") == Tile(0, 1234067)
    assert tiles.parse_path("tile/entries/273.p/112") == Tile(None, 273, 112)
    assert tiles.parse_path("tile/2/000.p/1") == Tile(2, 0, 1)
    for bad in ("tile/0/x000/005", "tile/0/5", "tile/0/005.p/256", "tile/0/005.p/0", "tile/64/000", "tile/01/000",
                "tile/0/005/", "checkpoint", "tile/0/x001", "tile/entries/005.p/07"):
        with pytest.raises(TileError):
            tiles.parse_path(bad)


def test_a_tree_of_70000_is_the_tiles_the_spec_lists():
    found = [t.path() for t in tiles.tiles_of(SIZE) if t.level is not None]
    assert len([p for p in found if p.startswith("tile/0/")]) == 274
    assert found[-4:] == ["tile/0/273.p/112", "tile/1/000", "tile/1/001.p/17", "tile/2/000.p/1"]
    assert [t.path() for t in tiles.tiles_of(256) if t.level is not None] == ["tile/0/000", "tile/1/000.p/1"]


def test_a_spec_client_recomputes_the_root_and_proves_inclusion_and_consistency_from_the_tiles():
    client = TlogClient(serve(SIZE), "unused", b"")
    root = client.mth(0, SIZE, SIZE)
    assert root == merkle.root(LEAVES)
    for index in (0, 255, 256, 65_535, 65_536, 69_999, 12_345):
        entry = client.entry(index, SIZE)
        assert entry == ENTRIES[index]
        proof = client.inclusion_proof(index, SIZE)
        assert verify_inclusion(index, SIZE, leaf_hash(entry), proof, root)
        assert not verify_inclusion(index, SIZE, leaf_hash(entry + b"!"), proof, root)
    for old in (1, 256, 1000, 65_536, 69_000):
        old_root = TlogClient(serve(old), "unused", b"").mth(0, old, old)
        proof = client.consistency_proof(old, SIZE)
        assert verify_consistency(old, SIZE, old_root, root, proof)
        assert not verify_consistency(old, SIZE, hashlib.sha256(b"forged").digest(), root, proof)


def test_a_partial_tile_of_a_smaller_tree_is_the_prefix_of_the_full_tile():
    full = b"".join(tiles.tile_hashes(Tile(0, 3), lambda a, b: LEAVES[a:b]))
    partial = b"".join(tiles.tile_hashes(Tile(0, 3, 17), lambda a, b: LEAVES[a:b]))
    assert full.startswith(partial) and len(partial) == 17 * 32


def test_a_tile_beyond_the_leaves_is_refused_and_an_oversized_entry_does_not_bundle():
    with pytest.raises(TileError):
        tiles.tile_hashes(Tile(0, 0), lambda a, b: LEAVES[a:min(b, 100)])
    with pytest.raises(TileError):
        tiles.bundle([b"x" * 0x10000])
