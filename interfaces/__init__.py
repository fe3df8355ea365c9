"""Paywarden interfaces: everything that touches the outside world."""
