"""Replay an evaluation made elsewhere: completions someone else generated (another toolkit's run, a published
evaluation), scored by this project's evaluation protocol, and set beside that toolkit's own verdicts.

``lead evaluate --completions FILE`` reads a JSONL or parquet file, one row per completion (or one per problem,
with a list ``completions``):

==========================  ===========================================================================
``problem_id`` / ``problem``  which problem (either; both when known)
``gold``                    the gold answer
``completion``              the text (or ``completions``: a list of texts for the problem)
``benchmark``               optional (default ``completions``); metrics are per benchmark (and per ``model``
                            when a file holds several models for one benchmark)
``model``                   optional
``tokens``                  optional: the completion's length in tokens (else in words, and said so)
``finished``                optional: whether it ended by itself (default true; false: cut at a limit)
``reference_correct``       optional: the other toolkit's verdict (bool, or a list beside ``completions``)
``reference_answer``        optional: the answer it extracted
==========================  ===========================================================================

Each completion is judged by the evaluate stage's one function (:func:`lead.core.outcomes.judge` under
:data:`~lead.core.outcomes.EVALUATION`), and each benchmark scored by :func:`lead.core.metrics.benchmark_metrics`
(every problem of a benchmark needs the same number of completions): the stage's figures, records and plots.
Where the file holds reference verdicts, :func:`agreement` counts how often both say the same, and every
disagreement is listed with both verdicts and both extracted answers: a user checks this protocol against a
published evaluation in one command.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lead.io.files import atomic_path, write_json, write_text

DEFAULT_BENCHMARK = "completions"


class CompletionsError(ValueError):
    """A completions file that cannot be read as the module's docstring describes (the message says where)."""


@dataclass
class Replayed:
    """What scoring a completions file gave: the metrics (``<suite>.<metric>``), one record per completion, the
    scored problems per suite (for the plots), and the agreement with the reference verdicts."""

    metrics: dict[str, Any]
    records: list[dict[str, Any]]
    scored: dict[str, list[Any]]
    length_unit: str
    agreement: dict[str, Any] = field(default_factory=dict)


def read_completions(path: Path) -> list[dict[str, Any]]:
    """The rows of a completions file (JSONL or parquet), one per completion, each checked: a
    :class:`CompletionsError` names the first row that lacks what it needs."""
    path = Path(path)
    if not path.is_file():
        raise CompletionsError(f"{path}: no such file")
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        raw = pq.read_table(path).to_pylist()
        where = [f"{path}: row {i + 1}" for i in range(len(raw))]
    else:
        raw, where = [], []
        with path.open(encoding="utf-8", errors="strict") as fh:
            try:
                for number, line in enumerate(fh, start=1):
                    if line.strip():
                        try:
                            raw.append(json.loads(line))
                        except json.JSONDecodeError as exc:
                            raise CompletionsError(f"{path}: line {number}: not JSON ({exc.msg})") from None
                        where.append(f"{path}: line {number}")
            except UnicodeDecodeError:
                raise CompletionsError(f"{path}: not UTF-8 text (JSONL) nor a .parquet file") from None
    rows = [row for place, item in zip(where, raw, strict=True) for row in _expand(place, item)]
    if not rows:
        raise CompletionsError(f"{path}: no completions")
    return rows


