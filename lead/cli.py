"""The ``lead`` command: one subcommand per pipeline stage, plus ``pipeline`` and ``params``.

Every stage subcommand runs the same ``run(params)`` that ``dvc repro`` (``python -m lead.stages.<stage>``)
and the Prefect flow call. ``--set key=value`` overrides ``params.yaml`` for one run, like
``dvc exp run -S``. Bad params stop before any work, with one message naming the key, value and rule.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from lead.config import DEFAULT_PARAMS, Params, ParamsError, load_params
from lead.config.dvc_args import dvc_args

app = typer.Typer(
    help="GRPO-LEAD pipeline: curate → warmstart → calibrate → train → evaluate → register.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
console = Console()


@app.callback()
def main(
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="All logs, vLLM's engine start-up included.")
    ] = False,
) -> None:
    """GRPO-LEAD pipeline: curate → warmstart → calibrate → train → evaluate → register."""
    if verbose:  # read when vLLM is imported, which no command has done yet
        import os

        from lead import VERBOSE_ENV

        os.environ["VLLM_LOGGING_LEVEL"] = "INFO"
        os.environ[VERBOSE_ENV] = "1"  # and errors keep their traceback (here and in the stages it starts)


ParamsOpt = Annotated[Path, typer.Option("--params", "-p", help="Params file.")]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set", "-S", help="Override a param for this run, e.g. -S warmstart.epochs=0.5 (repeatable)."
    ),
]


RecipeOpt = Annotated[
    Path | None,
    typer.Option(
        help="A recipe (params sections) to apply before --set, e.g. recipes/curate-real.yaml, "
        "recipes/paper-eval.yaml, recipes/grpo-lead-14b.yaml."
    ),
]


def _params(path: Path, overrides: list[str] | None) -> Params:
    try:
        return load_params(path, overrides or [])
    except ParamsError as exc:
        console.print(f"[bold red]error:[/] {exc}", highlight=False)
        raise typer.Exit(2) from None


@app.command()
def params(
    path: ParamsOpt = DEFAULT_PARAMS,
    overrides: SetOpt = None,
    recipe: RecipeOpt = None,
    check: Annotated[
        bool,
        typer.Option("--check", help="Only validate (exit 2 on a bad file); `make run` does this first."),
    ] = False,
    explain: Annotated[
        str | None,
        typer.Option(
            "--explain",
            metavar="KEY",
            help="What a key means: its type, default, value here and description (e.g. train.max_steps); "
            "a section (e.g. train) lists its keys.",
        ),
    ] = None,
    schema: Annotated[
        str | None,
        typer.Option(
            "--schema",
            metavar="FILE",
            help="Write the JSON Schema of params.yaml to FILE ('-' = stdout), e.g. params.schema.json "
            "(`make schema`).",
        ),
    ] = None,
    as_dvc_args: Annotated[
        bool,
        typer.Option(
            "--as-dvc-args",
            help="Print the overrides of --recipe and --set as `dvc exp run` arguments, checked against "
            'DVC\'s own -S parser: eval "dvc exp run $(lead params --recipe FILE --as-dvc-args)".',
        ),
    ] = False,
    restore: Annotated[
        bool,
        typer.Option(
            "--restore",
            help="Put back the last params.yaml that passed the check (a refused `dvc exp run` leaves its -S "
            "values in the file); prints what it changed back.",
        ),
    ] = False,
) -> None:
    """Validate params.yaml and print the fully resolved parameters (defaults included), explain one key, print
    a recipe's keys as `dvc exp run -S` arguments, or restore the last valid params.yaml."""
    import yaml

    from lead.config.explain import explain as explain_entry
    from lead.config.explain import json_schema, lookup
    from lead.config.last_valid import remember
    from lead.config.last_valid import restore as restore_last_valid

    if sum((check, explain is not None, schema is not None, as_dvc_args, restore)) > 1:
        raise typer.BadParameter("give one of --check, --explain, --schema, --as-dvc-args and --restore")
    overrides = [*_recipe_overrides(recipe), *(overrides or [])]
    if restore:
        try:
            undone = restore_last_valid(path)
        except ParamsError as exc:
            console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None
        what = "; ".join(undone) if undone else "nothing differed"
        console.print(
            f"{path}: restored the last valid one (changed back: {what})", highlight=False, soft_wrap=True
        )
        return
    if schema is not None:  # the schema is the code's, not the file's: params.yaml is not read
        text = json_schema()
        if schema == "-":
            typer.echo(text, nl=False)
        else:
            Path(schema).write_text(text, encoding="utf-8")
            console.print(f"wrote {schema}", highlight=False)
        return
    if explain is not None:
        try:
            entry = lookup(explain)
        except ParamsError as exc:
            console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None
        source = f"{path} with -S overrides" if overrides else str(path)
        typer.echo(explain_entry(entry, _params(path, overrides), source))
        return
    resolved = _params(path, overrides)
    _check(resolved)
    if as_dvc_args:
        if not overrides:
            raise typer.BadParameter("--as-dvc-args prints the overrides of --recipe and --set: give one")
        try:
            typer.echo(dvc_args(path, overrides))
        except ParamsError as exc:
            console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None
        return
    if check:
        if not overrides:
            remember(path)
        console.print(f"{path}: valid", highlight=False)
        return
    console.print(yaml.safe_dump(resolved.as_written(), sort_keys=False), highlight=False)


