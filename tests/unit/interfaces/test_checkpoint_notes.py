"""C2SP signed notes and tlog checkpoints: golang.org/x/mod/sumdb/note's published example signs byte for byte."""

from __future__ import annotations

import base64

import pytest

from domain.checkpoint import (
    Checkpoint,
    NoteError,
    parse_checkpoint,
    parse_signing_key,
    parse_verifier_key,
    verify_note,
)
from interfaces.audit.signing import CheckpointSigner, ed25519_verify

# golang.org/x/mod/sumdb/note, note.go's package documentation and example_test.go (ExampleSign, ExampleOpen).
GO_SIGNER = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
GO_VERIFIER = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
GO_TEXT = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n"
GO_SIGNATURE = "x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM="
GO_NOTE = GO_TEXT + "\n\u2014 PeterNeumann " + GO_SIGNATURE + "\n"


def test_the_sumdb_note_example_signs_byte_for_byte_and_its_key_reads_back():
    from domain.checkpoint import sign_note

    signer = CheckpointSigner.parse(GO_SIGNER)
    assert signer.verifier.encoded() == GO_VERIFIER
    assert signer.encoded() == GO_SIGNER
    assert sign_note(GO_TEXT, signer.name, signer.public_key, signer.private_key.sign) == GO_NOTE
    assert verify_note(GO_NOTE, [parse_verifier_key(GO_VERIFIER)], ed25519_verify) == GO_TEXT


def test_a_checkpoint_is_origin_size_and_base64_root_then_one_signature_line():
    signer = CheckpointSigner.generate("paywarden.test/audit")
    root = bytes(range(32))
    note = signer.sign(Checkpoint("paywarden.test/audit", 42, root))
    body, blank, signature = note.split("\n")[:3], note.split("\n")[3], note.split("\n")[4]
    assert body == ["paywarden.test/audit", "42", base64.b64encode(root).decode()]
    assert blank == "" and signature.startswith("\u2014 paywarden.test/audit ")
    text = verify_note(note, [signer.verifier], ed25519_verify)
    assert parse_checkpoint(text) == Checkpoint("paywarden.test/audit", 42, root)


def test_a_checkpoint_signed_by_another_key_is_refused():
    ours, theirs = CheckpointSigner.generate("paywarden.test/audit"), CheckpointSigner.generate("paywarden.test/audit")
    note = theirs.sign(Checkpoint("paywarden.test/audit", 3, bytes(32)))
    with pytest.raises(NoteError, match="no signature by a trusted key"):
        verify_note(note, [ours.verifier], ed25519_verify)


def test_a_changed_byte_in_a_signed_checkpoint_fails_its_signature():
    signer = CheckpointSigner.generate("log")
    note = signer.sign(Checkpoint("log", 7, bytes(32)))
    with pytest.raises(NoteError, match="does not verify"):
        verify_note(note.replace("\n7\n", "\n8\n", 1), [signer.verifier], ed25519_verify)


ZERO_ROOT = base64.b64encode(bytes(32)).decode()


@pytest.mark.parametrize("text", ["log\n7\n", "log\n07\n" + ZERO_ROOT + "\n", "log\nseven\n" + ZERO_ROOT + "\n",
                                  "log\n7\n" + base64.b64encode(bytes(31)).decode() + "\n"])
def test_malformed_checkpoints_are_refused(text):
    with pytest.raises(NoteError):
        parse_checkpoint(text)


@pytest.mark.parametrize("key", ["PRIVATE+KEY+x", "PUBLIC+KEY+a+00000000+AQ==", "PRIVATE+KEY+a b+00+" + "A" * 44])
def test_malformed_signing_keys_are_refused(key):
    with pytest.raises(NoteError):
        parse_signing_key(key)


def test_a_verifier_key_whose_id_does_not_match_is_refused():
    with pytest.raises(NoteError, match="does not match"):
        parse_verifier_key(GO_VERIFIER.replace("c74f20a3", "c74f20a4"))
