"""Evaluation benchmarks by name: the proxy test split and the shipped AIME / AMC / MATH-500 test sets.

``proxy`` is ``<paths.curated>/test.parquet`` (written by ``curate``); the others are read by
:func:`lead.io.sources.load_benchmark` from ``<paths.raw>`` -- the same loader curation decontaminates against,
so both see the same problems. It smooths the files' quirks (``data/raw/README.md``): gold answers become
text (AIME 2024's ``'025'`` stays as written, the grader compares numbers; AIME 2025's ints become ``'70'``;
AMC 2023's floats ``27.0`` become ``'27'``) and ids become ``<benchmark>-<id>``.

Every benchmark comes back as :class:`BenchmarkProblem`; its difficulty band is ``level_<k>`` where the set
has a per-problem level (proxy: number of operations; MATH-500: 1-5), else the single band ``all``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lead.config import BENCHMARKS, PathParams
from lead.core.metrics import ALL


@dataclass(frozen=True)
class BenchmarkProblem:
    """One evaluation problem: id (unique within its benchmark), statement, gold answer, difficulty band."""

    id: str
    problem: str
    answer: str
    band: str = ALL


def band_of(level: int | None) -> str:
    """The difficulty band of a problem with this level (``None``: the benchmark has no levels).

    >>> band_of(3), band_of(None)
    ('level_3', 'all')
    """
    return ALL if level is None else f"level_{level}"


def _proxy(paths: PathParams) -> list[BenchmarkProblem]:
    import pyarrow.parquet as pq

    path = Path(paths.curated) / "test.parquet"
    if not path.exists():
        raise FileNotFoundError(f"benchmark 'proxy': {path} does not exist (run `lead curate` first)")
    return [
        BenchmarkProblem(
            id=str(r["id"]), problem=r["problem"], answer=str(r["answer"]), band=band_of(r["level"])
        )
        for r in pq.read_table(path, columns=["id", "problem", "answer", "level"]).to_pylist()
    ]


def _raw(name: str, paths: PathParams) -> list[BenchmarkProblem]:
    from lead.io.sources import load_benchmark as load_shipped

    return [
        BenchmarkProblem(id=r.id, problem=r.problem, answer=r.answer, band=band_of(r.level))
        for r in load_shipped(name, Path(paths.raw))
    ]


def load_benchmark(name: str, paths: PathParams, max_problems: int | None = None) -> list[BenchmarkProblem]:
    """The problems of benchmark ``name`` under ``paths`` (params' section: the proxy's test split in
    ``paths.curated``, the shipped ones in ``paths.raw``); with ``max_problems``, only the first that many in file
    order."""
    if name not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {name!r}; known benchmarks: {', '.join(BENCHMARKS)}")
    problems = _proxy(paths) if name == "proxy" else _raw(name, paths)
    ids = [p.id for p in problems]
    if len(set(ids)) != len(ids):
        raise ValueError(f"benchmark {name!r}: problem ids are not unique")
    return problems if max_problems is None else problems[:max_problems]
