"""Command line (docs/architecture.md §1): ``ilnrun run | plot | report | index | pack | validate |
list``.

Exit status: 0 on success, 2 on a bad config or bad arguments (the message names the key path; no
traceback), 1 on any other failure.
"""

from __future__ import annotations

import os
import signal
import sys


def _is_command() -> bool:
    """Whether this process is the ``ilnrun`` command itself (not a caller of :func:`main`,
    such as a test's ``CliRunner``)."""
    script = os.path.basename(sys.argv[0]) if sys.argv else ""
    return script == "ilnrun" or (bool(sys.argv) and sys.argv[0].endswith("ilnrun/cli.py"))


def _stopped_early(signum: int, frame: object) -> None:
    """SIGINT / SIGTERM while the command starts, before ``ilnrun run`` installs its handling
    (:mod:`ilnrun.stopping`): nothing is written yet, so exit at once with status 128 + the
    signal and one line, not a ``KeyboardInterrupt`` traceback from an import."""
    os.write(2, f"interrupted by {signal.Signals(signum).name}\n".encode())
    os._exit(128 + signum)


if _is_command():  # first thing, before click (not for callers of main(): a test's CliRunner)
    for _sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(_sig, _stopped_early)

import shlex  # noqa: E402
from collections.abc import Mapping  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import TYPE_CHECKING  # noqa: E402

import click  # noqa: E402

from . import __version__  # noqa: E402
from .threads import BACKENDS  # noqa: E402

if TYPE_CHECKING:  # noqa: E402
    from .config.typed import Experiment


def _fail(lines: list[str] | str, code: int = 2) -> None:
    for line in [lines] if isinstance(lines, str) else lines:
        click.echo(f"error: {line}", err=True)
    sys.exit(code)


def _load(path: str, overrides: tuple[str, ...] = ()) -> Experiment:
    from . import config as C
    from .overrides import OverrideError, load_config

    try:
        return load_config(path, overrides)
    except OverrideError as exc:
        _fail(str(exc))
        raise SystemExit(2) from None  # not reached: _fail exits
    except C.ConfigError as exc:
        _fail([f"{p}: {m}" if p else m for p, m in exc.problems])
        raise SystemExit(2) from None  # not reached: _fail exits


def _results_errors(d: Path):
    """Context for ``plot`` / ``report`` / ``index``: a damaged or foreign results directory
    exits 2 and an operating-system failure (read-only directory, full disk) exits 1, each
    with one line naming the file; never a traceback."""
    from contextlib import contextmanager

    from .readers import ResultsError, environment_error

    @contextmanager
    def guard():
        try:
            yield
        except ResultsError as exc:
            _fail(str(exc))
        except OSError as exc:
            _fail(environment_error(exc, d), 1)
        except MemoryError:
            _fail(f"{d}: out of memory", 1)
        except Exception as exc:  # a foreign directory that passed the checks above
            _fail(
                f"{d}: the results look damaged or not ilnrun's ({type(exc).__name__}); "
                "regenerate them with `ilnrun run`"
            )

    return guard()


