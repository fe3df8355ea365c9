"""A tlog client written from the public specifications alone, to check Paywarden's tiles without its code:
C2SP tlog-tiles (paths, widths, bundles), C2SP signed-note and tlog-checkpoint (the checkpoint and its Ed25519
signature), RFC 6962 §2.1 (MTH, PATH, PROOF) and RFC 9162 §2.1.3.2 / §2.1.4.2 (verifying them). It imports nothing
from the project: `fetch(path) -> bytes` is all it is given (an HTTP GET below the log's prefix, or a file read).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

Fetch = Callable[[str], bytes]


def leaf_hash(entry: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + entry).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def tile_index(n: int) -> str:
    parts = []
    while True:
        parts.append(f"{n % 1000:03d}")
        n //= 1000
        if n == 0:
            break
    parts.reverse()
    return "/".join(["x" + p for p in parts[:-1]] + [parts[-1]])


def largest_power_of_two_below(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


class TlogClient:
    def __init__(self, fetch: Fetch, origin: str, public_key: bytes) -> None:
        self.fetch, self.origin, self.public_key = fetch, origin, public_key
        self.tiles: dict[str, bytes] = {}

    # -- the checkpoint ---------------------------------------------------------------------------------------

    def checkpoint(self) -> tuple[int, bytes, str]:
        """(size, root hash, note) of the log's checkpoint, its Ed25519 signature by the log's key verified."""
        note = self.fetch("checkpoint").decode()
        body, _, signatures = note.partition("\n\n")
        body += "\n"
        key_id = hashlib.sha256(self.origin.encode() + b"\n\x01" + self.public_key).digest()[:4]
        verified = False
        for line in signatures.splitlines():
            name, blob = line.removeprefix("\u2014 ").rsplit(" ", 1)
            raw = base64.b64decode(blob)
            if name == self.origin and raw[:4] == key_id:
                Ed25519PublicKey.from_public_bytes(self.public_key).verify(raw[4:], body.encode())  # raises
                verified = True
        assert verified, "no signature by the log's key"
        origin, size, root = body.splitlines()[:3]
        assert origin == self.origin
        return int(size), base64.b64decode(root), note

    # -- tiles ----------------------------------------------------------------------------------------------

    def tile(self, level: int, n: int, size: int) -> list[bytes]:
        """Tile n of `level` as the tree of `size` leaves has it (partial when it is the rightmost)."""
        width = min(256, (size >> (8 * level)) - n * 256)
        assert width > 0, f"no tile {level}/{n} in a tree of {size}"
        path = f"tile/{level}/{tile_index(n)}" + (f".p/{width}" if width < 256 else "")
        if path not in self.tiles:
            self.tiles[path] = self.fetch(path)
        data = self.tiles[path]
        assert len(data) == 32 * width, f"{path}: {len(data)} bytes"
        return [data[i:i + 32] for i in range(0, len(data), 32)]

    def entry(self, index: int, size: int) -> bytes:
        n = index // 256
        width = min(256, size - n * 256)
        data = self.fetch(f"tile/entries/{tile_index(n)}" + (f".p/{width}" if width < 256 else ""))
        entries, at = [], 0
        while at < len(data):
            length = int.from_bytes(data[at:at + 2], "big")
            entries.append(data[at + 2:at + 2 + length])
            at += 2 + length
        assert len(entries) == width
        return entries[index % 256]

    def subtree(self, height: int, k: int, size: int) -> bytes:
        """MTH of the complete subtree of 2**height leaves starting at leaf k * 2**height."""
        level, rest = divmod(height, 8)
        first = k << rest  # the subtree's first node at the tile level
        tile = self.tile(level, first // 256, size)
        nodes = tile[first % 256:first % 256 + (1 << rest)]
        while len(nodes) > 1:
            nodes = [node_hash(nodes[i], nodes[i + 1]) for i in range(0, len(nodes), 2)]
        return nodes[0]

    def mth(self, a: int, b: int, size: int) -> bytes:
        """RFC 6962 MTH(D[a:b]) for a range that is a subtree of the tree of `size` leaves."""
        n = b - a
        if n & (n - 1) == 0 and a % n == 0:
            return self.subtree(n.bit_length() - 1, a // n, size)
        k = largest_power_of_two_below(n)
        return node_hash(self.mth(a, a + k, size), self.mth(a + k, b, size))

    def inclusion_proof(self, m: int, size: int, a: int = 0, b: int | None = None) -> list[bytes]:
        """RFC 6962 PATH(m, D[a:b])."""
        b = size if b is None else b
        n = b - a
        if n == 1:
            return []
        k = largest_power_of_two_below(n)
        if m < k:
            return [*self.inclusion_proof(m, size, a, a + k), self.mth(a + k, b, size)]
        return [*self.inclusion_proof(m - k, size, a + k, b), self.mth(a, a + k, size)]

    def consistency_proof(self, m: int, size: int) -> list[bytes]:
        """RFC 6962 PROOF(m, D[0:size])."""
        def sub(m: int, a: int, b: int, complete: bool) -> list[bytes]:
            n = b - a
            if m == n:
                return [] if complete else [self.mth(a, b, size)]
            k = largest_power_of_two_below(n)
            if m <= k:
                return [*sub(m, a, a + k, complete), self.mth(a + k, b, size)]
            return [*sub(m - k, a + k, b, False), self.mth(a, a + k, size)]
        return sub(m, 0, size, True)


def verify_inclusion(index: int, size: int, leaf: bytes, proof: list[bytes], root: bytes) -> bool:
    """RFC 9162 §2.1.3.2."""
    if index >= size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            return False
        if fn % 2 == 1 or fn == sn:
            r = node_hash(p, r)
            if fn % 2 == 0:
                while fn % 2 == 0 and fn != 0:
                    fn, sn = fn >> 1, sn >> 1
        else:
            r = node_hash(r, p)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and r == root


def verify_consistency(m: int, n: int, old_root: bytes, new_root: bytes, proof: list[bytes]) -> bool:
    """RFC 9162 §2.1.4.2 (0 < m < n)."""
    if m & (m - 1) == 0:
        proof = [old_root, *proof]
    fn, sn = m - 1, n - 1
    while fn % 2 == 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = proof[0]
    for c in proof[1:]:
        if sn == 0:
            return False
        if fn % 2 == 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            if fn % 2 == 0:
                while fn % 2 == 0 and fn != 0:
                    fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and fr == old_root and sr == new_root
