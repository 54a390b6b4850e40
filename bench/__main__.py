"""``python -m bench [NAME ...]``: run benchmark modules (all by default), print, update bench/RESULTS.md.

RESULTS.md keeps one section per module, each stamped with the command, date and ``os.cpu_count()`` of the
run that measured it: running some modules replaces their sections and keeps the others, so benchmarks
measured at different times (or too slow to rerun together) stay side by side.
"""

from __future__ import annotations

import datetime
import importlib
import os
import pkgutil
import platform
import re
import sys
import time
from pathlib import Path

import bench

RESULTS = Path(__file__).with_name("RESULTS.md")
NOTES = "<!-- notes -->"  # RESULTS.md's hand-kept tail: measurements behind settings, not re-run by a module
_BLOCK_RE = re.compile(r"<!-- bench:(?P<name>\w+) -->\n(?P<body>.*?)<!-- /bench:(?P=name) -->\n", re.S)
_ROW_RE = re.compile(r"<!-- row: (?P<row>.*?) -->")


def modules() -> list[str]:
    """Every benchmark module of the package, in name order."""
    return sorted(m.name for m in pkgutil.iter_modules(bench.__path__) if not m.name.startswith("_"))


def _section(result: bench.Result | None, name: str, stamp: str, error: str | None = None) -> str:
    """One module's block: a hidden summary row (for the table at the top), a heading, the stamp, the body."""
    if result is None:
        row = f"| `bench/{name}.py` | not measured: {error} | | |"
        body = [f"## `bench/{name}.py`", "", stamp, "", f"Not measured: {error}"]
    else:
        met = {True: "yes", False: "**no**", None: "n/a"}[result.met]
        row = (
            f"| `bench/{name}.py` | {result.ratio_label} = **{result.ratio:.2f}x** | {result.goal} | {met} |"
        )
        body = [f"## {result.title} (`bench/{name}.py`)", "", stamp, "", *result.body]
    return f"<!-- bench:{name} -->\n<!-- row: {row} -->\n" + "\n".join(body) + f"\n<!-- /bench:{name} -->\n"


def write_results(sections: dict[str, str], known: list[str]) -> None:
    """Merge ``sections`` into RESULTS.md (sections of modules that no longer exist are dropped); the notes
    after :data:`NOTES` (measurements that decided a setting, with how they were made) are kept as they are."""
    old = RESULTS.read_text(encoding="utf-8") if RESULTS.exists() else ""
    notes = old[old.index(NOTES) :] if NOTES in old else ""
    blocks = {m["name"]: m.group(0) for m in _BLOCK_RE.finditer(old)}
    blocks.update(sections)
    ordered = [blocks[n] for n in known if n in blocks]
    rows = [m["row"] for block in ordered if (m := _ROW_RE.search(block))]
    head = [
        "# Benchmark results",
        "",
        "Benchmarks, not tests: `make bench` (= `python -m bench`) runs every module of `bench/`, "
        "`python -m bench NAME ...` some of them; each section says which command measured it, when, and on how "
        "many CPUs. Absolute figures depend on the machine and on what else it runs; compare the ratios.",
        "",
        "| benchmark | headline | goal | met |",
        "|---|---|---|---|",
        *rows,
        "",
    ]
    RESULTS.write_text(
        "\n".join(head) + "\n" + "\n".join(ordered) + ("\n" + notes if notes else ""), encoding="utf-8"
    )


def main(argv: list[str]) -> int:
    known = modules()
    names = argv or known
    unknown = [n for n in names if n not in known]
    if unknown:
        print(f"unknown benchmark(s) {', '.join(unknown)}; known: {', '.join(known)}", file=sys.stderr)
        return 2
    command = " ".join(["python -m bench", *argv])
    sections = {}
    for name in names:
        print(f"== bench.{name}", flush=True)
        started = time.perf_counter()
        module = importlib.import_module(f"bench.{name}")
        stamp = (
            f"Measured by `{command}` on {datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}; "
            f"`os.cpu_count()` = {os.cpu_count()}, load average {os.getloadavg()[0]:.1f} at the start (other jobs), "
            f"Python {platform.python_version()}, {platform.machine()}."
        )
        if not callable(getattr(module, "run", None)):
            error = "the module defines no `run() -> bench.Result`"
            print(f"   skipped: {error}")
            sections[name] = _section(None, name, stamp, error)
            continue
        result = module.run()
        print(result.headline())
        print(f"   ({time.perf_counter() - started:.0f} s)", flush=True)
        sections[name] = _section(result, name, stamp)
    write_results(sections, known)
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
