r"""Answer extraction: where a completion states its final answer.

Three named rules (:data:`Extraction`), chosen by the caller:

* ``"any"`` -- evaluation and :func:`lead.grading.grade` without options (calibration uses the reward's rule):
  math-verify's priority list. The last ``\boxed{}``/``\fbox{}`` (boxes that belong together -- several in one display
  formula, or joined only by "," / "and" / ``\quad`` -- form one answer, a list); then a final-answer phrase
  ("the final answer is", "answer:", in several languages); then the last LaTeX span; then the last
  number-like token of the last sentence. A completion that *is* only an answer (``-5``, ``$x \geq 5$``,
  ``7,425,000``) is that answer.
* ``"boxed"`` -- the paper's reward rule: the last box only (after the last ``</think>`` if there is one,
  else anywhere), no text fall-backs.
* ``"boxed_before_think"`` -- the reference code's rule (GRPO-LEAD.md §3): the last box *before the first*
  ``</think>``, alone (no list of boxes); an empty last box is no answer, as in the reference (where it reads as
  the prompt's own empty ``\boxed{}``, graded wrong); without any ``</think>`` there is no answer.

:func:`locate` does the string work, which is all the box rules need. Under ``"any"`` it returns a cheap
answer when there is one (a box, a bare answer, an answer right after a final-answer phrase); otherwise it
hands the text on (:attr:`Located.source`) and math-verify's own extraction (:mod:`lead.grading.verify`),
which is the field's reference, decides: its regexes for phrases, LaTeX spans and trailing numbers.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Literal

logger = logging.getLogger(__name__)

Extraction = Literal["any", "boxed", "boxed_before_think"]
EXTRACTIONS: tuple[Extraction, ...] = ("any", "boxed", "boxed_before_think")

THINK_CLOSE = "</think>"
# Only the end of a completion is searched for a stated answer (and handed to math-verify): the final
# statement lives there, and it keeps a 1 MB completion from being scanned by many regexes.
_TAIL_CHARS = 4000
_MAX_BARE_CHARS = 200

_BOX_RE = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")
_BARE_BOX_ARG_RE = re.compile(r"[ \t]+([^\s$]+)")  # `\boxed 5` (TeX allows an undelimited argument)
# Brace matching skips escaped characters (`\{`, `\}`, and `\\` so that `\\{` is a real brace).
_BRACE_TOKEN_RE = re.compile(r"\\.|[{}]", re.S)
_ENV_RE = re.compile(
    r"(?<!\\)\$\$.+?(?<!\\)\$\$|\\\[.+?\\\]|(?<![\\\d])\$[^\n$]+?(?<!\\)\$|\\\([^\n]+?\\\)", re.S
)
_ENV_JOIN_RE = re.compile(r"\s*(?:,?\s*and|,?\s*or|,)\s*")  # math-verify's connectors between math spans
_SEPARATOR_RE = re.compile(r"\b(?:and|or)\b|,|;")  # ... and between boxes
# Final-answer phrases, several languages; the answer must follow at once (a math span, or a short
# number-like token up to the end of the sentence) to be taken here; anything wordier goes to math-verify.
_PHRASE_RE = re.compile(
    r"(?:final\s+answer\s*(?:is)?|\bthe\s+answer\s+is|\banswer\s*:|\*\*\s*(?:final\s+)?answer\s*:?\s*\*\*"
    r"|la\s+r[ée]ponse\s+(?:finale\s+)?est|la\s+respuesta\s+(?:final\s+)?es|die\s+(?:endg[üu]ltige\s+)?antwort"
    r"\s+ist|la\s+risposta\s+(?:finale\s+)?[èe]|a\s+resposta\s+(?:final\s+)?[ée]|ответ\s*:|答案[是为:：]"
    r"|最终答案[是为:：]?|\banswer\b)\s*:?\s*",
    re.I,
)
_MATH_SPAN_RE = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.S)
_NUMBER_LIKE = r"-?(?:\d{1,3}(?:[ ,]\d{3})+|\d+)(?:[.,]\d+)?%?|-?\.\d+%?|-?\d+/\d+"
_PHRASE_ANSWER_RE = re.compile(rf"\s*(?:{_NUMBER_LIKE})\s*(?:[.!]\s*|$)", re.S)
# A word answer stated in prose ("... The final answer is Tuesday.", "... is a parabola."): up to three words
# ending the sentence, an article dropped. Taken only after a final statement ("final answer", "answer:"), never
# after a bare "the answer is", which prose follows with verdicts as often as with answers ("... is right").
_PHRASE_WORDS_RE = re.compile(
    r"\s*(?:(?:a|an|the)\s+)?(?P<words>[A-Za-z][A-Za-z'-]+(?:\s+[A-Za-z][A-Za-z'-]*){0,2})\s*(?:[.!]\s*|$)",
    re.I,
)
_STATED_RE = re.compile(r"final\s+answer|answer\s*(?:is\s*)?:|endg[üu]ltige|finale?\b", re.I)
_MINERVA_RE = re.compile(
    rf"final\s+answer\s+is\s*:?\s*(?P<answer>\$\$.+?\$\$|\$[^$]+?\$|\\\(.+?\\\)|{_NUMBER_LIKE})\s*\.?\s?I\s+hope",
    re.I | re.S,
)
# \text{...} answers are words of the answer; environment and operator names are not words at all.
_NOT_WORDS_RE = re.compile(r"\\text\{[^{}]*\}|\\(?:begin|end|operatorname|mathrm|mathbf)\{[A-Za-z*]*\}")
_WORD_RE = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{2,}")


@dataclass(frozen=True)
class Located:
    """Where a text states its answer. ``answer``: the answer string when string work finds it (``None``:
    none); ``source``: otherwise, under ``"any"``, the text math-verify should extract it from."""

    answer: str | None
    source: str | None = None


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


def _boxes(text: str, *, empty: bool = False) -> list[tuple[int, int, str]]:
    """``(start, end, content)`` of every balanced, non-empty box (``empty``: empty ones too), in order of
    their starts (a nest's inner box counts)."""
    starts = list(_BOX_RE.finditer(text))
    if not starts:
        return []
    match: dict[int, int] | None = None  # computed once, only if a braced box is seen
    out = []
    for m in starts:
        j = m.end()
        while j < len(text) and text[j] in " \t":
            j += 1
        if j < len(text) and text[j] == "{":
            if match is None:
                match = _match_braces(text, starts[0].end())
            close = match.get(j)
            content = text[j + 1 : close].strip() if close is not None else ""
            if close is not None and (content or empty):  # unbalanced or empty (an echo of "within \boxed{}")
                out.append((m.start(), close + 1, content))
            continue
        bare = _BARE_BOX_ARG_RE.match(text, m.end())
        if bare and bare.group(1).rstrip(".,;"):
            out.append((m.start(), bare.end(), bare.group(1).rstrip(".,;")))
    return out


def _math_envs(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of every math span (``$$..$$``, ``\\[..\\]``, ``$..$`` and ``\\(..\\)`` on one line)."""
    return [m.span() for m in _ENV_RE.finditer(text)]


def _boxes_after_connectors(
    text: str, boxes: list[tuple[int, int, str]], envs: list[tuple[int, int]]
) -> tuple[int, list[str]] | None:
    """math-verify's first box rule: the last math span holding a box, with the spans before it that hold
    boxes and are joined to it by ``,`` / "and" / "or" (up to six), read as one answer: (end, contents)."""
    holding = [(s, e) for s, e in envs if any(s <= b0 and b1 <= e for b0, b1, _ in boxes)]
    if not holding:
        return None
    chain = [holding[-1]]
    for s, e in reversed(holding[:-1]):
        if len(chain) == 6 or not _ENV_JOIN_RE.fullmatch(text[e : chain[0][0]]):
            break
        chain.insert(0, (s, e))
    contents = [c for b0, b1, c in boxes if any(s <= b0 and b1 <= e for s, e in chain)]
    return chain[-1][1], contents


def _boxes_by_gaps(text: str, boxes: list[tuple[int, int, str]]) -> tuple[int, list[str]]:
    """math-verify's second box rule (``extract_boxed_content``, mode "last"): the last box, and, walking
    back, each earlier one that is close (under 10 characters apart) or, with other content, under 70
    characters apart with a separator (",", ";", "and", "or") between; repeats in a row count once."""
    start, end, content = boxes[-1]
    contents = [content]
    for s, e, c in reversed(boxes[:-1]):
        if e > start:  # an outer box around the last one: its content is the last one
            break
        between = text[e:start]
        if not (
            len(between) < 10 or (c != contents[0] and len(between) < 70 and _SEPARATOR_RE.search(between))
        ):
            break
        if c != contents[0]:
            contents.insert(0, c)
        start = s
    return end, contents


def _last_boxed(text: str) -> tuple[int, str] | None:
    """(end, answer) of the last boxed answer by math-verify's two rules, the one ending last winning;
    several boxes are one list answer ``a, b``."""
    boxes = sorted(_boxes(text))
    if not boxes:
        return None
    candidates = [
        c for c in (_boxes_after_connectors(text, boxes, _math_envs(text)), _boxes_by_gaps(text, boxes)) if c
    ]
    end, contents = max(candidates, key=lambda c: c[0])
    return end, ", ".join(contents)


def _last_box(text: str) -> str | None:
    found = _last_boxed(text)
    return None if found is None else found[1]


def _unwrap(text: str) -> str:
    """``text`` without one pair of math delimiters around the whole of it."""
    s = text.strip()
    for left, right in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
        if s.startswith(left) and s.endswith(right) and len(s) > len(left) + len(right):
            inner = s[len(left) : -len(right)]
            if "$" not in inner:
                return inner.strip()
    return s


def _bare(text: str) -> str | None:
    """``text`` itself when it is only an answer: short, one formula or number, at most one word (``Evelyn``,
    ``\text{even}``, ``x \\in [-2,7]``, ``1 000``); None for prose."""
    s = text.strip().rstrip(".").strip()
    if not s or len(s) > _MAX_BARE_CHARS or "\n\n" in s:
        return None
    inner = _unwrap(s)
    if "$" in inner.replace("\\$", "") or "\\boxed" in inner:  # \$ is a currency sign, not a formula
        return None
    words = _WORD_RE.findall(_NOT_WORDS_RE.sub(" w ", inner))
    return inner if len(words) <= 1 and inner else None


def _phrase_answer(text: str) -> str | None:
    """The answer right after the last final-answer phrase, when it is a math span, a number-like token or (after
    an explicit statement) up to three words ending the sentence ("the final answer is $34$.", "Answer:
    7,425,000", "The final answer is a parabola." -> ``parabola``); None otherwise."""
    last = None
    for last in _PHRASE_RE.finditer(text):  # noqa: B007 (the last match is wanted)
        pass
    if last is None:
        return None
    rest = text[last.end() : last.end() + 400]
    span = _MATH_SPAN_RE.match(rest)
    if span:
        after = rest[span.end() :].lstrip()
        if not after or after[0] in ".!,;\n" or after.lower().startswith("i hope"):
            return _unwrap(span.group(0))
        return None
    number = _PHRASE_ANSWER_RE.match(rest)
    if number:
        return number.group(0).strip().rstrip(".!").strip()
    words = _PHRASE_WORDS_RE.match(rest)
    return words.group("words") if words and _STATED_RE.search(last.group(0)) else None


def _minerva(text: str) -> tuple[int, str] | None:
    """(end, answer) of the last "The final answer is X. I hope it is correct." (the Minerva format, which
    math-verify ranks with boxes: whichever ends last wins)."""
    found = None
    for found in _MINERVA_RE.finditer(text):  # noqa: B007 (the last match is wanted)
        pass
    if found is None:
        return None
    answer = _unwrap(found.group("answer"))
    return found.end(), _last_box(answer) or answer  # "the final answer is $\boxed{5}$. I hope ..." is 5


def _any(text: str) -> Located:
    """The ``"any"`` rule on one part of a completion (see the module docstring)."""
    tail = text[-_TAIL_CHARS:]  # for statements in prose; boxes are looked for everywhere (one linear pass)
    boxed = _last_boxed(text)
    minerva = _minerva(tail)
    first = [
        c for c in (boxed, None if minerva is None else (len(text) - len(tail) + minerva[0], minerva[1])) if c
    ]
    if first:
        return Located(max(first)[1])
    for found in (_bare(tail), _phrase_answer(tail)):
        if found is not None:
            return Located(found)
    return Located(None, tail) if tail.strip() else Located(None)


def locate(completion: str, extraction: Extraction = "any") -> Located:
    """Where ``completion`` states its final answer under ``extraction`` (see the module docstring).

    With ``</think>``, ``"any"`` and ``"boxed"`` look after the *last* ``</think>`` first; if that part holds
    no box (and, for ``"any"``, nothing math-verify could read: no digit, no formula), the last box of the
    reasoning is used -- "the last box of the whole completion"; under ``"any"``, with no box at all, the
    reasoning's final statement (as a completion without ``</think>`` is read)."""
    if not isinstance(completion, str) or not completion:
        return Located(None)
    if extraction not in EXTRACTIONS:
        raise ValueError(f"extraction must be one of {', '.join(EXTRACTIONS)}; got {extraction!r}")
    try:
        if extraction == "boxed_before_think":
            cut = completion.find(THINK_CLOSE)
            boxes = _boxes(completion[:cut], empty=True) if cut >= 0 else []
            return Located(max(boxes)[2] or None if boxes else None)  # the box that starts last
        cut = completion.rfind(THINK_CLOSE)
        tail = completion if cut < 0 else completion[cut + len(THINK_CLOSE) :]
        if extraction == "boxed":
            found = _last_box(tail)
            return Located(found if found is not None or cut < 0 else _last_box(completion[:cut]))
        located = _any(tail)
        if cut >= 0 and located.answer is None and not re.search(r"\d|\\\(|\$", tail):
            reasoning = _last_box(completion[:cut])
            if reasoning is not None:
                return Located(reasoning)
            # No box anywhere and nothing after the reasoning: its final statement ("Therefore, the value of
            # $k$ is 7.</think>"), read as a completion without </think> is read.
            return _any(completion[:cut])
        return located
    except Exception:  # defensive: nothing above should raise, but a grader must not
        logger.debug("locate failed", exc_info=True)
        return Located(None)