def _exit_stopped(code: int) -> None:
    """Exit a stopped ``ilnrun run`` with ``code``. When jax was used and this process is the
    ``ilnrun`` command itself, end it without interpreter finalization: XLA's threads, stopped
    in the middle of a batch, crashed the finalization (a segmentation fault after the resume
    hint in 2 of 5 SIGTERM trials). Everything is on disk by then. Otherwise the command's
    stop watchdog (:mod:`ilnrun.stopping`) stays on through the finalization: a process that
    has not ended :data:`~ilnrun.stopping.GRACE_S` seconds after the signal is ended."""
    if "jax" in sys.modules and _is_command():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def _directory(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--out``: an empty or blank path (only spaces or tabs: a variable left unset) is refused
    (exit status 2 naming the option), never read as the default directory, the current one or
    a directory named by whitespace."""
    if value is not None and not value.strip():
        raise click.BadParameter(
            f"{value!r}: an empty or blank path names no directory; leave --out out for the default"
        )
    return value


class _Count(click.ParamType):
    """``--jobs`` / ``--threads``: a whole number >= 1 in ASCII digits
    (:func:`ilnrun.threads.whole_number`; click's ``IntRange`` also took ``'２'``, ``'+2'`` and
    ``'1_0'``); a longer number than any machine's CPUs is read as a very large count (capped
    to the CPUs with a note)."""

    name = "integer"

    def convert(self, value: object, param, ctx) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value  # a default
        from .threads import whole_number

        try:
            return whole_number(str(value), long="capped")
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


_SET = click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a config key: a dotted path and a YAML value, e.g. --set dataset.T=400 or "
    "--set 'methods.fixed_random.eta=[0.1,0.3]'; repeatable, applied in order, validated like "
    "the file.",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(version=__version__, prog_name="ilnrun")
@click.pass_context
def main(ctx: click.Context) -> None:
    """ilnrun — reproduce and extend the comparison of "Learning Infinite Layer Networks Without
    the Kernel Trick" (Livni, Carmon, Globerson): Shrinking Gradient, Doubly SGD and Fixed-Random
    under matched feature budgets, with an exact-kernel oracle.

    \b
    Typical use:
      ilnrun validate configs/figure1.yaml   # check a config, count its cells
      ilnrun run configs/figure1.yaml --jobs 2
      ilnrun plot results/figure1
    """
    if ctx.invoked_subcommand != "run" and signal.getsignal(signal.SIGINT) is _stopped_early:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # the usual handling again
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@main.command()
@click.argument("config_path", metavar="CONFIG.yaml", type=click.Path(dir_okay=False))
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default=None,
    callback=_directory,
    help="Results directory (default: results/<name>).",
)
@click.option(
    "--jobs",
    "-j",
    type=_Count(),
    default=1,
    show_default=True,
    help="Parallel workers.",
)
@click.option(
    "--backend",
    type=click.Choice(BACKENDS),
    default="auto",
    show_default=True,
    help="Worker processes: fork (forked from the run: they start at once; Linux, one thread "
    "a cell), loky (fresh processes through joblib), dask; auto: fork where it applies, else "
    "loky. The numbers are the same with each.",
)
@click.option(
    "--scheduler",
    default=None,
    metavar="ADDRESS",
    help="dask scheduler address (with --backend dask); a local cluster if omitted.",
)
@click.option(
    "--engine",
    type=click.Choice(["numpy", "jax"]),
    default=None,
    help="Implementation of the learners (default: the config's `engine`, else numpy); jax runs "
    "cells in lockstep batches on CPU or GPU (pip install 'ilnrun[jax]' or 'ilnrun[gpu]').",
)
@click.option(
    "--threads",
    type=_Count(),
    default=None,
    help="Threads of one cell (default: ILNRUN_THREADS, else 1): a big Shrinking Gradient pass "
    "(m >= 4096 samples a round) searches and gathers on them; the numbers are the same for any "
    "count. --jobs N --threads K keeps N x K cores busy.",
)
@click.option("--fresh", is_flag=True, help="Discard earlier results in the directory.")
@click.option(
    "--extend",
    is_flag=True,
    help="Resume a directory whose config changed (added grid points, repetitions or axis "
    "values): finished cells whose numbers the new config keeps are kept, the others run.",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress output.")
@_SET
def run(
    config_path: str,
    out: str | None,
    jobs: int,
    backend: str,
    scheduler: str | None,
    engine: str | None,
    threads: int | None,
    fresh: bool,
    extend: bool,
    quiet: bool,
    overrides: tuple[str, ...],
) -> None:
    """Run every cell of CONFIG.yaml and write runs.csv, summary.csv, curves.csv, config.yaml
    and meta.json. A directory holding the same config is resumed; finished cells are kept."""
    from . import stopping

    # one handling for the whole command, installed before any heavy import (numpy, numba,
    # jax): the first SIGINT / SIGTERM stops the run, and is kept until the run stops, later
    # ones are ignored while it stops, and the process ends GRACE_S seconds after the first
    # one whatever it is doing (ilnrun/stopping.py)
    guard = stopping.install()
    stopped = (128 + signal.SIGINT, 128 + signal.SIGTERM)
    exiting = False  # a stopped command ending this process: its guard stays on
    try:
        if threads is not None:
            from .threads import set_threads_per_cell

            set_threads_per_cell(threads)
        _run(config_path, out, jobs, backend, scheduler, engine, fresh, quiet, overrides, extend)
        stopping.check_stop()  # a stop swallowed at the very end: the status says it
    except KeyboardInterrupt as exc:  # before or after the cells: nothing to resume
        stopping.ignore_signals()
        signum = getattr(exc, "signum", signal.SIGINT)
        click.echo(f"interrupted by {signal.Signals(signum).name}", err=True)
        exiting = _is_command()
        _exit_stopped(128 + signum)
    except SystemExit as exc:
        exiting = exc.code in stopped and _is_command()
        raise
    finally:
        if guard is not None and not exiting:
            guard.close()  # the caller's handlers again


def _run(
    config_path, out, jobs, backend, scheduler, engine, fresh, quiet, overrides, extend=False
) -> None:
    from . import config as C
    from .api import ArgumentError, run_checked
    from .experiment import RunBroken, RunDirError, RunInterrupted
    from .readers import environment_error
    from .stopping import check_stop, ignore_signals

    # the command line wins over the config (validated with it: a map without a jax twin is
    # refused with exit status 2)
    cfg = _load(config_path, (*overrides, f"engine={engine}") if engine is not None else overrides)
    if cfg.get("engine") == "jax":
        from .engines import jax_available

        if not jax_available():
            _fail(
                "--engine jax needs JAX, which is not installed: pip install 'ilnrun[jax]' "
                "(CPU) or 'ilnrun[gpu]' (CUDA 12), or run with --engine numpy"
            )
        from .engines.jax_runner import memory_budget

        try:
            memory_budget()
        except ValueError as exc:
            _fail(str(exc))
        if backend != "auto" or jobs > 1:
            click.echo(
                "note: the jax engine runs its batches in this process (--jobs and --backend "
                "do not apply)",
                err=True,
            )
    check_stop()  # a stop swallowed while jax or the config's modules were imported
    out_dir = Path(out) if out is not None else Path("results") / cfg["name"]
    try:
        summary = run_checked(
            cfg,
            out_dir,
            jobs=jobs,
            backend=backend,
            scheduler=scheduler,
            fresh=fresh,
            quiet=quiet,
            config_path=config_path,
            extend=extend,
        )
    except (RunDirError, ArgumentError) as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(f"cannot write the results: {environment_error(exc, out_dir)}", 1)
    except C.ConfigError as exc:  # e.g. --jobs workers that do not fit this machine's memory
        _fail([f"{p}: {m}" if p else m for p, m in exc.problems])
    except (RunInterrupted, RunBroken) as exc:
        stopped = isinstance(exc, RunInterrupted)
        if stopped:
            ignore_signals()  # the stop is under way: no second one
        again = ["ilnrun", "run", config_path, "--out", str(out_dir), "--jobs", str(jobs)]
        again += ["--engine", engine] if engine else []
        again += ["--backend", backend] if backend != "auto" else []
        again += ["--scheduler", scheduler] if scheduler else []
        from .threads import threads_per_cell

        again += ["--threads", str(threads_per_cell())] if threads_per_cell() > 1 else []
        what = f"{exc}:" if stopped else f"error: {exc};"
        click.echo(
            f"{what} {exc.saved} of {exc.total} cells saved in {out_dir}; "
            f"resume with: {shlex.join(again)}",
            err=True,
        )
        if not stopped:
            sys.exit(1)
        _exit_stopped(128 + exc.signum)
    if not quiet:
        div = ", ".join(f"{m}: {n}" for m, n in summary["diverged"].items())
        msg = f"done: {summary['cells']} cells ({summary['resumed']} resumed); diverged cells"
        msg += f" per learner (skipped by selection): {div}"
        if any(summary["timed_out"].values()):
            late = ", ".join(f"{m}: {n}" for m, n in summary["timed_out"].items())
            msg += f"; timed-out cells per learner: {late}"
        click.echo(f"{msg}; results in {out_dir}", err=True)
        from .config.schema import data_lines

        for line in data_lines(cfg):
            click.echo(f"data used: {line}", err=True)
        slow = {m: int(n) for m, n in summary["eval_slower"].items() if n}
        if slow:
            per = ", ".join(f"{m}: {n}" for m, n in slow.items())
            click.echo(
                f"note: evaluation took longer than training in {sum(slow.values())} of "
                f"{summary['cells']} cells ({per}; evaluation {summary['eval_s']:.1f} s, training "
                f"{summary['train_s']:.1f} s in all). Shrinking Gradient's Algorithm-2 test "
                "estimate costs 2 m_test evaluations on each of n_test_estimated test points "
                "(evaluation.m_test, evaluation.n_test_estimated); exact evaluation grows with "
                "n_val + n_test.",
                err=True,
            )


@main.command()
@click.argument("results_dir", type=click.Path(exists=True, file_okay=False))
@click.option(
    "--format",
    "formats",
    default="png,pdf",
    show_default=True,
    help="Comma-separated figure formats.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default=None,
    callback=_directory,
    help="Directory for the figures (default: RESULTS_DIR; required for a packed folder).",
)
def plot(results_dir: str, formats: str, out: str | None) -> None:
    """Figures from a results directory: figure1 (test loss against the dataset axis with 95%
    bands, oracle dashed), learning curves, and a budget sweep when there are several budgets."""
    from .plots import plot_results
    from .results import FIGURE_FORMATS, FIGURES

    fmts = [f.strip() for f in formats.split(",") if f.strip()]
    bad = [f for f in fmts if f not in FIGURE_FORMATS]
    if bad or not fmts:
        _fail(f"--format: unsupported format(s) {bad or formats!r}; use png, pdf or svg")
    from .readers import claim_outputs, has_table

    d = Path(results_dir)
    if not has_table(d, "summary.csv"):
        _fail(f"{d} holds no summary.csv; run `ilnrun run` first")
    target = _beside_packed(d, out)
    names = [f"{n}.{f}" for n in FIGURES for f in fmts]
    with _results_errors(d):
        same = target.exists() and target.resolve() == d.resolve()
        claim_outputs(target, names, results=same)
        notes: list[str] = []
        paths = plot_results(d, fmts, notes, out_dir=target)
    for p in paths:
        click.echo(str(p))
    for note in notes:
        click.echo(f"note: {note}", err=True)


def _beside_packed(d: Path, out: str | None) -> Path:
    """Where ``plot`` / ``report`` write: ``--out``, else the results directory itself; a packed
    folder (``ilnrun pack``, committed next to its report) is never written: the command is
    refused (exit status 2) when that is where it would write."""
    from .readers import is_packed

    target = Path(out) if out is not None else d
    if target.is_dir() and is_packed(target):
        _fail(
            f"{target} is a packed results folder (`ilnrun pack`), which ilnrun does not write "
            f"into; give another --out, e.g. --out {target.parent}"
        )
    return target


@main.command()
@click.argument("results_dir", type=click.Path(exists=True, file_okay=False))
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default=None,
    callback=_directory,
    help="Directory for REPORT.md and the figures (default: RESULTS_DIR; required for a packed "
    "folder, whose figures the report draws itself).",
)
def report(results_dir: str, out: str | None) -> None:
    """Generate REPORT.md from a results directory: setup, every choice made where the paper is
    silent, counted budgets, figures, tables (mean ± 95% CI) and verdicts on the paper's claim."""
    from .readers import claim_outputs, has_table
    from .report import build_report
    from .report.sections.figures import FIGURES

    d = Path(results_dir)
    missing = [f for f in ("config.yaml", "meta.json") if not (d / f).exists()]
    missing += [f for f in ("runs.csv", "summary.csv") if not has_table(d, f)]
    if missing:
        _fail(f"{d} lacks {', '.join(missing)}; run `ilnrun run` (and `ilnrun plot`) first")
    target = _beside_packed(d, out)
    with _results_errors(d):
        same = target.exists() and target.resolve() == d.resolve()
        claim_outputs(target, ["REPORT.md", *(f"{f}.png" for f in FIGURES)], results=same)
        path = build_report(d, target)
    click.echo(str(path))


