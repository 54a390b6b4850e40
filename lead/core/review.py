"""Model-registry review, pure: the champion/challenger gate and the description a reviewer reads.

A trained model is registered as a new version carrying its evaluation scores. It is compared with the
current ``@champion`` on the *same protocol* (same benchmarks, samples, temperature, token budget, ...); the
gate promotes it when, on every benchmark,

    Pass@1(candidate) ≥ Pass@1(champion) − pass_tolerance      and
    Len_avg(candidate) ≤ Len_avg(champion) · (1 + length_tolerance)

— GRPO-LEAD's promise: at least as accurate, no longer. Without a champion the first version passes; against a
champion scored under another protocol nothing can be concluded, so the gate refuses (``lead promote`` can
still move the alias, with a reason).

The description is markdown as MLflow's UI renders it (showdown, GitHub flavor, then sanitize-html): a link
survives only with an http(s) or a relative target, so every link is relative to the UI's own page — a route
of its hash router (:func:`ui_run_link`, :func:`ui_model_version_link`) or a file the server serves
(:func:`artifact_file_link`) — and works on whatever host and port the reviewer opened the UI at; a ``runs:/``
URI would render as a link without a target. GitHub flavor also turns ``@name`` into a link to a GitHub user:
:func:`escape_mentions`.

No MLflow here: :mod:`lead.registration` does the I/O.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

HEADLINE = ("pass_at_1", "len_avg")  # what the gate judges, per benchmark
# Evaluate params that change the measurement; model and backend do not (both backends sample the same way).
PROTOCOL_EXCLUDED = ("model", "backend")
METRIC_TAG = "eval.{benchmark}.{metric}"

Scores = dict[str, dict[str, float | None]]  # benchmark -> {pass_at_1, len_avg}


def headline_scores(metrics: Mapping[str, Any], benchmarks: Iterable[str]) -> Scores:
    """``{"aime24": {"pass_at_1": .., "len_avg": ..}}`` from evaluate's flat ``<benchmark>.<metric>`` dict."""
    return {b: {m: metrics.get(f"{b}.{m}") for m in HEADLINE} for b in benchmarks}


def protocol(evaluate_section: Mapping[str, Any]) -> dict[str, Any]:
    """The part of ``params.evaluate`` that defines the measurement (everything but the model and backend)."""
    return {k: v for k, v in sorted(evaluate_section.items()) if k not in PROTOCOL_EXCLUDED}


def protocol_id(evaluate_section: Mapping[str, Any]) -> str:
    """A short stable hash of :func:`protocol`: two versions are comparable only when theirs are equal."""
    return hashlib.sha256(json.dumps(protocol(evaluate_section), sort_keys=True).encode()).hexdigest()[:12]


def score_tags(scores: Scores) -> dict[str, str]:
    """Scores as model-version tags (``eval.aime24.pass_at_1 = 0.3125``), so a later gate can read them."""
    return {
        METRIC_TAG.format(benchmark=b, metric=m): repr(v)
        for b, values in scores.items()
        for m, v in values.items()
        if v is not None
    }


def scores_from_tags(tags: Mapping[str, str]) -> Scores:
    """The inverse of :func:`score_tags`."""
    out: Scores = {}
    for key, value in tags.items():
        parts = key.split(".")
        if len(parts) == 3 and parts[0] == "eval" and parts[2] in HEADLINE:
            out.setdefault(parts[1], {})[parts[2]] = float(value)
    return out


@dataclass(frozen=True)
class GateDecision:
    """Whether the challenger becomes champion, and why (one reason per check that decided)."""

    promote: bool
    reasons: tuple[str, ...]

    def summary(self) -> str:
        verdict = "passed" if self.promote else "failed"
        return f"gate {verdict}: " + "; ".join(self.reasons)


def gate(
    candidate: Scores,
    champion: Scores | None,
    *,
    pass_tolerance: float,
    length_tolerance: float,
    same_protocol: bool = True,
) -> GateDecision:
    """The promotion rule of the module docstring, benchmark by benchmark."""
    if champion is None:
        return GateDecision(True, ("no champion yet",))
    if not same_protocol:
        return GateDecision(False, ("the champion was evaluated under another protocol: not comparable",))
    reasons: list[str] = []
    ok = True
    for bench, cand in candidate.items():
        champ = champion.get(bench) or {}
        p0 = champ.get("pass_at_1")
        if p0 is None:
            ok = False
            reasons.append(f"{bench}: the champion has no score")
            continue
        p = cand["pass_at_1"] or 0.0
        if p < p0 - pass_tolerance:
            ok = False
            reasons.append(f"{bench}: Pass@1 {p:.4f} < champion {p0:.4f} - {pass_tolerance}")
        else:
            reasons.append(f"{bench}: Pass@1 {p:.4f} vs {p0:.4f} ok")
        n, n0 = cand.get("len_avg"), champ.get("len_avg")
        if n is not None and n0 is not None:
            if n > n0 * (1 + length_tolerance):
                ok = False
                reasons.append(f"{bench}: Len_avg {n:.1f} > champion {n0:.1f} x (1 + {length_tolerance})")
            else:
                reasons.append(f"{bench}: Len_avg {n:.1f} vs {n0:.1f} ok")
    return GateDecision(ok, tuple(reasons))


