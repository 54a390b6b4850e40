r"""Dataset curation, the pure core: raw rows in, a clean training pool, a test split and a report out.

Callers (``lead/stages/curate.py``, via ``lead/io/sources.py``) read the files and write the results; nothing
here touches the file system. Every input row ends in exactly one place: the training pool, the test split,
the quarantine (with a reason from :data:`REASONS`), or — only when ``max_problems`` /
``max_train_problems`` ask for fewer — the count of problems sampled out. The steps, in order, each one
function from the records the previous step kept to a :class:`Step` (kept, quarantined, report entries),
which :func:`curate` runs in turn:

1. **Rows → records** (:func:`load_records`; per source :func:`records_from_rows`). Field mapping:
   problem = ``problem`` or ``question``; answer = ``answer`` when the row has that key, else the last
   ``\boxed{}`` of ``solution`` (:func:`lead.grading.extract_answer`, box rule); optional
   ``id``/``unique_id``, ``level`` (``3`` or ``"Level 3"``), ``difficulty``, ``correctness``, ``solution``,
   ``split`` (``test`` = held out). Ids are ``<source>-<id or row index>``. A malformed line, a row with no
   problem or no answer, or a repeated id is quarantined.
2. **Normalise answers** (:func:`normalize_answers`; per answer :func:`normalize_answer`): numbers to text
   (``27.0`` → ``27``), surrounding ``$``/``\(``/``\[`` and a whole ``\boxed{}`` unwrapped, whitespace
   collapsed, AIME-style leading zeros dropped (``025`` → ``25``), a trailing period dropped. Each rule is
   counted.
3. **Gradable gold** (:func:`keep_gradable`; :func:`lead.grading.gold_problems`): the grader's own
   extraction and parse of the gold, the same the reward makes: plain numbers at once, guarded answers
   refused, everything else parsed by math-verify in the grader's worker processes (``\frac{1}{`` does not
   parse). A gold refused there could never earn a reward, so the problem is quarantined.
4. **Prompt length** (:func:`limit_prompt_length`): problem + prompt suffix counted with the model's
   tokenizer (chat template included) when one can be loaded, else estimated as ``ceil(characters / 2.5)``
   (:func:`estimate_tokens`); longer than ``max_prompt_tokens`` is quarantined (TRL 1.16 no longer
   truncates prompts).
5. **Exact duplicates** (:func:`drop_exact_duplicates`): same normalised word sequence (:func:`words`:
   lower-cased NFKC text, LaTeX formatting commands and math delimiters dropped; numbers, operators and
   brackets kept). The first copy wins, test records before training records (so the train pool never
   repeats a test problem), then source order, then row order. A later copy with a different answer is
   quarantined as ``duplicate_conflict``.
6. **Near duplicates** (:func:`drop_near_duplicates`): Jaccard similarity of word 5-gram sets ≥
   ``near_duplicate_jaccard`` (0.9), found with MinHash (64 multiply-shift hashes) and LSH (16 bands × 4
   rows), then verified exactly. Only pairs with the *same* answer are duplicates: the same template with
   other numbers is a different problem (the proxy task is made of such pairs).
7. **Decontamination** (:func:`drop_contaminated`; training records only) against every benchmark given
   (:func:`decontaminate`). The *coverage* of a benchmark problem by a training problem is the share of its
   words that lie inside a word ``decontam_ngram``-gram (8) the two share (the Tülu 3 measure). A training
   problem is contaminated when coverage reaches ``decontam_coverage_any_answer`` (80 %: near-verbatim text
   — the same problem with its answer asked in another form, or the same set-up or figure with another
   question, or a template sibling with other numbers), or ``decontam_coverage`` (50 %: a reformatted or
   lightly reworded copy) with an equal gold answer. Paraphrases that share no n-gram are not caught. Below
   80 % with a different answer a pair is kept and counted: on the shipped data those are template
   siblings or shared boilerplate ("Express your answer as a common fraction.", Asymptote grids) on short
   benchmark problems. A benchmark problem shorter than n words must appear whole.
8. **Mixing** (:func:`mix`; training records only): ``max_problems`` caps a source; ``max_train_problems``
   shares a total out by source ``weight`` (sources with fewer problems than their share give the rest to
   the others); the kept subset is a seeded sample in original order.

Everything is deterministic for the same rows and settings.
"""

from __future__ import annotations

import math
import random
import re
import time
import unicodedata
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

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
SAMPLED_OUT = (
    "sampled_out"  # not a quarantine reason: fine problems left out by max_problems / max_train_problems
)

