"""gunicorn configuration: gevent workers, so chain RPC, database calls and settle's confirmation wait all yield."""

import os

bind = os.environ.get("PAYWARDEN_BIND", "127.0.0.1:8402")
workers = int(os.environ.get("PAYWARDEN_WORKERS", "1"))
worker_class = "gevent"
worker_connections = 1000
timeout = 60
graceful_timeout = 10
keepalive = 5
accesslog = None
errorlog = "-"
loglevel = os.environ.get("PAYWARDEN_LOG_LEVEL", "info")
