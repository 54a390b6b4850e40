"""Identity by content: the one place that decides whether two results are *the same*.

Every "may I reuse / resume this?" decision in the project compares fingerprints made here, never paths: the
calibration cache (model + settings), train resume and reuse (params + start model + training rows), the
ablation's cells, the name a generation server serves a model under, and the registry's lineage tags. A path
is a place: the same folder can hold yesterday's model, and the same model can sit in two folders.

A fingerprint is ``sha256:<hex>`` over a canonical encoding of the thing:

* :func:`model_fingerprint` — a local model folder: relative path, size and bytes of every file that decides
  what the model computes (weights, config, tokenizer, chat template, remote code); a hub id: ``hub:<id>@<commit>``;
* :func:`file_fingerprint` — the bytes of one file, or of every file of a folder (relative paths included);
* :func:`rows_fingerprint` — records (a list of mappings, e.g. training rows), as canonical JSON;
* :func:`value_fingerprint` — any JSON-able value (a resolved params section, a dict of fingerprints);
* :func:`code_fingerprint` — the source of Python modules or packages (the code a result depends on).

**Generations.** A stage that writes several outputs publishes them as one generation: it writes the outputs,
then the manifest last (:func:`publish`): the fingerprint of every output plus facts such as the model it
describes. A reader calls :func:`verify` with the outputs it reads: a missing manifest (the stage never finished)
or an output whose content differs from the manifest's (a newer, unfinished run wrote it) raises
:class:`StaleOutputError` instead of mixing generations. The previous manifest stays while a new run writes: a run
that fails before replacing any output (a full disk at its first write) leaves the last good generation readable,
and one that replaced some is refused by content, file by file.

**What a run took is not what it made.** Timings and MLflow run ids differ between two runs that made the same
outputs, so no output holds them (:data:`RUN_FACTS`, :func:`without_run_facts`): a collaborator's clean run of a
commit writes the bytes its ``dvc.lock`` names. The stage's MLflow run holds them; it is tagged with the manifest's
fingerprint as :func:`publish` writes it, and a reader finds the run by the manifest's content
(:func:`lead.io.tracking.published_run`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

# Files whose bytes decide what a model generates: weights, configs, tokenizer, chat template, remote code.
MODEL_FILE_SUFFIXES = (".safetensors", ".bin", ".json", ".jinja", ".txt", ".model", ".tiktoken", ".py")
# Written beside a model by trainers, but metadata only: they hold paths and clocks, not what the model computes.
MODEL_METADATA_FILES = frozenset({"training_args.bin", "trainer_state.json"})
_BLOCK = 1 << 20


def _digest_file(digest: Any, path: Path) -> None:
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(_BLOCK), b""):
            digest.update(block)


def _files(folder: Path, keep) -> list[Path]:
    """Files under ``folder`` (hidden files and folders skipped), sorted by relative path."""
    return sorted(
        (
            f
            for f in folder.rglob("*")
            if f.is_file()
            and not any(part.startswith(".") for part in f.relative_to(folder).parts)
            and keep(f)
        ),
        key=lambda f: f.relative_to(folder).as_posix(),
    )


def _folder_digest(folder: Path, files: list[Path]) -> str:
    digest = hashlib.sha256()
    for f in files:
        digest.update(f"{f.relative_to(folder).as_posix()}\0{f.stat().st_size}\0".encode())
        _digest_file(digest, f)
    return "sha256:" + digest.hexdigest()


def model_fingerprint(model: str | os.PathLike[str]) -> str:
    """``sha256:<hex>`` of a local model folder's generation-relevant files (:data:`MODEL_FILE_SUFFIXES`,
    without :data:`MODEL_METADATA_FILES` and hidden files), or ``hub:<id>@<commit>`` for a hub id.

    Two folders with the same weights, config and tokenizer have the same fingerprint wherever they are."""
    path = Path(model)
    if path.is_dir():
        files = _files(path, lambda f: f.suffix in MODEL_FILE_SUFFIXES and f.name not in MODEL_METADATA_FILES)
        if not files:
            raise FileNotFoundError(
                f"{path}: no model files ({', '.join(MODEL_FILE_SUFFIXES)}) to fingerprint"
            )
        return _folder_digest(path, files)
    return f"hub:{model}@{_hub_commit(str(model))}"


def _hub_commit(repo_id: str) -> str:
    """The commit of a hub model: the locally cached snapshot's, else (online) the hub's current one."""
    from huggingface_hub import HfApi, snapshot_download

    try:
        return Path(snapshot_download(repo_id, local_files_only=True)).name
    except Exception:
        try:
            return str(HfApi().model_info(repo_id).sha)
        except Exception as exc:
            raise FileNotFoundError(
                f"model {repo_id!r}: neither a local folder nor a cached/reachable hub model ({exc})"
            ) from None


def file_fingerprint(path: str | os.PathLike[str]) -> str:
    """``sha256:<hex>`` of a file's bytes; of a folder, over (relative path, size, bytes) of its files."""
    path = Path(path)
    if path.is_dir():
        return _folder_digest(path, _files(path, lambda f: True))
    digest = hashlib.sha256()
    _digest_file(digest, path)
    return "sha256:" + digest.hexdigest()


