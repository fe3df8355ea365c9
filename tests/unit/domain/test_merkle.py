"""Known-answer tests of the RFC 6962 Merkle tree against the Certificate Transparency test vectors.

The vectors (leaf inputs, the roots of the trees of 1 to 8 leaves, inclusion and consistency proofs) are those of
github.com/transparency-dev/merkle, proof/verify_test.go (commit 02194e9afb6c1d95b5381350007963aa70fff472), which
carries them over from google/certificate-transparency's C++ merkle_tree_test.cc. RFC 6962 §2.1 defines the hashes.
"""

from __future__ import annotations

import hashlib

import pytest

from domain import merkle
from domain.merkle import ProofError

LEAVES = [bytes.fromhex(h) for h in (
    "", "00", "10", "2021", "3031", "40414243", "5051525354555657", "606162636465666768696a6b6c6d6e6f")]
ROOTS = [bytes.fromhex(h) for h in (
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
)]


def h(*hexes: str) -> list[bytes]:
    return [bytes.fromhex(x) for x in hexes]


# (leaf number counted from 1, tree size, audit path)
INCLUSION = [
    (1, 1, []),
    (1, 8, h("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
             "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
             "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4")),
    (6, 8, h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
             "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
             "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7")),
    (3, 3, h("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125")),
    (2, 5, h("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
             "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
             "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b")),
]
# (old size, new size, consistency proof)
CONSISTENCY = [
    (1, 1, []),
    (1, 8, h("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
             "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
             "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4")),
    (6, 8, h("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
             "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
             "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7")),
    (2, 5, h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
             "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b")),
    (6, 7, h("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
             "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
             "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7")),
]

HASHES = [merkle.leaf_hash(x) for x in LEAVES]


def _mth(leaves: list[bytes]) -> bytes:
    """RFC 6962's recursive definition, written out plainly, as a second opinion on the iterative root."""
    if len(leaves) == 1:
        return leaves[0]
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return merkle.node_hash(_mth(leaves[:k]), _mth(leaves[k:]))


def test_the_empty_tree_and_a_leaf_hash_as_rfc_6962_defines_them():
    assert merkle.root([]).hex() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert merkle.leaf_hash(b"") == ROOTS[0] == hashlib.sha256(b"\x00").digest()
    assert merkle.node_hash(b"N123", b"N456") == hashlib.sha256(b"\x01N123N456").digest()


@pytest.mark.parametrize("size", range(1, 9))
def test_the_root_of_each_prefix_of_the_ct_tree_is_the_published_root(size):
    assert merkle.root(HASHES[:size]) == ROOTS[size - 1]


def test_the_iterative_root_agrees_with_the_recursive_definition_up_to_70_leaves():
    leaves = [merkle.leaf_hash(bytes([i])) for i in range(70)]
    for n in range(1, 71):
        assert merkle.root(leaves[:n]) == _mth(leaves[:n])


@pytest.mark.parametrize(("leaf", "size", "path"), INCLUSION)
def test_inclusion_proofs_are_the_published_ones_and_verify(leaf, size, path):
    assert merkle.inclusion_proof(leaf - 1, HASHES[:size]) == path
    merkle.verify_inclusion(leaf - 1, size, HASHES[leaf - 1], path, ROOTS[size - 1])


@pytest.mark.parametrize(("old", "new", "proof"), CONSISTENCY)
def test_consistency_proofs_are_the_published_ones_and_verify(old, new, proof):
    assert merkle.consistency_proof(old, HASHES[:new]) == proof
    merkle.verify_consistency(old, new, ROOTS[old - 1], ROOTS[new - 1], proof)


