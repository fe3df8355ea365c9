"""The auditor's tools: the signing key, the log follower, export and offline verification, books against the chain."""
