"""What a params key means, read from the schema: ``lead params --explain KEY`` and ``lead params --schema``.

Nothing here is written by hand per key: the type, range, default and description of every key come from
:mod:`lead.config.schema`, so the explanation and the JSON Schema (``params.schema.json``, which editors use
to validate ``params.yaml``) cannot drift from what the loader accepts.
"""

from __future__ import annotations

import json
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic.fields import FieldInfo
from pydantic_core import to_jsonable_python

from lead.config.load import ParamsError, did_you_mean
from lead.config.schema import Params, Section, section_type, yaml_fields

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"  # the dialect pydantic generates
# Bounds as pydantic keeps them on a field (annotated-types' Ge, Lt, MinLen, ...), in reading order.
_BOUNDS = (
    ("ge", ">="),
    ("gt", ">"),
    ("le", "<="),
    ("lt", "<"),
    ("min_length", "length >="),
    ("max_length", "length <="),
    ("pattern", "matching"),
)


@dataclass(frozen=True)
class Entry:
    """A dotted params key, resolved in the schema.

    ``field`` is None only for the top level (the empty key); ``section`` is the section the key holds (its
    keys are listed), the entry section of a list of sections (``curate.sources``), or None for a value.
    ``entries_of`` names the list of sections the key is inside (``curate.sources`` for
    ``curate.sources.weight``: one value per entry), or is None.
    """

    key: str
    field: FieldInfo | None
    section: type[Section] | None
    entries_of: str | None = None


def lookup(key: str) -> Entry:
    """The schema entry of the dotted ``key`` (``train.max_steps``, ``train``, ``curate.sources.weight``).

    An unknown key is a :class:`ParamsError` naming the closest key and the keys allowed at that level.
    """
    parts = key.split(".") if key else []
    section: type[Section] | None = Params
    field: FieldInfo | None = None
    entries_of = None
    for depth, part in enumerate(parts):
        parent = ".".join(parts[:depth])
        if section is None:
            raise ParamsError(f"unknown params key '{key}': '{parent}' is a value, not a section")
        if field is not None and get_origin(field.annotation) is list:
            entries_of = entries_of or parent
        fields = yaml_fields(section)
        if part not in fields:
            prefix = f"{parent}." if parent else ""
            raise ParamsError(
                f"unknown params key '{key}'{did_you_mean(part, list(fields), prefix)}; "
                f"keys of {parent or 'the top level'}: {', '.join(fields)}"
            )
        field = fields[part]
        section = section_type(field.annotation)
    return Entry(key, field, section, entries_of)


def type_name(annotation: Any) -> str:
    """A field's type as someone editing ``params.yaml`` reads it: ``int``, ``float | null``, ``'a' | 'b'``."""
    origin, args = get_origin(annotation), get_args(annotation)
    if annotation is type(None):
        return "null"
    if origin is Literal:
        return " | ".join(repr(a) for a in args)
    if origin is Annotated:  # a constrained type (Seed): its bounds are listed apart
        return type_name(args[0])
    if origin in (Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin is not None:  # list[...], dict[...]
        return f"{origin.__name__}[{', '.join(type_name(a) for a in args)}]"
    if isinstance(annotation, type) and issubclass(annotation, Section):
        return "section"
    if annotation is Path:
        return "path"
    return getattr(annotation, "__name__", str(annotation)).lower()  # int, str, bool, Any -> any


def bounds(field: FieldInfo) -> list[str]:
    """The field's declared ranges and lengths, e.g. ``['>= 1', '<= 10000000']``."""
    out = []
    for constraint in field.metadata:
        for name, word in _BOUNDS:
            value = getattr(constraint, name, None)
            if value is not None:
                out.append(f"{word} {value}")
    return out


def _show(value: Any) -> str:
    """A value written as it could be in ``params.yaml`` (JSON is YAML: null, true, "text", [a, b])."""
    return json.dumps(to_jsonable_python(value), ensure_ascii=False)


def _value_at(data: Any, parts: list[str]) -> Any:
    """The value at ``parts`` in dumped params; through a list of sections, the list of each entry's value."""
    for depth, part in enumerate(parts):
        if isinstance(data, list):
            return [_value_at(item, parts[depth:]) for item in data]
        data = data[part]
    return data


def _field_lines(section: type[Section]) -> list[str]:
    """One line per key of ``section``: the key, and its description."""
    fields = yaml_fields(section)
    width = max(len(key) for key in fields) + 2
    return [f"  {key:<{width}}{field.description or ''}" for key, field in fields.items()]


def explain(entry: Entry, params: Params, source: str) -> str:
    """What ``entry`` means, as text: its key, type, default, the value ``params`` (read from ``source``)
    gives it, and its description; a section's keys with their descriptions."""
    lines = [f"key:         {entry.key or '(the top level)'}"]
    field = entry.field
    if field is not None:
        kind = type_name(field.annotation)
        limits = bounds(field)
        default = "required" if field.is_required() else _show(field.get_default(call_default_factory=True))
        lines.append(f"type:        {kind}" + (f" ({', '.join(limits)})" if limits else ""))
        if kind != "section":  # a section's default is the defaults of its keys, listed below
            current = _value_at(params.as_written(), entry.key.split("."))
            where = f"from {source}" + (f", one per entry of {entry.entries_of}" if entry.entries_of else "")
            lines += [f"default:     {default}", f"value:       {_show(current)}  ({where})"]
        lines.append(f"description: {field.description or ''}")
    if entry.section is not None:
        heading = (
            "keys of each entry:" if field is not None and get_origin(field.annotation) is list else "keys:"
        )
        lines += [heading, *_field_lines(entry.section)]
        lines.append(f"one key in full: lead params --explain {entry.key + '.' if entry.key else ''}KEY")
    return "\n".join(lines)


def json_schema() -> str:
    """The JSON Schema of ``params.yaml`` (every key's type, range, default and description), as JSON text."""
    schema = {"$schema": JSON_SCHEMA_DIALECT, **Params.model_json_schema(by_alias=True)}
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def override_schema() -> dict[str, Any]:
    """The JSON Schema of one ``key=value`` override: a string of that shape.

    What a Prefect deployment's parameter schema says of ``overrides``: the server refuses a value that is no
    ``KEY=VALUE`` when the flow run is created. Keys and values are checked by the flow as it starts
    (:func:`lead.config.load_params`), which names an unknown key with the nearest valid one; a schema listing
    every key would refuse a typo earlier, but in JSON Schema's words ("is not valid under any of the given
    schemas"), which name neither.
    """
    return {
        "type": "string",
        "pattern": r"^[^=\s]+=",
        "description": "KEY=VALUE, as lead -S and dvc exp run -S take it (lead params --explain KEY)",
    }
