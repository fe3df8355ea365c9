"""Moving-window rate limits on Redis, in keys of our own (interfaces/http/common/ratelimit.py uses them).

A window is a Redis list, `paywarden:window:<the limits item's key>`, of the times of the hits it admitted, newest
first, trimmed to the budget: a hit is admitted when the budget-th newest is older than the window (a hit exactly
one window old still counts, as `limits` and `MemoryWindows` count it), so "100 per minute" holds over any 60 s.
One Lua script checks any number of windows and takes an entry in those it should, all or nothing, in one round
trip: an authenticated request's failed-authentication budget (tested) and its key's budget (taken) together.
The time is Redis's own (`TIME`, in microseconds), one clock for every worker and host.

Why not `limits`' Redis storage: its public API tests or takes one window per call, so that request would cost two
round trips; the script that did it in one (until issue 32) wrote the library's own keys in the library's own
layout, which the library may change in any release. These keys are read and written by this module alone. On
the switch, windows held in the library's keys were not carried over: each budget started afresh once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from limits import RateLimitItem

PREFIX = "paywarden:window:"

# KEYS: the windows, in the order they are checked. ARGV, three per window: its budget, its length in microseconds,
# and 1 when an admitted request takes an entry in it (0: tested only). Answers 0 when every window has room (the
# entries are then taken), else {the full window's index from 1, microseconds until it frees a slot}.
_WINDOWS = """
local t = redis.call('time')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
for i, key in ipairs(KEYS) do
  local budget, length = tonumber(ARGV[3 * i - 2]), tonumber(ARGV[3 * i - 1])
  if budget < 1 then return {i, length} end
  local oldest = redis.call('lindex', key, budget - 1)
  if oldest and tonumber(oldest) >= now - length then return {i, tonumber(oldest) + length - now} end
end
local stamp = t[1] .. string.format('%06d', tonumber(t[2]))
for i, key in ipairs(KEYS) do
  if ARGV[3 * i] == '1' then
    local budget, length = tonumber(ARGV[3 * i - 2]), tonumber(ARGV[3 * i - 1])
    redis.call('lpush', key, stamp)
    redis.call('ltrim', key, 0, budget - 1)
    redis.call('pexpire', key, math.ceil(length / 1000))
  end
end
return 0
"""

Window = tuple[RateLimitItem, Sequence[str], bool]  # a `limits` item, the identifiers of its key, take an entry


class RedisWindows:
    """The moving windows of a `RateLimiter` on Redis, shared by every worker and host."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._script = client.register_script(_WINDOWS)

    def admit(self, *windows: Window) -> tuple[int, int] | None:
        """None when every window has room (an entry is then taken in each window marked so); else the index of
        the first full window and the whole seconds until it frees a slot (at least 1: `Retry-After`)."""
        keys = [PREFIX + item.key_for(*identifiers) for item, identifiers, _ in windows]
        args: list[int] = []
        for item, _, take in windows:
            args += [item.amount, item.get_expiry() * 1_000_000, int(take)]
        answer = self._script(keys=keys, args=args)
        if answer == 0:
            return None
        index, wait_us = answer
        return int(index) - 1, max(1, math.ceil(int(wait_us) / 1_000_000))