@main.command()
@click.argument("results_dir", type=click.Path(exists=True, file_okay=False))
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    required=True,
    callback=_directory,
    help="The packed folder, e.g. experiments/<name>/results (new, empty, or packed before).",
)
@click.option(
    "--replace",
    is_flag=True,
    help="Replace packed files whose content would change (other results packed there).",
)
def pack(results_dir: str, out: str, replace: bool) -> None:
    """Pack a results directory for committing next to its report: config.yaml, meta.json and
    runs.csv, summary.csv, curves.csv gzip-compressed (byte-reproducible), which is all that
    `ilnrun report` and `ilnrun plot` read. Regenerate the report from it with
    `ilnrun report OUT --out DIR` (figures drawn into DIR)."""
    from .pack import pack_results

    d = Path(results_dir)
    with _results_errors(d):
        written = pack_results(d, Path(out), replace=replace)
    for name, size in written.items():
        click.echo(f"{Path(out) / name}: {size:,} bytes")
    click.echo(f"packed {len(written)} files, {sum(written.values()):,} bytes in all, into {out}")


@main.command()
@click.argument("experiments_dir", type=click.Path(exists=True, file_okay=False))
def index(experiments_dir: str) -> None:
    """Write EXPERIMENTS_DIR/README.md indexing every */REPORT.md with its commands and headline."""
    from .report import build_index

    d = Path(experiments_dir)
    with _results_errors(d):
        path = build_index(d)
    click.echo(str(path))


