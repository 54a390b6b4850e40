r"""The answer grader: a completion's final answer, and whether it equals the gold answer.

Every RL reward, calibrated pass rate and reported score is decided here, so the module is built to be
right first, then cheap, and never to raise or hang on a model's output.

Pipeline for one (completion, gold) pair
----------------------------------------
1. :func:`extract_answer` -- the final answer string (rules in its docstring; ``None`` = no answer).
2. Clean-up, pure string work: unicode maths signs, ``$``/``\(``/``\[``, ``\left``/``\right``, ``\!``,
   ``\,``, ``\dfrac``, ``\frac12``, degrees, ``\%``, currency ``\$``, trailing units (``\text{ cm}``,
   ``5 cm``), thousands separators (``10,\!080``), ``\text{}`` wrappers, a leading ``x =`` / ``x \in``.
3. Fast paths, no sympy, exact: equal canonical strings; multiple-choice letters (``\text{(C)}`` = ``C``
   = ``(C)``); ``\text{}`` word answers (case-insensitive, and decisive: sympy would read ``Evelyn`` as a
   product of commuting symbols); numbers as exact fractions (AIME ``025`` = ``25``, AMC ``27.0`` = ``27``,
   ``\frac12`` = ``0.5`` = ``1/2``, mixed numbers, ``6.72\times10^{-5}``, percent as ``p`` or ``p/100``);
   base-n numbers (``52_8``); unordered lists (``1,-2`` = ``-2, 1``) and ordered tuples / intervals
   (``(1,2)`` != ``(2,1)``, ``(3,4]`` != ``(3,4)``) of numbers. A fast path either decides or defers.
4. Cheap guards before any sympy: length, non-ASCII, nesting depth, power towers, huge exponents and
   factorials, big operators (``\sum``, ``\prod``, ``\int``, ``\lim``). A refused answer is ``False``
   (counted ``unparseable``): a model must not be able to stall the reward loop.
5. math-verify (``parse`` both, ``verify(gold, pred)``, gold first), with set/inequality comparison
   switched on only when the gold is unmistakably an interval (``[``, ``]``, ``\infty``, ``\cup``), so that
   the ordered pair ``(2,4)`` never equals ``2 < x < 4``.

Time limits (math-verify's own ``signal.alarm`` timeouts are switched off everywhere)
------------------------------------------------------------------------------------
* :func:`grade_batch` sends the few pairs that reach step 5 to a pool of worker *processes* (plain
  ``subprocess`` children speaking JSON lines, shared by all calls, restarted when killed). Each worker
  bounds its own work with an interval timer (``timeout``), and the parent kills a worker that has not
  answered within ``timeout + 1 s`` (a hang inside a C-level big-integer operation ignores signals), then
  starts a replacement. Works from any thread (Prefect tasks, thread pools) and from daemonic processes.
  The pool serves one batch at a time: concurrent callers wait for the lock (each batch is bounded).
* :func:`grade` / :func:`answers_equal` on the main thread run step 5 in-process under our own
  ``setitimer`` alarm (re-firing every 50 ms in case sympy swallows one); off the main thread (where signals
  cannot be used), or when another interval timer is running (pytest-timeout), they use the worker pool.
  The guards of step 4 keep in-process work signal-interruptible; :func:`grade_batch` is the path with a
  hard, process-level guarantee.
* If worker processes cannot be started at all, the sympy step runs in-process (alarm on the main thread;
  otherwise in a daemon thread that is abandoned after ``timeout``), so callers still get an answer in time.

Everything here is pure (no I/O; only caches of pure functions) except the worker pool.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import functools
import json
import logging
import os
import re
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from fractions import Fraction
from typing import Any

__all__ = [
    "GradeStats",
    "answers_equal",
    "extract_answer",
    "grade",
    "grade_batch",
    "grade_batch_with_stats",
    "shutdown_worker_pool",
]

logger = logging.getLogger(__name__)

# Outcome labels of one graded pair (also the GradeStats field names).
FAST = "fast_path"
VERIFIED = "verified"
NO_ANSWER = "no_answer"
UNPARSEABLE = "unparseable"
TIMEOUT = "timeouts"

_THINK_CLOSE = "</think>"
# Text fall-backs ("The answer is ...") are searched only near the end: the final statement lives there,
# and it keeps a 1 MB completion from being scanned by several regexes.
_FALLBACK_WINDOW = 4000
_MAX_FALLBACK_CHARS = 300
# Longer extracted answers skip even the string fast paths (no real answer is this long).
_MAX_FAST_CHARS = 20_000
# Guards in front of sympy (measured with math-verify 0.9.0: nested \frac depth 12 takes ~2.5 s and
# depth 15 more than 10 s; 30 nested parentheses ~4.5 s; 10^{10^{10}} or (10^6)! never finish).
_MAX_SYMPY_CHARS = 400
_MAX_NESTING = 10
_MAX_FRACS = 16
_MAX_EXPONENT = 10_000
_MAX_FACTORIAL = 1000
_MAX_BINOM_LITERAL = 10_000
# Parent-side hard limit = timeout + this grace (the worker's own timer normally answers first).
_HARD_GRACE_S = 1.0
_STARTUP_TIMEOUT_S = 60.0
_MAX_STARTUP_FAILURES = 3
_MAX_TASKS_PER_WORKER = 5000
# Address-space cap of a worker: a blow-up becomes a MemoryError there, not swapping on a shared machine.
_WORKER_MEMORY_MB = 4096


# --------------------------------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------------------------------
@dataclass
class GradeStats:
    """How a batch was graded. ``fast_path + verified + no_answer + unparseable + timeouts == total``.

    fast_path: decided by exact string/number rules without sympy. verified: decided by math-verify.
    no_answer: nothing could be extracted. unparseable: refused by a guard, not parseable by math-verify,
    or a crashed worker (all graded ``False``). timeouts: math-verify ran out of time (graded ``False``).
    correct: how many were graded ``True`` (an extra, not part of the sum).
    """

    total: int = 0
    fast_path: int = 0
    verified: int = 0
    no_answer: int = 0
    unparseable: int = 0
    timeouts: int = 0
    correct: int = 0

    def merge(self, other: GradeStats) -> GradeStats:
        """Field-wise sum of two stats (for accumulating over batches)."""
        return GradeStats(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    def _count(self, status: str, ok: bool) -> None:
        setattr(self, status, getattr(self, status) + 1)
        self.correct += int(ok)


# --------------------------------------------------------------------------------------------------
# Extraction
# --------------------------------------------------------------------------------------------------
_BOX_RE = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")
_BARE_BOX_ARG_RE = re.compile(r"[ \t]+([^\s$]+)")  # `\boxed 5` (TeX allows an undelimited argument)
# Brace matching skips escaped characters (`\{`, `\}`, and `\\` so that `\\{` is a real brace).
_BRACE_TOKEN_RE = re.compile(r"\\.|[{}]", re.S)
# Anchors only (the answer is the rest of the line), so that overlapping statements on one line are all
# found and the latest one wins.
_FALLBACK_RES = (
    re.compile(r"final\s+answer\s+is\s*:?", re.I),
    re.compile(r"\bthe\s+answer\s+is\s*:?", re.I),
    re.compile(r"\*\*\s*(?:final\s+)?answer\s*:?\s*\*\*\s*:?", re.I),
    re.compile(r"^[ \t>#*_]*(?:final\s+)?answer\s*:", re.I | re.M),
)
_MATH_SPAN_RE = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.S)
_SENTENCE_END_RE = re.compile(r"(?<=\S)\.(?=\s|$)")


def _match_braces(text: str, start: int) -> dict[int, int]:
    """Position of each ``{`` at or after ``start`` -> position of its matching ``}`` (one linear pass)."""
    stack: list[int] = []
    match: dict[int, int] = {}
    for m in _BRACE_TOKEN_RE.finditer(text, start):
        tok = m.group()
        if tok == "{":
            stack.append(m.start())
        elif tok == "}" and stack:
            match[stack.pop()] = m.start()
    return match


def _last_boxed(text: str) -> str | None:
    """Content of the last non-empty, balanced ``\\boxed{}``/``\\fbox{}`` (the inner box of a nest)."""
    ends = [m.end() for m in _BOX_RE.finditer(text)]
    if not ends:
        return None
    match: dict[int, int] | None = None  # computed once, only if a braced box is seen
    for pos in reversed(ends):
        j = pos
        while j < len(text) and text[j] in " \t":
            j += 1
        if j < len(text) and text[j] == "{":
            if match is None:
                match = _match_braces(text, ends[0])
            close = match.get(j)
            if close is None:  # unbalanced: ignore this box, an earlier one may be fine
                continue
            content = text[j + 1 : close].strip()
            if content:  # an empty box carries no answer (e.g. an echo of "within \boxed{}")
                return content
            continue
        bare = _BARE_BOX_ARG_RE.match(text, pos)
        if bare:
            content = bare.group(1).rstrip(".,;")
            if content:
                return content
    return None


def _clean_fallback(raw: str) -> str | None:
    """The answer at the start of ``raw``: a leading math span (may span lines), else the rest of the
    first line up to the end of its sentence ("5. Done" -> "5")."""
    s = raw.strip().strip("*").strip()
    span = _MATH_SPAN_RE.match(s)
    if span:
        s = next(g for g in span.groups() if g is not None)
    else:
        s = _SENTENCE_END_RE.split(s.split("\n", 1)[0], maxsplit=1)[0]
    s = s.strip().rstrip(".,;:!").strip().strip("*").strip()
    if not s or len(s) > _MAX_FALLBACK_CHARS:
        return None
    return s


def _fallback_answer(text: str) -> str | None:
    """Last "final answer is X" / "The answer is X" / "**Answer:** X" / "Answer: X" near the end."""
    window = text[-_FALLBACK_WINDOW:]
    best: re.Match[str] | None = None
    for rx in _FALLBACK_RES:
        for m in rx.finditer(window):
            if best is None or m.start() > best.start():
                best = m
    if best is None:
        return None
    # "The final answer is:" with the answer on the next line(s) ("$$\n5\n$$") is common in markdown.
    return _clean_fallback(window[best.end() : best.end() + 2 * _MAX_FALLBACK_CHARS])


def extract_answer(completion: str, *, before_think_close: bool = False) -> str | None:
    r"""The final answer of a completion, or ``None`` when it has none.

    Box rule: the content of the last ``\boxed{...}`` or ``\fbox{...}`` (by start position, so the inner
    box of ``\boxed{\boxed{5}}`` wins), with nesting-aware brace matching that skips ``\{``/``\}``. An
    unbalanced or empty box is ignored (the previous box is used). ``\boxed 5`` is accepted.

    ``before_think_close=True`` -- the reference code's rule (GRPO-LEAD.md §3): the last box *before the
    first* ``</think>``, box only (no text fall-backs, like its ``last_boxed_only_string``). Without any
    ``</think>`` the result is ``None``: the reference code gives no answer to an unclosed reasoning.

    ``before_think_close=False`` (evaluation / improved rule): if the completion contains ``</think>``,
    the answer is looked for after the *last* ``</think>``: its last box, else a text fall-back there;
    if that part has neither, the last box of the whole completion (inside the reasoning) is used --
    "the last box of the whole completion". Without ``</think>``: last box, else a text fall-back.

    Text fall-backs, only when there is no box, searched in the last 4000 characters, the latest match
    wins: "final answer is X", "The answer is X", "**Answer:** X", a line "Answer: X". X is the first
    ``$...$`` / ``\(...\)`` span if it starts with one, else the text up to the end of the sentence.
    """
    if not isinstance(completion, str) or not completion:
        return None
    try:
        if before_think_close:
            cut = completion.find(_THINK_CLOSE)
            return None if cut < 0 else _last_boxed(completion[:cut])
        cut = completion.rfind(_THINK_CLOSE)
        if cut < 0:
            return _last_boxed(completion) or _fallback_answer(completion)
        tail = completion[cut + len(_THINK_CLOSE) :]
        return _last_boxed(tail) or _fallback_answer(tail) or _last_boxed(completion[:cut])
    except Exception:  # defensive: nothing above should raise, but a grader must not
        logger.debug("extract_answer failed", exc_info=True)
        return None


# --------------------------------------------------------------------------------------------------
# Clean-up (pure string work, whitespace preserved so that `\cot x` stays valid LaTeX for sympy)
# --------------------------------------------------------------------------------------------------
_UNICODE_MAP = {
    "\u2212": "-",
    "\u2013": "-",
    "\u2014": "-",
    "\u00d7": r"\times ",
    "\u22c5": r"\cdot ",
    "\u00b7": r"\cdot ",
    "\u00f7": r"\div ",
    "\u03c0": r"\pi ",
    "\u221e": r"\infty ",
    "\u2264": r"\le ",
    "\u2265": r"\ge ",
    "\u2260": r"\ne ",
    "\u221a": r"\sqrt",
    "\u00b0": r"^\circ",
    "\u222a": r"\cup ",
    "\u2229": r"\cap ",
    "\u00b1": r"\pm ",
    "\u00a0": " ",
    "\u2009": " ",
    "\u202f": " ",
    "\u200b": "",
    "\ufeff": "",
}
_UNICODE_TABLE = str.maketrans(_UNICODE_MAP)
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_DBL_BACKSLASH = "\x00"  # placeholder for `\\` (matrix rows) while single-backslash commands are edited
_UNIT_WORDS = (
    r"(?:(?:square|sq\.?|cubic)\s+)?(?:units?|cm|mm|km|meters?|metres?|centimeters?|kilometers?|inch(?:es)?"
    r"|feet|foot|ft|yards?|miles?|mph|kg|grams?|pounds?|lbs?|ounces?|oz|liters?|litres?|gallons?|degrees?"
    r"|cents?|dollars?|seconds?|sec|minutes?|mins?|hours?|hrs?|days?|weeks?|months?|years?)"
)
_TEXT_UNIT_RE = re.compile(
    r"(?P<body>.*?[0-9}])\s*\\text\{\s*(?P<unit>[A-Za-z][A-Za-z .]*)\}(?:\s*\^\s*\{?\s*[23]\s*\}?)?\s*",
    re.S,
)
_WORD_UNIT_RE = re.compile(
    rf"(?P<body>.*?[0-9}}])\s*{_UNIT_WORDS}\.?(?:\s*\^\s*\{{?\s*[23]\s*\}}?)?\s*", re.S
)
_TEXT_CMD_RE = re.compile(r"\\(?:textbf|textrm|textit|textup|texttt|textsf|mathrm|mathbf|mathit|mbox|hbox)\{")
_TEXT_WRAP_RE = re.compile(r"\\text\{([^{}]*)\}")
_ASSIGN_RE = re.compile(r"[A-Za-z](?:_\{?\w+\}?)?\s*(?:=|\\in(?![A-Za-z]))\s*(?P<rhs>[^=]+)", re.S)


def _has_percent(s: str) -> bool:
    return "%" in s


def _clean(s: str) -> str:
    r"""Canonical LaTeX for an answer string, whitespace kept (single spaces)."""
    # Golds and popular answers repeat across a group: cache, but only short strings (memory).
    return _clean_cached(s) if len(s) <= 1000 else _clean_uncached(s)


@functools.lru_cache(maxsize=8192)
def _clean_cached(s: str) -> str:
    return _clean_uncached(s)


def _clean_uncached(s: str) -> str:
    s = _CONTROL_RE.sub(" ", s.translate(_UNICODE_TABLE)).strip()
    # Thousands separators written with LaTeX spacing, before spacing commands become plain spaces.
    s = re.sub(r"(\d),\s*\\!\s*(?=\d{3}(?!\d))", r"\1,", s)
    s = re.sub(r"(\d)\{,\}(?=\d{3}(?!\d))", r"\1,", s)
    s = re.sub(r"(\d)\\[,;: ](?=\d{3}(?!\d))", r"\1", s)
    s = s.replace("\\$", " ")  # currency
    s = s.replace("\\\\", _DBL_BACKSLASH)
    s = re.sub(r"\\[()\[\]]", " ", s)  # \( \) \[ \] math delimiters
    s = s.replace("$", " ")
    s = re.sub(r"\\(?:left|right)(?![A-Za-z])\s*\.?", "", s)
    s = re.sub(r"\\(?:[bB]igg?[lr]?)(?![A-Za-z])", "", s)
    s = re.sub(r"\\(?:displaystyle|textstyle|scriptstyle)(?![A-Za-z])", "", s)
    s = re.sub(r"\\(?:[!,;: ]|q?quad(?![A-Za-z]))|~", " ", s)
    s = re.sub(r"\\[dt]frac(?![A-Za-z])", r"\\frac", s)
    s = re.sub(r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ(?![A-Za-z])|\\degree(?![A-Za-z])", "", s)
    s = re.sub(r"\\?%", "", s)
    s = _TEXT_CMD_RE.sub(r"\\text{", s)
    for rx in (_TEXT_UNIT_RE, _WORD_UNIT_RE):
        m = rx.fullmatch(s)
        if m:
            s = m.group("body")
    prev = None
    while prev != s:  # unwrap \text{...}, innermost first
        prev, s = s, _TEXT_WRAP_RE.sub(r"\1", s)
    s = re.sub(r"\\frac\s*(\d)\s*(\d)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\frac\s*(\{[^{}]*\})\s*(\d)", r"\\frac\1{\2}", s)
    s = re.sub(r"\\frac\s*(\d)\s*\{", r"\\frac{\1}{", s)
    s = re.sub(r"\\sqrt\s*(\d)", r"\\sqrt{\1}", s)
    s = re.sub(r"\s+", " ", s).strip().rstrip(".").strip()
    m = _ASSIGN_RE.fullmatch(s)
    if m and m.group("rhs").strip():
        s = m.group("rhs").strip()
    return s.replace(_DBL_BACKSLASH, "\\\\")


def _canon(clean: str) -> str:
    """Whitespace-free form of a cleaned answer, for exact comparisons."""
    s = re.sub(r"\s+", "", clean)
    return re.sub(r"([_^])\{(\w)\}", r"\1\2", s)


# --------------------------------------------------------------------------------------------------
# Fast paths: True / False when decidable exactly, None to defer to math-verify
# --------------------------------------------------------------------------------------------------
_NUM = r"\d+(?:\.\d*)?|\.\d+"
_PLAIN_NUM_RE = re.compile(rf"(?:{_NUM})")
_THOUSANDS_RE = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_SLASH_RE = re.compile(rf"(?P<a>{_NUM})/(?P<b>{_NUM})")
_FRAC_RE = re.compile(rf"\\frac\{{(?P<a>[+-]?(?:{_NUM}))\}}\{{(?P<b>[+-]?(?:{_NUM}))\}}")
_MIXED_RE = re.compile(r"(?P<n>\d+)\\frac\{(?P<a>\d+)\}\{(?P<b>\d+)\}")
_SCI_RE = re.compile(rf"(?P<m>{_NUM})(?:\\times|\\cdot|\*)10\^(?:\{{(?P<e1>[+-]?\d{{1,3}})\}}|(?P<e2>\d))")
_CHOICE_RE = re.compile(r"\(?(?P<c>[A-J])\)?")
_CHOICE_PRED_RE = re.compile(r"\((?P<c>[A-J])\)[A-Za-z]*|(?P<d>[A-J])\)?")
_BASE_RE = re.compile(r"(?P<d>[0-9A-Z]+)_\{?(?P<b>[2-9]|[12]\d|3[0-6])\}?")  # 52_8, 4210_{5}, 1A_{16}
_TEXT_WORD_RE = re.compile(r"\s*\\(?:text|textbf|textrm|mbox|mathrm)\{\s*(?P<w>[^{}]*?)\s*\}\s*\.?\s*")
_INF = {"\\infty": "inf", "+\\infty": "inf", "-\\infty": "-inf"}


def _parse_number(clean: str) -> tuple[Fraction, bool] | None:
    """Exact value of a plain number (int, decimal, a/b, \\frac{a}{b}, mixed, a\\times10^{e}), and whether
    it was written as a decimal; None for anything else."""
    if len(clean) > 400:  # also keeps Python's int-string limit (4300 digits) out of reach
        return None
    thousands_ok = not re.search(r",\s", clean)  # "3, 5" is a list, "3,500" is a number
    c = _canon(clean)
    sign = 1
    if c.startswith(("+", "-")):
        sign, c = (-1 if c[0] == "-" else 1), c[1:]
    if c.startswith("-"):  # "--5" and the like are not plain numbers
        return None
    try:
        if thousands_ok and _THOUSANDS_RE.fullmatch(c):
            c = c.replace(",", "")
        if _PLAIN_NUM_RE.fullmatch(c):
            return sign * Fraction(c), "." in c
        m = _SLASH_RE.fullmatch(c) or _FRAC_RE.fullmatch(c)
        if m:
            a, b = Fraction(m.group("a")), Fraction(m.group("b"))
            return None if b == 0 else (sign * a / b, "." in c)
        m = _MIXED_RE.fullmatch(c)
        if m and int(m.group("b")) != 0:
            return sign * (int(m.group("n")) + Fraction(int(m.group("a")), int(m.group("b")))), False
        m = _SCI_RE.fullmatch(c)
        if m:
            e = int(m.group("e1") or m.group("e2"))
            return sign * Fraction(m.group("m")) * Fraction(10) ** e, True
    except (ValueError, ZeroDivisionError, OverflowError):
        return None
    return None


def _numbers_equal(
    pn: tuple[Fraction, bool], gn: tuple[Fraction, bool], pct_p: bool, pct_g: bool
) -> bool | None:
    (p, pdec), (g, gdec) = pn, gn
    if p == g or (pct_g and p == g / 100) or (pct_p and p / 100 == g):
        return True
    if not (pdec or gdec):
        return False
    # A decimal close to the gold (0.3333333 vs 1/3) is left to math-verify's rounding rules.
    if abs(p - g) > Fraction(1, 10_000) * max(1, abs(g)):
        return False
    return None


def _split_top(c: str) -> list[str]:
    """Split a canonical string at top-level commas."""
    items, depth, cur = [], 0, []
    i = 0
    while i < len(c):
        ch = c[i]
        if ch == "\\" and i + 1 < len(c):
            tok = c[i : i + 2]
            if tok in ("\\{", "\\}"):
                depth += 1 if tok == "\\{" else -1
            cur.append(tok)
            i += 2
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            items.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    items.append("".join(cur))
    return items


def _outer_brackets(c: str) -> tuple[str, str, str] | None:
    """(open, inner, close) when one bracket pair encloses the whole string."""
    if c.startswith("\\{") and c.endswith("\\}"):
        opener, closer, inner = "\\{", "\\}", c[2:-2]
    elif c[:1] in "([" and c[-1:] in ")]":
        opener, closer, inner = c[0], c[-1], c[1:-1]
    else:
        return None
    depth = 0
    for ch in inner:  # reject "(1)+(2)": the first bracket must close at the very end
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth < 0:
            return None
    return opener, inner, closer


def _as_list(clean: str) -> tuple[str, list[Any]] | None:
    """("set", values) for unordered lists, ("(]", values) etc. for tuples/intervals, else None. Values are
    Fractions or "inf"/"-inf"; None if any item is not a plain number."""
    c = _canon(clean)
    outer = _outer_brackets(c)
    if outer:
        opener, inner, closer = outer
        kind = "set" if opener == "\\{" else opener + closer
    else:
        inner, kind = c, "set"
    items = _split_top(inner)
    if len(items) < 2 or (kind == "set" and outer is None and "," not in inner):
        return None
    values: list[Any] = []
    for item in items:
        if item in _INF:
            values.append(_INF[item])
            continue
        num = _parse_number(item)
        if num is None or num[1]:  # decimals inside lists: leave to math-verify
            return None
        values.append(num[0])
    return kind, values


def _lists_equal(pl: tuple[str, list[Any]], gl: tuple[str, list[Any]]) -> bool | None:
    (pk, pv), (gk, gv) = pl, gl
    if (pk == "set") != (gk == "set"):
        return None  # a bare list against a tuple: math-verify's strict rules decide
    if pk == "set":
        if any(isinstance(v, str) for v in pv + gv):
            return None
        return sorted(pv) == sorted(gv)
    return pk == gk and pv == gv


def _choice(clean: str, *, pred: bool) -> str | None:
    c = _canon(clean)
    if pred:
        m = _CHOICE_PRED_RE.fullmatch(c)
        return (m.group("c") or m.group("d")) if m else None
    m = _CHOICE_RE.fullmatch(c)
    if not m:
        return None
    # A bare gold letter is a choice only for the usual A-E; "(F)" style golds are explicit.
    return m.group("c") if (c != m.group("c") or m.group("c") in "ABCDE") else None


def _word_key(s: str) -> str:
    return re.sub(r"[^a-z0-9]", "", s.lower())


def _fast_compare(pred: str, gold: str, pc: str, gc: str) -> bool | None:
    """Exact decision without sympy: True, False, or None (defer). pred/gold raw, pc/gc cleaned."""
    cp, cg = _canon(pc), _canon(gc)
    if not cp or not cg:
        return False
    if cp == cg:
        return True
    gold_choice = _choice(gc, pred=False)
    if gold_choice is not None:
        return _choice(pc, pred=True) == gold_choice
    # A \text{} word on either side: compare words (sympy reads "Even" as the product E*v*e*n).
    word = _TEXT_WORD_RE.fullmatch(gold) or _TEXT_WORD_RE.fullmatch(pred)
    if word and sum(ch.isalpha() for ch in word.group("w")) >= 2:
        return _word_key(cp) == _word_key(cg)
    base = _BASE_RE.fullmatch(cg)
    if base:
        pb = _BASE_RE.fullmatch(cp)
        pdigits = pb.group("d") if pb else (cp if re.fullmatch(r"[0-9A-Z]+", cp) else None)
        if pdigits is not None:
            same_base = pb is None or int(pb.group("b")) == int(base.group("b"))
            return same_base and pdigits.upper().lstrip("0") == base.group("d").upper().lstrip("0")
    gn, pn = _parse_number(gc), _parse_number(pc)
    if gn is not None and pn is not None:
        return _numbers_equal(pn, gn, _has_percent(pred), _has_percent(gold))
    gl, pl = _as_list(gc), _as_list(pc)
    if gl is not None and pl is not None:
        return _lists_equal(pl, gl)
    return None


# --------------------------------------------------------------------------------------------------
# Guards in front of sympy
# --------------------------------------------------------------------------------------------------
_BIG_OPS_RE = re.compile(
    r"\\(?:sum|prod|coprod|int|iint|iiint|oint|lim|limsup|liminf|bigcup|bigcap|partial)(?![A-Za-z])"
)


def _group_end(s: str, i: int) -> int:
    """Index just past the brace/paren group starting at s[i] (end of string if unbalanced)."""
    opener = s[i]
    closer = "}" if opener == "{" else ")"
    depth = 0
    for j in range(i, len(s)):
        if s[j] == opener:
            depth += 1
        elif s[j] == closer:
            depth -= 1
            if depth == 0:
                return j + 1
    return len(s)


def _exponent_token(s: str, i: int) -> tuple[str, int]:
    """The exponent after a `^` at s[i-1]: a braced/paren group, a command (+ its groups), a digit run
    (conservatively: TeX would take one digit, plain-text parsers the whole run) or one character."""
    while i < len(s) and s[i] == " ":
        i += 1
    start = i
    if i < len(s) and s[i] in "+-":
        i += 1
    if i >= len(s):
        return s[start:], i
    if s[i] in "{(":
        end = _group_end(s, i)
    elif s[i] == "\\":
        m = re.match(r"\\[A-Za-z]+", s[i:])
        end = i + (len(m.group()) if m else 2)
        while end < len(s) and s[end] == "{":
            end = _group_end(s, end)
    elif s[i].isdigit():
        m = re.match(r"\d+", s[i:])
        end = i + len(m.group()) if m else i + 1
    else:
        end = i + 1
    return s[start:end], end


def _max_literal(s: str) -> int:
    """Largest integer literal in s (a huge stand-in for literals too long to convert)."""
    best = 0
    for lit in re.findall(r"\d+", s):
        if len(lit.lstrip("0")) > 9:
            return 10**9
        best = max(best, int(lit))
    return best


def _group_before(s: str, i: int) -> str:
    """Content of the ``(...)``/``{...}`` group that ends just before s[i] (spaces skipped), else ""."""
    j = i - 1
    while j >= 0 and s[j] == " ":
        j -= 1
    if j < 0 or s[j] not in ")}":
        return ""
    closer = s[j]
    opener = "(" if closer == ")" else "{"
    depth = 0
    for k in range(j, -1, -1):
        if s[k] == closer:
            depth += 1
        elif s[k] == opener:
            depth -= 1
            if depth == 0:
                return s[k + 1 : j]
    return s[:j]


def _max_power(s: str) -> int:
    """Largest effective integer exponent in s: powers of powers multiply, ``((3^{100})^{100})^{100}``
    counts 10^6 (nesting is capped, so the recursion is shallow)."""
    best = 0
    for m in re.finditer(r"\^", s):
        outer = max(_max_literal(_exponent_token(s, m.end())[0]), 1)
        base = _group_before(s, m.start())
        inner = _max_power(base) if "^" in base else 1
        best = max(best, outer * max(inner, 1))
    return best


def _guard(clean: str) -> str | None:
    """Why ``clean`` must not reach sympy (a short reason), or None when it is safe enough."""
    if len(clean) > _MAX_SYMPY_CHARS:
        return "too long"
    if not clean.isascii():
        return "non-ascii"
    if _BIG_OPS_RE.search(clean):
        return "big operator"
    depth = deepest = 0
    for ch in clean:
        if ch in "({[":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")}]":
            depth -= 1
    if deepest > _MAX_NESTING:
        return "nested too deep"
    if clean.count("\\frac") > _MAX_FRACS:
        return "too many fractions"
    s = clean.replace("**", "^")
    for m in re.finditer(r"\^", s):
        exp, end = _exponent_token(s, m.end())
        if "^" in exp or s[end:].lstrip(" ").startswith("^"):  # a^{b^c}, a^b^c
            return "power tower"
    if _max_power(s) > _MAX_EXPONENT:
        return "huge exponent"
    # Factorials, binomials and Gamma are evaluated eagerly by sympy: their arguments must stay small.
    for m in re.finditer(r"(\d*)\s*!", s):
        arg = m.group(1) or _group_before(s, m.start())
        if "^" in arg or _max_literal(arg) > _MAX_FACTORIAL:
            return "huge factorial"
    for m in re.finditer(r"\\(?:binom|dbinom|tbinom|Gamma)(?![A-Za-z])", s):
        args, end = "", m.end()
        for _ in range(2):
            while end < len(s) and s[end] == " ":
                end += 1
            if end < len(s) and s[end] in "{(":
                stop = _group_end(s, end)
                args, end = args + s[end:stop], stop
        if "^" in args or _max_literal(args) > _MAX_BINOM_LITERAL:
            return "huge binomial"
    if "\\choose" in s and ("^" in s or _max_literal(s) > _MAX_BINOM_LITERAL):
        return "huge binomial"
    return None


# --------------------------------------------------------------------------------------------------
# math-verify (sympy) step, bounded in-process by an interval timer where signals are usable
# --------------------------------------------------------------------------------------------------
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


def _interval_like(clean: str) -> bool:
    return bool(re.search(r"\\infty|\\cup|\[|\]", clean))


def _sympy_equal(pred_clean: str, gold_clean: str) -> tuple[bool, str]:
    """math-verify on two cleaned, guarded answers (no time limit of its own). Gold first."""
    parse, verify, configs, sympy_types = _math_verify()
    gold = parse(f"${gold_clean}$", extraction_config=configs, parsing_timeout=None)
    if not any(isinstance(g, sympy_types) for g in gold):
        return False, UNPARSEABLE
    pred = parse(f"${pred_clean}$", extraction_config=configs, parsing_timeout=None)
    if not any(isinstance(p, sympy_types) for p in pred):
        return False, UNPARSEABLE
    ok = verify(gold, pred, timeout_seconds=None, allow_set_relation_comp=_interval_like(gold_clean))
    return bool(ok), VERIFIED


def _can_use_alarm() -> bool:
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


def _bounded_sympy_equal(pred_clean: str, gold_clean: str, timeout: float) -> tuple[bool, str]:
    """_sympy_equal under an in-process alarm. Main thread only (the caller checks)."""
    try:
        with _alarm(timeout):
            return _sympy_equal(pred_clean, gold_clean)
    except _SoftTimeout:
        return False, TIMEOUT
    except Exception:
        logger.debug("math-verify failed", exc_info=True)
        return False, UNPARSEABLE


def _thread_bounded_sympy_equal(pred_clean: str, gold_clean: str, timeout: float) -> tuple[bool, str]:
    """Last resort off the main thread without worker processes: a daemon thread abandoned on timeout."""
    box: list[tuple[bool, str]] = []

    def run() -> None:
        try:
            box.append(_sympy_equal(pred_clean, gold_clean))
        except Exception:
            box.append((False, UNPARSEABLE))

    t = threading.Thread(target=run, name="lead-grading-fallback", daemon=True)
    t.start()
    t.join(timeout)
    return box[0] if box else (False, TIMEOUT)


def _in_process_sympy_equal(pred_clean: str, gold_clean: str, timeout: float) -> tuple[bool, str]:
    if _can_use_alarm():
        return _bounded_sympy_equal(pred_clean, gold_clean, timeout)
    return _thread_bounded_sympy_equal(pred_clean, gold_clean, timeout)


# --------------------------------------------------------------------------------------------------
# Worker processes
# --------------------------------------------------------------------------------------------------
# The child loads this file under a private module name, without importing the `lead` package (whose
# __init__ may pull heavy dependencies) and without re-running the parent's __main__ (unlike
# multiprocessing's spawn/forkserver); '' is dropped from sys.path so the cwd cannot shadow modules.
_WORKER_BOOT = (
    "import importlib.util as u, sys\n"
    "sys.path[:] = [p for p in sys.path if p not in ('', '.')]\n"
    "s = u.spec_from_file_location('_lead_grading_worker', sys.argv[1])\n"
    "m = u.module_from_spec(s)\n"
    "sys.modules[s.name] = m\n"
    "s.loader.exec_module(m)\n"
    "m._worker_main()\n"
)


def _worker_main() -> None:
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
        limit = (int(mb) if mb.isdigit() else _WORKER_MEMORY_MB) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):
        pass
    try:
        _math_verify()
        _sympy_equal("1", "1")  # warm the parser so the first real item is not charged for it
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
            ok, status = _bounded_sympy_equal(req["pred"], req["gold"], float(req["timeout"]))
        except Exception:
            ok, status = False, UNPARSEABLE
        send({"id": req.get("id") if isinstance(req, dict) else None, "eq": ok, "status": status})


class _WorkerUnavailable(RuntimeError):
    pass


class _Worker:
    """One child process. States: starting -> idle <-> busy; dead after EOF, error or kill."""

    def __init__(self) -> None:
        if not sys.executable:
            raise _WorkerUnavailable("no sys.executable")
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _WORKER_BOOT, os.path.abspath(__file__)],
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


class _WorkerPool:
    """Worker processes shared by all grading calls of this process; one batch at a time (a lock)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.workers: list[_Worker] = []
        self.broken = False  # workers cannot be started here: callers use the in-process fallback

    def run(self, requests: list[dict[str, Any]], timeout: float, workers: int) -> list[tuple[bool, str]]:
        """Answer every request (``pred``/``gold`` or a test ``op``) with (equal, status); never raises."""
        with self.lock:
            try:
                return self._run(requests, timeout, max(1, workers))
            except Exception:  # defensive: drop the workers, answer in-process
                logger.warning("grading worker pool failed; grading in-process", exc_info=True)
                for w in self.workers:
                    w.kill()
                self.workers = []
                return [
                    _in_process_sympy_equal(r["pred"], r["gold"], timeout)
                    if "pred" in r
                    else (False, TIMEOUT)
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

    def _run(self, requests: list[dict[str, Any]], timeout: float, n_workers: int) -> list[tuple[bool, str]]:
        n = len(requests)
        results: list[tuple[bool, str] | None] = [None] * n
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
                    if not w.send(req, now + timeout + _HARD_GRACE_S, idx):
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
                        results[w.task] = (False, UNPARSEABLE)
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
                        results[w.task] = (bool(msg.get("eq")), str(msg.get("status", UNPARSEABLE)))
                        w.state, w.task = "idle", None
                        w.done += 1
            now = time.monotonic()
            for w in active:
                if w.state in ("starting", "busy") and now >= w.deadline:
                    if w.state == "busy" and w.task is not None:
                        results[w.task] = (False, TIMEOUT)  # hard limit: killed, counted as a timeout
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
            if "pred" in req:
                results[idx] = _in_process_sympy_equal(req["pred"], req["gold"], timeout)
            else:
                results[idx] = (False, TIMEOUT)
        return [r if r is not None else (False, UNPARSEABLE) for r in results]

    def _n_busy(self) -> int:
        return sum(w.state == "busy" for w in self.workers)

    def shutdown(self) -> None:
        with self.lock:
            for w in self.workers:
                w.close()
            self.workers = []


_POOL: _WorkerPool | None = None
_POOL_LOCK = threading.Lock()


def _shared_pool() -> _WorkerPool:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL.pid != os.getpid():  # after a fork, the parent's workers are not ours
            _POOL = _WorkerPool()
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


def _sympy_many(pairs: list[tuple[str, str]], timeout: float, workers: int | None) -> list[tuple[bool, str]]:
    """math-verify on (pred_clean, gold_clean) pairs in worker processes, hard-limited per item."""
    if not pairs:
        return []
    pool = _shared_pool()
    n_workers = workers if workers is not None else _default_workers(len(pairs))
    if pool.broken:
        return [_in_process_sympy_equal(p, g, timeout) for p, g in pairs]
    return pool.run([{"pred": p, "gold": g} for p, g in pairs], timeout, n_workers)


# --------------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------------
def _gold_str(gold: Any) -> str:
    # AMC golds come as floats (27.0), AIME 2025 as ints: their str() is handled by the number fast path.
    if isinstance(gold, str):
        return gold
    if isinstance(gold, bool) or gold is None:
        return ""
    return str(gold)


def _timeout(timeout: float) -> float:
    try:
        t = float(timeout)
    except (TypeError, ValueError):
        return 5.0
    return 5.0 if t != t else min(max(t, 0.05), 600.0)  # NaN -> default


def _decide_cheaply(pred: str, gold: str) -> tuple[bool | None, str, str, str]:
    """(decision, status, pred_clean, gold_clean); decision None = needs math-verify."""
    if not pred or not gold or len(pred) > _MAX_FAST_CHARS or len(gold) > _MAX_FAST_CHARS:
        return False, UNPARSEABLE, "", ""
    pc, gc = _clean(pred), _clean(gold)
    fast = _fast_compare(pred, gold, pc, gc)
    if fast is not None:
        return fast, FAST, pc, gc
    if _guard(pc) is not None or _guard(gc) is not None:
        return False, UNPARSEABLE, pc, gc
    return None, VERIFIED, pc, gc


def _equal_with_status(pred: str, gold: str, timeout: float) -> tuple[bool, str]:
    try:
        decision, status, pc, gc = _decide_cheaply(pred, gold)
        if decision is not None:
            return decision, status
        if _can_use_alarm():
            return _bounded_sympy_equal(pc, gc, timeout)
        return _sympy_many([(pc, gc)], timeout, 1)[0]
    except Exception:
        logger.debug("grading failed", exc_info=True)
        return False, UNPARSEABLE


def answers_equal(pred: str, gold: str, *, timeout: float = 5.0) -> bool:
    """Whether an extracted answer equals the gold answer (both strings, e.g. ``"0.5"``, ``"\\frac12"``).

    The relation is math-verify's, which is not symmetric (``gold`` is parsed as the reference: e.g. the
    gold ``3 < x \\le 4`` accepts ``(3,4]`` but only an interval-looking gold accepts an inequality). For
    majority voting over equivalence classes, compare each answer with a class representative as ``gold``.
    Never raises; bounded by ``timeout`` (see the module docstring for how, per thread).
    """
    return _equal_with_status(_gold_str(pred), _gold_str(gold), _timeout(timeout))[0]


def grade(completion: str, gold: str, *, before_think_close: bool = False, timeout: float = 5.0) -> bool:
    """Whether the completion's final answer (:func:`extract_answer`) equals ``gold``.

    Never raises and never hangs: ``False`` for no answer, unparseable or guarded answers, and on timeout.
    On the main thread the sympy step runs in-process under an alarm; elsewhere in a worker process.
    """
    pred = extract_answer(completion, before_think_close=before_think_close)
    if pred is None:
        return False
    return _equal_with_status(pred, _gold_str(gold), _timeout(timeout))[0]


def grade_batch_with_stats(
    completions: Sequence[str],
    golds: Sequence[str],
    *,
    before_think_close: bool = False,
    timeout: float = 5.0,
    workers: int | None = None,
) -> tuple[list[bool], GradeStats]:
    """Grade many completions; also say how each was decided (:class:`GradeStats`).

    Extraction and the fast paths run in this process; only the pairs left (deduplicated) go to worker
    processes, each with a hard per-item limit of ``timeout`` (+1 s grace before a kill). ``workers``
    caps the worker processes used (default: min(items needing sympy, CPUs, 8)). Safe from any thread.
    Never raises, except ``ValueError`` when the two sequences differ in length (a caller bug).
    """
    if len(completions) != len(golds):
        raise ValueError(f"{len(completions)} completions but {len(golds)} golds")
    limit = _timeout(timeout)
    n = len(completions)
    results = [False] * n
    statuses = [NO_ANSWER] * n
    jobs: dict[tuple[str, str], list[int]] = {}
    for i, (completion, gold) in enumerate(zip(completions, golds, strict=True)):
        pred = extract_answer(completion, before_think_close=before_think_close)
        if pred is None:
            continue
        try:
            decision, status, pc, gc = _decide_cheaply(pred, _gold_str(gold))
        except Exception:
            logger.debug("fast path failed", exc_info=True)
            decision, status, pc, gc = False, UNPARSEABLE, "", ""
        if decision is None:
            jobs.setdefault((pc, gc), []).append(i)
        else:
            results[i], statuses[i] = decision, status
    if jobs:
        keys = list(jobs)
        try:
            answers = _sympy_many(keys, limit, workers)
        except Exception:  # defensive: the pool is written not to raise
            logger.warning("grading pool failed", exc_info=True)
            answers = [(False, UNPARSEABLE)] * len(keys)
        for key, (ok, status) in zip(keys, answers, strict=True):
            for i in jobs[key]:
                results[i], statuses[i] = ok, status
    stats = GradeStats(total=n)
    for ok, status in zip(results, statuses, strict=True):
        stats._count(status, ok)
    return results, stats


def grade_batch(
    completions: Sequence[str],
    golds: Sequence[str],
    *,
    before_think_close: bool = False,
    timeout: float = 5.0,
    workers: int | None = None,
) -> list[bool]:
    """:func:`grade_batch_with_stats` without the stats."""
    return grade_batch_with_stats(
        completions, golds, before_think_close=before_think_close, timeout=timeout, workers=workers
    )[0]
