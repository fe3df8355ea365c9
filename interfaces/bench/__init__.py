"""The developers' benchmarks: Paywarden beside the x402 SDK's facilitator, the floors below it, a long history
(`paywarden-bench`, README.md beside this file). Nothing of the product imports this package."""
