"""The base of every ``params.yaml`` section, and the helpers the sections and the loader share.

:class:`Section` makes unknown keys errors and numbers refuse booleans; :func:`_rule` is the one shape of a
cross-field error (the key inside its section, its value and the rule), which :mod:`lead.config.load` turns into
one message; :func:`yaml_fields` and :func:`section_type` walk the models by their ``params.yaml`` keys.
"""

from __future__ import annotations

from typing import Annotated, Any, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic.fields import FieldInfo

# Random seeds: numpy and torch take 0 .. 2**32 - 1.
Seed = Annotated[int, Field(ge=0, le=2**32 - 1)]


def _rule(key: str, value: object, rule: str) -> ValueError:
    """A cross-field error naming the key (inside its section), its value and the rule it breaks."""
    return ValueError(rule, key, value)


def _numeric(annotation: Any) -> bool:
    """Whether a field's type is a number (``int``, ``float``, optionally ``None``, a list of them...)."""
    if annotation in (int, float):
        return True
    return any(_numeric(a) for a in get_args(annotation))


class Section(BaseModel):
    """Base of every params section: unknown keys are errors, values are re-validated on assignment."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, validate_by_name=True)

    def as_written(self) -> dict[str, Any]:
        """The section as params.yaml writes it (aliases as keys, plain JSON values): what a stage's MLflow run
        logs as its params (:func:`lead.io.tracking.stage_run`)."""
        return self.model_dump(mode="json", by_alias=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_booleans_for_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        # pydantic reads true as 1: `max_steps: true` would train one step. A boolean is never a count.
        field = cls.model_fields.get(info.field_name or "")
        if field is None:
            return value
        if _accepts_bool(field.annotation) and not _accepts(field.annotation, str) and isinstance(value, str):
            # pydantic reads 'yes', 'on', 'y' and '1' as true; DVC's YAML reads them as strings: one meaning only.
            raise ValueError(f"expected true or false, got the string {value!r}")
        if not _numeric(field.annotation) or _accepts_bool(field.annotation):
            return value
        if isinstance(value, bool):
            raise ValueError(f"expected a number, got the boolean {value}")
        if isinstance(value, list) and any(isinstance(v, bool) for v in value):
            raise ValueError(f"expected numbers, got booleans in {value}")
        return value


def _accepts(annotation: Any, kind: type) -> bool:
    """Whether a field's type is ``kind`` or holds it (``kind | None``, ``list[kind]``, ...)."""
    return annotation is kind or any(_accepts(a, kind) for a in get_args(annotation))


def _accepts_bool(annotation: Any) -> bool:
    return _accepts(annotation, bool)


def yaml_fields(model: type[BaseModel]) -> dict[str, FieldInfo]:
    """A model's fields by their ``params.yaml`` key (the alias where there is one: ``register``)."""
    return {field.alias or name: field for name, field in model.model_fields.items()}


def section_type(annotation: Any) -> type[Section] | None:
    """The section a field holds: its own type, or the entry type of a list of sections (``curate.sources``)."""
    for kind in (annotation, *get_args(annotation)):
        if isinstance(kind, type) and issubclass(kind, Section):
            return kind
    return None
