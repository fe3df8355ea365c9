"""The sandbox: the localnet and its JSON-RPC methods, the sandbox chain, the example merchant, the
exact-payment client helpers."""
