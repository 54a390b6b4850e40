"""Loaders: the raw rows of each ``curate.sources`` entry and of the evaluation benchmarks.

A source's ``path`` is one of

* a built-in name for a shipped file under ``paths.raw`` (:data:`BUILTIN`; see ``data/raw/README.md``);
* a local ``.jsonl`` (read line by line: a bad line is handed on as :class:`lead.core.curation.Malformed`, so it
  is quarantined rather than fatal), ``.json`` (one array of objects; JSON Lines in a ``.json`` file are
  accepted too) or ``.parquet`` file, or a local dataset folder (``datasets.load_dataset``);
* a Hugging Face dataset id (``datasets.load_dataset(path, config, split=split)``; lead runs offline by
  default, so this needs ``HF_DATASETS_OFFLINE=0`` or a cached copy).

The ``proxy`` source is generated, not read: :func:`proxy_problems` draws it (curate, warmstart and the
benchmarks draw the same problems). Rows are returned
as ``(origin, row)`` pairs for :func:`lead.core.curation.records_from_rows`. A file that cannot be read at all —
missing, not UTF-8, not JSON, no line of it parseable, not Parquet — raises :class:`SourceError` naming it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lead.config import CurateParams
from lead.core.curation import Malformed, Record, normalize_answer, records_from_rows
from lead.core.proxy import ProxyProblem, generate_problems

BUILTIN: dict[str, str] = {
    "math_train": "math/train.jsonl",
    "grpo_lead_stage23": "grpo_lead/stage_2_3_data.json",
    "grpo_lead_combined27": "grpo_lead/combined_27.json",
    "deepscaler_aime": "deepscaler/train/aime.json",
    "deepscaler_math": "deepscaler/train/math.json",
}
# Evaluation benchmark name (``evaluate.benchmarks``) -> shipped file under ``paths.raw``.
BENCHMARK_FILES: dict[str, str] = {
    "aime24": "aime2024/test.jsonl",
    "aime25": "aime2025/test.jsonl",
    "amc23": "amc2023/test.jsonl",
    "math500": "math500/test.jsonl",
}
REAL_BENCHMARKS = tuple(BENCHMARK_FILES)
FILE_SUFFIXES = (".jsonl", ".json", ".parquet")

Rows = list[tuple[str, Any]]


class SourceError(ValueError):
    """A source that cannot be read at all (the message names the source and the file)."""


def resolve(path: str, raw: Path) -> Path | str:
    """The file a source reads (built-in names resolved under ``raw``), or the hub id as given."""
    if path in BUILTIN:
        return raw / BUILTIN[path]
    local = Path(path)
    if local.suffix in FILE_SUFFIXES or local.is_dir():
        return local
    return path


def _no_rows(path: Path) -> SourceError:
    return SourceError(f"{path}: holds no problems (an empty file?); fix it or remove it from curate.sources")


def read_jsonl(path: Path) -> Rows:
    """Rows of a JSON Lines file; blank lines are skipped, a line that does not parse becomes Malformed; a
    UTF-8 byte order mark at the start is not part of the first row."""
    rows: Rows = []
    for number, raw_line in enumerate(path.read_bytes().splitlines(), start=1):
        if not raw_line.strip():
            continue
        origin = f"{path.name}:{number}"
        try:
            text = raw_line.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            rows.append((origin, Malformed(raw_line.decode("utf-8", "replace"), f"not UTF-8: {exc.reason}")))
            continue
        try:
            rows.append((origin, json.loads(text)))
        except json.JSONDecodeError as exc:
            rows.append((origin, Malformed(text, f"invalid JSON: {exc.msg} at column {exc.colno}")))
    if not rows:
        raise _no_rows(path)
    if all(isinstance(r, Malformed) for _, r in rows):
        raise SourceError(f"{path}: no line is valid JSON (is it a JSON Lines file?)")
    return rows


def read_json(path: Path) -> Rows:
    """Rows of a file holding one JSON array (falls back to JSON Lines, which ``datasets`` also accepts)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise SourceError(f"{path}: not UTF-8 text ({exc.reason})") from None
    except json.JSONDecodeError:
        return read_jsonl(path)
    if not isinstance(data, list):
        raise SourceError(f"{path}: expected a JSON array of problems, got a JSON {type(data).__name__}")
    if not data:
        raise _no_rows(path)
    return [(f"{path.name}#{i}", row) for i, row in enumerate(data)]