# MLflow 3's UI opens in its GenAI mode, whose navigation has no model registry; this query parameter of its
# routes (read by the UI's WorkflowTypeProvider, and kept when it navigates) opens the classic ML mode.
UI_MODE = "workflowType=machine_learning"


def ui_run_link(experiment_id: str, run_id: str, artifact: str | None = None) -> str:
    """The UI's page of a run (``#/experiments/<id>/runs/<run>``), or of one of its artifacts (its file viewer),
    relative to the UI's own page."""
    route = f"#/experiments/{quote(str(experiment_id), safe='')}/runs/{quote(run_id, safe='')}"
    if artifact:
        route += f"/artifacts/{quote(artifact)}"
    return f"{route}?{UI_MODE}"


def ui_model_version_link(name: str, version: str) -> str:
    """The UI's page of a registered model's version (``#/models/<name>/versions/<v>``)."""
    return f"#/models/{quote(name, safe='')}/versions/{quote(str(version), safe='')}?{UI_MODE}"


def artifact_file_link(run_id: str, path: str) -> str:
    """A run's artifact file as the tracking server serves it (``get-artifact?path=..&run_uuid=..``, the URL the
    UI itself fetches artifacts by), relative to the UI's page.

    >>> artifact_file_link("abc", "evaluate/budget_curve.png")
    'get-artifact?path=evaluate%2Fbudget_curve.png&run_uuid=abc'
    """
    return f"get-artifact?path={quote(path, safe='')}&run_uuid={quote(run_id, safe='')}"


_MENTION = re.compile(r"(^|\s)@(?=\w)")


def escape_mentions(markdown: str) -> str:
    """``@champion`` → ``\\@champion`` outside code spans: GitHub-flavored markdown (MLflow's UI) would link a
    mention to github.com/champion; CommonMark renders the escape as a plain ``@``.

    >>> escape_mentions("vs the @champion, `git@host` and @v2")
    'vs the \\\\@champion, `git@host` and \\\\@v2'
    """
    parts = re.split(r"(`[^`]*`)", markdown)
    return "".join(p if p.startswith("`") else _MENTION.sub(r"\1\\@", p) for p in parts)


def _fmt(value: float | None, digits: int) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


# MLflow's UI draws a description's table cells without padding: headers and figures would run together.
_PAD = "&nbsp;&nbsp;"


def comparison_table(candidate: Scores, champion: Scores | None, champion_label: str = "champion") -> str:
    """A markdown table: Pass@1 and Len_avg of the candidate against the champion, with the differences."""
    heads = [
        "benchmark",
        "Pass@1",
        f"{champion_label} Pass@1",
        "Δ",
        "Len_avg",
        f"{champion_label} Len_avg",
        "Δ",
    ]
    lines = [
        "| " + " | ".join(f"{_PAD}{h}{_PAD}" for h in heads) + " |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for bench, cand in candidate.items():
        champ = (champion or {}).get(bench, {})
        p, p0 = cand.get("pass_at_1"), champ.get("pass_at_1")
        n, n0 = cand.get("len_avg"), champ.get("len_avg")
        dp = None if p is None or p0 is None else p - p0
        dn = None if n is None or n0 is None else n - n0
        cells = [bench, _fmt(p, 3), _fmt(p0, 3), "" if dp is None else f"{dp:+.3f}"]
        cells += [_fmt(n, 1), _fmt(n0, 1), "" if dn is None else f"{dn:+.1f}"]
        lines.append(_row(cells))
    return "\n".join(lines)


def _row(cells: Sequence[str]) -> str:
    """One markdown table row, each cell padded (:data:`_PAD`)."""
    return "| " + " | ".join(f"{_PAD}{c}{_PAD}" for c in cells) + " |"


# --------------------------------------------------------------------------------------------------
# What a reviewer reads: answers, problem by problem
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ProblemResult:
    """One problem of an evaluation: how many of its samples were correct, and its most common answer."""

    benchmark: str
    problem_id: str
    gold: str
    n_correct: int
    samples: int
    answer: str | None
    problem: str = ""  # its statement, when the records hold it (older evaluations' do not)

    @property
    def solved(self) -> bool:
        """Solved by most samples (at least half correct)."""
        return 2 * self.n_correct >= self.samples > 0


def problem_results(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], ProblemResult]:
    """Evaluate's sample records (``benchmark, problem_id, gold, answer, correct``) as one result per problem;
    the answer shown is the most common one (ties: the first seen).

    >>> rows = [{"benchmark": "b", "problem_id": "p", "gold": "4", "answer": a, "correct": a == "4"} for a in "454"]
    >>> problem_results(rows)[("b", "p")]
    ProblemResult(benchmark='b', problem_id='p', gold='4', n_correct=2, samples=3, answer='4', problem='')
    """
    grouped: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for row in rows:
        grouped.setdefault((str(row["benchmark"]), str(row["problem_id"])), []).append(row)
    out = {}
    for key, group in grouped.items():
        answers = [r["answer"] for r in group if r["answer"] is not None]
        common = max(answers, key=answers.count) if answers else None
        n_correct = sum(bool(r["correct"]) for r in group)
        statement = str(group[0].get("problem") or "")
        out[key] = ProblemResult(
            key[0], key[1], str(group[0]["gold"]), n_correct, len(group), common, statement
        )
    return out


