"""Curation core (lead.core.curation) and loaders (lead.io.sources): tables of hand-made rows, small files written to
tmp_path, and the real shipped files where the claim is about them (the stage-2/3 set's MATH-500 problems)."""

import json
from pathlib import Path

import pytest

from lead.core import curation
from lead.core.curation import Malformed, Record, Settings, SourceInput
from lead.io.sources import SourceError, load_benchmark, read_rows, resolve
from lead.reports.curation import render_markdown

ROOT = Path(__file__).resolve().parents[2]
RAW = ROOT / "data/raw"


def rec(problem: str, answer: str = "1", *, id: str = "x", source: str = "s", split: str = "train") -> Record:
    return Record(id=id, problem=problem, answer=answer, source=source, split=split)


def rows(*items) -> list[tuple[str, object]]:
    return [(f"f:{i}", item) for i, item in enumerate(items)]


# ------------------------------------------------------------------------------------------------
# Rows -> records, and the quarantine reasons
# ------------------------------------------------------------------------------------------------
# (row, the quarantine reason or None when it is kept)
ROW_TABLE = [
    ({"problem": "What is 1+1?", "answer": "2"}, None),
    ({"question": "What is 2+2?", "answer": 4}, None),
    ({"problem": "What is 3+3?", "solution": "So \\boxed{6}."}, None),
    (Malformed('{"problem": "x", ', "invalid JSON"), "malformed_json"),
    (["a", "list"], "not_an_object"),
    ({"answer": "3"}, "missing_problem"),
    ({"problem": "   ", "answer": "3"}, "missing_problem"),
    ({"problem": "What is 4+4?"}, "missing_answer"),
    ({"problem": "What is 5+5?", "answer": ""}, "missing_answer"),
    ({"problem": "What is 6+6?", "answer": None}, "missing_answer"),
    ({"problem": "What is 7+7?", "answer": ["14", "fourteen"]}, "missing_answer"),
    ({"problem": "What is 8+8?", "solution": "sixteen, no box"}, "missing_answer"),
    # A missing value written out as text (pandas' "nan"/"<NA>", Python's "None", JSON's "null") is none.
    ({"problem": "What is 9+9?", "answer": "None"}, "missing_answer"),
    ({"problem": "What is 9+9?", "answer": "nan"}, "missing_answer"),
    ({"problem": "What is 9+9?", "answer": " NULL "}, "missing_answer"),
    ({"problem": "What is 9+9?", "answer": float("nan")}, "missing_answer"),
]


@pytest.mark.parametrize(("row", "reason"), ROW_TABLE)
def test_rows_to_records_or_quarantine(row, reason):
    records, rejected = curation.records_from_rows("src", rows(row))
    assert [r.reason for r in rejected] == ([reason] if reason else [])
    assert len(records) == (0 if reason else 1)
    if reason:
        assert reason in curation.REASONS
        assert rejected[0].origin == "f:0" and rejected[0].source == "src"


def test_record_fields_ids_and_duplicate_ids():
    records, rejected = curation.records_from_rows(
        "math",
        rows(
            {"problem": "P1", "answer": 27.0, "unique_id": "train/a/1.json", "level": "Level 3"},
            {"problem": "P2", "answer": "5", "correctness": "0.4375", "difficulty": "2.5", "split": "test"},
            {
                "problem": "P3",
                "answer": "5",
                "id": "train/a/1.json",
                "level": "Level ?",
                "difficulty": "hard",
            },
            {"problem": "P4", "answer": "5", "id": "math-7"},
        ),
    )
    assert [r.id for r in records] == ["math-train/a/1.json", "math-1", "math-7"]
    first, second, third = records
    assert (first.answer, first.level, first.split) == ("27", 3, "train")
    assert (second.correctness, second.difficulty, second.split) == (0.4375, 2.5, "test")
    assert third.id == "math-7"  # an id already carrying the source prefix is kept (the proxy's ids)
    assert [(r.reason, r.origin) for r in rejected] == [("duplicate_id", "f:2")]


