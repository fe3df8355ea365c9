"""What the HTTP apps share: authentication, body reading, error mapping, rate limits, the request log."""
