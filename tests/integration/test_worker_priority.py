"""`paywarden serve`'s workers (projections, audit log, webhooks) run at a lower CPU priority than the API: when the
cores are short the requests go first, and the workers catch up in larger batches (docs/performance.md)."""

from __future__ import annotations

import os
import sys

from interfaces.runtime import supervisor

REPORT = "import os, sys, time; open(sys.argv[1] + '.part', 'w').write(str(os.nice(0))); " \
         "os.rename(sys.argv[1] + '.part', sys.argv[1])"


def test_the_workers_run_niced_and_the_server_at_the_supervisors_priority(tmp_path):
    server_file, worker_file = tmp_path / "server", tmp_path / "worker"
    worker = [sys.executable, "-c", REPORT + "; time.sleep(30)", str(worker_file)]
    server = [sys.executable, "-c", REPORT + "\nwhile not os.path.exists(sys.argv[2]): time.sleep(0.02)",
              str(server_file), str(worker_file)]
    assert supervisor.supervise(server, worker, poll_seconds=0.05) == 0  # returns when the server exits
    mine = os.nice(0)
    assert int(server_file.read_text()) == mine
    assert int(worker_file.read_text()) == min(mine + supervisor.WORKER_NICENESS, 19)
