r"""math-verify, bounded: the one place the grader calls ``parse`` and ``verify`` (sympy underneath).

Standalone on purpose: a worker process (:mod:`lead.grading.pool`) loads this file by its path, without
importing the ``lead`` package, and serves requests with :func:`worker_main`. Nothing here imports from the
rest of the package.

A *source* is what math-verify parses: a cleaned answer in ``$...$``, a plain number as written, or, when
string work found no answer (:mod:`lead.grading.extract`), the end of the text itself, so that
math-verify's own extraction (final-answer phrases, LaTeX spans, the last number) decides.

* :func:`sympy_equal` -- ``verify(parse(gold), parse(pred))``, gold first, with set/inequality comparison
  switched on only when the gold is unmistakably an interval (``[``, ``]``, ``\infty``, ``\cup``), so that
  the ordered pair ``(2,4)`` never equals ``2 < x < 4``. Floats are compared to 12 decimals (math-verify's
  default is 6): a decimal equals a number only when it is that number to machine precision
  (``0.0833333333333333`` is 1/12, ``0.33`` is not 1/3) -- approximations are wrong answers;
* :func:`parse_ok` -- whether math-verify parses a source (curation's "gradable gold" check, and the answer
  string of a text under the ``"any"`` rule);
* :func:`serve` answers one request of either kind; :func:`bounded_serve` the same under our own
  ``setitimer`` alarm (math-verify's ``signal.alarm`` timeouts are switched off: they are silently disabled
  off the main thread); :func:`in_process_serve` the alarm on the main thread, else a daemon thread
  abandoned on timeout.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

logger = logging.getLogger(__name__)

# Outcome labels of one graded pair (also the GradeStats field names).
FAST = "fast_path"
VERIFIED = "verified"
NO_ANSWER = "no_answer"
UNPARSEABLE = "unparseable"
TIMEOUT = "timeouts"
# Address-space cap of a worker: a blow-up becomes a MemoryError there, not swapping on a shared machine.
WORKER_MEMORY_MB = 4096


class _SoftTimeout(BaseException):
    """Raised by our SIGALRM handler. A BaseException so that math-verify's and sympy's
    ``except Exception`` blocks do not swallow it."""


_MV: tuple[Any, ...] | None = None


def _math_verify() -> tuple[Any, ...]:
    """Import math-verify lazily: the fast paths never need sympy, and workers import it once."""
    global _MV
    if _MV is None:
        import math_verify.grader as mv_grader
        import math_verify.parser as mv_parser
        from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify
        from sympy import Basic, MatrixBase

        # We pass timeout None (signals are ours); these flags only silence its one-time warning about it.
        mv_parser.TIMEOUT_WARNING_SHOWN = True
        mv_grader.TIMEOUT_WARNING_SHOWN = True
        configs = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]
        _MV = (parse, verify, configs, (Basic, MatrixBase))
    return _MV


FLOAT_ROUNDING = 12  # decimals compared: machine precision, not an approximation


def _interval_like(clean: str) -> bool:
    return bool(re.search(r"\\infty|\\cup|\[|\]", clean))


def _answer_text(parsed: list[Any]) -> str | None:
    """The answer string math-verify extracted (the string it keeps beside the sympy object)."""
    texts = [p for p in parsed if isinstance(p, str)]
    if texts:
        return texts[-1]
    return str(parsed[0]) if parsed else None


def sympy_equal(pred_source: str, gold_source: str) -> tuple[bool, str, str | None]:
    """math-verify on two sources (no time limit of its own), gold first: (equal, status, the prediction's
    answer string as math-verify extracted it)."""
    parse, verify, configs, sympy_types = _math_verify()
    gold = parse(gold_source, extraction_config=configs, parsing_timeout=None)
    pred = parse(pred_source, extraction_config=configs, parsing_timeout=None)
    answer = _answer_text(pred)
    if not any(isinstance(g, sympy_types) for g in gold):
        return False, UNPARSEABLE, answer
    if not pred:
        return False, NO_ANSWER, None
    if not any(isinstance(p, sympy_types) for p in pred):
        return False, UNPARSEABLE, answer
    interval = _interval_like(_answer_text(gold) or gold_source)
    ok = verify(
        gold, pred, float_rounding=FLOAT_ROUNDING, timeout_seconds=None, allow_set_relation_comp=interval
    )
    return bool(ok), VERIFIED, answer


def parse_ok(source: str) -> tuple[bool, str | None]:
    """Whether math-verify parses ``source`` into a value, and the answer string it extracted."""
    parse, _, configs, sympy_types = _math_verify()
    parsed = parse(source, extraction_config=configs, parsing_timeout=None)
    return any(isinstance(p, sympy_types) for p in parsed), _answer_text(parsed)


def can_use_alarm() -> bool:
    """Signals work on the main thread only; never clobber an interval timer someone else has set."""
    return (
        hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
        and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    )


@contextlib.contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    """Raise _SoftTimeout in the main thread after ``seconds``, re-firing every 50 ms until cancelled."""
    armed = [True]

    def handler(signum: int, frame: Any) -> None:
        if armed[0]:
            raise _SoftTimeout

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001), 0.05)
    try:
        yield
    finally:
        while True:  # a late tick may raise while we clean up: retry until the timer is really off
            try:
                armed[0] = False
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, old)
                break
            except _SoftTimeout:
                continue


Verdict = tuple[bool, str, "str | None"]  # (equal / parsed, status, the answer string math-verify extracted)


def serve(request: dict[str, Any]) -> Verdict:
    """One request, no time limit of its own: ``{"pred", "gold"}`` sources -> :func:`sympy_equal`;
    ``{"op": "parse", "source"}`` -> whether it parses, and its answer string (:func:`parse_ok`)."""
    if request.get("op") == "parse":
        ok, answer = parse_ok(request["source"])
        return ok, (VERIFIED if ok else (UNPARSEABLE if answer else NO_ANSWER)), answer
    return sympy_equal(request["pred"], request["gold"])


def bounded_serve(request: dict[str, Any], timeout: float) -> Verdict:
    """:func:`serve` under an in-process alarm. Main thread only (the caller checks)."""
    try:
        with _alarm(timeout):
            return serve(request)
    except _SoftTimeout:
        return False, TIMEOUT, None
    except Exception:
        logger.debug("math-verify failed", exc_info=True)
        return False, UNPARSEABLE, None


def thread_bounded_serve(request: dict[str, Any], timeout: float) -> Verdict:
    """Last resort off the main thread without worker processes: a daemon thread abandoned on timeout."""
    box: list[Verdict] = []

    def run() -> None:
        try:
            box.append(serve(request))
        except Exception:
            box.append((False, UNPARSEABLE, None))

    t = threading.Thread(target=run, name="lead-grading-fallback", daemon=True)
    t.start()
    t.join(timeout)
    return box[0] if box else (False, TIMEOUT, None)


def in_process_serve(request: dict[str, Any], timeout: float) -> Verdict:
    """:func:`serve` bounded in this process: the alarm on the main thread, else a daemon thread."""
    if can_use_alarm():
        return bounded_serve(request, timeout)
    return thread_bounded_serve(request, timeout)


def worker_main() -> None:
    """Entry point of a worker process: JSON requests on stdin, JSON answers on stdout."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's business; EOF on stdin ends us
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # stray prints from libraries must not corrupt the protocol
    logging.disable(logging.CRITICAL)

    def send(obj: dict[str, Any]) -> None:
        proto.write(json.dumps(obj) + "\n")
        proto.flush()

    try:
        import resource

        mb = os.environ.get("LEAD_GRADER_WORKER_MEMORY_MB", "")
        limit = (int(mb) if mb.isdigit() else WORKER_MEMORY_MB) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):
        pass
    try:
        _math_verify()
        sympy_equal("$1$", "$1$")  # warm the parser so the first real item is not charged for it
    except BaseException as exc:
        send({"error": repr(exc)})
        return
    send({"ready": True, "pid": os.getpid()})
    stdin = sys.stdin.buffer
    while True:
        line = stdin.readline()
        if not line:
            return
        try:
            req = json.loads(line)
            if req.get("op") == "_test_hang":  # test hook: a hang that signals cannot interrupt
                signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
                time.sleep(float(req.get("seconds", 3600)))
                send({"id": req["id"], "eq": False, "status": VERIFIED})
                continue
            ok, status, answer = bounded_serve(req, float(req["timeout"]))
        except Exception:
            ok, status, answer = False, UNPARSEABLE, None
        reply = {"id": req.get("id") if isinstance(req, dict) else None, "eq": ok, "status": status}
        send({**reply, "answer": answer})