@pytest.mark.parametrize(("leaf", "size", "path"), [v for v in INCLUSION if v[2]])
def test_a_corrupted_inclusion_proof_is_refused(leaf, size, path):
    index, root, leaf_hash = leaf - 1, ROOTS[size - 1], HASHES[leaf - 1]
    probes = [
        (index + 1, size, leaf_hash, path, root), (index ^ 2, size, leaf_hash, path, root),
        (index, size * 2, leaf_hash, path, root), (index, size // 2, leaf_hash, path, root),
        (index, size, HASHES[(index + 1) % 8], path, root), (index, size, leaf_hash, path, merkle.empty_root()),
        (index, size, leaf_hash, [*path, root], root), (index, size, leaf_hash, [root, *path], root),
        (index, size, leaf_hash, path[:-1], root),
    ]
    if index > 0:
        probes.append((index - 1, size, leaf_hash, path, root))
    for i in range(len(path)):
        flipped = list(path)
        flipped[i] = bytes([flipped[i][0] ^ 8]) + flipped[i][1:]
        probes.append((index, size, leaf_hash, flipped, root))
    for probe in probes:
        with pytest.raises(ProofError):
            merkle.verify_inclusion(*probe)


@pytest.mark.parametrize(("old", "new", "proof"), [v for v in CONSISTENCY if v[2]])
def test_a_corrupted_consistency_proof_is_refused(old, new, proof):
    r1, r2 = ROOTS[old - 1], ROOTS[new - 1]
    probes = [
        (old - 1, new, r1, r2, proof), (old + 1, new, r1, r2, proof), (old ^ 2, new, r1, r2, proof),
        (old, new * 2, r1, r2, proof), (old, new // 2, r1, r2, proof), (old, new, r2, r1, proof),
        (old, new, merkle.empty_root(), r2, proof), (old, new, r1, merkle.empty_root(), proof),
        (old, new, r1, r2, []), (old, new, r1, r2, [*proof, r1]), (old, new, r1, r2, [r2, *proof]),
        (old, new, r1, r2, [proof[0], *proof]), (old, new, r1, r2, proof[:-1]),
    ]
    for i in range(len(proof)):
        flipped = list(proof)
        flipped[i] = bytes([flipped[i][0] ^ 16]) + flipped[i][1:]
        probes.append((old, new, r1, r2, flipped))
    for probe in probes:
        if probe[0] == 0 and not probe[4]:
            continue  # the empty tree is a prefix of every tree: nothing to refuse
        with pytest.raises(ProofError):
            merkle.verify_consistency(*probe)


def test_every_proof_generated_for_every_size_up_to_33_verifies():
    leaves = [merkle.leaf_hash(str(i).encode()) for i in range(33)]
    for n in range(1, 34):
        top = merkle.root(leaves[:n])
        for i in range(n):
            merkle.verify_inclusion(i, n, leaves[i], merkle.inclusion_proof(i, leaves[:n]), top)
        for m in range(0, n + 1):
            merkle.verify_consistency(m, n, merkle.root(leaves[:m]), top, merkle.consistency_proof(m, leaves[:n]))


def test_a_log_rewritten_below_an_old_size_fails_consistency_with_it():
    leaves = [merkle.leaf_hash(str(i).encode()) for i in range(10)]
    old_root = merkle.root(leaves[:6])
    rewritten = [*leaves[:3], merkle.leaf_hash(b"inserted"), *leaves[3:]]
    with pytest.raises(ProofError, match="does not extend"):
        merkle.verify_consistency(6, 11, old_root, merkle.root(rewritten), merkle.consistency_proof(6, rewritten))


def test_a_compact_range_gives_the_root_of_every_prefix_without_the_leaves_again():
    from domain.merkle import CompactRange, empty_root, leaf_hash, root

    leaves = [leaf_hash(bytes([i])) for i in range(70)]
    compact = CompactRange()
    assert compact.root() == empty_root()
    for n, leaf in enumerate(leaves, start=1):
        compact.append(leaf)
        assert compact.size == n and compact.root() == root(leaves[:n])


def test_a_compact_range_resumed_from_its_hashes_goes_on_as_the_original():
    from domain.merkle import CompactRange, ProofError, leaf_hash, root

    leaves = [leaf_hash(bytes([i])) for i in range(40)]
    for kept in range(len(leaves)):
        original = CompactRange()
        for leaf in leaves[:kept]:
            original.append(leaf)
        resumed = CompactRange.resumed(kept, original.hashes())
        assert len(original.hashes()) == bin(kept).count("1")
        assert resumed.size == kept and resumed.root() == original.root()
        for leaf in leaves[kept:]:
            resumed.append(leaf)
        assert resumed.root() == root(leaves), kept
    hashes = CompactRange.resumed(0, []).hashes()
    assert hashes == []
    three = [leaf_hash(b"a"), leaf_hash(b"b")]  # 3 = 2 + 1: two subtrees
    assert CompactRange.resumed(3, three).size == 3
    for size, given in ((3, three[:1]), (4, three), (-1, []), (3, [three[0], b"short"])):
        with pytest.raises(ProofError):
            CompactRange.resumed(size, given)
