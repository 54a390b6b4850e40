"""The calibration cache (lead.io.calibration_cache): keys pinned to the values they had before the module was
split out of lead/stages/calibrate.py, and the file's load / append / compaction on a temporary file."""

import hashlib
import json

import pytest

from lead.config import parse_params
from lead.core.outcomes import OutcomeRules
from lead.io import calibration_cache
from lead.io.calibration_cache import CalibrationCache

# Every calibrate input that enters the key, set explicitly so that a new default in lead/config.py does not
# move the key (a changed default is a changed setting, not a changed key function).
PARAMS = {
    "calibrate": {"samples": 4, "temperature": 0.7, "seed": 11},
    "model": {"dtype": "bfloat16", "prompt_suffix": " Put the answer in \\boxed{}."},
}


def test_the_cache_keys_are_the_ones_existing_caches_hold(monkeypatch):
    # Pinned: the problem key was computed with lead/stages/calibrate.py before the keys moved here (commit
    # d49c87d); the settings key changed on purpose when calibration began to judge samples with the reward's
    # outcome rules and token budget (a verdict is the trainer's "correct" now) and to seed each problem by its
    # text, not its chunk. Users' cache files are keyed by them; if this fails, every cached result would be
    # sampled again. Change them only on purpose (a new key field), never as a side effect.
    # The grader's source hash is fixed here, so that an edit of lead/grading (which rightly re-keys) does
    # not break the pin.
    monkeypatch.setattr(calibration_cache, "code_fingerprint", lambda modules: "grader-source-fixed")
    params = parse_params(PARAMS)
    rules = OutcomeRules(extraction="boxed", truncation="unfinished")
    values = calibration_cache.settings(
        params.calibrate, params.model, "hub:org/model@0123abcd", "vllm", rules, 96
    )
    assert values["grader"] == "grader-source-fixed"
    assert (
        calibration_cache.settings_key(values)
        == "8d21793c5e0e8868a3bae3e0efadd45c5cc237b2c77fc20825047c37382ae43a"
    )
    assert (
        calibration_cache.problem_key("What is 1+1?", "2")
        == "b7885d3c82821bcb4b1cfe608f8a56385096bb477decfd9b4b0fbdc13e0953dc"
    )


def test_the_key_follows_the_sampling_but_not_the_chunking(monkeypatch):
    monkeypatch.setattr(calibration_cache, "code_fingerprint", lambda modules: "grader-source-fixed")

    def key(**calibrate) -> str:
        params = parse_params({**PARAMS, "calibrate": {**PARAMS["calibrate"], **calibrate}})
        values = calibration_cache.settings(params.calibrate, params.model, "m", "vllm", OutcomeRules(), 96)
        return calibration_cache.settings_key(values)

    assert key(chunk_size=100) == key()  # an execution knob: any chunking gives valid draws
    assert key(temperature=0.8) != key() and key(samples=5) != key() and key(seed=12) != key()
    params = parse_params(PARAMS)
    for other in (OutcomeRules(truncation="unfinished"), OutcomeRules(loops="anywhere")):
        assert (
            calibration_cache.settings_key(
                calibration_cache.settings(params.calibrate, params.model, "m", "vllm", other, 96)
            )
            != key()
        )
    assert (
        calibration_cache.settings_key(
            calibration_cache.settings(params.calibrate, params.model, "m", "vllm", OutcomeRules(), 64)
        )
        != key()
    )


def result(settings: str, problem: str, correct: list[bool]) -> dict:
    n = len(correct)
    return {
        "kind": "result",
        "settings": settings,
        "problem": problem,
        "correct": correct,
        "lengths": [3] * n,
        "finished": [True] * n,
    }


