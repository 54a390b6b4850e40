"""Worker processes for the sympy step: hard time limits that work from any thread.

:func:`serve_many` sends the pairs the fast paths left to a pool of worker *processes* (plain ``subprocess``
children speaking JSON lines, shared by all calls, restarted when killed). Each worker bounds its own work
with an interval timer, and the parent kills a worker that has not answered within ``timeout + 1 s`` (a hang
inside a C-level big-integer operation ignores signals), then starts a replacement. Works from any thread
(Prefect tasks, thread pools) and from daemonic processes. The pool serves one batch at a time: concurrent
callers wait for the lock (each batch is bounded). If worker processes cannot be started at all, the sympy
step runs in-process (:func:`lead.grading.verify.in_process_serve`), so callers still get an answer in
time.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import json
import logging
import os
import selectors
import subprocess
import sys
import threading
import time
from typing import Any

from lead.grading import verify as _verify
from lead.grading.verify import TIMEOUT, UNPARSEABLE, Verdict, in_process_serve

logger = logging.getLogger(__name__)

# Parent-side hard limit = timeout + this grace (the worker's own timer normally answers first).
HARD_GRACE_S = 1.0
_STARTUP_TIMEOUT_S = 60.0
_MAX_STARTUP_FAILURES = 3
_MAX_TASKS_PER_WORKER = 5000

# The child loads lead/grading/verify.py under a private module name, without importing the `lead` package
# (whose __init__ may pull heavy dependencies) and without re-running the parent's __main__ (unlike
# multiprocessing's spawn/forkserver); '' is dropped from sys.path so the cwd cannot shadow modules.
_WORKER_BOOT = (
    "import importlib.util as u, sys\n"
    "sys.path[:] = [p for p in sys.path if p not in ('', '.')]\n"
    "s = u.spec_from_file_location('_lead_grading_worker', sys.argv[1])\n"
    "m = u.module_from_spec(s)\n"
    "sys.modules[s.name] = m\n"
    "s.loader.exec_module(m)\n"
    "m.worker_main()\n"
)


class _WorkerUnavailable(RuntimeError):
    pass


class _Worker:
    """One child process. States: starting -> idle <-> busy; dead after EOF, error or kill."""

    def __init__(self) -> None:
        if not sys.executable:
            raise _WorkerUnavailable("no sys.executable")
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _WORKER_BOOT, os.path.abspath(_verify.__file__)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                close_fds=True,
            )
        except OSError as exc:
            raise _WorkerUnavailable(repr(exc)) from exc
        self.state = "starting"
        self.deadline = time.monotonic() + _STARTUP_TIMEOUT_S
        self.task: int | None = None
        self.done = 0
        self._buf = b""

    def fileno(self) -> int:
        assert self.proc.stdout is not None
        return self.proc.stdout.fileno()

    def send(self, obj: dict[str, Any], deadline: float, task: int) -> bool:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write((json.dumps(obj) + "\n").encode())
            self.proc.stdin.flush()
        except (OSError, ValueError):
            self.kill()
            return False
        self.state, self.deadline, self.task = "busy", deadline, task
        return True

    def read(self) -> list[dict[str, Any]] | None:
        """Messages now available; None on EOF (the child died)."""
        try:
            data = os.read(self.fileno(), 1 << 16)
        except OSError:
            data = b""
        if not data:
            return None
        self._buf += data
        *lines, self._buf = self._buf.split(b"\n")
        out = []
        for line in lines:
            with contextlib.suppress(ValueError):
                out.append(json.loads(line))
        return out

    def kill(self) -> None:
        self.state = "dead"
        with contextlib.suppress(OSError):
            self.proc.kill()
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=5)
        for f in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(Exception):
                f.close()  # type: ignore[union-attr]

    def close(self) -> None:
        """Polite stop: EOF on stdin, then kill if it lingers."""
        with contextlib.suppress(Exception):
            self.proc.stdin.close()  # type: ignore[union-attr]
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=1)
        self.kill()


class WorkerPool:
    """Worker processes shared by all grading calls of this process; one batch at a time (a lock)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.workers: list[_Worker] = []
        self.broken = False  # workers cannot be started here: callers use the in-process fallback

    def run(self, requests: list[dict[str, Any]], timeout: float, workers: int) -> list[Verdict]:
        """Answer every request (see :func:`serve_many`; or a test ``op``) with (equal, status, answer);
        never raises."""
        with self.lock:
            try:
                return self._run(requests, timeout, max(1, workers))
            except Exception:  # defensive: drop the workers, answer in-process
                logger.warning("grading worker pool failed; grading in-process", exc_info=True)
                for w in self.workers:
                    w.kill()
                self.workers = []
                return [
                    in_process_serve(r, timeout)
                    if "op" not in r or r["op"] == "parse"
                    else (False, TIMEOUT, None)
                    for r in requests
                ]

    def _spawn(self) -> _Worker | None:
        try:
            w = _Worker()
        except _WorkerUnavailable:
            logger.warning("grading worker could not be started; grading in-process", exc_info=True)
            self.broken = True
            return None
        self.workers.append(w)
        return w

    def _run(self, requests: list[dict[str, Any]], timeout: float, n_workers: int) -> list[Verdict]:
        n = len(requests)
        results: list[Verdict | None] = [None] * n
        pending = collections.deque(range(n))
        startup_failures = 0
        for w in self.workers:
            if w.state == "busy":  # left over from a call interrupted (e.g. KeyboardInterrupt): stale answer
                w.kill()
        self.workers = [w for w in self.workers if w.state != "dead"]
        while len(self.workers) < min(n_workers, n) and not self.broken and self._spawn():
            pass
        while pending or any(w.state == "busy" for w in self.workers):
            now = time.monotonic()
            for w in self.workers:
                while w.state == "idle" and pending and self._n_busy() < n_workers:
                    idx = pending.popleft()
                    req = dict(requests[idx], id=idx, timeout=timeout)
                    if not w.send(req, now + timeout + HARD_GRACE_S, idx):
                        pending.appendleft(idx)
            active = [w for w in self.workers if w.state in ("starting", "busy")]
            if not active:
                if pending and not self.broken and startup_failures < _MAX_STARTUP_FAILURES and self._spawn():
                    continue
                break
            wait = max(0.0, min(w.deadline for w in active) - time.monotonic())
            with selectors.DefaultSelector() as sel:
                for w in active:
                    sel.register(w.fileno(), selectors.EVENT_READ, w)
                ready = [key.data for key, _ in sel.select(wait)]
            for w in ready:
                msgs = w.read()
                if msgs is None:  # the child died (crash, memory limit, failed import)
                    if w.state == "busy" and w.task is not None:
                        results[w.task] = (False, UNPARSEABLE, None)
                    elif w.state == "starting":
                        startup_failures += 1
                    w.kill()
                    continue
                for msg in msgs:
                    if msg.get("ready"):
                        w.state = "idle"
                    elif "error" in msg:
                        logger.warning("grading worker failed to start: %s", msg["error"])
                        startup_failures += 1
                        w.kill()
                    elif w.state == "busy" and msg.get("id") == w.task:
                        status = str(msg.get("status", UNPARSEABLE))
                        results[w.task] = (bool(msg.get("eq")), status, msg.get("answer"))
                        w.state, w.task = "idle", None
                        w.done += 1
            now = time.monotonic()
            for w in active:
                if w.state in ("starting", "busy") and now >= w.deadline:
                    if w.state == "busy" and w.task is not None:
                        results[w.task] = (False, TIMEOUT, None)  # hard limit: killed, counted as a timeout
                    else:
                        startup_failures += 1
                    w.kill()
                elif w.state == "idle" and w.done >= _MAX_TASKS_PER_WORKER:
                    w.close()  # recycle: sympy's caches only grow
            self.workers = [w for w in self.workers if w.state != "dead"]
            if startup_failures >= _MAX_STARTUP_FAILURES and not any(w.state == "idle" for w in self.workers):
                self.broken = True
            while (
                pending
                and not self.broken
                and len(self.workers) < min(n_workers, len(pending) + self._n_busy())
                and self._spawn()
            ):
                pass
            if self.broken and pending and not any(w.state in ("idle", "busy") for w in self.workers):
                break
        for idx in pending:  # workers unusable: bounded in-process fallback
            req = requests[idx]
            if "op" not in req or req["op"] == "parse":
                results[idx] = in_process_serve(req, timeout)
            else:
                results[idx] = (False, TIMEOUT, None)
        return [r if r is not None else (False, UNPARSEABLE, None) for r in results]

    def _n_busy(self) -> int:
        return sum(w.state == "busy" for w in self.workers)

    def shutdown(self) -> None:
        with self.lock:
            for w in self.workers:
                w.close()
            self.workers = []


_POOL: WorkerPool | None = None
_POOL_LOCK = threading.Lock()


def shared_pool() -> WorkerPool:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL.pid != os.getpid():  # after a fork, the parent's workers are not ours
            _POOL = WorkerPool()
        return _POOL


def shutdown_worker_pool() -> None:
    """Stop the grading worker processes (they are also stopped at exit, and restarted on demand)."""
    global _POOL
    with _POOL_LOCK:
        pool, _POOL = _POOL, None
    if pool is not None and pool.pid == os.getpid():
        pool.shutdown()


atexit.register(shutdown_worker_pool)


def _default_workers(n_jobs: int) -> int:
    return max(1, min(n_jobs, os.cpu_count() or 1, 8))


def serve_many(requests: list[dict[str, Any]], timeout: float, workers: int | None) -> list[Verdict]:
    """math-verify requests (``{"pred", "gold"}`` sources, or ``{"op": "parse", "source"}``) in worker
    processes, hard-limited per item."""
    if not requests:
        return []
    pool = shared_pool()
    n_workers = workers if workers is not None else _default_workers(len(requests))
    if pool.broken:
        return [in_process_serve(r, timeout) for r in requests]
    return pool.run(requests, timeout, n_workers)