@main.command()
@click.argument("config_path", metavar="CONFIG.yaml", type=click.Path(dir_okay=False))
@click.option(
    "--jobs",
    "-j",
    type=_Count(),
    default=1,
    show_default=True,
    help="Workers to check the memory estimate for (as `ilnrun run --jobs`).",
)
@_SET
def validate(config_path: str, jobs: int, overrides: tuple[str, ...]) -> None:
    """Check CONFIG.yaml; print the resolved config, the derived budgets, each learner's estimated
    time and memory per cell, the cell count and the estimated size of the largest cell."""
    from . import config as C
    from . import cost
    from .budget import derive
    from .learners import LEARNERS

    cfg = _load(config_path, overrides)
    click.echo(C.dump(cfg).rstrip())
    work = cost.Workload.of(cfg)
    # one estimate per (dataset setting, learner setting, budget): the cells of one repetition
    # (ilnrun.config.grid.cells), made when the config was resolved
    est = cost.estimates(work)
    n_cells = work.repetitions * len(est)
    jobs = max(1, min(cost.workers(cfg.engine, jobs), n_cells))
    # the cells themselves (ids) only where several workers share the memory
    cells = C.cells(cfg) if jobs > 1 else None
    problems: list = []
    if cells is not None:  # one process: checked when the config was resolved
        cost.check(work, problems, jobs=jobs, cells=cells, est=est)
    if problems:
        _fail([f"{p}: {m}" for p, m in problems])
    Ts = sorted({e.setting["T"] for e in est})
    budgeted = [m for m in LEARNERS if any(e.method == m and e.per_round for e in est)]
    if budgeted:
        click.echo("# derived budgets (per T and dsgd_k):")
    # (T, validation + test points): the points scored enter the budget under match: total
    sizes_of: dict = {}
    for d in work.data:
        T, n_val, n_test, _ = d.sizes
        sizes_of.setdefault(T, n_val + n_test)
    per_round = sorted({e.per_round for e in est if e.per_round is not None})
    # the budgeted settings of every learner, each once (every budget and T has them all)
    own = _distinct((e.method, e.hyper) for e in est if e.per_round is not None)
    for T in Ts:
        for k in per_round:
            b = derive(cfg.budget.match, k, T, sizes_of.get(T, 0))
            for line in _budget_lines(b, T, k, budgeted, own):
                click.echo(line)
    for name, params in cfg.methods.items():
        notes = LEARNERS[name].notes
        if notes is not None:
            for line in notes(C.method_grid(name, params), Ts):
                click.echo(f"# {line}")
    for line in _numpy_fallbacks(cfg.methods, cfg.engine, Ts):
        click.echo(f"# {line}")
    for line in cost.summary_lines(work, jobs, cells, est):
        click.echo(f"# {line}")