def changed_problems(
    candidate: Mapping[tuple[str, str], ProblemResult],
    champion: Mapping[tuple[str, str], ProblemResult],
    most: int = 3,
) -> tuple[list[tuple[ProblemResult, ProblemResult]], list[tuple[ProblemResult, ProblemResult]]]:
    """(newly failed, newly solved): the problems both evaluated that the champion solves and the candidate
    does not, and the reverse (:attr:`ProblemResult.solved`), the largest changes of pass rate first, at most
    ``most`` of each, as (candidate, champion) pairs."""
    both = [(candidate[k], champion[k]) for k in sorted(candidate) if k in champion]

    def change(pair: tuple[ProblemResult, ProblemResult]) -> float:
        a, b = pair
        return a.n_correct / a.samples - b.n_correct / b.samples

    failed = sorted((p for p in both if p[1].solved and not p[0].solved), key=change)
    solved = sorted((p for p in both if p[0].solved and not p[1].solved), key=change, reverse=True)
    return failed[:most], solved[:most]


_MARKDOWN = re.compile(r"([\\`*_\[\]<~|#])")  # what Markdown reads as markup (a lone > is text)


def _clip(text: str, most: int = 280) -> str:
    """One line of a completion (or an answer) as literal text in Markdown: whitespace collapsed, the end kept
    when long (where the answer is), and every character Markdown would read as markup escaped -- ``6*6=36`` is not
    an emphasis, a pipe does not end the cell, ``\\frac`` keeps its backslash.

    >>> _clip("6*6=36 | 2*3")
    '6\\\\*6=36 \\\\| 2\\\\*3'
    """
    flat = " ".join(str(text).split())
    flat = flat if len(flat) <= most else "…" + flat[-most:]
    return _MARKDOWN.sub(r"\\\1", flat)


