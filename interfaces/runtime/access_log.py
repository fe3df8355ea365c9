"""gunicorn's access line built only when something would write it.

The API logs each request itself (interfaces/http/common/requestlog.py), and the logging configuration gives
`gunicorn.access` no handler at WARNING. gunicorn decides whether to build its access line from its settings alone:
with a `logconfig_dict` it builds the line's atoms (a dict of some twenty formatted values, the request's headers
walked) for every request and hands them to a logger that drops them, 3.8% of an API worker's samples per verify.
`AccessLogWhenEnabled` (gunicorn's `logger_class`) builds it only when `gunicorn.access` would log at INFO, so an
operator who configures that logger still gets gunicorn's lines.
"""

from __future__ import annotations

import logging
from typing import Any

from gunicorn import glogging  # type: ignore[import-untyped]  # gunicorn ships no type information

LOGGER_CLASS = "interfaces.runtime.access_log.AccessLogWhenEnabled"


class AccessLogWhenEnabled(glogging.Logger):
    def access(self, resp: Any, req: Any, environ: Any, request_time: Any) -> None:
        if self.access_log.isEnabledFor(logging.INFO):
            super().access(resp, req, environ, request_time)
