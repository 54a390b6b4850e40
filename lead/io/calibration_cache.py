"""The calibration cache: what keys a calibration result, and the file that keeps the results (file I/O).

The calibration stages (:mod:`lead.stages.calibrate`, :mod:`lead.stages.calibrate_stage2`) sample only
what their cache lacks. This module reads, appends to and rewrites that file; the keys are pure functions.

File format
-----------
``<paths.resume>/calibrate/cache.jsonl`` (``<paths.resume>/calibrate_stage2/cache.jsonl`` for stage 2) holds
one JSON object per line, keys sorted, no spaces:

* ``{"kind": "settings", "settings": <settings hash>, "values": {...}}`` describes a settings key (the
  :func:`settings` it hashes), written with the first results of that key;
* ``{"kind": "result", "settings": <settings hash>, "problem": <problem hash>, "correct": [...],
  "lengths": [...], "finished": [...]}`` is one (settings, problem) result: for each of the k samples,
  whether the reward scores it correct (:func:`lead.core.outcomes.outcome`), its length in tokens, its EOS flag.

Every line also holds ``"check"``: the first 16 hex digits of the sha256 of the line's other keys (as written:
sorted, no spaces). A line whose check does not match -- a flipped digit that still reads as JSON, a bad edit,
a line of an older format -- is unreadable like a torn one: dropped and sampled again, never trusted.

Keys: *settings* = sha256 of {model fingerprint (:func:`lead.io.fingerprint.model_fingerprint`: content hash of a
local model folder's weights, config and tokenizer files, or ``hub:<id>@<commit>``), resolved backend,
``model.dtype``, prompt suffix, the sampling spec (k, temperature, top_p, top_k, min_p, max_new_tokens, seed), the
per-prompt seed rule, the source hash of the grader and the outcome rule, the outcome rules}; *problem* =
sha256(problem text + NUL + gold answer). A generation server counts as the vLLM backend (same engine settings and
seeds, so the same completions up to vLLM's batch arithmetic), so its results and an in-process engine's share the
cache. Only missing (settings, problem) pairs are sampled, in chunks of ``calibrate.chunk_size`` problems; each
chunk's lines are appended and fsync'ed as soon as it is graded, so an interrupted run resumes from the last
finished chunk. Results of other settings stay in the file (switching back to a model or temperature costs
nothing). A torn last line from a crash is skipped and removed by the compaction at the end of the next run. The
file is no DVC output (resume state, :func:`lead.dag.resume_dir`): ``dvc repro`` never deletes it, ``dvc push``
never carries it, and a clone without it samples again what it needs.

Seeds: every prompt is sampled with its own seed, sha256(``calibrate.seed``, its user message)
(:func:`lead.io.sampling.prompt_seed`, what both samplers and the server do), so a problem's samples depend on
the problem and the settings only: a resumed run, or a problem resampled alone after its cache line was torn,
ends with the same numbers as an uninterrupted run (with a deterministic backend), and no two problems share a
random stream. ``chunk_size`` is therefore an execution knob, not part of the cache key.

The key of existing caches must not change for the same inputs (every cached result would be sampled again):
``tests/unit/test_calibration_cache.py`` pins it.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import lead.io.sampling as sampling
from lead.io.files import sha256_text, write_text, writing
from lead.io.fingerprint import code_fingerprint

if TYPE_CHECKING:
    from lead.config import CalibrateParams, ModelParams
    from lead.core.outcomes import OutcomeRules

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------------
# Keys
# --------------------------------------------------------------------------------------------------
def problem_key(problem: str, answer: str) -> str:
    """sha256(problem + NUL + answer): a result depends on the text sampled from and the gold it is graded
    against (an id can be reassigned, a text cannot)."""
    return sha256_text(f"{problem}\0{answer}")


def sampling_spec(cfg: CalibrateParams, max_new_tokens: int) -> sampling.SamplingSpec:
    """The sampling of a calibration (``calibrate.samples``, ``temperature``, ``seed`` -- each prompt's own seed
    derives from it --, and the reward's token budget ``max_new_tokens``). Both the settings key and the
    sampling loop build it here, so that the key describes what is sampled."""
    return sampling.SamplingSpec(
        n=cfg.samples, temperature=cfg.temperature, max_new_tokens=max_new_tokens, seed=cfg.seed
    )


def settings(
    cfg: CalibrateParams,
    model: ModelParams,
    fingerprint: str,
    backend: str,
    rules: OutcomeRules,
    max_new_tokens: int,
) -> dict[str, Any]:
    """Everything besides the problem that decides a calibration result (the cache key's first half):
    the model ``fingerprint``, the resolved ``backend``, dtype, prompt suffix, sampling spec (with the
    reward's budget ``max_new_tokens``), seed rule, the judge's source and its outcome ``rules``."""
    spec = asdict(sampling_spec(cfg, max_new_tokens))
    return {
        "model": fingerprint,
        "backend": backend,
        "dtype": model.dtype,
        "prompt_suffix": model.prompt_suffix,
        "sampling": spec,
        "seed_rule": f"per problem: {sampling.SEED_RULE}",
        # A verdict depends on the grader and the outcome rule: any edit of either re-judges (conservative,
        # never stale).
        "grader": code_fingerprint(["lead.grading", "lead.core.outcomes"]),
        "outcome_rules": asdict(rules),
    }


def settings_key(values: dict[str, Any]) -> str:
    """The settings hash: sha256 of ``values`` as JSON with sorted keys."""
    return sha256_text(json.dumps(values, sort_keys=True))


# --------------------------------------------------------------------------------------------------
# Cache file
# --------------------------------------------------------------------------------------------------
def _check(body: str) -> str:
    return sha256_text(body)[:16]


def _line(row: dict[str, Any]) -> str:
    """``row`` as one cache line: its keys sorted, no spaces, and its ``check``."""
    content = {k: v for k, v in row.items() if k != "check"}
    check = _check(json.dumps(content, sort_keys=True, separators=(",", ":")))
    return json.dumps({**content, "check": check}, sort_keys=True, separators=(",", ":"))


def _read_line(line: bytes) -> dict[str, Any]:
    """The row of one cache line; ValueError when its ``check`` is missing or does not match its content."""
    row = json.loads(line.decode("utf-8"))
    check = row.pop("check", None)
    if check != _check(json.dumps(row, sort_keys=True, separators=(",", ":"))):
        raise ValueError("its check does not match its content")
    return row


class CalibrationCache:
    """The JSON-lines cache file (format in the module docstring), loaded into memory: ``results`` by
    (settings hash, problem hash), ``described`` settings lines by settings hash. Appends are whole lines,
    flushed and fsync'ed per call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.results: dict[tuple[str, str], dict[str, Any]] = {}
        self.described: dict[str, dict[str, Any]] = {}
        self.bad_lines = 0
        self.duplicates = 0
        if path.exists():
            self._load()

    def _load(self) -> None:
        # Bytes, decoded line by line: a damaged byte (a flipped bit, a torn multi-byte character) costs its
        # line, which is dropped and sampled again, never the file.
        with self.path.open("rb") as fh:
            for line in fh:
                try:
                    row = _read_line(line)
                    if row["kind"] == "settings":
                        self.described[row["settings"]] = row
                    elif row["kind"] == "result" and len(row["correct"]) == len(row["lengths"]) > 0:
                        key = (row["settings"], row["problem"])
                        self.duplicates += key in self.results
                        self.results[key] = row
                    else:
                        raise ValueError("unknown or malformed line")
                except (
                    ValueError,
                    KeyError,
                    TypeError,
                ):  # a torn or damaged line, or a bad edit (UnicodeDecodeError
                    # is a ValueError)
                    self.bad_lines += 1
        if self.bad_lines:
            logger.warning("%s: skipped %d unreadable line(s)", self.path, self.bad_lines)

    def get(self, settings_hash: str, problem_hash: str) -> dict[str, Any] | None:
        """The result line of (settings, problem), or None when it was never cached."""
        return self.results.get((settings_hash, problem_hash))

    def append(self, rows: list[dict[str, Any]]) -> None:
        """Append ``rows`` (and the settings line of any new key) durably, as whole lines."""
        lines = []
        for row in rows:
            if row["kind"] == "settings":
                self.described[row["settings"]] = row
            else:
                self.results[(row["settings"], row["problem"])] = row
            lines.append(_line(row))
        with writing(self.path):  # inside the workspace; a full disk names this file
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a+b") as fh:
                # A crash mid-write can leave a line without its newline: start ours on a fresh line.
                if fh.tell() > 0:
                    fh.seek(-1, os.SEEK_END)
                    if fh.read(1) != b"\n":
                        fh.write(b"\n")
                fh.write(("\n".join(lines) + "\n").encode("utf-8"))
                fh.flush()
                os.fsync(fh.fileno())

    def compact(self) -> None:
        """Rewrite the file atomically without unreadable or duplicate lines (only when it has any)."""
        if not (self.bad_lines or self.duplicates):
            return
        rows = [*self.described.values(), *self.results.values()]
        text = "".join(_line(r) + "\n" for r in rows)
        write_text(self.path, text)
        self.bad_lines = self.duplicates = 0
