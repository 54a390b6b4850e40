"""Completions made elsewhere, scored by the evaluation protocol (lead/evaluation/replay.py, `lead evaluate
--completions`)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lead.evaluation import replay
from lead.evaluation.replay import CompletionsError, read_completions
from tests.conftest import ROOT

PUBLIC = ROOT / "data" / "completions" / "public.jsonl"  # source and licence: data/completions/SOURCE.md


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_file_is_scored_as_the_stage_scores_and_set_beside_its_reference_verdicts(tmp_path):
    rows = [
        # one problem per row with a list of completions (and verdicts), one with a row per completion
        {
            "benchmark": "toy",
            "problem_id": "p1",
            "gold": "4",
            "completions": [r"so \boxed{4}", r"so \boxed{5}"],
            "reference_correct": [True, True],  # the reference accepts a wrong 5
            "reference_answer": ["4", "5"],
        },
        {
            "benchmark": "toy",
            "problem": "2+1?",
            "gold": "3",
            "completion": r"\boxed{3}",
            "reference_correct": True,
        },
        {
            "benchmark": "toy",
            "problem": "2+1?",
            "gold": "3",
            "completion": "no idea",
            "reference_correct": False,
        },
    ]
    result = replay.replay(read_completions(_write(tmp_path / "c.jsonl", rows)))
    assert result.metrics["toy.problems"] == 2 and result.metrics["toy.pass_at_1"] == 0.5
    assert result.metrics["toy.cons_at_2"] == 1.0 and result.length_unit == "words"  # ties: the first answer
    assert result.agreement == {"compared": 4, "agree": 3, "share": 0.75, "only_ours": 0, "only_reference": 1}
    (wrong,) = replay.disagreements(result.records)
    assert (wrong["answer"], wrong["correct"], wrong["reference_answer"]) == ("5", False, "5")
    table = replay.disagreement_table(result.records)
    assert "| toy | p1 | 4 | 5 | wrong | 5 | correct |" in table

    replay.write_replay(tmp_path / "out", tmp_path / "c.jsonl", result)
    written = {p.name for p in (tmp_path / "out").iterdir()}
    assert written == {
        "samples.parquet",
        "metrics.json",
        "agreement.json",
        "disagreements.md",
        "accuracy_vs_length.png",
        "budget_curve.png",
    }
    records = pq.read_table(tmp_path / "out" / "samples.parquet").to_pylist()
    assert [r["correct"] for r in records] == [True, False, True, False]


def test_parquet_with_token_counts_and_unfinished_completions(tmp_path):
    rows = [
        {"problem_id": "a", "gold": "7", "completion": r"\boxed{7}", "tokens": 10, "finished": True},
        {"problem_id": "b", "gold": "8", "completion": r"\boxed{8", "tokens": 30, "finished": False},
    ]
    path = tmp_path / "c.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    result = replay.replay(read_completions(path))
    assert result.length_unit == "tokens" and result.metrics["completions.len_avg"] == 20.0
    assert result.metrics["completions.truncation_rate"] == 0.5 and result.agreement == {}


@pytest.mark.parametrize(
    ("rows", "said"),
    [
        ([{"gold": "1", "completion": "1"}], "line 1: needs problem_id or problem"),
        ([{"problem_id": "a", "completion": "1"}], "line 1: needs gold"),
        ([{"problem_id": "a", "gold": "1"}], "line 1: needs completion"),
        (
            [{"problem_id": "a", "gold": "1", "completion": "1", "reference_correct": "yes"}],
            "true, false or absent",
        ),
        (
            [{"problem_id": "a", "gold": "1", "completions": ["1", "2"], "reference_correct": [True]}],
            "2 completions but 1 reference verdicts",
        ),
        (
            [
                {"problem_id": "a", "gold": "1", "completions": ["1", "2"]},
                {"problem_id": "b", "gold": "1", "completion": "1"},
            ],
            "every problem needs the same number of completions",
        ),
    ],
)
def test_a_file_that_lacks_what_it_needs_is_refused_in_one_line_naming_the_row(tmp_path, rows, said):
    with pytest.raises(CompletionsError, match=said):
        replay.replay(read_completions(_write(tmp_path / "c.jsonl", rows)))


def test_a_broken_line_is_named(tmp_path):
    (tmp_path / "c.jsonl").write_text('{"problem_id": "a", "gold": "1", "completion": "1"}\n{oops\n')
    with pytest.raises(CompletionsError, match=r"c\.jsonl: line 2: not JSON"):
        read_completions(tmp_path / "c.jsonl")


def test_the_shipped_public_evaluation_agrees_with_ours_but_for_the_references_own_error():
    """830 completions of two public evaluations (DeepScaleR-1.5B on AIME 2024, a Qwen2.5-Math model on MATH):
    one disagreement, where the other toolkit refused ``10000`` for the gold ``10{,}000``."""
    result = replay.replay(read_completions(PUBLIC))
    assert result.agreement["compared"] == 830 and result.agreement["agree"] == 829
    (only,) = replay.disagreements(result.records)
    assert (only["gold"], only["answer"], only["correct"], only["reference_correct"]) == (
        "10{,}000",
        "10000",
        True,
        False,
    )
