"""The `paywarden` command: one module per command group."""