CHARS_PER_TOKEN = 2.5
SHINGLE = 5
_NUM_PERM, _BANDS = 64, 16


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


@dataclass
class Settings:
    """The knobs of :func:`curate` (``curate.*`` in params)."""

    max_prompt_tokens: int = 1024
    prompt_suffix: str = ""
    near_duplicate_jaccard: float = 0.9
    decontam_ngram: int = 8
    decontam_coverage: float = 0.5
    decontam_coverage_any_answer: float = 0.8
    max_train_problems: int | None = None
    seed: int = 0


@dataclass
class Result:
    """The output of :func:`curate`: the two splits, the quarantine and the report (JSON-ready)."""

    train: list[Record]
    test: list[Record]
    rejected: list[Rejected]
    report: dict[str, Any] = field(default_factory=dict)


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
    """Map raw rows of source ``name`` to :class:`Record` (rules in the module docstring, step 1).

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


# --------------------------------------------------------------------------------------------------
# Answers
# --------------------------------------------------------------------------------------------------
_WRAPPERS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))
_BOXED_RE = re.compile(r"\\boxed\s*\{(.*)\}", re.S)


def _balanced(s: str) -> bool:
    depth = 0
    for m in re.finditer(r"\\.|[{}]", s):
        depth += {"{": 1, "}": -1}.get(m.group(), 0)
        if depth < 0:
            return False
    return depth == 0


def normalize_answer(answer: str) -> tuple[str, list[str]]:
    """The stored form of a gold answer and the rules that changed it (module docstring, step 2).

    >>> normalize_answer("$\\\\boxed{025}$.")
    ('25', ['trailing_period', 'math_delimiters', 'boxed', 'leading_zeros'])
    """
    rules: list[str] = []
    s = answer.strip()
    changed = True
    while changed:  # peel the outer layers in any order: "$\\boxed{5}$." -> "\\boxed{5}" -> "5"
        changed = False
        if len(s) > 1 and s.endswith(".") and not s.endswith(".."):
            s, changed = s[:-1].rstrip(), True
            rules.append("trailing_period")
        for left, right in _WRAPPERS:
            if len(s) > len(left) + len(right) and s.startswith(left) and s.endswith(right):
                inner = s[len(left) : -len(right)].strip()
                if left == "$" and "$" in inner:  # "$a$ or $b$" is not one wrapped answer
                    continue
                s, changed = inner, True
                rules.append("math_delimiters")
                break
        m = _BOXED_RE.fullmatch(s)
        if m and _balanced(m.group(1)):
            s, changed = m.group(1).strip(), True
            rules.append("boxed")
    collapsed = re.sub(r"\s+", " ", s)
    if collapsed != s:
        s = collapsed
        rules.append("whitespace")
    if re.fullmatch(r"0+\d+", s):
        s = str(int(s))
        rules.append("leading_zeros")
    return s, list(dict.fromkeys(rules))


def same_answer(reference: str, other: str) -> bool:
    """Whether ``other`` equals the gold ``reference`` for the grader (its fast paths first; math-verify,
    at most 2 s, only for the few symbolic pairs: 41 of 10,401 comparisons on the shipped data)."""
    return reference == other or grading.answers_equal(other, reference, timeout=2.0)


def estimate_tokens(text: str) -> int:
    """Token estimate without a tokenizer: ``ceil(characters / 2.5)``.

    Measured with a 130k-vocabulary BPE (Mistral's Tekken, the only tokenizer available offline here) on
    5,000 MATH / stage-2/3 problems: median 3.05 characters per token, 10th percentile 2.15. With 2.5 the
    estimate is at least the Tekken count for 91 % of the curated real prompts, so the filter errs towards
    dropping; Qwen2 tokenizers split digits, so digit-heavy prompts run longer than Tekken's count.
    """
    return math.ceil(len(text) / CHARS_PER_TOKEN)


# --------------------------------------------------------------------------------------------------
# Text normalisation, duplicates, contamination
# --------------------------------------------------------------------------------------------------
_ENV_RE = re.compile(r"\\(?:begin|end)\s*\{[^{}]*\}")
_DELIM_RE = re.compile(r"\\[()\[\]]|\$")
_WORD_RE = re.compile(r"\\[a-z]+|[^\W\d_]+|\d+|[-+=<>*/^!|]")
_BRACKET_WORD_RE = re.compile(r"\\[a-z]+|[^\W\d_]+|\d+|[-+=<>*/^!|()\[\]]")
# LaTeX commands that only format: dropped so that `\text{-}\textit{x}` and `\textit{-x}` read the same.
_FORMAT_WORDS = (
    "text textit textbf textrm textup textsf texttt mathrm mathbf mathit mathsf mbox hbox left right big bigl "
    "bigr bigg biggl biggr displaystyle textstyle scriptstyle quad qquad hspace vspace noindent newline par "
    "underline emph limits nolimits"
)
_FORMAT_COMMANDS = frozenset(_FORMAT_WORDS.split())
_ALIASES = {"dfrac": "frac", "tfrac": "frac", "geq": "ge", "geqslant": "ge", "leq": "le", "leqslant": "le"}
_ALIASES |= {"neq": "ne", "lvert": "|", "rvert": "|", "vert": "|"}


def words(text: str, *, brackets: bool = False) -> list[str]:
    """Normalised word tokens of a problem: NFKC, lower case, LaTeX environments, math delimiters and
    formatting commands dropped, other commands kept by name (``\\frac`` -> ``frac``), digit runs, letter
    runs and the operators ``- + = < > * / ^ ! |`` as tokens; brackets and other punctuation dropped
    (``\\arcsin(0.4)`` and ``\\arcsin 0.4`` are the same text). ``brackets=True`` keeps ``( ) [ ]`` as tokens:
    the exact-duplicate key needs them (``88 \\div 4 \\div 2`` is not ``88 \\div (4 \\div 2)``).

    >>> words("Find $x^2$ if \\\\(x = \\\\dfrac{1}{2}\\\\).")
    ['find', 'x', '^', '2', 'if', 'x', '=', 'frac', '1', '2']
    """
    s = unicodedata.normalize("NFKC", text).lower()
    s = _DELIM_RE.sub(" ", _ENV_RE.sub(" ", s))
    out = []
    for w in (_BRACKET_WORD_RE if brackets else _WORD_RE).findall(s):
        if w[0] == "\\":
            w = w[1:]
            if w in _FORMAT_COMMANDS:
                continue
            w = _ALIASES.get(w, w)
        out.append(w)
    return out


def ngrams(tokens: Sequence[str], n: int) -> list[tuple[str, ...]]:
    """The word n-grams of ``tokens``; a text shorter than n is one gram (itself); no words, no grams."""
    if len(tokens) < n:
        return [tuple(tokens)] if tokens else []
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def _shingles(tokens: Sequence[str]) -> np.ndarray:
    grams = ngrams(tokens, SHINGLE)
    hashes = np.fromiter((zlib.crc32(" ".join(g).encode()) for g in grams), dtype=np.uint64, count=len(grams))
    return np.unique(hashes)


_HASH_RNG = np.random.default_rng(20250412)  # fixed: the hash family is part of the method, not the seed
_A = _HASH_RNG.integers(1, 2**63, size=_NUM_PERM, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
_B = _HASH_RNG.integers(0, 2**63, size=_NUM_PERM, dtype=np.uint64)


def minhash(shingles: np.ndarray) -> np.ndarray:
    """MinHash signature: for each of 64 multiply-shift hashes ``(a·x + b mod 2^64) >> 32``, the minimum."""
    hashed: np.ndarray = (shingles[:, None] * _A[None, :] + _B[None, :]) >> np.uint64(32)
    signature: np.ndarray = hashed.min(axis=0)
    return signature


def jaccard(a: set[int], b: set[int]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def near_duplicates(
    records: Sequence[Record], threshold: float, equal: Callable[[str, str], bool] = same_answer
) -> tuple[list[int], dict[int, tuple[int, float]], int]:
    """Indices kept, ``{dropped index: (kept index it duplicates, Jaccard)}`` and the number of pairs at or
    above the threshold kept because their answers differ (module docstring, step 6). Earlier wins."""
    rows = _NUM_PERM // _BANDS
    buckets: dict[tuple[int, bytes], list[int]] = {}
    sets: dict[int, set[int]] = {}
    kept: list[int] = []
    dropped: dict[int, tuple[int, float]] = {}
    different_answers = 0
    for i, rec in enumerate(records):
        sh = _shingles(words(rec.problem))
        if not len(sh):
            kept.append(i)
            continue
        sig = minhash(sh)
        keys = [(band, sig[band * rows : (band + 1) * rows].tobytes()) for band in range(_BANDS)]
        mine = set(sh.tolist())
        candidates = sorted({j for key in keys for j in buckets.get(key, ())})
        match = None
        for j in candidates:
            sim = jaccard(mine, sets[j])
            if sim >= threshold:
                if equal(records[j].answer, rec.answer):
                    match = (j, sim)
                    break
                different_answers += 1
        if match is not None:
            dropped[i] = match
            continue
        kept.append(i)
        sets[i] = mine
        for key in keys:
            buckets.setdefault(key, []).append(i)
    return kept, dropped, different_answers


@dataclass(frozen=True)
class Hit:
    """A training problem contaminated by a benchmark problem."""

    record: int
    benchmark: str
    benchmark_id: str
    coverage: float
    same_answer: bool


class ContaminationIndex:
    """The word n-grams of every benchmark problem, to test training problems against (step 7)."""

    def __init__(self, benchmarks: Mapping[str, Sequence[Record]], n: int) -> None:
        self.n = n
        self.problems: list[tuple[str, Record, list[str], list[tuple[str, ...]]]] = []
        self.index: dict[tuple[str, ...], list[int]] = {}
        for name, recs in benchmarks.items():
            for rec in recs:
                toks = words(rec.problem)
                grams = ngrams(toks, n)
                if not grams:
                    continue
                k = len(self.problems)
                self.problems.append((name, rec, toks, grams))
                for g in set(grams):
                    self.index.setdefault(g, []).append(k)

    def matches(self, problem: str, min_coverage: float) -> list[tuple[int, float]]:
        """Benchmark problems (index, coverage) whose coverage by ``problem`` reaches ``min_coverage``,
        highest first: coverage = share of the benchmark problem's word positions inside an n-gram that
        ``problem`` contains too."""
        mine = set(ngrams(words(problem), self.n))
        shared = Counter(k for g in mine for k in self.index.get(g, ()))
        out = []
        for k, count in shared.items():
            _, _, toks, grams = self.problems[k]
            if count * self.n < min_coverage * len(toks):  # upper bound: cannot reach the threshold
                continue
            covered = [False] * len(toks)
            for start, g in enumerate(grams):
                if g in mine:
                    covered[start : start + self.n] = [True] * min(self.n, len(toks) - start)
            cov = sum(covered) / len(toks)
            if cov >= min_coverage:
                out.append((k, cov))
        return sorted(out, key=lambda m: (-m[1], m[0]))


def decontaminate(
    records: Sequence[Record],
    benchmarks: Mapping[str, Sequence[Record]],
    n: int,
    min_coverage: float,
    any_answer_coverage: float,
    equal: Callable[[str, str], bool] = same_answer,
) -> tuple[list[int], list[Hit], int]:
    """Indices of the records kept, one :class:`Hit` per contaminated record (its best match), and the
    number of (record, benchmark problem) pairs left alone: coverage in [min_coverage, any_answer_coverage)
    with a different answer (the same template with other numbers, or shared boilerplate)."""
    index = ContaminationIndex(benchmarks, n)
    kept, hits, spared = [], [], 0
    for i, rec in enumerate(records):
        hit = None
        for k, cov in index.matches(rec.problem, min_coverage) if index.problems else ():
            name, bench, _, _ = index.problems[k]
            same = equal(bench.answer, rec.answer)
            if same or cov >= any_answer_coverage:
                hit = Hit(i, name, bench.id, round(cov, 4), same)
                break
            spared += 1
        if hit is None:
            kept.append(i)
        else:
            hits.append(hit)
    return kept, hits, spared


# --------------------------------------------------------------------------------------------------
# Mixing
# --------------------------------------------------------------------------------------------------
def quotas(available: Mapping[str, int], weights: Mapping[str, float], total: int | None) -> dict[str, int]:
    """How many problems each source keeps: all of them without ``total``; else ``total`` shared by weight,
    sources with fewer than their share keeping all theirs and the rest re-shared among the others
    (largest remainders, ties in source order).

    >>> quotas({"a": 10, "b": 100}, {"a": 1, "b": 1}, 50)
    {'a': 10, 'b': 40}
    """
    if total is None or total >= sum(available.values()):
        return dict(available)
    out = {name: 0 for name in available}
    active = [name for name in available if available[name] > 0]
    remaining = total
    while active:
        wsum = sum(weights[n] for n in active)
        full = [n for n in active if available[n] <= remaining * weights[n] / wsum]
        if not full:
            break
        for n in full:
            out[n] = available[n]
            remaining -= available[n]
            active.remove(n)
    if active:
        wsum = sum(weights[n] for n in active)
        exact = {n: remaining * weights[n] / wsum for n in active}
        for n in active:
            out[n] = math.floor(exact[n])
        order = sorted(active, key=lambda n: (-(exact[n] - out[n]), active.index(n)))
        for n in order[: remaining - sum(out[n] for n in active)]:
            out[n] += 1
    return out


def sample_in_order(items: Sequence[Any], k: int, seed: str) -> list[Any]:
    """A seeded sample of ``k`` items, in their original order."""
    if k >= len(items):
        return list(items)
    picked = sorted(random.Random(seed).sample(range(len(items)), k))
    return [items[i] for i in picked]


# --------------------------------------------------------------------------------------------------
# The steps (module docstring, 1-8): one pure function each, records in, a Step out
# --------------------------------------------------------------------------------------------------
@dataclass
class Step:
    """What one step did: the records it passes on (in the order the next step reads them), those it
    quarantined, those it sampled out per source (mixing only: fine problems, not a quarantine), and its own
    entries for the report's step table (``info``: method, thresholds, ...). ``n_in`` is what it was given."""

    name: str
    n_in: int
    kept: list[Record]
    rejected: list[Rejected] = field(default_factory=list)
    sampled_out: dict[str, int] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)


