"""Paywarden's domain: aggregates, their events, value objects and pure rules. No I/O."""