def read_parquet(path: Path) -> Rows:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for a damaged or non-Parquet file
        raise SourceError(f"{path}: not a readable Parquet file ({exc})") from None
    if not table.num_rows:
        raise _no_rows(path)
    return [(f"{path.name}#{i}", row) for i, row in enumerate(table.to_pylist())]


def read_dataset(name: str, config: str | None, split: str) -> Rows:
    """Rows of a hub dataset or a local dataset folder (``datasets.load_dataset``)."""
    from datasets import load_dataset

    try:
        data = load_dataset(name, config, split=split)
    except Exception as exc:
        hint = "" if Path(name).exists() else " (hub downloads need HF_DATASETS_OFFLINE=0 and network)"
        raise SourceError(f"{name}: cannot load dataset{hint}: {type(exc).__name__}: {exc}") from None
    return [(f"{name}[{split}]#{i}", row) for i, row in enumerate(data)]


def missing_sources(sources: list[Any], raw: Path) -> list[str]:
    """One line per ``curate.sources`` entry whose local file does not exist (checked with the params, before
    any stage runs; hub ids are left to the stage, which needs the network or a cache to know)."""
    lines = []
    for i, source in enumerate(sources):
        if source.path == "proxy":
            continue
        target = resolve(source.path, raw)
        if isinstance(target, Path) and not target.exists():
            builtin = f" (built-in source {source.path!r})" if source.path in BUILTIN else ""
            lines.append(f"curate.sources[{i}].path = {source.path!r}: {target}{builtin}: no such file")
    return lines


def read_rows(path: str, raw: Path, *, split: str = "train", config: str | None = None) -> tuple[str, Rows]:
    """``(location, rows)`` of a non-proxy source (see the module docstring for what ``path`` may be)."""
    target = resolve(path, raw)
    if isinstance(target, str) or target.is_dir():
        return str(target), read_dataset(str(target), config, split)
    if not target.is_file():
        builtin = f" (built-in source {path!r})" if path in BUILTIN else ""
        raise SourceError(f"{target}{builtin}: no such file")
    reader = {".jsonl": read_jsonl, ".json": read_json, ".parquet": read_parquet}[target.suffix]
    return str(target), reader(target)


def load_benchmark(name: str, raw: Path) -> list[Record]:
    """The problems of a shipped evaluation benchmark (``aime24``, ``aime25``, ``amc23``, ``math500``)."""
    if name not in BENCHMARK_FILES:
        raise ValueError(f"unknown benchmark {name!r}; shipped: {', '.join(BENCHMARK_FILES)}")
    path = raw / BENCHMARK_FILES[name]
    if not path.is_file():
        raise SourceError(f"{path} (benchmark {name}): no such file")
    records, rejected = records_from_rows(name, read_jsonl(path))
    if rejected:
        raise SourceError(f"{path} (benchmark {name}): {len(rejected)} bad rows, first: {rejected[0].detail}")
    for rec in records:  # the same answer form as the training pool (AIME 2024's "025" -> "25")
        rec.answer = normalize_answer(rec.answer)[0]
    return records


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


def proxy_problems(curate: CurateParams, split: str) -> list[ProxyProblem]:
    """The proxy problems of ``split`` as ``curate.proxy`` and ``curate.seed`` draw them (curate and warmstart)."""
    cfg = curate.proxy
    levels = cfg.max_ops - cfg.min_ops + 1
    n = cfg.train_problems if split == "train" else cfg.test_per_level * levels
    return generate_problems(
        n,
        split=split,
        seed=curate.seed,
        min_ops=cfg.min_ops,
        max_ops=cfg.max_ops,
        max_value=cfg.max_value,
    )
