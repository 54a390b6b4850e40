"""Rows → records (step 1 of :mod:`lead.core.curation`): the curated schema (:class:`Record`), a quarantined row
(:class:`Rejected`, its reason one of :data:`REASONS`), what a loader hands over (:class:`SourceInput`, its rows
possibly :class:`Malformed`), and :func:`records_from_rows` with its field parsers."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from lead import grading

# Quarantine reasons (the "reason" field of each quarantine.jsonl line) and what each means.
REASONS: dict[str, str] = {
    "malformed_json": "a line that is not valid JSON (or not UTF-8)",
    "not_an_object": "a row that is not a JSON object / mapping",
    "missing_problem": "no problem/question field, or an empty one",
    "missing_answer": "no answer (nor a \\boxed{} in the solution), or an empty one",
    "duplicate_id": "an id already used by an earlier row of the same source",
    "ungradable_answer": "the grader cannot read the gold answer: no prediction could be graded against it",
    "prompt_too_long": "problem + prompt suffix longer than curate.max_prompt_tokens",
    "duplicate": "the same normalised text as an earlier problem, same answer",
    "duplicate_conflict": "the same normalised text as an earlier problem, different answer",
    "near_duplicate": "word 5-gram Jaccard >= curate.near_duplicate_jaccard with an earlier problem, same answer",
    "contaminated": "shares n-grams covering >= curate.decontam_coverage of an evaluation benchmark problem",
}


class Malformed:
    """A raw line that could not be parsed (kept verbatim for the quarantine)."""

    __slots__ = ("error", "text")

    def __init__(self, text: str, error: str) -> None:
        self.text, self.error = text, error


@dataclass
class Record:
    """One problem in the curated schema (``origin`` = file:line or file#index, for reports only)."""

    id: str
    problem: str
    answer: str
    source: str
    split: str = "train"
    level: int | None = None
    difficulty: float | None = None
    correctness: float | None = None
    solution: str | None = None
    origin: str = ""

    def row(self) -> dict[str, Any]:
        """The output row (no ``origin``)."""
        out = asdict(self)
        del out["origin"]
        return out


@dataclass
class Rejected:
    """A quarantined row: why, where it came from, and the row itself (or the raw line)."""

    reason: str
    source: str
    origin: str
    detail: str
    row: Any

    def line(self) -> dict[str, Any]:
        row = self.row.row() if isinstance(self.row, Record) else self.row
        return {
            "reason": self.reason,
            "source": self.source,
            "origin": self.origin,
            "detail": self.detail,
            "row": row,
        }


@dataclass
class SourceInput:
    """What a loader hands over for one source: its settings and its rows as ``(origin, row)`` pairs."""

    name: str
    rows: Sequence[tuple[str, Any]]
    location: str = ""
    weight: float = 1.0
    max_problems: int | None = None


# --------------------------------------------------------------------------------------------------
# Rows -> records
# --------------------------------------------------------------------------------------------------
_LEVEL_RE = re.compile(r"\s*(?:level\s*)?(\d+)\s*", re.I)


def _text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _level(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    m = _LEVEL_RE.fullmatch(value) if isinstance(value, str) else None
    return int(m.group(1)) if m else None  # MATH has two "Level ?" rows: no level, not an error


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        x = float(value)  # the stage-2/3 set stores its rates as strings ("0.4375")
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def records_from_rows(name: str, rows: Iterable[tuple[str, Any]]) -> tuple[list[Record], list[Rejected]]:
    """Map raw rows of source ``name`` to :class:`Record` (rules in the package docstring, step 1).

    Answers are kept as given here (numbers become text); :func:`normalize_answer` runs next. A raw id that
    already starts with ``<name>-`` is kept as it is (the proxy's ``proxy-<hash>`` ids).
    """
    records: list[Record] = []
    rejected: list[Rejected] = []
    seen: set[str] = set()
    for index, (origin, row) in enumerate(rows):
        if isinstance(row, Malformed):
            rejected.append(Rejected("malformed_json", name, origin, row.error, {"line": row.text}))
            continue
        if not isinstance(row, Mapping):
            rejected.append(Rejected("not_an_object", name, origin, type(row).__name__, row))
            continue
        problem = _text(row.get("problem")) or _text(row.get("question"))
        if problem is None:
            rejected.append(
                Rejected("missing_problem", name, origin, "no non-empty problem/question", dict(row))
            )
            continue
        if "answer" in row:
            answer = _answer_text(row["answer"])
        else:
            solution = row.get("solution")
            answer = grading.extract_answer(solution, "boxed") if isinstance(solution, str) else None
        if not answer:
            rejected.append(Rejected("missing_answer", name, origin, "no non-empty answer", dict(row)))
            continue
        raw_id = row.get("id", row.get("unique_id"))
        raw_id = str(raw_id) if raw_id is not None and str(raw_id).strip() else str(index)
        rid = raw_id if raw_id.startswith(f"{name}-") else f"{name}-{raw_id}"
        if rid in seen:
            rejected.append(Rejected("duplicate_id", name, origin, f"id {rid} seen before", dict(row)))
            continue
        seen.add(rid)
        solution = row.get("solution")
        records.append(
            Record(
                id=rid,
                problem=problem,
                answer=answer,
                source=name,
                split="test" if row.get("split") == "test" else "train",
                level=_level(row.get("level")),
                difficulty=_number(row.get("difficulty")),
                correctness=_number(row.get("correctness")),
                solution=solution if isinstance(solution, str) and solution.strip() else None,
                origin=origin,
            )
        )
    return records, rejected


def _answer_text(value: Any) -> str | None:
    """An answer value as text: ints as digits, integral floats without ``.0`` (AMC's ``27.0``)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, str):
        text = value.strip()
        # A missing value written out as text by pandas, numpy or a JSON dump is no answer.
        return None if text.lower() in _MISSING_TEXT else text or None
    return None  # lists (Minerva-style multi-answers), dicts: no single gold


_MISSING_TEXT = frozenset({"none", "nan", "null", "n/a", "na", "<na>"})
