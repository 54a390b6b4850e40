"""Stage ``curate``: the problems the pipeline calibrates, trains and evaluates on.

Writes ``<paths.curated>/train.parquet`` (the RL training pool) and ``<paths.curated>/test.parquet`` (the
proxy test split, evaluated as the ``proxy`` benchmark), in one schema: ``id, problem, answer, source, split,
level``, plus ``curation.json`` with the counts. The embedded default draws the proxy task
(:mod:`lead.proxy`): ``curate.proxy.train_problems`` training problems and ``test_per_level`` test
problems per level, disjoint by construction.
"""

from __future__ import annotations

from typing import Any

from lead.config import Params
from lead.io import atomic_path, write_json
from lead.proxy import ProxyProblem, generate_problems
from lead.stages._common import stage_main


def proxy_records(problems: list[ProxyProblem]) -> list[dict[str, Any]]:
    """Proxy problems in the curated schema."""
    return [
        {
            "id": p.uid,
            "problem": p.question,
            "answer": str(p.answer),
            "source": "proxy",
            "split": p.split,
            "level": p.level,
        }
        for p in problems
    ]


def proxy_problems(params: Params, split: str) -> list[ProxyProblem]:
    """The proxy problems of ``split`` exactly as ``curate`` draws them (other stages call this too)."""
    cfg = params.curate.proxy
    levels = cfg.max_ops - cfg.min_ops + 1
    n = cfg.train_problems if split == "train" else cfg.test_per_level * levels
    return generate_problems(
        n,
        split=split,
        seed=params.curate.seed,
        min_ops=cfg.min_ops,
        max_ops=cfg.max_ops,
        max_value=cfg.max_value,
    )


def run(params: Params) -> dict[str, Any]:
    """Write the curated training pool and the proxy test split."""
    from datasets import Dataset

    counts: dict[str, Any] = {}
    for split in ("train", "test"):
        records = proxy_records(proxy_problems(params, split))
        with atomic_path(params.paths.curated / f"{split}.parquet") as tmp:
            Dataset.from_list(records).to_parquet(str(tmp))
        counts[split] = len(records)
    summary = {"sources": {"proxy": counts}, "train": counts["train"], "test": counts["test"]}
    write_json(params.paths.curated / "curation.json", summary)
    return summary


def main(argv: list[str] | None = None) -> None:
    stage_main("curate", run, argv)


if __name__ == "__main__":
    main()