def _check(resolved: Params) -> None:
    """The checks the schema cannot make (the params stage's: TRL's train settings, local source files); a
    failure exits 2."""
    from lead.checks import check_params

    try:
        check_params(resolved.curate, resolved.train, resolved.paths)
    except ParamsError as exc:
        console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


@app.command()
def curate(
    path: ParamsOpt = DEFAULT_PARAMS,
    overrides: SetOpt = None,
    recipe: RecipeOpt = None,
) -> None:
    """Build the curated training pool and test split (embedded default: the proxy task)."""
    from lead.stages import curate as stage

    cfg = _params(path, [*_recipe_overrides(recipe), *(overrides or [])])
    summary = stage.run(cfg)
    removed = sum(summary["removed"].values())
    hits = ", ".join(f"{name} {n}" for name, n in summary["contamination"].items()) or "none checked"
    console.print(
        f"curated: {summary['train']} training problems, {summary['test']} test problems; {removed} rows left out"
        f" (contamination hits: {hits}); report: {cfg.paths.reports / 'curate' / 'report.md'}"
    )


@app.command()
def warmstart(
    path: ParamsOpt = DEFAULT_PARAMS,
    overrides: SetOpt = None,
    report: Annotated[
        bool,
        typer.Option("--report", help="Do not train: sample the saved model and print pass rate by level."),
    ] = False,
    backend: Annotated[
        str, typer.Option(help="Sampling backend for --report: auto, vllm, transformers.")
    ] = "auto",
) -> None:
    """Supervised fine-tuning before RL (embedded default: build the tiny model and teach it verbose traces)."""
    from lead.dag import output
    from lead.stages import warmstart as stage

    cfg = _params(path, overrides)
    if report:
        from lead.training.warmstart import report as sample_report

        rows = sample_report(cfg.warmstart.report, cfg.curate, cfg.paths, cfg.model.prompt_suffix, backend)
        r = cfg.warmstart.report
        table = Table(
            title=f"warm-started model on proxy training problems ({r.samples} samples, T={r.temperature})"
        )
        for col in ("level", "problems", "pass rate", "share in [0.1, 0.9]", "mean length", "max/min length"):
            table.add_column(col, justify="right")
        for row in rows:
            table.add_row(
                str(row.level),
                str(row.problems),
                f"{row.pass_rate:.3f}",
                f"{row.informative:.2f}",
                f"{row.mean_length:.1f}",
                f"{row.length_ratio:.2f}",
            )
        total = sum(r.problems for r in rows)
        share = sum(r.informative * r.problems for r in rows) / total
        rate = sum(r.pass_rate * r.problems for r in rows) / total
        table.add_row("all", str(total), f"{rate:.3f}", f"{share:.2f}", "", "", style="bold")
        console.print(table)
        return
    summary = stage.run(cfg)
    if summary["enabled"]:
        console.print(
            f"warm start: {summary['steps']} steps in {summary['seconds']} s, final loss {summary['final_loss']:.3f}"
            f" → {output(cfg.paths, 'warmstart', 'model')}"
        )
    else:
        console.print(f"warm start disabled: later stages start from {summary['model']}")


