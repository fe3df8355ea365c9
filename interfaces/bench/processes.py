"""The processes a benchmark starts: waiting until one answers, stopping it with its children, and the CPU every
process of a side spent (from /proc), which is robust to the machine's other load where throughput is not."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from typing import Any


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())


def wait_answering(url: str, child: subprocess.Popen, what: str, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise RuntimeError(f"{what} exited with status {child.returncode}")
        try:
            get_json(url)
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{what} did not answer {url} within {seconds:.0f} s")


def stop_child(child: subprocess.Popen) -> None:
    if child.poll() is None:
        os.killpg(child.pid, 2)  # the child leads its own session: SIGINT stops it and its own children
        try:
            child.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, 9)
            child.wait()


TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def tree_cpu(root: int) -> dict[int, tuple[str, float]]:
    """CPU seconds (user + system) of a process and all its live descendants, by pid, with a short name: the
    side's whole stack. Robust to the machine's other load, unlike throughput."""
    stats: dict[int, tuple[int, list[str], float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()  # after the name: state, ppid, ..., utime (11), stime
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        stats[int(entry)] = (int(fields[1]), argv, (int(fields[11]) + int(fields[12])) / TICKS)
    mine, queue = set(), [root]
    while queue:
        pid = queue.pop()
        if pid in stats and pid not in mine:
            mine.add(pid)
            queue.extend(child for child, (ppid, _, _) in stats.items() if ppid == pid)
    out = {}
    for pid in mine:
        ppid, argv, seconds = stats[pid]
        name = _process_name(argv)
        if ppid in stats and stats[ppid][1] == argv:
            name += " worker"  # a gunicorn worker: the same command line as its master
        out[pid] = (name, seconds)
    return out


def _process_name(argv: list[str]) -> str:
    joined = " ".join(argv)
    for needle, name in (("uvicorn", "reference (uvicorn)"), ("facilitator.mjs", "TypeScript facilitator (node)"),
                         ("http.proxy.wsgi", "proxy gunicorn"),
                         ("facilitator.wsgi", "API gunicorn"), (" up ", "up (localnet)"), (" serve ", "supervisor"),
                         (" project", "projection worker"), (" webhooks", "webhook worker")):
        if needle in joined + " ":
            return name
    return " ".join(argv[:3])


def cpu_delta(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]) -> dict[str, float]:
    """CPU seconds spent between two snapshots, summed by process name."""
    spent: dict[str, float] = {}
    for pid, (name, seconds) in after.items():
        spent[name] = spent.get(name, 0.0) + seconds - before.get(pid, (name, 0.0))[1]
    return spent