NORMALIZE = [
    ("27", "27", []),
    ("$\\frac{1}{2}$", "\\frac{1}{2}", ["math_delimiters"]),
    ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}", ["boxed"]),
    ("\\[\n\\frac{16}{5}\n\\]", "\\frac{16}{5}", ["math_delimiters"]),
    ("025", "25", ["leading_zeros"]),
    ("0", "0", []),
    ("5.", "5", ["trailing_period"]),
    ("x  +\n 1", "x + 1", ["whitespace"]),
    ("$a$ or $b$", "$a$ or $b$", []),  # not one wrapped answer
    ("\\boxed{a} + \\boxed{b}", "\\boxed{a} + \\boxed{b}", []),  # not one box
    ("0.5", "0.5", []),
]


@pytest.mark.parametrize(("raw", "expected", "rules"), NORMALIZE)
def test_normalize_answer(raw, expected, rules):
    assert curation.normalize_answer(raw) == (expected, rules)


@pytest.mark.parametrize(
    ("gold", "reason"),
    [
        ("5", None),
        ("\\frac{1}{2}", None),
        ("(3, \\frac{\\pi}{2})", None),
        ("2019!", "huge factorial"),
        ("$ $", ""),
        # Unparseable golds a careless source holds: no reward could ever be earned on them.
        ("\\frac{1}{", "cannot parse"),
        ("}}}{{{\\\\", ""),
        (r"\text{Evelyn}", None),
        ("x \\in [-2,7]", None),
    ],
)
def test_gradable_gold_is_the_graders_own_parse(gold, reason):
    from lead.grading import gold_problem

    got = gold_problem(gold)
    assert (got is None) == (reason is None), got
    if reason:
        assert reason in got


