"""Paywarden's applications: the commands, and the ports (`typing.Protocol`) they need from the outside."""