def _budget_lines(
    b, T: int, k: int, budgeted: list[str], settings: list[tuple[str, dict]]
) -> list[str]:
    """``ilnrun validate``'s derived-budget lines of matched budget ``b`` (``T`` rounds, Doubly
    SGD's ``k``): each budgeted learner's size, then each size a setting takes of its own
    (Doubly SGD's batch, Shrinking Gradient's Taylor copies change what a unit spends:
    :func:`ilnrun.budget.setting_size`), one line per learner and size, with the values its
    settings share and why (``BudgetSize.setting_doc``). ``settings``: the ``(learner,
    setting)`` pairs of the budgeted cells, each once."""
    from .budget import setting_size
    from .learners import LEARNERS

    taken: dict[str, dict[int, list[dict]]] = {}
    for method, hyper in settings:
        size = setting_size(b, method, hyper)
        taken.setdefault(method, {}).setdefault(size, []).append(hyper)
    # a learner whose settings all take one size is shown with it, else with the budget's
    shown = {
        m: next(iter(taken[m])) if len(taken.get(m, ())) == 1 else b.size(LEARNERS[m].budget.name)
        for m in budgeted
    }
    sizes = ", ".join(f"{LEARNERS[m].budget.name}={shown[m]} ({m})" for m in budgeted)
    lines = [f"#   T={T} dsgd_k={k}: {b.match} target {b.target:,}; {sizes}"]
    for method, by_size in taken.items():
        budget_size = LEARNERS[method].budget
        for size, hypers in by_size.items():
            if size != b.size(budget_size.name):
                why = f": {budget_size.setting_doc}" if budget_size.setting_doc else ""
                lines.append(f"#     {budget_size.name}={size} ({method}{_shared(hypers)}){why}")
    return lines


