"""A benchmark's completions graded and scored under the protocol (:mod:`lead.core.metrics`'s metrics)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

GRADER_STATS = ("fast_path", "verified", "no_answer", "unparseable", "timeouts")


@dataclass
class Prepared:
    """A benchmark's problems with their user messages and whether each prompt fits in the context window."""

    problems: list[Any]
    messages: list[str]
    fits: list[bool]
    prompt_tokens: list[int]


def prepare(
    suites: dict[str, list[Any]], prompt_suffix: str, budget: int, tokenizer, context: int | None
) -> dict[str, Prepared]:
    """Each benchmark's user messages (the problem and ``prompt_suffix``), and whether each prompt leaves room
    for ``budget`` new tokens in the ``context`` window."""
    from lead.io.sampling import render_prompt, user_message

    out = {}
    for name, problems in suites.items():
        messages = [user_message(p.problem, prompt_suffix) for p in problems]
        prompts = [render_prompt(tokenizer, m) for m in messages]
        # Counted with special tokens: the larger of the counts with and without them (a safe bound).
        lengths = [len(ids) for ids in tokenizer(prompts)["input_ids"]] if prompts else []
        fits = [context is None or n + budget <= context for n in lengths]
        out[name] = Prepared(problems, messages, fits, lengths)
    return out


def score_benchmark(name: str, bench: Prepared, groups: list[list[Any]], n: int):
    """Grade the sampled groups; per-sample records, the evaluation's ProblemSamples and the grader stats."""
    from lead.core.metrics import ProblemSamples, Sample
    from lead.core.outcomes import EVALUATION, judge

    sampled = [p for p, fit in zip(bench.problems, bench.fits, strict=True) if fit]
    flat = [c for group in groups for c in group]
    golds = [p.answer for p, group in zip(sampled, groups, strict=True) for _ in group]
    # One pass: each verdict with the answer it was judged by (the records and Cons@n use the same answers).
    judged, stats = judge([c.text for c in flat], golds, [not c.finished for c in flat], EVALUATION)
    records, problems = [], []
    position = 0
    for problem, fit in zip(bench.problems, bench.fits, strict=True):
        samples = []
        for i in range(n):
            if fit:
                c, j = flat[position], judged[position]
                position += 1
                sample = Sample(j.answer, j.correct, c.num_tokens, c.finished, outcome=j.outcome)
                text = c.text
            else:
                sample = Sample(answer=None, correct=False, tokens=0, finished=False, generated=False)
                text = ""
            samples.append(sample)
            records.append(
                {
                    "benchmark": name,
                    "problem_id": problem.id,
                    "problem": problem.problem,  # the statement: what a reviewer reads a changed verdict against
                    "band": problem.band,
                    "gold": problem.answer,
                    "sample": i,
                    "completion": text,
                    "answer": sample.answer,
                    "correct": sample.correct,
                    "tokens": sample.tokens,
                    "finished": sample.finished,
                    "in_context": fit,
                }
            )
        problems.append(ProblemSamples(tuple(samples), band=problem.band))
    return records, problems, stats


def headline_figures(metrics: dict[str, Any], benchmarks: list[str], samples: int) -> dict[str, Any]:
    """Per benchmark: Pass@1, Cons@n, Len_avg and the answered share (and their spread over repeats)."""
    names = ("pass_at_1", f"cons_at_{samples}", "len_avg", "answered")
    keys = [f"{b}.{m}{std}" for b in benchmarks for m in names for std in ("", "_std")]
    return {k: metrics[k] for k in keys if k in metrics}
