"""RFC 6962 Merkle trees over a log of entries: leaf and node hashes, tree heads, inclusion and consistency proofs.

Hashing is SHA-256 with the RFC 6962 domain separation: a leaf is `SHA-256(0x00 || entry)`, an interior node
`SHA-256(0x01 || left || right)`, the empty tree `SHA-256()`. A tree of n leaves splits at k, the largest power of
two below n (RFC 6962 §2.1). Proof generation follows RFC 6962 §2.1.1-2.1.2 and verification RFC 9162 §2.1.3.2 and
§2.1.4.2, which also state what an auditor checks. Pure functions over lists of 32-byte hashes: no I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

HASH_SIZE = 32


class ProofError(ValueError):
    """A proof does not prove what it claims (bad size, bad length, or a root that does not match)."""


def leaf_hash(entry: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + entry).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def empty_root() -> bytes:
    return hashlib.sha256(b"").digest()


def _split(n: int) -> int:
    """The largest power of two smaller than n (n > 1)."""
    return 1 << ((n - 1).bit_length() - 1)


def root(leaves: Sequence[bytes]) -> bytes:
    """MTH(D[n]) of RFC 6962 over leaf hashes, computed bottom-up in O(n) without recursion."""
    compact = CompactRange()
    for leaf in leaves:
        compact.append(leaf)
    return compact.root()


class CompactRange:
    """The perfect subtrees (a compact range) of a growing list of leaf hashes: appending a leaf and computing the
    root each cost O(log n), so a log's root is kept current without reading its leaves again."""

    def __init__(self) -> None:
        self.size = 0
        self._stack: list[tuple[int, bytes]] = []  # (size, hash), largest first

    def append(self, leaf: bytes) -> None:
        size, node = 1, leaf
        while self._stack and self._stack[-1][0] == size:
            left_size, left = self._stack.pop()
            size, node = left_size + size, node_hash(left, node)
        self._stack.append((size, node))
        self.size += 1

    @classmethod
    def resumed(cls, size: int, hashes: Sequence[bytes]) -> CompactRange:
        """The compact range of a tree of `size` leaves from its perfect subtrees' roots (`hashes()`, largest
        first): one subtree per bit set in `size`, so the roots alone say which subtree each is."""
        if size < 0:
            raise ProofError(f"a tree cannot have {size} leaves")
        sizes = [1 << bit for bit in reversed(range(size.bit_length())) if size >> bit & 1]
        if len(hashes) != len(sizes):
            raise ProofError(f"a tree of {size} leaves has {len(sizes)} perfect subtrees, not {len(hashes)}")
        _sizes(*hashes)
        compact = cls()
        compact.size, compact._stack = size, list(zip(sizes, hashes, strict=True))
        return compact

    def hashes(self) -> list[bytes]:
        """The perfect subtrees' roots, largest first: with `size`, all `resumed` needs."""
        return [node for _, node in self._stack]

    def root(self) -> bytes:
        """MTH of the leaves appended so far: the perfect subtrees merged right to left."""
        if not self._stack:
            return empty_root()
        node = self._stack[-1][1]
        for _, left in reversed(self._stack[:-1]):
            node = node_hash(left, node)
        return node


def inclusion_proof(index: int, leaves: Sequence[bytes]) -> list[bytes]:
    """PATH(m, D[n]) of RFC 6962 §2.1.1: the audit path of leaf `index` in the tree of `leaves`."""
    n = len(leaves)
    if not 0 <= index < n:
        raise ProofError(f"leaf {index} is not in a tree of size {n}")
    if n == 1:
        return []
    k = _split(n)
    if index < k:
        return [*inclusion_proof(index, leaves[:k]), root(leaves[k:])]
    return [*inclusion_proof(index - k, leaves[k:]), root(leaves[:k])]


def consistency_proof(old_size: int, leaves: Sequence[bytes]) -> list[bytes]:
    """PROOF(m, D[n]) of RFC 6962 §2.1.2: proves the tree of `old_size` leaves is a prefix of `leaves`."""
    n = len(leaves)
    if not 0 <= old_size <= n:
        raise ProofError(f"cannot prove size {old_size} consistent with size {n}")
    if old_size in (0, n):
        return []
    return _subproof(old_size, leaves, True)


def _subproof(m: int, leaves: Sequence[bytes], complete: bool) -> list[bytes]:
    n = len(leaves)
    if m == n:
        return [] if complete else [root(leaves)]
    k = _split(n)
    if m <= k:
        return [*_subproof(m, leaves[:k], complete), root(leaves[k:])]
    return [*_subproof(m - k, leaves[k:], False), root(leaves[:k])]


def root_from_inclusion_proof(index: int, size: int, leaf: bytes, proof: Sequence[bytes]) -> bytes:
    """RFC 9162 §2.1.3.2: the root that `proof` implies for `leaf` at `index` in a tree of `size` leaves."""
    if not 0 <= index < size:
        raise ProofError(f"leaf {index} is not in a tree of size {size}")
    _sizes(leaf, *proof)
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            raise ProofError("the inclusion proof is too long")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while fn & 1 == 0 and fn != 0:
                    fn, sn = fn >> 1, sn >> 1
        else:
            r = node_hash(r, p)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        raise ProofError("the inclusion proof is too short")
    return r


def verify_inclusion(index: int, size: int, leaf: bytes, proof: Sequence[bytes], expected_root: bytes) -> None:
    """Raise ProofError unless `proof` shows `leaf` at `index` under `expected_root`."""
    if root_from_inclusion_proof(index, size, leaf, proof) != expected_root:
        raise ProofError(f"leaf {index} is not included in the tree of size {size} with that root")


def verify_consistency(old_size: int, new_size: int, old_root: bytes, new_root: bytes,
                       proof: Sequence[bytes]) -> None:
    """RFC 9162 §2.1.4.2: raise ProofError unless the tree (old_size, old_root) is a prefix of (new_size, new_root)."""
    _sizes(old_root, new_root, *proof)
    if not 0 <= old_size <= new_size:
        raise ProofError(f"size {old_size} is larger than size {new_size}: a log never shrinks")
    if old_size == new_size:
        if proof:
            raise ProofError("equal sizes need an empty consistency proof")
        if old_root != new_root:
            raise ProofError(f"two different roots for the same size {old_size}")
        return
    if old_size == 0:
        if proof:
            raise ProofError("a consistency proof from the empty tree is empty")
        return
    if not proof:
        raise ProofError("the consistency proof is empty")
    path = list(proof)
    if old_size & (old_size - 1) == 0:  # a power of two: the old root is itself a node of the new tree
        path.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise ProofError("the consistency proof is too long")
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            if not fn & 1:
                while fn & 1 == 0 and fn != 0:
                    fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        raise ProofError("the consistency proof is too short")
    if fr != old_root:
        raise ProofError(f"the log of size {new_size} does not extend the log of size {old_size} (old root differs)")
    if sr != new_root:
        raise ProofError(f"the log of size {new_size} does not extend the log of size {old_size} (new root differs)")


def _sizes(*hashes: bytes) -> None:
    if any(len(h) != HASH_SIZE for h in hashes):
        raise ProofError("every hash in a proof is 32 bytes")