@app.command()
def calibrate(path: ParamsOpt = DEFAULT_PARAMS, overrides: SetOpt = None, recipe: RecipeOpt = None) -> None:
    """Pass rate of every training problem under the current model (cached: reruns sample only what is new)."""
    from lead.stages import calibrate as stage

    s = stage.run(_params(path, [*_recipe_overrides(recipe), *(overrides or [])]))
    table = Table(title=f"calibration: {s['problems']} problems x {s['samples_per_problem']} samples")
    table.add_column("band (pass rate)")
    table.add_column("problems", justify="right")
    for band, n in s["bands"].items():
        table.add_row(band, str(n))
    console.print(table)
    console.print(
        f"kept {s['kept']} ({s['keep_rule']}); sampled {s['sampled_problems']}, reused {s['cached_problems']} "
        f"from the cache; {s['seconds']} s"
    )


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def serve(
    ctx: typer.Context,
    path: ParamsOpt = DEFAULT_PARAMS,
    overrides: SetOpt = None,
    recipe: RecipeOpt = None,
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    insecure: Annotated[
        bool,
        typer.Option(help="Serve on a non-loopback host without LEAD_SERVE_API_KEY (warned, not refused)."),
    ] = False,
) -> None:
    """Serve the model that calibrate samples (vLLM's OpenAI-compatible server) until stopped; then
    `-S calibrate.server=http://HOST:PORT` calibrates without starting an engine per run.

    The model is served under its content fingerprint and dtype, so calibrate refuses a server whose model has
    changed since (restart this after `lead warmstart`). A host other than loopback needs LEAD_SERVE_API_KEY
    (or --insecure). Arguments after `--` go to vLLM's server unchanged,
    e.g. `lead serve -- --tensor-parallel-size 2 --gpu-memory-utilization 0.8`.
    """
    import os

    from lead.calibration import model_path
    from lead.io.fingerprint import model_fingerprint
    from lead.io.sampling import exposure_refusal, serve_command, served_model_name

    refusal, warning = exposure_refusal(host, insecure=insecure)
    if refusal:
        console.print(f"[bold red]error:[/] {refusal}", highlight=False)
        raise typer.Exit(2)
    if warning:
        console.print(f"[bold yellow]warning:[/] {warning}", highlight=False)
    cfg = _params(path, [*_recipe_overrides(recipe), *(overrides or [])])
    model = model_path(cfg.model, cfg.paths.models, warm_start=cfg.warmstart.enabled)
    name = served_model_name(model_fingerprint(model), cfg.model.dtype)
    argv, env = serve_command(model, name, dtype=cfg.model.dtype, host=host, port=port)
    console.print(
        f"serving {model} as {name!r}; calibrate with -S calibrate.server=http://{host}:{port}",
        highlight=False,
    )
    # vLLM's server replaces this process: signals (Ctrl-C, a pod's SIGTERM) reach it directly.
    os.execve(argv[0], [*argv, *ctx.args], {**os.environ, **env})


@app.command()
def train(path: ParamsOpt = DEFAULT_PARAMS, overrides: SetOpt = None, recipe: RecipeOpt = None) -> None:
    """GRPO-LEAD reinforcement learning (TRL GRPOTrainer + LEAD rewards and advantages); resumes a killed run."""
    from lead.dag import output
    from lead.stages import train as stage

    cfg = _params(path, [*_recipe_overrides(recipe), *(overrides or [])])
    summary = stage.run(cfg)
    resumed = f" (resumed from {summary['resumed_from']})" if summary["resumed_from"] else ""
    console.print(
        f"train: {summary['steps']} steps{resumed} in {summary['seconds']} s, reward {summary['first_reward']}"
        f" → {summary['last_reward']}; MLflow run {summary['mlflow_run_id']} → {output(cfg.paths, 'train', 'model')}"
    )


@app.command(name="calibrate-stage2")
def calibrate_stage2(
    path: ParamsOpt = DEFAULT_PARAMS, overrides: SetOpt = None, recipe: RecipeOpt = None
) -> None:
    """Curriculum stage 2: re-calibrate the pool with the stage-1 model (`train.stage2.enabled`)."""
    from lead.stages import calibrate_stage2 as stage

    s = stage.run(_params(path, [*_recipe_overrides(recipe), *(overrides or [])]))
    if not s["enabled"]:
        console.print("curriculum stage 2 is off (train.stage2.enabled: false): nothing to calibrate")
        return
    console.print(
        f"stage 2 pool: {s['kept']} of {s['problems']} problems ({s['keep_rule']}, stage-1 model); "
        f"sampled {s['sampled_problems']}, reused {s['cached_problems']}; {s['seconds']} s"
    )