def review_section(
    candidate_rows: Sequence[Mapping[str, Any]],
    champion_rows: Sequence[Mapping[str, Any]] | None,
    champion_label: str,
    plot: str | None = None,
) -> str:
    """The description's reading section: the accuracy-vs-length plot itself (``plot``: its URL), the problems
    the candidate newly fails and newly solves against the champion with both answers, and the candidate's
    shortest and longest correct completions.

    >>> rows = [{"benchmark": "b", "problem_id": "p", "gold": "4", "answer": "4", "correct": True,
    ...          "tokens": 9, "completion": "2+2 = 4, so 4", "in_context": True}]
    >>> print(review_section(rows, None, "v1"))
    **Shortest correct answer** (b p, 9 tokens): 2+2 = 4, so 4
    <BLANKLINE>
    **Longest correct answer** (b p, 9 tokens): 2+2 = 4, so 4
    """
    parts = []
    if plot:
        parts += [f"![accuracy against answer length]({plot})"]
    if champion_rows is not None:
        failed, solved = changed_problems(problem_results(candidate_rows), problem_results(champion_rows))
        for title, pairs in (("Newly failed", failed), ("Newly solved", solved)):
            if not pairs:
                parts += [f"**{title}** against {champion_label}: none."]
                continue
            lines = [
                f"**{title}** against {champion_label}:",
                "",
                _row(["problem", "gold", "this version", champion_label]),
                "|---|---|---|---|",
            ]
            for mine, theirs in pairs:
                lines.append(
                    _row(
                        [
                            f"{mine.benchmark} {_clip(mine.problem_id, 40)}"
                            + (f": {_clip(mine.problem, 80)}" if mine.problem else ""),
                            _clip(mine.gold, 40),
                            f"{_clip(mine.answer or '(no answer)', 40)} ({mine.n_correct}/{mine.samples})",
                            f"{_clip(theirs.answer or '(no answer)', 40)} ({theirs.n_correct}/{theirs.samples})",
                        ]
                    )
                )
            parts.append("\n".join(lines))
        parts.append(
            "*A problem is solved when at least half of its samples are correct; each answer shown is its most "
            "common one, with correct/samples: a most common answer equal to the gold can still be a failure when "
            "fewer than half the samples give it.*"
        )
    correct = sorted(
        (r for r in candidate_rows if r.get("correct") and r.get("in_context", True)),
        key=lambda r: r["tokens"],
    )
    if correct:
        for title, row in (("Shortest", correct[0]), ("Longest", correct[-1])):
            parts.append(
                f"**{title} correct answer** ({row['benchmark']} {row['problem_id']}, {row['tokens']} tokens): "
                f"{_clip(row['completion'])}"
            )
    return "\n\n".join(parts)


def description(
    *,
    candidate: Scores,
    champion: Scores | None,
    champion_version: str | None,
    decision: GateDecision,
    protocol_text: str,
    lineage: Mapping[str, str],
    runs: Mapping[str, str] | None = None,
    plots: Mapping[str, str] | None = None,
    changed: Sequence[ParamChange] | None = None,
    review: str | None = None,
) -> str:
    """The model version's description: what was trained, the table against the champion, the verdict, the
    params that differ from the champion's (``changed``; None: not known), the reading section (``review``:
    :func:`review_section`), links to the runs that hold the evidence (``runs``: label → link) and to the plots
    (``plots``). Mentions are escaped (:func:`escape_mentions`); links are written as given (see
    :func:`ui_run_link`)."""
    label = f"v{champion_version}" if champion_version else "champion"
    parts = [
        f"**Evaluation** ({protocol_text}) against the current @champion"
        f"{f' (version {champion_version})' if champion_version else ' (none yet)'}:",
        "",
        comparison_table(candidate, champion, label),
        "",
        f"**Gate**: {decision.summary()}.",
        "",
        "**Lineage**: " + ", ".join(f"{k} `{v}`" for k, v in lineage.items()),
    ]
    if champion_version and changed is not None:
        parts += ["", params_changed_text(changed, label)]
    if review:
        parts += ["", review]
    if runs:
        parts += ["", "**Runs**: " + ", ".join(f"[{k}]({v})" for k, v in runs.items())]
    if plots:
        parts += ["", "**Plots**: " + ", ".join(f"[{k}]({v})" for k, v in plots.items())]
    return escape_mentions("\n".join(parts))


@dataclass(frozen=True)
class ParamChange:
    """One params key whose value differs between a candidate's runs and the champion's (``None``: absent)."""

    key: str
    champion: str | None
    candidate: str | None


def params_diff(candidate: Mapping[str, str], champion: Mapping[str, str]) -> list[ParamChange]:
    """The keys whose logged values differ (MLflow logs params as strings), sorted by key.

    >>> [(c.key, c.champion, c.candidate) for c in params_diff({"train.max_steps": "20", "a": "1"},
    ...                                                          {"train.max_steps": "100", "a": "1", "b": "x"})]
    [('b', 'x', None), ('train.max_steps', '100', '20')]
    """
    keys = sorted(set(candidate) | set(champion))
    return [
        ParamChange(k, champion.get(k), candidate.get(k)) for k in keys if candidate.get(k) != champion.get(k)
    ]


def params_changed_text(changed: Sequence[ParamChange], label: str, most: int = 20) -> str:
    """The description's "params changed" paragraph: at most ``most`` keys as ``key: old → new``."""
    if not changed:
        return f"**Params vs @champion ({label})**: the same training and evaluation params."
    shown = ", ".join(
        f"`{c.key}` {c.champion if c.champion is not None else '(unset)'} → "
        f"{c.candidate if c.candidate is not None else '(unset)'}"
        for c in changed[:most]
    )
    more = f", and {len(changed) - most} more" if len(changed) > most else ""
    return f"**Params changed vs @champion ({label})**: {shown}{more}."
