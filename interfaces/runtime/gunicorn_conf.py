"""gunicorn configuration: gevent workers, so chain RPC, database calls and settle's confirmation wait all yield."""

import logging
import os
import sys

from interfaces.config import default_data_dir
from interfaces.runtime.access_log import LOGGER_CLASS
from interfaces.runtime.closing import close_worker
from interfaces.runtime.observability import (
    MULTIPROC_ENV,
    logging_config,
    mark_worker_dead,
    metrics_dir,
    prepare_metrics_dir,
)
from interfaces.runtime.turns import take_turns

api_bind = os.environ.get("PAYWARDEN_BIND", "127.0.0.1:8402")
# `serve --console-bind`: the console's listener too; `up`: the localnet's (interfaces/http/facilitator/wsgi.py
# routes by listener)
bind = [api_bind, *filter(None, [os.environ.get(name, "").strip()
                                 for name in ("PAYWARDEN_CONSOLE_BIND", "PAYWARDEN_LOCALNET_BIND")])]
workers = int(os.environ.get("PAYWARDEN_WORKERS", "1"))
worker_class = "gevent"
worker_connections = 1000
timeout = 60
graceful_timeout = 10
keepalive = 5
accesslog = None
errorlog = "-"
loglevel = os.environ.get("PAYWARDEN_LOG_LEVEL", "").strip().lower() or "info"  # checked by load_config
# gunicorn's control socket defaults to one path per user: two servers on one host would fight over it.
control_socket_disable = True
# One JSON object per line on stderr, gunicorn's own messages included (interfaces/runtime/observability.py).
logconfig_dict = logging_config(loglevel)
logger_class = LOGGER_CLASS  # gunicorn's access line only when gunicorn.access would write it (access_log.py)
# Prometheus multiprocess mode: each worker writes its metrics in this directory, and /metrics sums them.
os.environ.setdefault(MULTIPROC_ENV, str(metrics_dir(default_data_dir(), api_bind)))


post_request = take_turns  # each keep-alive connection its turn: yield to the hub after every answer (turns.py)


def on_starting(server):
    prepare_metrics_dir(os.environ[MULTIPROC_ENV])


def child_exit(server, worker):
    mark_worker_dead(worker.pid)


def worker_int(worker):
    """SIGINT or SIGQUIT: gunicorn's quick stop (how `paywarden up` stops `serve`)."""
    worker.paywarden_quick_stop = True


def worker_exit(server, worker):
    """Close the worker's follower and pools while its event loop still runs (not in interpreter shutdown's
    finalizers). On a quick stop, then end the process at once: the interpreter's own teardown (every module and
    extension freed, LiteSVM's chain among them) took over a second of CPU, past `up`'s promise to stop within 2 s;
    nothing is left to flush but the log."""
    close_worker()  # what the worker's composition root registered (interfaces/runtime/closing.py)
    if getattr(worker, "paywarden_quick_stop", False):
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def on_exit(server):
    """The master, once every worker has exited: on a stop (a signal; gunicorn calls this while handling its
    StopIteration or KeyboardInterrupt) end the process at once, as a quick-stopped worker does. A failure to
    boot (HaltServer, with its own exit status) takes gunicorn's usual way out."""
    if isinstance(sys.exc_info()[1], StopIteration | KeyboardInterrupt):
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