def load_records(sources: Sequence[SourceInput]) -> Step:
    """Step 1: the rows of every source as records (:func:`records_from_rows`: malformed rows, missing
    problems or answers and repeated ids within a source quarantined), then ids unique across sources: a
    record whose id an earlier source already gave out is quarantined as ``duplicate_id``. Counts rows in."""
    records: list[Record] = []
    rejected: list[Rejected] = []
    for src in sources:
        recs, rej = records_from_rows(src.name, src.rows)
        records += recs
        rejected += rej
    seen: set[str] = set()
    unique: list[Record] = []
    for rec in records:  # the source prefix keeps most ids apart; "a" + "x-1" and "a-x" + "1" still meet
        if rec.id in seen:
            rejected.append(Rejected("duplicate_id", rec.source, rec.origin, f"id {rec.id} seen before", rec))
            continue
        seen.add(rec.id)
        unique.append(rec)
    return Step("load", sum(len(s.rows) for s in sources), unique, rejected)


def normalize_answers(records: Sequence[Record]) -> Step:
    """Step 2: every gold answer in its stored form (:func:`normalize_answer`); one that normalises to
    nothing is quarantined as ``missing_answer``. ``info["changed"]`` counts the answers each rule changed."""
    rules: Counter[str] = Counter()
    kept: list[Record] = []
    emptied: list[Rejected] = []
    for rec in records:
        answer, applied = normalize_answer(rec.answer)
        rules.update(applied)
        if not answer:
            emptied.append(
                Rejected("missing_answer", rec.source, rec.origin, "empty after normalisation", rec)
            )
            continue
        kept.append(replace(rec, answer=answer))
    return Step(
        "normalize_answers", len(records), kept, emptied, info={"changed": dict(sorted(rules.items()))}
    )


