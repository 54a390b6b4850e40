"""The rings beyond what ``lint-imports`` can say (pyproject's contracts say which package imports which): a
stage is a thin script over the libraries, and what calls a stage calls only its entry point."""

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

ENTRY_POINTS = {"run", "main"}
RUNNER = "lead.stages._common"  # what runs every stage (its errors, its verbosity): no stage itself
STAGES = sorted(p for p in (ROOT / "lead" / "stages").glob("*.py") if not p.name.startswith("_"))


def stage_uses(path: Path) -> list[str]:
    """What ``path`` uses of ``lead.stages.*`` beyond a stage's entry point (``run``, ``main``): names imported from
    a stage module, attributes read off a stage module bound to a name."""
    tree = ast.parse(path.read_text())
    bound: set[str] = set()
    wrong: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "lead.stages":
            bound |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("lead.stages."):
            if node.module == RUNNER:
                continue
            wrong += [f"{node.module}.{a.name}" for a in node.names if a.name not in ENTRY_POINTS]
    for node in ast.walk(tree):
        named = (
            isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound
        )
        if named and node.attr not in ENTRY_POINTS:
            wrong.append(f"{node.value.id}.{node.attr}")
    return wrong


def test_the_cli_calls_a_stage_only_through_its_entry_point():
    # The paths, reports and helpers a command prints or needs come from lead.dag and the libraries.
    assert stage_uses(ROOT / "lead" / "cli.py") == []


def test_the_checker_sees_a_stage_internal(tmp_path):
    code = tmp_path / "user.py"
    code.write_text(
        "from lead.stages import train as stage\nfrom lead.stages.evaluate import model_path\n"
        "stage.run(p)\nstage.model_dir(p)\n"
    )
    assert sorted(stage_uses(code)) == ["lead.stages.evaluate.model_path", "stage.model_dir"]


@pytest.mark.parametrize("path", STAGES, ids=lambda p: p.stem)
def test_a_stage_is_a_thin_script(path):
    # The work lives in libraries (lead.curation, lead.training, lead.calibration, lead.evaluation,
    # lead.registration, lead.ablation): a stage reads its params sections once and calls them. A stage that grows
    # past this has a library hiding in it.
    assert len(path.read_text().splitlines()) <= 70, f"{path.name}: move its work into a library"


# Who may take the whole Params: the stages (each reads its sections once and passes on what a library needs),
# the CLI and the config package. Libraries and flows get sections, resolved paths and plain values.
WHOLE_PARAMS = ("lead/stages/", "lead/cli.py", "lead/config/")


def takes_params(path: Path) -> list[str]:
    """The functions of ``path`` with a parameter annotated ``Params``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            if any(
                a.annotation is not None and ast.unparse(a.annotation).strip("'\"") == "Params" for a in args
            ):
                found.append(node.name)
    return found


def test_libraries_and_flows_get_the_sections_they_need_not_the_whole_params():
    files = sorted([*(ROOT / "lead").rglob("*.py"), *(ROOT / "flows").rglob("*.py")])
    taking = {
        str(p.relative_to(ROOT)): names
        for p in files
        if (names := takes_params(p)) and not str(p.relative_to(ROOT)).startswith(WHOLE_PARAMS)
    }
    assert taking == {}, f"pass these the sections they read, not the whole Params: {taking}"
