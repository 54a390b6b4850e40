"""The README and the pages under docs/ name only commands that exist: every ``make <target>`` is a Makefile
target, every ``lead <command>`` a command of the ``lead`` CLI, every ``python -m <module>`` a module, every
relative link a file of the repository."""

import importlib.util
import re

import pytest
import typer

from lead.cli import app
from tests.conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _text() -> dict[str, str]:
    return {page.relative_to(ROOT).as_posix(): page.read_text() for page in PAGES}


def _lead_commands() -> set[str]:
    command = typer.main.get_command(app)
    return set(command.commands)  # type: ignore[attr-defined]


def test_every_make_target_named_exists():
    targets = set(re.findall(r"^([a-z][a-z0-9-]*):", (ROOT / "Makefile").read_text(), re.M))
    for page, text in _text().items():
        named = set(re.findall(r"`make ([a-z][a-z0-9-]*)", text)) | set(
            re.findall(r"^make ([a-z][a-z0-9-]*)", text, re.M)
        )
        assert named <= targets, f"{page}: make {sorted(named - targets)} is no Makefile target"


def test_every_lead_command_named_exists():
    commands = _lead_commands()
    assert {"curate", "train", "evaluate", "register", "promote", "params", "exp"} <= commands
    for page, text in _text().items():
        code = "\n".join(re.findall(r"^```[a-z]*\n(.*?)^```", text, re.M | re.S))
        named = set(re.findall(r"(?:`|bin/)lead ([a-z][a-z0-9-]*)", text))
        named |= set(re.findall(r"^lead ([a-z][a-z0-9-]*)", code, re.M))
        assert named <= commands, f"{page}: lead {sorted(named - commands)} is no command of `lead`"


def test_every_python_module_named_exists():
    for page, text in _text().items():
        for module in set(re.findall(r"python -m ((?:lead|flows|bench)[\w.]*)", text)):
            if module.endswith("."):  # a pattern such as `python -m lead.stages.<stage>`
                continue
            assert importlib.util.find_spec(module) is not None, f"{page}: python -m {module} does not exist"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_points_to_a_file(page):
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
        if re.match(r"[a-z]+://", target):
            continue
        assert (page.parent / target).exists(), f"{page.name}: link to {target}, which does not exist"