def _expand(place: str, item: Any) -> list[dict[str, Any]]:
    """One file row as rows of one completion each, checked."""
    if not isinstance(item, Mapping):
        raise CompletionsError(f"{place}: a row must be an object, got {type(item).__name__}")
    if item.get("problem_id") is None and item.get("problem") is None:
        raise CompletionsError(f"{place}: needs problem_id or problem")
    if item.get("gold") is None:
        raise CompletionsError(f"{place}: needs gold")
    texts, verdicts = item.get("completions"), item.get("reference_correct")
    if texts is None:
        if not isinstance(item.get("completion"), str):
            raise CompletionsError(f"{place}: needs completion (a string) or completions (a list of strings)")
        texts, verdicts = [item["completion"]], [verdicts]
    elif not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise CompletionsError(f"{place}: completions must be a list of strings")
    elif not isinstance(verdicts, list):
        verdicts = [verdicts] * len(texts)
    if len(verdicts) != len(texts):
        raise CompletionsError(f"{place}: {len(texts)} completions but {len(verdicts)} reference verdicts")
    answers = item.get("reference_answer")
    answers = answers if isinstance(answers, list) else [answers] * len(texts)
    base = {
        "benchmark": str(item.get("benchmark") or DEFAULT_BENCHMARK),
        "model": None if item.get("model") is None else str(item["model"]),
        "problem_id": str(item.get("problem_id") if item.get("problem_id") is not None else item["problem"])[
            :200
        ],
        "problem": None if item.get("problem") is None else str(item["problem"]),
        "gold": str(item["gold"]),
        "finished": bool(item.get("finished", True)),
        "tokens": item.get("tokens"),
    }
    out = []
    for text, verdict, answer in zip(texts, verdicts, answers, strict=True):
        if verdict is not None and not isinstance(verdict, bool):
            raise CompletionsError(
                f"{place}: reference_correct must be true, false or absent, got {verdict!r}"
            )
        out.append(
            {
                **base,
                "completion": text,
                "reference_correct": verdict,
                "reference_answer": None if answer is None else str(answer),
            }
        )
    return out