# ------------------------------------------------------------------------------------------------
# Loaders
# ------------------------------------------------------------------------------------------------
def test_jsonl_loader_keeps_bad_lines_for_the_quarantine(tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_bytes(
        b'{"problem": "What is 1+1?", "answer": "2"}\n'
        b"\n"  # blank lines are not rows
        b'{"problem": "broken", \n'
        b'{"problem": "caf\xe9", "answer": "1"}\n'  # Latin-1 byte: not UTF-8
        b'{"question": "What is 3+3?", "solution": "\\\\boxed{6}"}\n'
    )
    location, got = read_rows(str(path), RAW)
    assert location == str(path)
    assert [origin for origin, _ in got] == ["mine.jsonl:1", "mine.jsonl:3", "mine.jsonl:4", "mine.jsonl:5"]
    records, rejected = curation.records_from_rows("mine", got)
    assert [r.answer for r in records] == ["2", "6"]
    assert [(r.reason, r.origin) for r in rejected] == [
        ("malformed_json", "mine.jsonl:3"),
        ("malformed_json", "mine.jsonl:4"),
    ]
    assert "not UTF-8" in rejected[1].detail


def test_a_byte_order_mark_is_not_part_of_the_first_row(tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(
        b'\xef\xbb\xbf{"problem": "What is 1+1?", "answer": "2"}\n{"problem": "P", "answer": "3"}\n'
    )
    records, rejected = curation.records_from_rows("bom", read_rows(str(path), RAW)[1])
    assert [r.answer for r in records] == ["2", "3"] and not rejected
    array = tmp_path / "bom.json"
    array.write_bytes(b'\xef\xbb\xbf[{"problem": "P", "answer": "1"}]')
    assert len(read_rows(str(array), RAW)[1]) == 1


def test_json_parquet_and_folder_loaders(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    array = tmp_path / "a.json"
    array.write_text(json.dumps([{"problem": "P", "answer": "1"}, {"problem": "Q", "answer": "2"}]))
    assert [o for o, _ in read_rows(str(array), RAW)[1]] == ["a.json#0", "a.json#1"]
    lines = tmp_path / "b.json"  # JSON Lines in a .json file, as `datasets` accepts
    lines.write_text('{"problem": "P", "answer": "1"}\n{"problem": "Q", "answer": "2"}\n')
    assert len(read_rows(str(lines), RAW)[1]) == 2
    table = tmp_path / "c.parquet"
    pq.write_table(pa.table({"problem": ["P"], "answer": ["1"], "level": ["Level 2"]}), table)
    records, _ = curation.records_from_rows("c", read_rows(str(table), RAW)[1])
    assert (records[0].problem, records[0].level) == ("P", 2)
    folder = tmp_path / "dataset"
    folder.mkdir()
    (folder / "train.jsonl").write_text('{"question": "P", "answer": "1"}\n')
    location, got = read_rows(str(folder), RAW)
    assert location == str(folder) and got[0][1] == {"question": "P", "answer": "1"}


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("garbage.jsonl", b"not json\nnor this\n", "no line is valid JSON"),
        ("dict.json", b'{"problem": "P"}', "expected a JSON array"),
        ("latin.json", b'[{"problem": "caf\xe9"}]', "not UTF-8"),
        ("fake.parquet", b"PAR1 but not really", "not a readable Parquet file"),
        ("empty.jsonl", b"", "holds no problems"),  # an empty source is an error, not an empty pool
        ("blank.jsonl", b"\n\n", "holds no problems"),
        ("empty.json", b"[]", "holds no problems"),
    ],
)
def test_wholly_unreadable_files_are_errors_naming_the_file(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(SourceError, match=message) as info:
        read_rows(str(path), RAW)
    assert name in str(info.value)


def test_params_check_names_a_missing_local_source(tmp_path):
    from lead.config import SourceSpec
    from lead.io.sources import missing_sources

    sources = [
        SourceSpec(name="proxy", path="proxy"),
        SourceSpec(name="mine", path=str(tmp_path / "mine.jsonl")),
        SourceSpec(name="hub", path="some-org/some-set"),  # the stage's to judge (network, cache)
        SourceSpec(name="math", path="math_train"),
    ]
    assert missing_sources(sources, RAW) == [
        f"curate.sources[1].path = '{tmp_path / 'mine.jsonl'}': {tmp_path / 'mine.jsonl'}: no such file"
    ]


def test_missing_files_builtins_and_hub_ids(tmp_path):
    with pytest.raises(SourceError, match=r"missing\.jsonl: no such file"):
        read_rows(str(tmp_path / "missing.jsonl"), RAW)
    assert resolve("math_train", RAW) == RAW / "math/train.jsonl"
    assert resolve("some-org/some-set", RAW) == "some-org/some-set"
    with pytest.raises(SourceError, match="HF_DATASETS_OFFLINE=0"):  # lead runs offline by default
        read_rows("no-such-org/no-such-dataset", RAW)


def test_benchmark_loader_normalises_answers():
    aime = load_benchmark("aime24", RAW)
    assert len(aime) == 30 and {r.source for r in aime} == {"aime24"}
    assert "25" in {r.answer for r in aime} and "025" not in {r.answer for r in aime}
    with pytest.raises(ValueError, match="unknown benchmark"):
        load_benchmark("gsm8k", RAW)


# ------------------------------------------------------------------------------------------------
# Duplicates
# ------------------------------------------------------------------------------------------------
LONG = (
    "A bag holds 5 red marbles, 7 blue marbles and 9 green marbles. Two marbles are drawn at random without "
    "replacement. What is the probability that both marbles have the same colour? Express it as a fraction."
)


def test_words_normalise_formatting_but_keep_numbers_and_operators():
    assert (
        curation.words("Find $\\dfrac{1}{2}$.")
        == curation.words("find \\(\\tfrac{1}{2}\\)")
        == ["find", "frac", "1", "2"]
    )
    assert curation.words("$z^4 - z^2 + 1$") != curation.words("$z^4 + z^2 + 1$")
    assert curation.words("$88 \\div (4 \\div 2)$", brackets=True) != curation.words(
        "$88 \\div 4 \\div 2$", brackets=True
    )


def test_exact_and_near_duplicates_through_curate():
    near = LONG.replace("as a fraction", "as a common fraction")  # 5-gram Jaccard 0.91
    similar_other_answer = LONG.replace("a fraction", "a decimal")  # 0.94 with the first copy, other answer
    src = SourceInput(
        "s",
        rows(
            {"problem": LONG, "answer": "\\frac{83}{210}"},
            {"problem": LONG.upper().replace(" ", "  "), "answer": "83/210"},  # same text, same answer
            {"problem": f"${LONG}$", "answer": "1/2"},  # same text, another answer
            {"problem": near, "answer": "\\frac{83}{210}"},
            {"problem": similar_other_answer, "answer": "0.395"},
        ),
    )
    result = curation.curate([src], {}, Settings())
    assert [(r.reason, r.origin) for r in result.rejected] == [
        ("duplicate", "f:1"),
        ("duplicate_conflict", "f:2"),
        ("near_duplicate", "f:3"),
    ]
    assert [r.origin for r in result.train] == ["f:0", "f:4"]
    near_step = next(s for s in result.report["steps"] if s["step"] == "near_duplicates")
    assert near_step["pairs_kept_different_answers"] >= 1


def test_near_duplicates_need_the_threshold():
    a = rec(LONG)
    b = rec(LONG.replace("without replacement", "with replacement"))
    sim = curation.jaccard(
        set(curation.similarity._shingles(curation.words(a.problem)).tolist()),
        set(curation.similarity._shingles(curation.words(b.problem)).tolist()),
    )
    assert 0.5 < sim < 0.9
    kept, dropped, _ = curation.near_duplicates([a, b], threshold=0.9)
    assert kept == [0, 1] and not dropped
    kept, dropped, _ = curation.near_duplicates([a, b], threshold=sim)
    assert kept == [0] and dropped == {1: (0, pytest.approx(sim))}


def test_a_training_copy_of_a_test_problem_is_the_one_removed():
    src = SourceInput(
        "s", rows({"problem": LONG, "answer": "1"}, {"problem": LONG, "answer": "1", "split": "test"})
    )
    result = curation.curate([src], {}, Settings())
    assert [r.split for r in result.test] == ["test"] and result.train == []
    assert [(r.reason, r.origin) for r in result.rejected] == [("duplicate", "f:0")]


# ------------------------------------------------------------------------------------------------
# Decontamination
# ------------------------------------------------------------------------------------------------
BENCH = {
    "bench": [
        rec(
            "Let $a,$ $b,$ $c$ be positive real numbers such that $a + b + c = 1.$ Find the minimum value of "
            "\\[\\frac{1}{a} + \\frac{4}{b} + \\frac{9}{c}.\\]",
            "36",
            id="bench-1",
            source="bench",
        ),
        rec("What is the sum of all of the multiples of 7 between 100 and 200?", "2107", id="bench-2"),
    ]
}
DECONTAM = [
    # (training problem, answer, contaminated?, why)
    (
        "Given positive reals a, b and c that sum to one, what is the least possible value of 1/a + 4/b + 9/c?",
        "36",
        False,
        "a paraphrase shares no 8-gram (n-gram matching does not catch paraphrases)",
    ),
    (
        "Let \\(a\\), \\(b\\), \\(c\\) be positive real numbers such that \\(a+b+c=1\\). Find the minimum value "
        "of $\\dfrac{1}{a} + \\dfrac{4}{b} + \\dfrac{9}{c}$.",
        "36",
        True,
        "other delimiters and dfrac",
    ),
    (
        "Let $a, b, c$ be positive real numbers such that $a+b+c=1$. Find the minimum value of "
        "$\\frac{1}{a}+\\frac{4}{b}+\\frac{9}{c}$.",
        "36",
        True,
        "reformatted copy",
    ),
    (
        "Let $a, b, c$ be positive real numbers such that $a+b+c=1$. Find the minimum value of "
        "$\\frac{1}{a}+\\frac{4}{b}+\\frac{16}{c}$.",
        "49",
        True,
        "template sibling above 80% coverage, other answer",
    ),
    (
        "Let $a, b, c$ be positive real numbers such that $a+b+c=1$. Find the maximum value of $abc$.",
        "\\frac{1}{27}",
        False,
        "shares the set-up only (about 55% coverage), other answer",
    ),
    (
        "What is the sum of all of the distinct possible integers that could be under the ink stain?",
        "85",
        False,
        "boilerplate overlap with a short benchmark problem",
    ),
]


@pytest.mark.parametrize(("problem", "answer", "hit", "why"), DECONTAM, ids=[d[3] for d in DECONTAM])
def test_decontamination_rule(problem, answer, hit, why):
    kept, hits, _ = curation.decontaminate(
        [rec(problem, answer)], BENCH, n=8, min_coverage=0.5, any_answer_coverage=0.8
    )
    assert bool(hits) is hit, why
    assert kept == ([] if hit else [0])


def test_coverage_is_the_share_of_benchmark_words_in_shared_ngrams():
    index = curation.ContaminationIndex(BENCH, 8)
    setup_only = next(d[0] for d in DECONTAM if d[3].startswith("shares the set-up"))
    (k, cov), *_ = index.matches(setup_only, 0.1)
    assert index.problems[k][1].id == "bench-1"
    toks = curation.words(BENCH["bench"][0].problem)
    shared = curation.words("Let a b c be positive real numbers such that a + b + c = 1 find the")
    assert toks[: len(shared)] == shared and cov == pytest.approx(len(shared) / len(toks))


@pytest.fixture(scope="module")
def stage23() -> list[Record]:
    records, rejected = curation.records_from_rows(
        "grpo_lead_stage23", read_rows("grpo_lead_stage23", RAW)[1]
    )
    assert len(records) == 3453 and not rejected
    return records


def test_real_stage23_math500_hits_are_found(stage23):
    # data/raw/grpo_lead/SOURCE.md: two stage-2/3 problems are MATH-500 test problems verbatim.
    math500 = load_benchmark("math500", RAW)
    _, hits, _ = curation.decontaminate(stage23, {"math500": math500}, 8, 0.5, 0.8)
    found = {h.benchmark_id: (stage23[h.record].answer, h.coverage, h.same_answer) for h in hits}
    assert found["math500-test/intermediate_algebra/1411.json"] == ("440", 1.0, True)
    assert found["math500-test/intermediate_algebra/1849.json"] == ("501", 1.0, True)
    # ... and reformatted copies the SOURCE.md count missed (e.g. AIME 1994 #13 = intermediate_algebra/582).
    assert found["math500-test/intermediate_algebra/582.json"][0] == "850"
    assert 5 <= len(hits) <= 30


def test_real_combined27_aime24_hits_are_found():
    records, _ = curation.records_from_rows("c27", read_rows("grpo_lead_combined27", RAW)[1])
    aime24 = load_benchmark("aime24", RAW)
    _, hits, _ = curation.decontaminate(records, {"aime24": aime24}, 8, 0.5, 0.8)
    # SOURCE.md: its 10 problems with random 6-character ids are AIME 2024 II problems.
    assert sorted(records[h.record].answer for h in hits) == sorted(
        ["699", "468", "236", "211", "23", "601", "80", "127", "321", "315"]
    )
    assert all(h.same_answer for h in hits)


# ------------------------------------------------------------------------------------------------
# Mixing, the whole pass, determinism
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("available", "weights", "total", "expected"),
    [
        ({"a": 10, "b": 100}, {"a": 1, "b": 1}, None, {"a": 10, "b": 100}),
        ({"a": 10, "b": 100}, {"a": 1, "b": 1}, 50, {"a": 10, "b": 40}),
        ({"a": 100, "b": 100}, {"a": 3, "b": 1}, 40, {"a": 30, "b": 10}),
        ({"a": 100, "b": 100, "c": 100}, {"a": 1, "b": 1, "c": 1}, 10, {"a": 4, "b": 3, "c": 3}),
        ({"a": 0, "b": 5}, {"a": 1, "b": 1}, 4, {"a": 0, "b": 4}),
        ({"a": 3, "b": 5}, {"a": 1, "b": 1}, 100, {"a": 3, "b": 5}),
    ],
)
def test_quotas(available, weights, total, expected):
    got = curation.quotas(available, weights, total)
    assert got == expected
    assert sum(got.values()) == min(total or 10**9, sum(available.values()))


def _sources() -> list[SourceInput]:
    a = [
        {"problem": f"Compute {i} times {i + 3} plus {i * 7}.", "answer": str(i * (i + 3) + i * 7)}
        for i in range(40)
    ]
    b = [
        {"problem": f"How many divisors does {i * 12} have, counting one?", "answer": str(i)}
        for i in range(1, 30)
    ]
    b.append({"problem": a[5]["problem"], "answer": a[5]["answer"]})  # a cross-source duplicate
    b.append({"problem": "Too long " + "word " * 400, "answer": "1"})
    return [SourceInput("a", rows(*a), weight=3.0), SourceInput("b", rows(*b), max_problems=20)]


def test_curate_accounts_for_every_row_and_is_deterministic():
    settings = Settings(max_prompt_tokens=100, max_train_problems=40, seed=1)
    first = curation.curate(_sources(), {}, settings)
    again = curation.curate(_sources(), {}, settings)
    assert [r.row() for r in first.train] == [r.row() for r in again.train]
    assert [r.line() for r in first.rejected] == [r.line() for r in again.rejected]
    report = first.report
    for name, s in report["sources"].items():
        assert s["read"] == s["train"] + s["test"] + sum(s["removed"].values()), name
    assert report["sources"]["a"]["train"] == 30 and report["sources"]["b"]["train"] == 10
    assert report["sources"]["b"]["removed"] == {"duplicate": 1, "prompt_too_long": 1, "sampled_out": 19}
    assert report["quarantine"] == {"duplicate": 1, "prompt_too_long": 1}
    other_seed = curation.curate(
        _sources(), {}, Settings(max_prompt_tokens=100, max_train_problems=40, seed=2)
    )
    assert {r.id for r in other_seed.train} != {r.id for r in first.train}
    summary = curation.summary(report)
    assert summary["removed"] == {"exact_duplicates": 1, "mix": 29, "prompt_length": 1}
    assert json.loads(json.dumps(summary)) == summary
    markdown = render_markdown(report)
    assert (
        "| exact_duplicates | 70 | 69 | duplicate 1 |" in markdown and "| prompt_too_long | 1 |" in markdown
    )


def test_token_counter_is_used_when_given():
    src = SourceInput(
        "s", rows({"problem": "short", "answer": "1"}, {"problem": "longer one", "answer": "2"})
    )
    result = curation.curate(
        [src], {}, Settings(max_prompt_tokens=5), lambda ps: [len(p) for p in ps], "chars"
    )
    assert [r.problem for r in result.train] == ["short"]
    step = next(s for s in result.report["steps"] if s["step"] == "prompt_length")
    assert (step["method"], step["longest"]) == ("chars", 10)


# ------------------------------------------------------------------------------------------------
# The steps one by one (each a function from records to a Step; curate runs them in order)
# ------------------------------------------------------------------------------------------------
def test_curate_is_its_steps_in_order():
    settings = Settings(max_prompt_tokens=100, max_train_problems=40, seed=1)
    sources = _sources()
    steps = [curation.load_records(sources)]
    steps.append(curation.normalize_answers(steps[-1].kept))
    steps.append(curation.keep_gradable(steps[-1].kept))
    steps.append(curation.limit_prompt_length(steps[-1].kept, settings))
    steps.append(curation.drop_exact_duplicates(steps[-1].kept))
    steps.append(curation.drop_near_duplicates(steps[-1].kept, settings))
    train = [r for r in steps[-1].kept if r.split != "test"]
    decontaminated, contamination = curation.drop_contaminated(train, {}, settings)
    steps.append(decontaminated)
    steps.append(curation.mix(decontaminated.kept, sources, settings))

    result = curation.curate(sources, {}, settings)
    table = [{k: v for k, v in row.items() if k != "seconds"} for row in result.report["steps"]]
    assert table == [{k: v for k, v in curation.step_row(s, 0.0).items() if k != "seconds"} for s in steps]
    assert [r.line() for r in result.rejected] == [r.line() for s in steps for r in s.rejected]
    assert [r.row() for r in result.train] == [r.row() for r in steps[-1].kept]
    assert result.report["contamination"] == contamination == {}
    assert result.report["sources"]["b"]["removed"] == curation.removed_by_source(steps, "b")


def test_an_id_repeated_across_sources_is_quarantined_at_load():
    # Ids are "<source>-<id>": source "a" with id "x-1" and source "a-x" with id "1" both give "a-x-1".
    step = curation.load_records(
        [
            SourceInput("a", rows({"problem": "P", "answer": "1", "id": "x-1"})),
            SourceInput("a-x", rows({"problem": "Q", "answer": "2", "id": "1"}, ["not", "a", "row"])),
        ]
    )
    assert (step.n_in, [r.id for r in step.kept]) == (3, ["a-x-1"])
    assert [(r.reason, r.source) for r in step.rejected] == [
        ("not_an_object", "a-x"),
        ("duplicate_id", "a-x"),
    ]


def test_normalize_answers_leaves_the_records_it_is_given_alone():
    given = [rec("P", "$\\boxed{025}$."), rec("Q", "\\boxed{ }", id="y"), rec("R", "7", id="z")]
    step = curation.normalize_answers(given)
    assert [r.answer for r in step.kept] == ["25", "7"]
    assert [r.answer for r in given] == ["$\\boxed{025}$.", "\\boxed{ }", "7"]  # a new record, not an edit
    assert [(r.reason, r.detail) for r in step.rejected] == [("missing_answer", "empty after normalisation")]
    assert step.info["changed"] == {
        "boxed": 2,
        "leading_zeros": 1,
        "math_delimiters": 1,
        "trailing_period": 1,
    }


def test_exact_duplicates_pass_test_records_on_first():
    step = curation.drop_exact_duplicates(
        [rec("A one", id="a"), rec("B two", id="b", split="test"), rec("C three", id="c")]
    )
    assert [r.id for r in step.kept] == ["b", "a", "c"] and step.rejected == []


def test_mix_samples_out_without_quarantining_and_the_step_row_counts_it():
    train = [rec(f"P{i}", id=f"a{i}", source="a") for i in range(5)] + [rec("Q", id="b0", source="b")]
    sources = [SourceInput("a", [], max_problems=2), SourceInput("b", [])]
    step = curation.mix(train, sources, Settings())
    assert [r.id for r in step.kept] == [r.id for r in step.kept if r.source == "a"] + ["b0"]
    assert len(step.kept) == 3 and step.rejected == []
    assert step.sampled_out == {"a": 3, "b": 0}
    row = curation.step_row(step, 1.5)
    assert (row["in"], row["out"], row["removed"], row["seconds"]) == (6, 3, {"sampled_out": 3}, 1.5)
    assert row["quotas"] == {"a": 2, "b": 1}
    assert curation.removed_by_source([step], "a") == {"sampled_out": 3}
    assert curation.removed_by_source([step], "b") == {}  # zero counts are left out


def test_decontamination_without_benchmarks_removes_nothing_and_says_so():
    step, contamination = curation.drop_contaminated([rec(BENCH["bench"][0].problem, "36")], {}, Settings())
    assert (len(step.kept), step.rejected, contamination) == (1, [], {})
    assert step.info["method"] == "no benchmarks to check against"
    step, contamination = curation.drop_contaminated(
        [rec(BENCH["bench"][0].problem, "36")], BENCH, Settings()
    )
    assert step.kept == [] and [r.reason for r in step.rejected] == ["contaminated"]
    assert contamination["bench"]["hits"] == contamination["bench"]["same_answer"] == 1