def keep_gradable(records: Sequence[Record]) -> Step:
    """Step 3: a record whose gold the grader refuses (:func:`lead.grading.gold_problems`, the reward's own
    extraction and parse) could never earn a reward: quarantined as ``ungradable_answer``, with the
    grader's reason."""
    kept: list[Record] = []
    bad: list[Rejected] = []
    for rec, why in zip(records, grading.gold_problems([r.answer for r in records]), strict=True):
        if why is None:
            kept.append(rec)
        else:
            bad.append(Rejected("ungradable_answer", rec.source, rec.origin, why, rec))
    method = "lead.grading.gold_problems: the reward's extraction and parse of the gold"
    return Step("gradable_answer", len(records), kept, bad, info={"method": method})


def limit_prompt_length(
    records: Sequence[Record],
    settings: Settings,
    count_tokens: Callable[[list[str]], list[int]] | None = None,
    token_method: str = "",
) -> Step:
    """Step 4: problem + ``settings.prompt_suffix`` longer than ``settings.max_prompt_tokens`` tokens is
    quarantined as ``prompt_too_long``. Tokens are ``count_tokens`` of the prompts (``token_method`` says
    how, for the report), else :func:`estimate_tokens`."""
    prompts = [rec.problem + settings.prompt_suffix for rec in records]
    counts = count_tokens(prompts) if count_tokens else [estimate_tokens(p) for p in prompts]
    kept: list[Record] = []
    long_: list[Rejected] = []
    for rec, n in zip(records, counts, strict=True):
        if n <= settings.max_prompt_tokens:
            kept.append(rec)
        else:
            long_.append(Rejected("prompt_too_long", rec.source, rec.origin, f"{n} tokens", rec))
    info = {
        "method": token_method or f"estimate ceil(chars / {CHARS_PER_TOKEN})",
        "max_prompt_tokens": settings.max_prompt_tokens,
        "longest": max(counts, default=0),
    }
    return Step("prompt_length", len(records), kept, long_, info=info)