def suite_names(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each row's suite: its benchmark, with its model when the file holds several models for that benchmark.

    >>> suite_names([{"benchmark": "aime24", "model": "a"}, {"benchmark": "aime24", "model": "b"},
    ...              {"benchmark": "math500", "model": "a"}])
    ['aime24 (a)', 'aime24 (b)', 'math500']
    """
    models: dict[str, set[Any]] = {}
    for row in rows:
        models.setdefault(row["benchmark"], set()).add(row.get("model"))
    return [
        f"{r['benchmark']} ({r.get('model')})" if len(models[r["benchmark"]]) > 1 else r["benchmark"]
        for r in rows
    ]


def replay(rows: Sequence[Mapping[str, Any]]) -> Replayed:
    """Judge every completion under evaluation's rules and score each suite (:func:`suite_names`) as the evaluate
    stage does; the agreement with the reference verdicts where rows carry them."""
    from lead.core.metrics import ProblemSamples, Sample, benchmark_metrics, cached_equal
    from lead.core.outcomes import EVALUATION, judge

    judged, stats = judge(
        [r["completion"] for r in rows],
        [r["gold"] for r in rows],
        [not r["finished"] for r in rows],
        EVALUATION,
    )
    counted = all(isinstance(r["tokens"], int) for r in rows)
    records: list[dict[str, Any]] = []
    groups: dict[str, dict[str, list[Any]]] = {}  # suite -> problem -> samples, in file order
    for suite, row, j in zip(suite_names(rows), rows, judged, strict=True):
        tokens = row["tokens"] if counted else len(row["completion"].split())
        sample = Sample(j.answer, j.correct, tokens, row["finished"], outcome=j.outcome)
        groups.setdefault(suite, {}).setdefault(row["problem_id"], []).append(sample)
        records.append(
            {
                **{k: row[k] for k in ("benchmark", "model", "problem_id", "problem", "gold", "completion")},
                "suite": suite,
                "answer": j.answer,
                "correct": j.correct,
                "outcome": j.outcome.value,
                "tokens": tokens,
                "finished": row["finished"],
                "reference_correct": row["reference_correct"],
                "reference_answer": row["reference_answer"],
            }
        )
    metrics: dict[str, Any] = {}
    scored: dict[str, list[Any]] = {}
    for suite, problems in groups.items():
        sizes = sorted({len(s) for s in problems.values()})
        if len(sizes) > 1:
            raise CompletionsError(
                f"{suite}: every problem needs the same number of completions (Pass@k and Cons@n compare them); "
                f"this file has {sizes[0]} to {sizes[-1]}"
            )
        scored[suite] = [ProblemSamples(tuple(s)) for s in problems.values()]
        values = benchmark_metrics(scored[suite], equal=cached_equal())
        values["extraction"] = EVALUATION.extraction
        metrics.update({f"{suite}.{k}": v for k, v in values.items()})
    metrics.update(
        {f"grader_{k}": getattr(stats, k) for k in ("verified", "no_answer", "unparseable", "timeouts")}
    )
    return Replayed(metrics, records, scored, "tokens" if counted else "words", agreement(records))


def agreement(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """How our verdicts compare with the reference's, over the records that carry one: ``compared``, ``agree``,
    ``share`` (agree / compared), ``only_ours`` (we say correct, the reference wrong), ``only_reference``; {}
    when no record carries a reference verdict.

    >>> r = [{"correct": True, "reference_correct": True}, {"correct": False, "reference_correct": True},
    ...      {"correct": True, "reference_correct": None}]
    >>> agreement(r)
    {'compared': 2, 'agree': 1, 'share': 0.5, 'only_ours': 0, 'only_reference': 1}
    """
    both = [r for r in records if r.get("reference_correct") is not None]
    if not both:
        return {}
    agree = sum(bool(r["correct"]) == r["reference_correct"] for r in both)
    return {
        "compared": len(both),
        "agree": agree,
        "share": round(agree / len(both), 4),
        "only_ours": sum(bool(r["correct"]) and not r["reference_correct"] for r in both),
        "only_reference": sum(not r["correct"] and r["reference_correct"] for r in both),
    }


def disagreements(records: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The records whose verdict differs from the reference's, in file order."""
    return [
        r
        for r in records
        if r.get("reference_correct") is not None and bool(r["correct"]) != r["reference_correct"]
    ]


def _cell(text: Any, most: int = 60) -> str:
    flat = " ".join(str("-" if text is None else text).split())
    flat = flat if len(flat) <= most else "…" + flat[-(most - 1) :]
    return flat.replace("|", "\\|")


def disagreement_table(records: Sequence[Mapping[str, Any]]) -> str:
    """The disagreements as a Markdown table: where, the gold, both extracted answers and both verdicts."""
    lines = [
        "| suite | problem | gold | our answer | ours | reference answer | reference |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in disagreements(records):
        lines.append(
            f"| {_cell(r['suite'])} | {_cell(r['problem_id'], 20)} | {_cell(r['gold'], 30)} | {_cell(r['answer'])} | "
            f"{'correct' if r['correct'] else 'wrong'} | {_cell(r['reference_answer'])} | "
            f"{'correct' if r['reference_correct'] else 'wrong'} |"
        )
    return "\n".join(lines) + "\n"


def write_replay(out: Path, source: Path, result: Replayed) -> None:
    """``out``: ``samples.parquet`` (every completion, both verdicts), ``metrics.json``, ``agreement.json`` and
    ``disagreements.md`` (when the file holds reference verdicts), ``accuracy_vs_length.png`` and
    ``budget_curve.png`` (the latter without budgets: lengths come from elsewhere)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lead.evaluation import write_plots

    out.mkdir(parents=True, exist_ok=True)
    with atomic_path(out / "samples.parquet") as tmp:
        pq.write_table(pa.Table.from_pylist(result.records), tmp)
    write_json(
        out / "metrics.json", {**result.metrics, "length_unit": result.length_unit, "source": str(source)}
    )
    if result.agreement:
        write_json(out / "agreement.json", result.agreement)
        write_text(out / "disagreements.md", disagreement_table(result.records))
    n = max((p.n for problems in result.scored.values() for p in problems), default=1)
    write_plots(out, result.scored, {}, n)