def code_fingerprint(modules: Iterable[str]) -> str:
    """``sha256:<hex>`` of the source of Python ``modules`` (a package: every ``.py`` file below its folder;
    bytecode caches play no part), so that a result computed by edited code is never taken for the old one."""
    import importlib

    files = {}
    for name in modules:
        path = Path(importlib.import_module(name).__file__)
        package = path.name == "__init__.py"
        for source in sorted(path.parent.rglob("*.py")) if package else [path]:
            key = f"{name}/{source.relative_to(path.parent).as_posix()}" if package else name
            files[key] = file_fingerprint(source)
    return value_fingerprint(files)


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode()


def value_fingerprint(value: Any) -> str:
    """``sha256:<hex>`` of canonical JSON (sorted keys; paths and other objects as ``str``)."""
    if hasattr(value, "model_dump"):  # a pydantic params section
        value = value.model_dump(mode="json", by_alias=True)
    return "sha256:" + hashlib.sha256(_canonical(value)).hexdigest()


def rows_fingerprint(rows: Iterable[Mapping[str, Any]]) -> str:
    """``sha256:<hex>`` of records in order (each as canonical JSON): the content of a table, not its file
    encoding (a parquet file's bytes also hold the writer's version)."""
    digest = hashlib.sha256()
    for row in rows:
        digest.update(_canonical(dict(row)))
        digest.update(b"\n")
    return "sha256:" + digest.hexdigest()


# --------------------------------------------------------------------------------------------------
# Generations: a stage's outputs, published together
# --------------------------------------------------------------------------------------------------
class StaleOutputError(RuntimeError):
    """An output is not of the generation its stage last published (an interrupted or foreign run)."""


# The keys of a summary that say how a run went rather than what it made (see the module's docstring); any key
# ending in ``run_id`` names a run too (a registration's lineage: ``train.run_id``, ``mlflow.parent_run_id``), and
# ``git.commit`` the checkout it ran in.
RUN_FACTS = frozenset(
    {
        "seconds",
        "seconds_total",
        "sampling_seconds",
        "sampler_start_seconds",
        "mlflow_run_id",
        "run_id",
        "resumed_from",
        "git.commit",
    }
)


def is_run_fact(key: str) -> bool:
    """Whether ``key`` says how a run went (:data:`RUN_FACTS`, or a run id by any name)."""
    return key in RUN_FACTS or key.endswith("run_id")