def drop_exact_duplicates(records: Sequence[Record]) -> Step:
    """Step 5: of the records with the same normalised word sequence (:func:`words`, brackets kept) the
    first wins; a later copy is quarantined as ``duplicate``, or as ``duplicate_conflict`` when its answer
    differs (:func:`same_answer`). Test records come first, so that the copy removed is a training one (the
    train pool never repeats a test problem): the records passed on are in that order, test then train."""
    ordered = [r for r in records if r.split == "test"] + [r for r in records if r.split != "test"]
    first: dict[tuple[str, ...], Record] = {}
    kept: list[Record] = []
    dups: list[Rejected] = []
    for rec in ordered:
        key = tuple(words(rec.problem, brackets=True)) or (rec.problem,)  # no words: the raw text decides
        other = first.get(key)
        if other is None:
            first[key] = rec
            kept.append(rec)
        elif same_answer(other.answer, rec.answer):
            dups.append(Rejected("duplicate", rec.source, rec.origin, f"same text as {other.id}", rec))
        else:
            detail = f"same text as {other.id}, answer {other.answer!r} there"
            dups.append(Rejected("duplicate_conflict", rec.source, rec.origin, detail, rec))
    return Step(
        "exact_duplicates", len(records), kept, dups, info={"method": "equal normalised word sequences"}
    )


