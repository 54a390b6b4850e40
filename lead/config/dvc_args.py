"""``-S`` overrides for ``dvc exp run``: the params loader's ``key=YAML value`` overrides in Hydra's grammar, which
DVC parses, checked with DVC's own code to come out as the loader reads them (``lead params --as-dvc-args``,
``lead ablation -S``)."""

from __future__ import annotations

import re
from pathlib import Path

from lead.config.load import DEFAULT_PARAMS, ParamsError, apply_overrides, parse_params, read_yaml

_MISSING = object()


def _lookup(data: object, key: str) -> object:
    """The value at the dotted ``key`` of nested mappings, or ``_MISSING``."""
    for part in key.split("."):
        data = data.get(part, _MISSING) if isinstance(data, dict) else _MISSING
    return data


def hydra_value(value: object) -> str:
    """``value`` in Hydra's override grammar, which ``dvc exp run -S`` parses (strings double-quoted)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{hydra_value(v)}" for k, v in value.items()) + "}"
    # Hydra un-escapes a backslash only before a quote: double the backslashes there, escape the quote.
    text = re.sub(r'(\\*)(")', lambda m: m.group(1) * 2 + '\\"', str(value))
    return '"' + re.sub(r"(\\+)$", lambda m: m.group(1) * 2, text) + '"'


def dvc_args(path: Path, overrides: list[str]) -> str:
    """``overrides`` (``key=YAML value``) as ``-S`` arguments of ``dvc exp run``, shell-quoted, checked by
    applying them with DVC's own code to a copy of ``path``: it must come out as the params loader reads
    them (DVC takes Hydra's grammar, not YAML, and adds a key absent from the file only as ``++key``)."""
    import shlex
    import shutil
    import tempfile

    from dvc.utils.hydra import apply_overrides as dvc_apply

    from lead.core.experiments import flatten

    text = path.read_bytes()
    data = read_yaml(text, str(path)) or {}
    expected = apply_overrides(read_yaml(text, str(path)) or {}, overrides)
    args = []
    for item in overrides:
        key, _, raw = item.partition("=")
        prefix = "++" if _lookup(data, key) is _MISSING else ""
        args.append(f"{prefix}{key}={hydra_value(read_yaml(raw, repr(item)))}")
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "params.yaml"
        shutil.copyfile(path, copy)
        try:
            dvc_apply(copy, args)
        except Exception as exc:  # DVC's InvalidArgumentError (Hydra's parse error as its cause), OmegaConf's
            cause = f" ({exc.__cause__})" if exc.__cause__ else ""
            raise ParamsError(f"dvc exp run would refuse these -S arguments: {exc}{cause}") from None
        # As the stages read it: DVC writes 1e-06 where YAML 1.1 reads a string, which a float key accepts.
        got = parse_params(read_yaml(copy.read_bytes(), "dvc exp run -S"), "dvc exp run -S")
    want = parse_params(expected, str(path)).model_dump(mode="json")
    wrong = [
        key for key, value in flatten(got.model_dump(mode="json")).items() if _lookup(want, key) != value
    ]
    if wrong:
        raise ParamsError(
            f"dvc exp run -S would set {', '.join(wrong)} otherwise than these overrides do (Hydra's grammar "
            f"reads the value another way): copy them into {path} instead"
        )
    # DVC sets params.yaml unless an argument names another file (FILE:key=value).
    file = "" if path.resolve() == DEFAULT_PARAMS.resolve() else f"{path}:"
    return " ".join(f"-S {shlex.quote(file + arg)}" for arg in args)
