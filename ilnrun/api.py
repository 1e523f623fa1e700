"""The Python API of the runner: :func:`run_experiment` (what ``ilnrun run`` does, for a notebook).

    >>> import ilnrun
    >>> res = ilnrun.run_experiment("configs/figure1.yaml", overrides=["dataset.D=[550]"], jobs=2)
    >>> res.summary.pivot_table(index="dsgd_k", columns="method", values="test_loss_mean")

The command line is a thin layer over the same code path (:func:`run_checked`), so a config
gives the same cells, seeds and numbers from either.
"""

from __future__ import annotations

import numbers
import sys
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .overrides import load_config

if TYPE_CHECKING:
    import pandas as pd

    from .config.typed import Experiment
from .threads import BACKENDS, fork_refused, requested_threads, threads_per_cell


class ArgumentError(ValueError):
    """An argument of :func:`run_experiment` (or an option of ``ilnrun run``) that cannot be
    used; the message names it."""


def cpus() -> int:
    """CPUs this process may run on (:func:`ilnrun.threads.usable_cpus`)."""
    from .threads import usable_cpus

    return usable_cpus()


def check_run_args(
    jobs: object,
    backend: object,
    scheduler: object,
    fresh: object,
    quiet: object,
    note: bool = True,
    extend: object = False,
) -> int:
    """Validate the run arguments shared by the command line and the API; return ``jobs``
    capped to the CPUs present (with a note on stderr) unless a dask scheduler spreads the
    work elsewhere. ``ILNRUN_THREADS`` (``--threads``) is checked here too: a bad value is an
    :class:`ArgumentError`, one above the CPUs is noted (cells run capped,
    :func:`ilnrun.threads.threads_per_cell`)."""
    if isinstance(jobs, bool) or not isinstance(jobs, numbers.Integral) or int(jobs) < 1:
        raise ArgumentError(f"jobs must be a whole number >= 1, got {type(jobs).__name__}")
    if backend not in BACKENDS:
        raise ArgumentError(f"backend must be one of {', '.join(map(repr, BACKENDS))}")
    if scheduler is not None and not (isinstance(scheduler, str) and scheduler.strip()):
        raise ArgumentError("scheduler must be a dask scheduler address (a non-empty string)")
    if scheduler is not None and backend != "dask":
        raise ArgumentError("a scheduler needs the dask backend (--backend dask)")
    for name, v in (("fresh", fresh), ("quiet", quiet), ("extend", extend)):
        if not isinstance(v, bool):
            raise ArgumentError(f"{name} must be True or False, got {type(v).__name__}")
    if fresh and extend:
        raise ArgumentError("fresh discards a directory's results and extend keeps them: give one")
    jobs, n = int(jobs), cpus()
    if jobs > n and scheduler is None:
        if note:
            print(f"note: --jobs {jobs} capped to the {n} CPU(s) present", file=sys.stderr)
        jobs = n
    try:
        asked = requested_threads()
    except ValueError as exc:  # e.g. ILNRUN_THREADS='２': named, exit status 2
        raise ArgumentError(str(exc)) from None
    threads = threads_per_cell()
    refused = fork_refused() if backend == "fork" else None
    if refused:
        raise ArgumentError(refused)
    if note and asked > threads:
        print(
            f"note: --threads {asked} (ILNRUN_THREADS) capped to {threads}, the CPUs this "
            "process may use",
            file=sys.stderr,
        )
    if note and scheduler is None and jobs * threads > n:
        print(
            f"note: --jobs {jobs} x --threads {threads} asks for more cores than the {n} present",
            file=sys.stderr,
        )
    return jobs


@dataclass
class Results:
    """The tables of a run (as written to ``runs.csv``, ``summary.csv``, ``curves.csv``), the
    resolved config, the closing summary (cells run and resumed, diverged / timed-out cells per
    learner, cells whose evaluation took longer than training) and the results directory
    (``None`` when the run went to a temporary directory, since removed)."""

    runs: pd.DataFrame
    summary: pd.DataFrame
    curves: pd.DataFrame
    out_dir: Path | None
    config: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)


