"""A stage process's exit without the interpreter's teardown of every module: what a normal exit does that
matters, in its order, then ``os._exit``.

- Upstream: CPython 3.11 and 3.12 (``threading._shutdown``, ``atexit._run_exitfuncs``: what ``Py_FinalizeEx``
  calls first, before it frees the modules).
- Why: the teardown (torch's, transformers', MLflow's... objects freed one by one) is most of the end of every
  stage process, on every stage of every ``dvc repro`` (``bench/stage_end.py``: 0.08x of a normal exit's time,
  bench/RESULTS.md), and nothing any output depends on happens in it.
- Delete when: the stages' libraries tear down in well under a second, or Python offers a public "finalize
  the threads and the atexit handlers, then exit" call.
- Contract: ``tests/contracts/test_patches.py`` (the two calls exist; a process with a live thread pool, a
  non-daemon thread and an atexit handler exits with its code, having run them, and does not hang).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn


def exit_now(code: int) -> NoReturn:
    """End the process with ``code`` after what a normal exit does first, in the interpreter's order:
    ``threading._shutdown`` (the hooks threads registered with ``threading._register_atexit``, so an idle
    ``ThreadPoolExecutor``'s workers are told to stop, then every non-daemon thread joined), the ``atexit``
    handlers (MLflow ends its run and flushes its async logging, an engine's ``close``, ``logging``'s shutdown,
    ``weakref.finalize`` callbacks, multiprocessing's children), stdout and stderr flushed."""
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)
