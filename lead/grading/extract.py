r"""Answer extraction: a completion's final answer as a string, or ``None`` when it has none."""

from __future__ import annotations

import logging
import re

logger = logging.getLogger(__name__)

THINK_CLOSE = "</think>"
# Text fall-backs ("The answer is ...") are searched only near the end: the final statement lives there,
# and it keeps a 1 MB completion from being scanned by several regexes.
_FALLBACK_WINDOW = 4000
_MAX_FALLBACK_CHARS = 300

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
            cut = completion.find(THINK_CLOSE)
            return None if cut < 0 else _last_boxed(completion[:cut])
        cut = completion.rfind(THINK_CLOSE)
        if cut < 0:
            return _last_boxed(completion) or _fallback_answer(completion)
        tail = completion[cut + len(THINK_CLOSE) :]
        return _last_boxed(tail) or _fallback_answer(tail) or _last_boxed(completion[:cut])
    except Exception:  # defensive: nothing above should raise, but a grader must not
        logger.debug("extract_answer failed", exc_info=True)
        return None