def run_experiment(
    config: dict | str | Path,
    *,
    out: str | Path | None = None,
    jobs: int = 1,
    overrides: Iterable[str] = (),
    quiet: bool = True,
    fresh: bool = False,
    backend: str = "auto",
    scheduler: str | None = None,
    engine: str | None = None,
    extend: bool = False,
) -> Results:
    """Run every cell of ``config`` and return its tables.

    ``config`` is a raw config mapping (as in a YAML file) or the path of a YAML file;
    ``overrides`` are ``KEY=VALUE`` strings applied before validation, as ``--set`` on the command
    line (:mod:`ilnrun.overrides`). With ``out`` the usual results directory is written there
    (and resumed when it holds the same config, as ``ilnrun run`` does; ``fresh`` discards it;
    ``extend`` resumes it under a changed config, keeping the cells whose numbers it keeps);
    without, the run goes to a temporary directory that is removed afterwards. ``jobs``,
    ``backend`` (``auto``, ``fork``, ``loky`` or ``dask``:
    :func:`ilnrun.threads.resolve_backend`) and ``scheduler`` (a dask address; a local cluster when
    omitted) are the command's options; ``quiet=False`` shows progress on stderr; ``engine``
    (``numpy`` or ``jax``), when given, replaces the config's ``engine`` as ``--engine`` does.

    Raises :class:`~ilnrun.config.ConfigError` for an invalid config,
    :class:`~ilnrun.overrides.OverrideError` for a malformed override (``overrides`` must be a
    list or tuple of strings), :class:`ArgumentError` for an unusable argument (``jobs`` above
    the CPUs present is capped, with a note) and :class:`~ilnrun.experiment.RunDirError` for an
    unusable directory; an operating-system failure while writing (full disk, read-only
    directory) raises :class:`OSError` whose ``filename`` is the file, else the directory.
    """
    check_run_args(jobs, backend, scheduler, fresh, quiet, note=False, extend=extend)
    if out is not None and (not isinstance(out, (str, Path)) or not str(out).strip()):
        raise ArgumentError("out must be a directory path (not empty or blank) or None")
    if isinstance(overrides, (str, bytes)) or not isinstance(overrides, (list, tuple)):
        raise ArgumentError("overrides must be a list or tuple of KEY=VALUE strings")
    if not all(isinstance(o, str) for o in overrides):
        raise ArgumentError("overrides must be a list or tuple of KEY=VALUE strings")
    if engine not in (None, "numpy", "jax"):
        raise ArgumentError("engine must be 'numpy' or 'jax'")
    if not isinstance(config, (dict, str, Path)):
        raise ArgumentError("config must be a mapping or the path of a YAML file")
    if engine is not None:
        overrides = [*overrides, f"engine={engine}"]
    cfg = load_config(config, overrides)
    config_path = None if isinstance(config, dict) else str(config)
    kw = dict(
        jobs=jobs,
        backend=backend,
        scheduler=scheduler,
        fresh=fresh,
        quiet=quiet,
        config_path=config_path,
        extend=extend,
    )
    if out is not None:
        return run_resolved(cfg, Path(out), **kw)
    with tempfile.TemporaryDirectory(prefix=f"ilnrun-{cfg['name']}-") as tmp:
        res = run_resolved(cfg, Path(tmp), **kw)
    res.out_dir = None
    return res


@contextmanager
def _naming(out: Path) -> Iterator[None]:
    """An operating-system failure that names no file (a full disk while writing the log)
    raised again, of the same type, naming the results directory ``out``: the caller learns
    where (the command line's one line names it the same way)."""
    try:
        yield
    except OSError as exc:
        if exc.filename is not None or exc.errno is None or exc.strerror is None:
            raise
        raise OSError(exc.errno, exc.strerror, str(out)) from exc


def run_resolved(cfg: Experiment, out: Path, **options: Any) -> Results:
    """Run a resolved config into ``out`` (see :func:`run_experiment`) and read its tables:
    :func:`run_checked` with ``options`` (its keywords), then ``runs.csv``, ``summary.csv``
    and ``curves.csv`` read back."""
    info = run_checked(cfg, out, **options)
    import pandas as pd  # here: importing the API loads no table library (the run does)

    # absolute: pandas expands a leading '~' of a path, which would read another directory's
    # tables than the one written (out='~/x' is the folder '~' in the working directory)
    tables = {
        name: pd.read_csv(out.absolute() / f"{name}.csv", low_memory=False)
        for name in ("runs", "summary", "curves")
    }
    return Results(**tables, out_dir=out, config=cfg, info=info)


def run_checked(
    cfg: Experiment,
    out: Path,
    *,
    jobs: int = 1,
    backend: str = "auto",
    scheduler: str | None = None,
    fresh: bool = False,
    quiet: bool = True,
    config_path: str | None = None,
    extend: bool = False,
) -> dict:
    """Run a resolved config into ``out`` and return the run's closing summary
    (:attr:`Results.info`), its tables left on disk (``ilnrun run``: it reads none back); the
    arguments are checked here, where the command line and the API meet
    (:func:`check_run_args`)."""
    from .experiment import run

    if "\x00" in str(out):  # no path may hold one (os.mkdir's ValueError otherwise)
        raise ArgumentError("out holds a NUL byte, which no path may hold")
    jobs = check_run_args(jobs, backend, scheduler, fresh, quiet, extend=extend)
    from . import config as C
    from .cost import Workload, check_run, one_at_a_time_note

    # jobs workers at once: refused before any work; the cells too big to run jobs at once
    # run one at a time
    sched = check_run(Workload.of(cfg), lambda: C.cells(cfg), jobs, backend, scheduler)
    alone = sched.one_at_a_time
    if alone and not quiet:
        print(one_at_a_time_note(cfg.limits, sched), file=sys.stderr)
    kw = dict(
        jobs=jobs,
        fresh=fresh,
        quiet=quiet,
        config_path=config_path,
        extend=extend,
        one_at_a_time=alone,
    )
    with _naming(out):
        if backend == "dask":
            from .distributed import dask_client

            with dask_client(scheduler, jobs):
                info = run(cfg, out, backend="dask", **kw)
        else:
            info = run(cfg, out, backend=backend, **kw)
    return info
