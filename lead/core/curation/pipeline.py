"""The curation pass (:mod:`lead.core.curation`, steps 1-8): its knobs (:class:`Settings`), one pure function
per step (records in, a :class:`Step` out), :func:`curate` running them in turn into a :class:`Result` with the
report (a JSON-ready dict of numbers), and :func:`summary`, the report's deterministic counts."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from lead import grading
from lead.core.curation.answers import CHARS_PER_TOKEN, estimate_tokens, normalize_answer, same_answer
from lead.core.curation.mixing import quotas, sample_in_order
from lead.core.curation.records import Record, Rejected, SourceInput, records_from_rows
from lead.core.curation.similarity import BANDS, NUM_PERM, SHINGLE, decontaminate, near_duplicates, words

SAMPLED_OUT = (
    "sampled_out"  # not a quarantine reason: fine problems left out by max_problems / max_train_problems
)


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
# The steps (package docstring, 1-8): one pure function each, records in, a Step out
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
        f"(MinHash {NUM_PERM} hashes, LSH {BANDS} bands x {NUM_PERM // BANDS} rows, verified exactly)"
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
    """Run steps 1-8 of the package docstring over ``sources`` (in priority order), each on what the one
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
