"""How alike two problems' texts are (steps 5-7 of :mod:`lead.core.curation`): normalised words
(:func:`words`) and word n-grams, MinHash/LSH near-duplicate detection (:func:`near_duplicates`), and the
contamination of training problems by benchmark problems (:class:`ContaminationIndex`, :func:`decontaminate`)."""

from __future__ import annotations

import re
import unicodedata
import zlib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from lead.core.curation.answers import same_answer
from lead.core.curation.records import Record

SHINGLE = 5
NUM_PERM, BANDS = 64, 16  # MinHash hashes; LSH bands (of NUM_PERM // BANDS rows each)

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
_A = _HASH_RNG.integers(1, 2**63, size=NUM_PERM, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
_B = _HASH_RNG.integers(0, 2**63, size=NUM_PERM, dtype=np.uint64)


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
    above the threshold kept because their answers differ (package docstring, step 6). Earlier wins."""
    rows = NUM_PERM // BANDS
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
        keys = [(band, sig[band * rows : (band + 1) * rows].tobytes()) for band in range(BANDS)]
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
