"""The curation report as markdown: the ``report`` of :func:`lead.core.curation.curate` (steps, sources,
contamination per benchmark, quarantine reasons) rendered for people (``<paths.reports>/curate/report.md``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lead.core.curation import REASONS


def render_markdown(report: Mapping[str, Any]) -> str:
    """The report as markdown: steps, sources, contamination per benchmark, quarantine reasons."""
    lines = [
        "# Curation report",
        "",
        f"{report['train']} training problems, {report['test']} test problems.",
        "",
        "## Steps",
        "",
        "| step | in | out | removed | method |",
        "|---|---:|---:|---|---|",
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
        lines.append(f"| {s['step']} | {s['in']} | {s['out']} | {removed} | {extra} |")
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
