"""The merchant console: its own Falcon WSGI app (pages and the JSON API under /api/v1); see docs/console.md."""
