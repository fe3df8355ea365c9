"""The public discovery catalog resource."""