@app.command(name="train-stage2")
def train_stage2(
    path: ParamsOpt = DEFAULT_PARAMS, overrides: SetOpt = None, recipe: RecipeOpt = None
) -> None:
    """Curriculum stage 2: continue training from the stage-1 model on its stage-2 pool."""
    from lead.dag import output
    from lead.stages import train_stage2 as stage

    cfg = _params(path, [*_recipe_overrides(recipe), *(overrides or [])])
    s = stage.run(cfg)
    if not s["enabled"]:
        console.print("curriculum stage 2 is off (train.stage2.enabled: false): nothing to train")
        return
    console.print(
        f"train_stage2: {s['steps']} steps on {s['problems']} problems in {s['seconds']} s; MLflow run "
        f"{s['mlflow_run_id']} → {output(cfg.paths, 'train_stage2', 'model')}"
    )


def _recipe_overrides(recipe: Path | None) -> list[str]:
    """A recipe file as ``key=value`` overrides, applied before --set (:func:`lead.config.recipe_overrides`);
    a bad recipe exits 2 with its message."""
    from lead.config import recipe_overrides

    if recipe is None:
        return []
    try:
        return recipe_overrides(recipe)
    except ParamsError as exc:
        console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


@app.command()
def evaluate(
    path: ParamsOpt = DEFAULT_PARAMS,
    overrides: SetOpt = None,
    recipe: RecipeOpt = None,
    completions: Annotated[
        Path | None,
        typer.Option(
            help="Score the completions in this JSONL/parquet file (made elsewhere) instead of sampling the model; "
            "with reference verdicts in it, how often ours agree (lead/evaluation/replay.py says the fields)."
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(help="Where --completions writes (default: <paths.reports>/replay/<file name>)."),
    ] = None,
) -> None:
    """Sample the model on the benchmarks and score it: Pass@k, Cons@n, lengths, budget sweep, difficulty bands."""
    from lead.evaluation import output_dir
    from lead.stages import evaluate as stage

    cfg = _params(path, [*_recipe_overrides(recipe), *(overrides or [])])
    if completions is not None:
        _replay(completions, out or cfg.paths.reports / "replay" / completions.stem)
        return
    metrics = stage.run(cfg)
    n = cfg.evaluate.samples
    title = f"{cfg.evaluate.model}: {n} samples/problem, T={cfg.evaluate.temperature}"
    console.print(_scores_table(title, metrics, cfg.evaluate.benchmarks, n))
    console.print(f"records, metrics.json and plots → {output_dir(cfg.paths)}")


def _replay(source: Path, out: Path) -> None:
    """``lead evaluate --completions``: score a completions file (:mod:`lead.evaluation.replay`); print the result."""
    from lead.evaluation.replay import CompletionsError, disagreements, read_completions, replay, write_replay

    try:
        rows = read_completions(source)
        result = replay(rows)
    except CompletionsError as exc:
        console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        raise typer.Exit(1) from None
    write_replay(out, source, result)
    suites = list(result.scored)
    sizes = sorted({p.n for problems in result.scored.values() for p in problems})
    title = f"{source.name}: {len(rows)} completions, lengths in {result.length_unit}"
    console.print(_scores_table(title, result.metrics, suites, sizes[0] if len(sizes) == 1 else None))
    a = result.agreement
    if a:
        console.print(
            f"agreement with the file's verdicts: {a['agree']}/{a['compared']} ({100 * a['share']:.1f} %); "
            f"correct only for us {a['only_ours']}, only for the reference {a['only_reference']}",
            highlight=False,
        )
        shown = Table(title="disagreements (first 10)", box=None, pad_edge=False)
        for column in ("suite", "problem", "gold", "our answer", "ours", "reference answer", "reference"):
            shown.add_column(column, overflow="fold")
        for r in disagreements(result.records)[:10]:
            shown.add_row(
                r["suite"],
                r["problem_id"][:20],
                r["gold"][:20],
                str(r["answer"])[:30],
                "correct" if r["correct"] else "wrong",
                str(r["reference_answer"])[:30],
                "correct" if r["reference_correct"] else "wrong",
            )
        if shown.row_count:
            console.print(shown)
    console.print(f"records, metrics.json, agreement and plots → {out}", highlight=False)


def _scores_table(title: str, metrics: dict[str, Any], suites: list[str], n: int | None) -> Table:
    """Per benchmark (or suite): problems, Pass@1, Cons@n, answered, Len_avg, truncation, no room (``n`` None:
    each suite's own number of samples per problem)."""
    from rich import box

    table = Table(title=title, box=box.SIMPLE, pad_edge=False, collapse_padding=True)  # fits 80 columns
    columns = {
        "problems": "problems",
        "pass_at_1": "Pass@1",
        "cons": f"Cons@{n or 'n'}",
        "answered": "answered",
        "len_avg": "Len_avg",
        "truncation_rate": "trunc.",
        "over_context": "no room",
    }
    table.add_column("benchmark")
    for header in columns.values():
        table.add_column(header, justify="right")
    for name in suites:
        cons = f"cons_at_{n or metrics.get(f'{name}.samples_per_problem')}"
        values = [metrics.get(f"{name}.{cons if col == 'cons' else col}") for col in columns]
        table.add_row(
            name, *("-" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v) for v in values)
        )
    return table


