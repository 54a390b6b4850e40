"""The evaluation's per-completion records: the parquet file and the reviewer's MLflow table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lead.dag import output_name
from lead.io.files import atomic_path

RECORDS = output_name("evaluate", "records")


SAMPLES_TABLE = "evaluate/samples.json"  # the records as an MLflow table artifact of the evaluate run


# What decides a verdict first (the UI shows the first few columns without scrolling), then the completion.
TABLE_COLUMNS = (
    "problem_id",
    "answer",
    "correct",
    "gold",
    "completion",
    "tokens",
    "finished",
    "benchmark",
    "seed",
    "sample",
)


def review_table(records: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """The sampled records as MLflow table columns (:data:`TABLE_COLUMNS`)."""
    rows = [r for r in records if r["in_context"]]
    return {c: [r[c] for r in rows] for c in TABLE_COLUMNS}


def write_records(path: Path, records: list[dict[str, Any]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(
        [
            ("benchmark", pa.string()),
            ("problem_id", pa.string()),
            ("problem", pa.string()),
            ("band", pa.string()),
            ("gold", pa.string()),
            ("seed", pa.int64()),
            ("sample", pa.int32()),
            ("completion", pa.string()),
            ("answer", pa.string()),
            ("correct", pa.bool_()),
            ("tokens", pa.int32()),
            ("finished", pa.bool_()),
            ("in_context", pa.bool_()),
        ]
    )
    with atomic_path(path) as tmp:
        pq.write_table(pa.Table.from_pylist(records, schema=schema), tmp)
