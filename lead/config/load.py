"""Reading ``params.yaml``: the file, ``key=value`` overrides, and one clear message for every bad key.

Bad input stops before any work with one :class:`ParamsError` whose message names each bad key, its value
and what is allowed (:mod:`lead.config.schema` declares what is allowed). Setting nested keys has one
mechanism, :func:`set_path`: ``-S key=value`` overrides (:func:`apply_overrides`) and nested merges
(:func:`merge`, used by the tests' reduced configs) both go through it. A recipe (``--recipe FILE``, a YAML
fragment of params sections) becomes such overrides in one place, :func:`recipe_overrides`, for every entry
point: the ``lead`` command and ``python -m lead.stages.<stage>``.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import yaml
from pydantic import BaseModel, ValidationError

from lead.config.schema import Params, section_type, yaml_fields

DEFAULT_PARAMS = Path("params.yaml")


class ParamsError(ValueError):
    """Bad ``params.yaml``: the message names every bad key, its value and what is allowed."""


# What a params file may hold, checked while it is read, before any value is built: a params file is a page of
# settings, so these bounds are generous, and they keep a hostile file (an alias bomb, a 10 MB string) from
# costing memory or minutes before the first check.
MAX_PARAMS_BYTES = 1 << 20
MAX_SCALAR_CHARS = 1 << 16
_BOOL_TAG = "tag:yaml.org,2002:bool"


class _ParamsLoader(yaml.SafeLoader):
    """PyYAML's safe loader as DVC reads params files: YAML 1.2 booleans (only ``true``/``false``; ``yes``,
    ``no``, ``on`` and ``off`` are strings, as DVC's ruamel reads them, so both tools see one value), no
    aliases (``*name``: each is a reference that validation and DVC's hashing walk again, nine nested nine-way
    aliases are 9**9 values), no key given twice (YAML's last-wins would drop the first silently), no scalar
    over :data:`MAX_SCALAR_CHARS`."""

    yaml_implicit_resolvers: ClassVar = {
        first: [r for r in resolvers if r[0] != _BOOL_TAG]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise _Refused(
                event.start_mark,
                f"the alias *{event.anchor} is not allowed in a params file (write the value out)",
            )
        return super().compose_node(parent, index)

    def construct_scalar(self, node: Any) -> Any:
        if len(node.value) > MAX_SCALAR_CHARS:
            raise _Refused(
                node.start_mark, f"a value of {len(node.value):,} characters (at most {MAX_SCALAR_CHARS:,})"
            )
        return super().construct_scalar(node)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if key is not None and key in seen:
                raise _Refused(
                    key_node.start_mark,
                    f"the key '{key}' is given twice in one section (also line {seen[key]}): keep one",
                )
            if key is not None:
                seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


_ParamsLoader.add_implicit_resolver(
    _BOOL_TAG, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


class _Refused(Exception):
    def __init__(self, mark: Any, why: str) -> None:
        super().__init__(f"line {mark.line + 1}: {why}")


def read_yaml(text: str | bytes, source: str) -> Any:
    """The YAML document ``text`` (a params file, a recipe, an override's value), read as DVC reads params
    (:class:`_ParamsLoader`); anything refused -- not UTF-8, over :data:`MAX_PARAMS_BYTES`, not YAML, an alias, a
    key twice, a huge value -- is one :class:`ParamsError` line naming ``source`` and the line."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = text[: exc.start].count(b"\n") + 1
            raise ParamsError(
                f"{source}: not UTF-8 text (byte 0x{text[exc.start]:02x} on line {line}): save it as UTF-8"
            ) from None
    if len(text.encode("utf-8")) > MAX_PARAMS_BYTES:
        raise ParamsError(
            f"{source}: {len(text.encode('utf-8')):,} bytes, over the {MAX_PARAMS_BYTES:,} a params file may hold"
        )
    try:
        return yaml.load(text, Loader=_ParamsLoader)  # a SafeLoader
    except _Refused as exc:
        raise ParamsError(f"{source}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ParamsError(f"{source}: not valid YAML: {exc}") from None


def did_you_mean(name: str, allowed: Sequence[str], prefix: str = "") -> str:
    """`` (did you mean 'x'?)`` for the closest of ``allowed`` to a mistyped ``name``, or ``""`` when none is
    close; ``prefix`` is written before the suggestion (the section of a dotted key: ``'train.max_steps'``)."""
    close = difflib.get_close_matches(name, allowed, n=1)
    return f" (did you mean '{prefix}{close[0]}'?)" if close else ""


def set_path(data: dict[str, Any], key: str | Sequence[str], value: Any) -> None:
    """Set ``data[a][b][c] = value`` for the dotted ``key`` ``"a.b.c"`` (or the parts ``("a", "b", "c")``).

    Missing sections on the way are created; a part that holds a value rather than a section is a
    :class:`ParamsError` naming it (setting ``train.max_steps.x`` must not replace the number silently).
    """
    *parents, leaf = key.split(".") if isinstance(key, str) else key
    node = data
    for part in parents:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ParamsError(f"'{part}' is a value, not a section")
    node[leaf] = value


def _leaves(values: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """``(parts of the key, value)`` of every non-mapping value in the nested ``values``."""
    for key, value in values.items():
        if isinstance(value, Mapping):
            yield from _leaves(value, (*prefix, key))
        else:
            yield (*prefix, key), value


def merge(into: dict[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """Merge the nested mapping ``values`` into ``into`` with :func:`set_path`, and return ``into``.

    Sections merge key by key and other values replace what was there, so ``{"train": {"max_steps": 2}}``
    changes one key and keeps the rest of ``train`` (an empty mapping therefore changes nothing).
    """
    for parts, value in _leaves(values):
        set_path(into, parts, value)
    return into


# Keys that existed once, and where what they set lives now (an old params.yaml is told, not just refused).
RETIRED = {
    "calibrate.max_new_tokens": "calibration samples with the reward's token budget, train.max_completion_length "
    "(a pass rate is the share the trainer will score correct)",
}


def _allowed_keys(loc: tuple[Any, ...]) -> list[str]:
    """The YAML keys allowed beside the last part of the error location ``loc`` (for 'unknown key' messages)."""
    model: type[BaseModel] | None = Params
    for part in loc[:-1]:
        if isinstance(part, int):  # the index of an entry of a list of sections: the entry's keys
            continue
        field = yaml_fields(model).get(str(part))
        model = section_type(field.annotation) if field else None
        if model is None:
            return []
    return list(yaml_fields(model))


def _describe(error: dict[str, Any], source: str) -> str:
    """One line for one pydantic error: the dotted key, the value and what is allowed."""
    loc = tuple(error["loc"])
    value = error.get("input")
    if error["type"] == "value_error":
        # Cross-field validators raise _rule(key, value, rule): name the key inside its section.
        args = getattr(error.get("ctx", {}).get("error"), "args", ())
        if len(args) == 3:
            rule, key, value = args
            return f"{source}: {'.'.join(map(str, (*loc, key)))} = {value!r}: {rule}"
        where = f"{'.'.join(map(str, loc))} = {value!r}: " if loc else ""  # a field's own validator
        return f"{source}: {where}{error['msg'].removeprefix('Value error, ')}"
    name = ".".join(map(str, loc))
    if error["type"] == "extra_forbidden" and name in RETIRED:
        return f"{source}: {name} is no longer a key: {RETIRED[name]}; remove it"
    if error["type"] == "extra_forbidden":
        allowed = _allowed_keys(loc)
        hint = did_you_mean(str(loc[-1]), allowed, "".join(f"{part}." for part in loc[:-1]))
        return f"{source}: unknown key '{name}'{hint}; allowed keys here: {', '.join(allowed)}"
    return f"{source}: {name} = {value!r}: {error['msg']}"


def parse_params(data: dict[str, Any] | None, source: str = "params") -> Params:
    """Validate a parsed params mapping; raise one :class:`ParamsError` listing every problem."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ParamsError(f"{source}: the top level must be a mapping of sections, got {type(data).__name__}")
    try:
        return Params.model_validate(data)
    except ValidationError as exc:
        lines = [_describe(e, source) for e in exc.errors()]
        raise ParamsError("\n".join(lines)) from None


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``section.key=value`` overrides to ``data`` (values parsed as YAML, as ``dvc exp run -S`` does)."""
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ParamsError(f"override {item!r}: expected KEY=VALUE, e.g. train.max_steps=20")
        try:
            value = yaml.load(raw, Loader=_ParamsLoader)  # a SafeLoader
        except _Refused as exc:
            raise ParamsError(f"override {item!r}: {str(exc).partition(': ')[2]}") from None
        except yaml.YAMLError as exc:
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise ParamsError(
                f"override {item!r}: the value {raw!r} is not valid YAML ({problem}); quote strings, "
                "write lists as [a, b]"
            ) from None
        try:
            set_path(data, key, value)
        except ParamsError as exc:
            raise ParamsError(f"override {item!r}: {exc}") from None
    return data


def recipe_overrides(path: str | os.PathLike[str]) -> list[str]:
    """A recipe file -- a YAML fragment of params sections -- as ``key=value`` overrides, one per leaf value.

    ``{"train": {"batch_size": 256, "lora": {"r": 8}}}`` becomes ``["train.batch_size=256",
    "train.lora.r=8"]``: sections merge key by key into params.yaml (what is not named stays), other values
    (lists included) replace. Values are written as YAML that :func:`apply_overrides` reads back exactly as
    the recipe wrote them (floats, lists, null, quoted strings). Callers apply them before any ``-S``.
    A missing or unreadable file, bad YAML, a top level that is not a mapping, or an unknown section is a
    :class:`ParamsError` naming the recipe; keys inside sections are validated with the params.
    """
    path = Path(path)
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        raise ParamsError(f"recipe {path}: no such file (the shipped ones are in recipes/)") from None
    except OSError as exc:
        raise ParamsError(f"recipe {path}: cannot be read ({exc.strerror or exc})") from None
    data = read_yaml(text, f"recipe {path}")
    if data is None:  # an empty file (or only comments) changes nothing
        return []
    if not isinstance(data, dict):
        raise ParamsError(
            f"recipe {path}: expected a mapping of params sections (e.g. train:, evaluate:), "
            f"got {type(data).__name__}"
        )
    sections = list(yaml_fields(Params))
    for name in data:
        if name not in sections:
            raise ParamsError(
                f"recipe {path}: unknown section '{name}'{did_you_mean(str(name), sections)}; "
                f"sections: {', '.join(sections)}"
            )
    return [f"{'.'.join(parts)}={_as_yaml(value)}" for parts, value in _leaves(data)]


def _as_yaml(value: Any) -> str:
    """``value`` as YAML text that :func:`yaml.safe_load` reads back as the same value (one flow-style node;
    JSON would not do: ``1e-06`` is a string in YAML 1.1, a float only as ``1.0e-06``)."""
    text = yaml.safe_dump(value, default_flow_style=True, width=2**31, allow_unicode=True)
    return text.removesuffix("\n...\n").removesuffix("\n")  # a scalar's end-of-document marker


def params_data(path: str | os.PathLike[str] = DEFAULT_PARAMS, overrides: list[str] | None = None) -> Any:
    """What ``path`` holds, with ``overrides`` applied, before validation: the mapping :func:`load_params`
    validates (comments and layout aside, two reads of the file compare equal exactly when it says the same)."""
    path = Path(path)
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        raise ParamsError(
            f"{path}: no such params file (run from the repository root, or pass --params)"
        ) from None
    except OSError as exc:
        raise ParamsError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    data = read_yaml(text, str(path))
    # A top level that is not a mapping takes no overrides: parse_params names the problem.
    if overrides and isinstance(data, dict | None):
        data = apply_overrides(data or {}, overrides)
    return data


def load_params(path: str | os.PathLike[str] = DEFAULT_PARAMS, overrides: list[str] | None = None) -> Params:
    """Read, override and validate ``params.yaml``. Errors are :class:`ParamsError` with one clear message."""
    path = Path(path)
    data = params_data(path, overrides)
    params = parse_params(data, str(path))
    workspace = path.resolve().parent
    problems = [
        *outside_workspace((data or {}).get("paths") or {}, workspace, params.tracking.uri),
        *_not_a_model(params.model.base, workspace),
    ]
    if problems:
        raise ParamsError("\n".join(f"{path}: {line}" for line in problems))
    return params


def _not_a_model(base: str, workspace: Path) -> list[str]:
    """A line when ``model.base`` names a local folder (a path that exists, or one written as a path) that is no
    model folder (no ``config.json``): refused here rather than when the warm start loads it minutes later. A
    hub id (``org/name``) that is no local folder is the hub's to judge."""
    if base == "tiny":
        return []
    written_as_path = base.startswith(("/", "./", "../", "~"))
    folder = (workspace / Path(base).expanduser()).resolve()
    if not (written_as_path or folder.is_dir()):
        return []
    if not folder.is_dir():
        return [
            f"model.base = {base!r}: no such folder (a local model is a folder with config.json; a hub id is org/name)"
        ]
    if not (folder / "config.json").is_file():
        return [f"model.base = {base!r}: {folder} holds no config.json, so it is not a model folder"]
    return []


def _local_store(uri: str | None) -> Path | None:
    """The file or folder a ``file:`` or ``sqlite:`` tracking URI writes to; None for a server or null."""
    if not uri:
        return None
    from urllib.parse import unquote, urlparse

    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    if parsed.scheme == "sqlite":  # sqlite:///relative.db, sqlite:////absolute.db
        return Path(unquote(uri.removeprefix("sqlite:///")))
    return None


# The paths stages write to: they stay inside the workspace (the folder of params.yaml) unless allowed.
WRITTEN_PATHS = ("curated", "models", "reports", "resume")
ALLOW_EXTERNAL_ENV = "LEAD_ALLOW_EXTERNAL_PATHS"


def outside_workspace(
    paths: Mapping[str, Any], workspace: Path, tracking_uri: str | None = None
) -> list[str]:
    """One line per ``paths.*`` key that stages write to (:data:`WRITTEN_PATHS`) whose value resolves -- symlinks
    followed -- outside ``workspace``, and for a ``tracking_uri`` that is a local store (``file:``, ``sqlite:``)
    outside it; none when :data:`ALLOW_EXTERNAL_ENV` is ``1`` (a shared location on purpose: the ``lead`` CLI
    and the flows write there; ``dvc repro`` refuses outputs outside the repository). Checked when params are
    read, so a bad path stops every way in before anything is written."""
    if os.environ.get(ALLOW_EXTERNAL_ENV) == "1":
        return []
    root = workspace.resolve()
    lines = []
    store = _local_store(tracking_uri)
    if store is not None:
        where = (root / store).resolve()
        if where != root and root not in where.parents:
            lines.append(
                f"tracking.uri = {tracking_uri!r} writes to {where}, outside the workspace {root}; keep the "
                f"store inside (null: mlflow.db here), use a server (http://...), or set {ALLOW_EXTERNAL_ENV}=1"
            )
    for key in WRITTEN_PATHS:
        value = paths.get(key)
        if not isinstance(value, str) or not value:
            continue
        where = (root / value).resolve()
        if where != root and root not in where.parents:
            lines.append(
                f"paths.{key} = {value!r} resolves to {where}, outside the workspace {root}: stages write there; "
                f"keep it inside (or set {ALLOW_EXTERNAL_ENV}=1 for a shared location, which dvc repro refuses)"
            )
    return lines