@app.command()
def register(path: ParamsOpt = DEFAULT_PARAMS, overrides: SetOpt = None) -> None:
    """Register the trained model in MLflow (lineage tags, review description) and run the champion gate."""
    from lead.stages import register as stage

    s = stage.run(_params(path, overrides))
    if not s["registered"] or not s.get("new_version", True):  # an experiment; or already that version
        console.print(s["reason"], highlight=False)
        return
    console.print(
        f"{s['model_name']} version {s['version']} → @{', @'.join(s['aliases'])}; "
        f"{'promoted' if s['promoted'] else 'not promoted'}: {'; '.join(s['gate'])}",
        highlight=False,
    )


@app.command()
def promote(
    version: Annotated[str, typer.Argument(help="The registered model version to make @champion.")],
    reason: Annotated[str, typer.Option(help="Why (recorded on the version).")],
    path: ParamsOpt = DEFAULT_PARAMS,
    overrides: SetOpt = None,
) -> None:
    """Move @champion to VERSION by hand, whatever the gate said; the move and its reason are recorded."""
    from mlflow.exceptions import MlflowException

    from lead.registration import promote as promote_version

    try:
        cfg = _params(path, overrides)
        s = promote_version(cfg.register_, cfg.tracking, version, reason)
    except (MlflowException, ValueError) as exc:
        console.print(f"[bold red]error:[/] {exc}", highlight=False)
        raise typer.Exit(1) from None
    if s["already"]:
        console.print(
            f"{s['model_name']}@champion is version {s['champion']} already ({s['reason']}): nothing changed",
            highlight=False,
        )
        return
    if s["failed_gate"]:
        console.print(
            f"[bold yellow]warning:[/] version {version} failed the champion gate ({s['failed_gate']}); it is "
            "champion by your decision: the recorded reason should say why the gate's verdict does not hold",
            highlight=False,
        )
    console.print(f"{s['model_name']}@champion → version {s['champion']} ({s['reason']})", highlight=False)


@app.command(name="ablation")
def ablation_(
    path: ParamsOpt = DEFAULT_PARAMS,
    overrides: SetOpt = None,
    out: Annotated[
        Path | None,
        typer.Option(help="Also copy the result JSON here (its .md and .png beside it)."),
    ] = None,
) -> None:
    """The paper's ablation on the proxy (ablation/dvc.yaml): `dvc repro` of its cells (variants x seeds of
    ablation:) and its report; with -S, a DVC experiment (`dvc exp run ablation/dvc.yaml -S ...`)."""
    import shlex
    import shutil
    import subprocess
    import sys

    from rich.markdown import Markdown

    from lead.dag import ablation_output
    from lead.reports.ablation import markdown

    if path.resolve() != DEFAULT_PARAMS.resolve():
        console.print(
            f"[bold red]error:[/] the ablation pipeline reads {DEFAULT_PARAMS.name}: give -S instead of --params"
        )
        raise typer.Exit(2)
    params = _params(path, overrides)
    try:
        args = shlex.split(dvc_args(path, overrides)) if overrides else []
    except ParamsError as exc:
        console.print(f"[bold red]error:[/] {exc}", highlight=False)
        raise typer.Exit(2) from None
    beside = Path(sys.executable).with_name("dvc")  # this environment's DVC, as `make run` uses
    dvc = str(beside) if beside.exists() else shutil.which("dvc") or "dvc"
    command = [dvc, "exp", "run", "ablation/dvc.yaml", *args] if args else [dvc, "repro", "ablation/dvc.yaml"]
    console.print(" ".join(shlex.quote(c) for c in command), highlight=False)
    done = subprocess.run(command, cwd=DEFAULT_PARAMS.parent)
    if done.returncode:
        raise typer.Exit(done.returncode)
    result_file = ablation_output(params.paths, "result")
    result = json.loads(result_file.read_text())
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        for suffix in (".json", ".md", ".png"):
            shutil.copyfile(result_file.with_suffix(suffix), out.with_suffix(suffix))
    console.print(
        Markdown(
            markdown(result["summary"], result["target"], result["claims"], result["gains"], result["notes"])
        )
    )