def drop_near_duplicates(records: Sequence[Record], settings: Settings) -> Step:
    """Step 6: a record whose word 5-gram Jaccard with an earlier one reaches
    ``settings.near_duplicate_jaccard``, with the same answer, is quarantined as ``near_duplicate``
    (:func:`near_duplicates`). Similar pairs with different answers are different problems: kept, and
    counted in ``info["pairs_kept_different_answers"]``."""
    keep_idx, dropped, differ = near_duplicates(records, settings.near_duplicate_jaccard)
    near = [
        Rejected(
            "near_duplicate",
            records[i].source,
            records[i].origin,
            f"Jaccard {sim:.3f} with {records[j].id}",
            records[i],
        )
        for i, (j, sim) in sorted(dropped.items())
    ]
    method = (
        f"word {SHINGLE}-gram Jaccard >= {settings.near_duplicate_jaccard} and the same answer "
        f"(MinHash {_NUM_PERM} hashes, LSH {_BANDS} bands x {_NUM_PERM // _BANDS} rows, verified exactly)"
    )
    info = {"method": method, "pairs_kept_different_answers": differ}
    return Step("near_duplicates", len(records), [records[i] for i in keep_idx], near, info=info)


def drop_contaminated(
    train: Sequence[Record], benchmarks: Mapping[str, Sequence[Record]], settings: Settings
) -> tuple[Step, dict[str, dict[str, Any]]]:
    """Step 7, for training records only: one contaminated by a benchmark problem (:func:`decontaminate`:
    shared ``settings.decontam_ngram``-grams cover ``decontam_coverage_any_answer`` of it, or
    ``decontam_coverage`` with the same answer) is quarantined as ``contaminated``. No benchmarks, nothing
    removed. Also returns the report's contamination table: per benchmark its size, the hits, how many
    of them had the same answer, and every hit."""
    contamination: dict[str, dict[str, Any]] = {
        name: {"problems": len(recs), "hits": 0, "same_answer": 0, "examples": []}
        for name, recs in benchmarks.items()
    }
    keep_idx, hits, spared = decontaminate(
        train,
        benchmarks,
        settings.decontam_ngram,
        settings.decontam_coverage,
        settings.decontam_coverage_any_answer,
    )
    contaminated: list[Rejected] = []
    for hit in hits:
        rec = train[hit.record]
        entry = contamination[hit.benchmark]
        entry["hits"] += 1
        entry["same_answer"] += int(hit.same_answer)
        entry["examples"].append(
            {
                "id": rec.id,
                "benchmark_id": hit.benchmark_id,
                "coverage": hit.coverage,
                "same_answer": hit.same_answer,
            }
        )
        detail = f"{hit.benchmark}:{hit.benchmark_id} coverage {hit.coverage:.2f}" + (
            ", same answer" if hit.same_answer else ", different answer"
        )
        contaminated.append(Rejected("contaminated", rec.source, rec.origin, detail, rec))
    method = (
        f"shared word {settings.decontam_ngram}-grams cover >= {settings.decontam_coverage_any_answer:.0%} of a "
        f"benchmark problem's words, or >= {settings.decontam_coverage:.0%} with the same answer"
    )
    info = {
        "method": method if benchmarks else "no benchmarks to check against",
        "benchmarks": sorted(benchmarks),
        "pairs_kept_different_answers": spared,
    }
    step = Step("decontaminate", len(train), [train[i] for i in keep_idx], contaminated, info=info)
    return step, contamination