def _shared(hypers: list[dict]) -> str:
    """``: key=value, …`` of the values every one of ``hypers`` (grid settings) shares, with
    ``; n settings`` where there are several (a learner's settings that take one size)."""
    first = hypers[0]
    common = [
        f"{p}={v}"
        for p, v in first.items()
        if v is not None and all(h.get(p) == v for h in hypers[1:])
    ]
    text = f": {', '.join(common)}" if common else ""
    return text + (f"; {len(hypers)} settings" if len(hypers) > 1 else "")


def _distinct(pairs) -> list[tuple[str, dict]]:
    """The ``(learner, setting)`` pairs, each once (equal settings are one), in order."""
    out: list[tuple[str, dict]] = []
    seen_ids: set[int] = set()
    seen: set = set()
    for method, hyper in pairs:
        if id(hyper) in seen_ids:  # the same mapping: the grid's settings are shared
            continue
        seen_ids.add(id(hyper))
        try:
            key = (method, frozenset(hyper.items()))
        except TypeError:  # an unhashable value: compared one by one
            if (method, hyper) not in out:
                out.append((method, hyper))
            continue
        if key not in seen:
            seen.add(key)
            out.append((method, hyper))
    return out


def _numpy_fallbacks(methods: Mapping, engine: str, Ts: list[int]) -> list[str]:
    """``ilnrun validate``'s notes of the settings that run as numpy code because a learner's
    compiled pass does not implement them (its declaration, ``LearnerSpec.implements
    ["compiled"]``; ilnrun.learners.implements), where its numpy ``fit`` runs: on the numpy
    ``engine``, and on the jax engine for a learner without a jax pass. ``methods``: the
    configured learners and their parameters."""
    from . import config as C
    from .learners import LEARNERS
    from .learners.implements import refusal

    out = []
    for name, params in methods.items():
        spec = LEARNERS[name]
        declared = spec.implements.get("compiled")
        if declared is None or (engine == "jax" and "jax" in spec.engines):
            continue  # no compiled pass (numpy code always), or its jax pass runs
        settings = C.method_grid(name, params)
        for key, values in spec.not_implemented("compiled", settings, Ts).items():
            out.append(
                f"{refusal(name, 'compiled', declared, key, values)}: those settings run as "
                "numpy code (the same numbers, slower; the time estimates assume the compiled "
                "pass)"
            )
    return out