@app.command()
def sweep(
    grid: Annotated[
        list[str],
        typer.Argument(help="KEY=V1,V2,... per train key (values as YAML); the sweep is every combination."),
    ],
    seeds: Annotated[str, typer.Option(help="Seeds, comma-separated: each point runs once per seed.")] = "0",
    cell_deployment: Annotated[
        str | None,
        typer.Option(
            help="Each cell a flow run of this lead-cell deployment, e.g. lead-cell/gpu (default: here)."
        ),
    ] = None,
    concurrency: Annotated[int, typer.Option(help="Cells at once.")] = 2,
    overrides: SetOpt = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show the points and the command; run nothing.")
    ] = False,
) -> None:
    """A grid over train keys (`lead sweep alpha=0.05,0.1 learning_rate=1.0e-6,3.0e-6 --seeds 0,1`), run as the
    ablation's cells — one per point and seed, each trained from the warm start and evaluated — by the
    lead-ablation flow, as a DVC experiment (`lead exp` lists it; one MLflow parent run holds every cell;
    reports/ablation/ tabulates the points)."""
    import shlex
    import subprocess
    import sys

    from lead.config.ablation import sweep_variants
    from lead.config.load import _as_yaml

    values: dict[str, list[object]] = {}
    for item in grid:
        key, sep, raw = item.partition("=")
        if not sep or not raw:
            console.print(f"[bold red]error:[/] {item!r}: give KEY=V1,V2,... (a train key and its values)")
            raise typer.Exit(2)
        values[key.removeprefix("train.")] = [_sweep_value(item, v) for v in raw.split(",")]
    try:
        seed_list = [int(s) for s in seeds.split(",")]
    except ValueError:
        console.print(f"[bold red]error:[/] --seeds {seeds!r}: give integers separated by commas, e.g. 0,1,2")
        raise typer.Exit(2) from None
    variants = sweep_variants(values)
    sweep_overrides = [
        *(overrides or []),
        f"ablation.variants={_as_yaml(variants)}",
        f"ablation.seeds={_as_yaml(seed_list)}",
    ]
    _params(DEFAULT_PARAMS, sweep_overrides)  # each point checked as train settings, before anything runs
    command = [sys.executable, "-m", "flows.ablation", "--concurrency", str(concurrency)]
    command += [a for o in sweep_overrides for a in ("-S", o)]
    command += ["--cell-deployment", cell_deployment] if cell_deployment else []
    table = Table("variant", *values, title=f"{len(variants)} points x {len(seed_list)} seeds")
    for name, point in variants.items():
        table.add_row(name, *(str(point[k]) for k in values))
    console.print(table)
    console.print(shlex.join(command), highlight=False, markup=False, soft_wrap=True)
    if not dry_run:
        raise typer.Exit(subprocess.run(command, cwd=DEFAULT_PARAMS.parent).returncode)