def mix(train: Sequence[Record], sources: Sequence[SourceInput], settings: Settings) -> Step:
    """Step 8, for training records only: each source keeps at most its ``max_problems``, and
    ``settings.max_train_problems`` is shared out by source ``weight`` (:func:`quotas`); what a source keeps
    is a sample seeded by ``settings.seed`` and its name, in original order (:func:`sample_in_order`). The
    rest is sampled out (counted per source, not quarantined). Records are passed on in source order."""
    names = [s.name for s in sources]
    by_source = {s.name: [r for r in train if r.source == s.name] for s in sources}
    capped = {
        s.name: len(by_source[s.name])
        if s.max_problems is None
        else min(len(by_source[s.name]), s.max_problems)
        for s in sources
    }
    quota = quotas(capped, {s.name: s.weight for s in sources}, settings.max_train_problems)
    kept: list[Record] = []
    sampled_out: dict[str, int] = {}
    for n in names:
        chosen = sample_in_order(by_source[n], quota[n], f"{settings.seed}-{n}")
        sampled_out[n] = len(by_source[n]) - len(chosen)
        kept += chosen
    info = {"quotas": quota, "max_train_problems": settings.max_train_problems}
    return Step("mix", len(train), kept, sampled_out=sampled_out, info=info)


# --------------------------------------------------------------------------------------------------
# The whole pass
# --------------------------------------------------------------------------------------------------
def step_row(step: Step, seconds: float) -> dict[str, Any]:
    """A step's row of the report's step table: records in and out, the removed by reason (quarantine
    reasons and :data:`SAMPLED_OUT`), the seconds it took, then its own ``info``."""
    removed = Counter(r.reason for r in step.rejected)
    removed[SAMPLED_OUT] += sum(step.sampled_out.values())
    return {
        "step": step.name,
        "in": step.n_in,
        "out": len(step.kept),
        "removed": {k: v for k, v in sorted(removed.items()) if v},
        "seconds": seconds,
        **step.info,
    }


def removed_by_source(steps: Iterable[Step], source: str) -> dict[str, int]:
    """How many rows of ``source`` the steps removed, by reason (:data:`SAMPLED_OUT` for mixing)."""
    counts = Counter(r.reason for step in steps for r in step.rejected if r.source == source)
    counts[SAMPLED_OUT] += sum(step.sampled_out.get(source, 0) for step in steps)
    return dict(sorted((k, v) for k, v in counts.items() if v))


def curate(
    sources: Sequence[SourceInput],
    benchmarks: Mapping[str, Sequence[Record]],
    settings: Settings,
    count_tokens: Callable[[list[str]], list[int]] | None = None,
    token_method: str = "",
) -> Result:
    """Run steps 1-8 of the module docstring over ``sources`` (in priority order), each on what the one
    before it kept; the quarantine is every step's rejects, in step order.

    ``benchmarks`` are the evaluation sets to decontaminate against (empty: step 7 removes nothing);
    ``count_tokens`` maps prompts to token counts (default :func:`estimate_tokens`), ``token_method`` says
    how, for the report.
    """
    started = lap = time.perf_counter()
    done: list[tuple[Step, float]] = []

    def log_step(step: Step) -> list[Record]:
        """Keep ``step`` for the report, with the seconds since the previous one; pass its records on."""
        nonlocal lap
        now = time.perf_counter()
        done.append((step, round(now - lap, 2)))
        lap = now
        return step.kept

    records = log_step(load_records(sources))
    records = log_step(normalize_answers(records))
    records = log_step(keep_gradable(records))
    records = log_step(limit_prompt_length(records, settings, count_tokens, token_method))
    records = log_step(drop_exact_duplicates(records))
    records = log_step(drop_near_duplicates(records, settings))
    test = [r for r in records if r.split == "test"]  # held out from here: never decontaminated or mixed
    decontaminated, contamination = drop_contaminated(
        [r for r in records if r.split != "test"], benchmarks, settings
    )
    train = log_step(decontaminated)
    train = log_step(mix(train, sources, settings))
    names = [s.name for s in sources]
    test.sort(key=lambda r: names.index(r.source))  # back to source order (stable: row order within)

    steps = [step for step, _ in done]
    rejected = [r for step in steps for r in step.rejected]
    per_source = {
        s.name: {
            "location": s.location,
            "read": len(s.rows),
            "train": sum(r.source == s.name for r in train),
            "test": sum(r.source == s.name for r in test),
            "removed": removed_by_source(steps, s.name),
        }
        for s in sources
    }
    report = {
        "sources": per_source,
        "steps": [step_row(step, seconds) for step, seconds in done],
        "contamination": contamination,
        "quarantine": dict(sorted(Counter(r.reason for r in rejected).items())),
        "train": len(train),
        "test": len(test),
        "seconds": round(time.perf_counter() - started, 2),
    }
    return Result(train=train, test=test, rejected=rejected, report=report)