def without_run_facts(value: Any) -> Any:
    """``value`` without the keys of :data:`RUN_FACTS`, at any depth: what an output file holds.

    >>> without_run_facts({"steps": [{"step": "dedup", "seconds": 0.1}], "mlflow_run_id": "81a8", "kept": 3})
    {'steps': [{'step': 'dedup'}], 'kept': 3}
    >>> without_run_facts({"lineage": {"train.run_id": "81a8", "git.commit": "60bb", "model.fingerprint": "f0"}})
    {'lineage': {'model.fingerprint': 'f0'}}
    """
    if isinstance(value, Mapping):
        return {k: without_run_facts(v) for k, v in value.items() if not is_run_fact(k)}
    if isinstance(value, list):
        return [without_run_facts(v) for v in value]
    return value


def publish(
    manifest: str | os.PathLike[str],
    stage: str,
    outputs: Iterable[Path],
    *,
    before_writing: Callable[[str], Any] | None = None,
    **facts: Any,
) -> dict:
    """Write ``manifest`` (last, atomically): the fingerprint of each output and ``facts`` (e.g. the model the
    outputs describe). Paths are stored relative to the manifest's folder.

    ``before_writing`` is called with the fingerprint of the manifest's bytes before they are written: the stage's
    MLflow run is tagged with it there (:func:`lead.io.tracking.mark_run`), so a published manifest always has its
    run, and the manifest names no run: two runs that made the same outputs publish the same bytes."""
    from lead.io.files import json_text, write_text

    manifest = Path(manifest)
    entries = {_relative(p, manifest): file_fingerprint(p) for p in outputs}
    data = {"stage": stage, "outputs": entries, **facts}
    text = json_text(data)
    if before_writing is not None:
        before_writing("sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest())
    write_text(manifest, text)
    return data


def _hint(stage: str) -> str:
    return f"run the {stage} stage again (`dvc repro {stage}` or `lead {stage.replace('_', '-')}`)"


def _published(manifest: Path, stage: str) -> dict[str, Any]:
    if not manifest.exists():
        raise StaleOutputError(
            f"{manifest}: {stage} has not published its outputs (unfinished run?): {_hint(stage)}"
        )
    return json.loads(manifest.read_text(encoding="utf-8"))


def _check(data: dict[str, Any], manifest: Path, stage: str, path: Path, fingerprint: str | None) -> None:
    key = _relative(path, manifest)
    if key not in data.get("outputs", {}):
        raise StaleOutputError(
            f"{path}: not among the outputs {stage} published in {manifest}: {_hint(stage)}"
        )
    if fingerprint != data["outputs"][key]:
        raise StaleOutputError(
            f"{path}: not the content {stage} published in {manifest} (changed by an unfinished or other run): "
            f"{_hint(stage)}"
        )


def verify(manifest: str | os.PathLike[str], stage: str, outputs: Iterable[Path] = ()) -> dict[str, Any]:
    """The manifest of ``stage``'s last generation, after checking that each of ``outputs`` (files the caller
    is about to read) is the one it names. Raises :class:`StaleOutputError` otherwise."""
    manifest = Path(manifest)
    data = _published(manifest, stage)
    for path in outputs:
        _check(data, manifest, stage, Path(path), file_fingerprint(path) if Path(path).exists() else None)
    return data


def read_verified(manifest: str | os.PathLike[str], stage: str, path: Path) -> tuple[bytes, dict[str, Any]]:
    """The bytes of ``path`` and ``stage``'s manifest, the bytes checked against it: what is returned is what
    was checked (a file replaced between a check and a second read cannot slip through)."""
    manifest = Path(manifest)
    data = _published(manifest, stage)
    content = Path(path).read_bytes() if Path(path).exists() else None
    digest = None if content is None else "sha256:" + hashlib.sha256(content).hexdigest()
    _check(data, manifest, stage, Path(path), digest)
    return content, data


def _relative(path: Path, manifest: Path) -> str:
    return Path(os.path.relpath(Path(path).absolute(), manifest.absolute().parent)).as_posix()