def _sweep_value(item: str, raw: str) -> object:
    """One value of a sweep's ``KEY=V1,V2`` as the params loader reads values (one line when refused)."""
    from lead.config import read_yaml

    try:
        return read_yaml(raw, repr(item))
    except ParamsError as exc:
        console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def exp(ctx: typer.Context) -> None:
    """DVC experiments, headline only: what each changed against its commit, Pass@1 and Len per benchmark,
    problems kept, steps, last reward. Extra arguments go to `dvc exp show` (e.g. `lead exp -A`)."""
    import json
    import shutil
    import subprocess
    import sys

    from lead.core import experiments

    beside = Path(sys.executable).with_name("dvc")  # this environment's DVC, as `make run` uses
    dvc = str(beside) if beside.exists() else shutil.which("dvc") or "dvc"
    done = subprocess.run([dvc, "exp", "show", "--json", *ctx.args], capture_output=True, text=True)
    if done.returncode != 0:
        console.print(f"[bold red]error:[/] dvc exp show: {done.stderr.strip()}", highlight=False)
        raise typer.Exit(done.returncode)
    found = experiments.rows(json.loads(done.stdout or "[]"))
    # A sweep (an ablation run as an experiment) is its points, from the report its commit holds; the pipeline's
    # own figures in its row would only repeat its baseline's.
    console.print(_experiment_table("experiments", [r for r in found if not r.sweep]))
    for row in (r for r in found if r.sweep):
        points = experiments.sweep_rows(row, _sweep_metrics(row.rev))
        if points:
            console.print(_experiment_table(f"sweep {row.name}", points))
        else:
            console.print(
                f"sweep {row.name}: its commit holds no report (saved before reports travelled with it)"
            )


def _sweep_metrics(rev: str) -> dict[str, object]:
    """The report's headline per variant that a sweep's experiment commit holds (empty when none)."""
    import json
    import subprocess

    from lead.core.experiments import ABLATION_METRICS

    shown = subprocess.run(["git", "show", f"{rev}:{ABLATION_METRICS}"], capture_output=True, text=True)
    return json.loads(shown.stdout) if shown.returncode == 0 else {}


def _experiment_table(title: str, shown: list) -> Table:
    columns = list(dict.fromkeys(k for r in shown for k in r.figures))
    table = Table("experiment", "changed vs its commit", *columns, title=title)
    for r in shown:
        changed = ", ".join(f"{k}={v}" for k, v in r.changed.items()) or "-"
        table.add_row(
            r.name, changed, *("-" if r.figures.get(c) is None else f"{r.figures[c]:.4g}" for c in columns)
        )
    return table


@app.command()
def pipeline(path: ParamsOpt = DEFAULT_PARAMS, overrides: SetOpt = None) -> None:
    """Run every stage in order, in this process (``dvc repro`` does the same, skipping what is up to date)."""
    import importlib

    from lead.dag import STAGES

    cfg = _params(path, overrides)
    for name in STAGES:
        console.rule(f"[bold]{name}")
        importlib.import_module(f"lead.stages.{name}").run(cfg)
    console.print("[bold green]pipeline finished")


@app.command()
def results(path: ParamsOpt = DEFAULT_PARAMS) -> None:
    """What the workspace's last run holds: each stage's headline, then where to look (what `make run` ends with)."""
    import json

    from lead.dag import STAGES, summary_file
    from lead.io.summaries import headline
    from lead.io.tracking import tracking_uri

    cfg = _params(path, [])
    for stage in STAGES:
        file = summary_file(cfg.paths, stage)
        summary = json.loads(file.read_text()) if file.exists() else {}
        console.print(
            f"[bold]{stage}[/]: {escape(headline(stage, summary))}", highlight=False, soft_wrap=True
        )
    evaluated = cfg.paths.reports / "evaluate"
    console.print(
        "\n[bold]Results[/]\n"
        f"  scores          {evaluated / 'metrics.json'}  (headline: {evaluated / 'headline.json'}, `lead exp`)\n"
        f"  completions     {evaluated / 'samples.parquet'}  (every sample, its answer and verdict)\n"
        f"  plots           {evaluated / 'accuracy_vs_length.png'}, {evaluated / 'budget_curve.png'}\n"
        f"  model           {cfg.paths.models / cfg.evaluate.model}\n"
        f"  runs, registry  .venv/bin/mlflow ui --backend-store-uri {tracking_uri(cfg.tracking)}",
        highlight=False,
        soft_wrap=True,
    )


def run_app() -> None:
    """The ``lead`` command: the app, with the errors a user can fix (bad params; a stage that cannot go on, a bad
    source, a stale input, a full disk: :func:`lead.stages._common.user_error`) printed as one message and an exit
    status (2, 1) instead of a traceback (``lead -v``: with it)."""
    from lead import verbose
    from lead.stages._common import user_error

    try:
        app()
    except ParamsError as exc:
        console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        raise SystemExit(2) from None
    except Exception as exc:
        message = user_error(exc)
        if message is None or verbose():
            raise
        console.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
        raise SystemExit(1) from None


if __name__ == "__main__":
    run_app()