def summary(report: Mapping[str, Any]) -> dict[str, Any]:
    """The deterministic metrics of a report (``curation.json``, the DVC metrics file): counts only."""
    return {
        "sources": {n: {"train": s["train"], "test": s["test"]} for n, s in report["sources"].items()},
        "train": report["train"],
        "test": report["test"],
        "removed": {
            step["step"]: sum(step["removed"].values()) for step in report["steps"] if step["removed"]
        },
        "contamination": {name: c["hits"] for name, c in report["contamination"].items()},
    }


def render_markdown(report: Mapping[str, Any]) -> str:
    """The report as markdown: steps, sources, contamination per benchmark, quarantine reasons."""
    lines = [
        "# Curation report",
        "",
        f"{report['train']} training problems, {report['test']} test problems "
        f"({report['seconds']} s for the curation pass).",
        "",
        "## Steps",
        "",
        "| step | in | out | removed | seconds | method |",
        "|---|---:|---:|---|---:|---|",
    ]
    for s in report["steps"]:
        removed = ", ".join(f"{k} {v}" for k, v in s["removed"].items()) or "-"
        extra = s.get("method", "")
        if s["step"] == "normalize_answers":
            extra = "changed: " + (", ".join(f"{k} {v}" for k, v in s["changed"].items()) or "none")
        if s["step"] in ("near_duplicates", "decontaminate") and "pairs_kept_different_answers" in s:
            extra += f"; {s['pairs_kept_different_answers']} similar pairs kept (different answers)"
        if s["step"] == "prompt_length":
            extra += f"; limit {s['max_prompt_tokens']}, longest {s['longest']}"
        if s["step"] == "mix":
            extra = f"quotas {s['quotas']}, max_train_problems {s['max_train_problems']}"
        lines.append(f"| {s['step']} | {s['in']} | {s['out']} | {removed} | {s['seconds']} | {extra} |")
    lines += [
        "",
        "## Sources",
        "",
        "| source | location | read | train | test | removed |",
        "|---|---|---:|---:|---:|---|",
    ]
    for name, s in report["sources"].items():
        removed = ", ".join(f"{k} {v}" for k, v in s["removed"].items()) or "-"
        lines.append(f"| {name} | {s['location']} | {s['read']} | {s['train']} | {s['test']} | {removed} |")
    lines += ["", "## Contamination", ""]
    if not report["contamination"]:
        lines.append("No evaluation benchmark to check against (proxy only).")
    else:
        lines += [
            "| benchmark | problems | training problems removed | of which same answer |",
            "|---|---:|---:|---:|",
        ]
        for name, c in report["contamination"].items():
            lines.append(f"| {name} | {c['problems']} | {c['hits']} | {c['same_answer']} |")
        for name, c in report["contamination"].items():
            if c["examples"]:
                lines += ["", f"**{name}** (training id → benchmark id, coverage, same answer):", ""]
                lines += [
                    f"- {e['id']} → {e['benchmark_id']}, {e['coverage']:.2f}, {'yes' if e['same_answer'] else 'no'}"
                    for e in c["examples"]
                ]
    lines += ["", "## Quarantine reasons", "", "| reason | count | meaning |", "|---|---:|---|"]
    for reason, meaning in REASONS.items():
        lines.append(f"| {reason} | {report['quarantine'].get(reason, 0)} | {meaning} |")
    return "\n".join(lines) + "\n"