@main.command(name="list")
def list_() -> None:
    """Learners, feature maps and datasets, with their parameters and defaults."""
    from .config.keys import ESTIMATE_DRAWS, KERNEL, M_TEST_SWEEP, SELECT_ON
    from .config.schema import BUDGET_PARAMS, EVALUATION_PARAMS, LIMITS_PARAMS
    from .datasets import DATASETS
    from .features import FEATURE_MAPS
    from .learners import LEARNERS

    click.echo("learners (methods.<name>; a list is a grid searched on validation loss):")
    for name, spec in LEARNERS.items():
        size = f"; budget size {spec.budget.name}" if spec.budget else "; no budget"
        click.echo(f"  {name} ({spec.role}): {spec.summary}{size}")
        for p in spec.config_params:
            click.echo(f"      {p.describe()}")
    click.echo(
        "  every learner also takes edges_ok: a mapping parameter -> reason why a selection at "
        "the edge of that parameter's grid is acceptable (named in the report; not a setting)"
    )
    click.echo("feature maps (feature_map.kind):")
    for name, fmap in FEATURE_MAPS.items():
        kern = "closed-form kernel" if fmap.has_kernel else "no closed-form kernel"
        click.echo(f"  {name} ({kern})")
        for p in fmap.params:
            click.echo(f"      {p.describe()}")
    click.echo("datasets (dataset.kind; a list under dataset is an axis of the experiment):")
    for name, ds in DATASETS.items():
        click.echo(f"  {name}: {ds.summary}")
        for p in ds.params:
            click.echo(f"      {p.describe()}")
    for section, params in (
        ("budget", BUDGET_PARAMS),
        ("evaluation", (*EVALUATION_PARAMS, SELECT_ON, KERNEL, M_TEST_SWEEP, ESTIMATE_DRAWS)),
        ("limits", LIMITS_PARAMS),
    ):
        click.echo(f"{section}:")
        for p in params:
            click.echo(f"      {p.describe()}")


def entry() -> None:
    """The ``ilnrun`` command (``python -m ilnrun.cli`` too): :func:`main`, then an exit that
    leaves the objects the command made to the operating system. Once the command is done, the
    interpreter's exit would otherwise walk them with the cyclic garbage collector (about 0.3 s
    after a run of figure1's 9 600 cells); ``gc.freeze`` takes them out of its view. Nothing is
    lost by it: the command has written and closed its files, standard streams are flushed by
    the exit as always, and ``atexit`` handlers run."""
    import gc

    try:
        main()
    finally:
        gc.freeze()


if __name__ == "__main__":  # pragma: no cover
    entry()