def test_appended_lines_are_read_back(tmp_path):
    path = tmp_path / "sub" / "cache.jsonl"
    cache = CalibrationCache(path)
    assert cache.results == {} and not path.exists()
    header = {"kind": "settings", "settings": "s1", "values": {"model": "m"}}
    cache.append([header, result("s1", "p1", [True, False])])
    cache.append([result("s1", "p2", [False, False])])
    again = CalibrationCache(path)
    assert again.described == {"s1": header}
    assert again.get("s1", "p1")["correct"] == [True, False] and again.get("s2", "p1") is None
    assert (len(again.results), again.bad_lines, again.duplicates) == (2, 0, 0)
    # one compact JSON object per line, keys sorted, with the check of the other keys as written
    body = json.dumps(result("s1", "p1", [True, False]), sort_keys=True, separators=(",", ":"))
    check = hashlib.sha256(body.encode()).hexdigest()[:16]
    assert path.read_text().splitlines()[1] == body.replace('{"correct"', f'{{"check":"{check}","correct"')


def test_a_line_whose_check_fails_is_dropped_even_when_it_still_reads_as_json(tmp_path):
    # A flipped digit (a disk, a bad edit) that leaves valid JSON would otherwise change a pass rate silently.
    path = tmp_path / "cache.jsonl"
    CalibrationCache(path).append([result("s1", "p1", [True, False]), result("s1", "p2", [True, True])])
    lines = path.read_text().splitlines()
    assert '"lengths":[3,3]' in lines[0]
    path.write_text(lines[0].replace('"lengths":[3,3]', '"lengths":[3,8]') + "\n" + lines[1] + "\n")
    cache = CalibrationCache(path)
    assert cache.bad_lines == 1 and cache.get("s1", "p1") is None and cache.get("s1", "p2") is not None
    unchecked = json.loads(lines[1])
    del unchecked["check"]  # a line of the format before checks: not trusted either
    path.write_text(json.dumps(unchecked, sort_keys=True, separators=(",", ":")) + "\n")
    assert CalibrationCache(path).bad_lines == 1


@pytest.mark.parametrize(
    "bad",
    [
        '{"kind": "result", "settings": "',  # torn by a crash mid-write
        '{"kind": "other"}',
        '{"kind": "result", "settings": "s1", "problem": "p9", "correct": [], "lengths": []}',  # no samples
        '{"kind": "result", "settings": "s1", "problem": "p9", "correct": [true], "lengths": [1, 2]}',
    ],
)
def test_unreadable_lines_are_skipped_then_compacted_away(tmp_path, bad):
    path = tmp_path / "cache.jsonl"
    CalibrationCache(path).append([result("s1", "p1", [True])])
    with path.open("a") as fh:
        fh.write(bad)  # no newline: the next append must still start on a line of its own
    cache = CalibrationCache(path)
    assert (cache.bad_lines, len(cache.results)) == (1, 1)
    cache.append([result("s1", "p2", [False])])
    assert CalibrationCache(path).get("s1", "p2") is not None
    cache.compact()
    compacted = CalibrationCache(path)
    assert (compacted.bad_lines, sorted(compacted.results)) == (0, [("s1", "p1"), ("s1", "p2")])
    assert len(path.read_text().splitlines()) == 2


def test_a_repeated_result_keeps_the_last_and_compaction_drops_the_rest(tmp_path):
    path = tmp_path / "cache.jsonl"
    CalibrationCache(path).append([result("s1", "p1", [False]), result("s1", "p1", [True])])
    cache = CalibrationCache(path)
    assert cache.duplicates == 1 and cache.get("s1", "p1")["correct"] == [True]
    before = path.read_text()
    CalibrationCache(tmp_path / "clean.jsonl").compact()  # nothing to drop: no file is written
    assert not (tmp_path / "clean.jsonl").exists()
    cache.compact()
    assert path.read_text() != before and len(path.read_text().splitlines()) == 1
    assert CalibrationCache(path).get("s1", "p1")["correct"] == [True]


def test_a_damaged_byte_costs_its_line_not_the_file(tmp_path):
    path = tmp_path / "cache.jsonl"
    CalibrationCache(path).append([result("s1", "p1", [True]), result("s1", "p2", [False])])
    data = bytearray(path.read_bytes())
    data[data.index(b"p2") + 1] = 0xFF  # not UTF-8: the second line is damaged
    path.write_bytes(bytes(data))
    cache = CalibrationCache(path)
    assert (cache.bad_lines, sorted(cache.results)) == (1, [("s1", "p1")])
    cache.compact()
    assert CalibrationCache(path).bad_lines == 0 and path.read_bytes().decode("utf-8")
