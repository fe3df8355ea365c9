"""Owner passwords: the unknown email's check costs what a login's does, and building a hasher costs nothing."""

from __future__ import annotations

import pytest
from argon2 import PasswordHasher
from argon2.profiles import RFC_9106_LOW_MEMORY

from interfaces.adapters import passwords
from interfaces.adapters.passwords import DUMMY_HASH, Argon2Hasher


def test_the_dummy_hash_has_the_hashers_parameters_so_its_check_takes_a_logins_time():
    assert PasswordHasher.from_parameters(RFC_9106_LOW_MEMORY).check_needs_rehash(DUMMY_HASH) is False


def test_building_a_hasher_hashes_nothing(monkeypatch):
    def no_hash(self, password, **_):
        raise AssertionError("a hash at construction: every CLI command paid ~0.7 s for it")

    monkeypatch.setattr(passwords.PasswordHasher, "hash", no_hash)
    Argon2Hasher()


@pytest.mark.parametrize("password", ["paywarden-no-such-account", "anything"])
def test_an_unknown_login_never_verifies(password):
    hasher = Argon2Hasher()
    assert hasher.verify(None, password) is False
    assert hasher.verify(hasher.hash("right"), "right") is True
