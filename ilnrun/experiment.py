"""``ilnrun run``: a results directory, resumed or fresh, filled with every cell of a config.

Results are never overwritten silently: a directory holding the same resolved config is resumed
(finished cells whose record digest matches the config are skipped); a different config is
refused unless ``--fresh`` is given.

Ownership: a directory ilnrun creates (or finds empty) gets a manifest, ``.ilnrun-manifest.json``,
listing every file ilnrun writes there (tables, ``config.yaml``, ``meta.json``, and the figures and
report of ``ilnrun plot`` / ``ilnrun report``) with the SHA-256 of the content it wrote.
``--fresh`` deletes a listed file only when its content is still what ilnrun wrote
(:func:`clear_owned`) and refuses a non-empty directory without a manifest. No file ilnrun writes
may be a symbolic link or a directory: such a results directory is refused before anything is
written or locked.

Data: a resume, with or without ``--extend``, is refused when data read under the same name (a
data file's path, a table read by name) changed content since the results were written
(:func:`~ilnrun.datasets.identity.changed_inputs`): the kept cells would mix old and new data.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import platform
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path

import yaml

from . import __version__, numeric_env
from . import config as C
from .datasets import by_content, resume_views
from .datasets.identity import changed_inputs
from .engines import DEFAULT_ENGINE, Progress, WorkerLost, execute
from .results import (
    CELL_LOG,
    FIGURE_FORMATS,
    FIGURES,
    MANIFEST,
    REPORT,
    VALUES_KEY,
    CellLog,
    ManifestError,
    Written,
    file_entry,
    read_written,
    select_modes,
    sweep_temporaries,
    write_atomic,
    write_manifest,
    write_run_tables,
    written_by_ilnrun,
)
from .safe_yaml import YamlLimitError, bounded_repr, load_bounded, load_json
from .stopping import GRACE_S, check_stop, stop_on_signals  # noqa: F401  (GRACE_S: for callers)
from .threads import resolve_backend, threads_per_cell

# the files every run into a directory writes whole (a resume too), and the cell log it appends to
REWRITTEN = ("runs.csv", "summary.csv", "curves.csv", "config.yaml", "meta.json")
OUTPUTS = (CELL_LOG, *REWRITTEN)
LOCK = ".lock"
GUARDED = (*OUTPUTS, LOCK, MANIFEST)  # names that must be plain files (or absent)
# every name ilnrun writes in a results directory: what --fresh deletes of the files a manifest
# without digests (version 1, ilnrun 0.2.0 and earlier) lists
KNOWN_NAMES = frozenset(
    (*OUTPUTS, REPORT, *(f"{f}.{fmt}" for f in FIGURES for fmt in FIGURE_FORMATS))
)


def dataset_keys(dataset: C.DatasetConfig) -> list[str]:
    """The dataset parameters that identify a dataset setting (columns of the tables)."""
    return [k for k in dataset.raw if k != "kind"]


class RunDirError(Exception):
    """The results directory cannot be used as asked (exit status 2)."""


class RunInterrupted(Exception):
    """A run stopped by SIGINT or SIGTERM after saving ``saved`` of ``total`` cells."""

    def __init__(self, signum: int, saved: int, total: int) -> None:
        self.signum, self.saved, self.total = signum, saved, total
        super().__init__(f"interrupted by {signal.Signals(signum).name}")


class RunBroken(Exception):
    """A run ended by the loss of a worker process (:class:`ilnrun.engines.local.WorkerLost`)
    after saving ``saved`` of ``total`` cells."""

    def __init__(self, reason: str, saved: int, total: int) -> None:
        self.saved, self.total = saved, total
        super().__init__(reason)


def _flatten(d, prefix=""):
    out = {}
    if isinstance(d, dict):
        for k, v in d.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    else:
        out[prefix] = d
    return out


def config_diff(old: dict, new: dict) -> list[str]:
    """Human-readable differences between two resolved configs, by key path."""
    a, b = _flatten(old), _flatten(new)
    lines = []
    for key in sorted(set(a) | set(b)):
        old, new = a.get(key, "<absent>"), b.get(key, "<absent>")
        if old != new:
            lines.append(f"  {key}: {_short(old)} in the results, {_short(new)} in the config")
    return lines


def _short(v: object, width: int = 60) -> str:
    return bounded_repr(v, width)


def _numbers_part(cfg: Mapping) -> dict:
    """The config (a resolved config's dict form, stored or new) without its free-text
    ``description``, ``evaluation.select_on`` and each learner's ``edges_ok`` (which change no
    number: a resume under another ``select_on`` only selects again); the default
    ``engine: numpy`` is left out, so results written before the key existed still resume."""
    out = {
        k: v
        for k, v in cfg.items()
        if k != "description" and not (k == "engine" and v == DEFAULT_ENGINE)
    }
    if isinstance(out.get("evaluation"), Mapping) and "select_on" in out["evaluation"]:
        out["evaluation"] = {k: v for k, v in out["evaluation"].items() if k != "select_on"}
    if isinstance(out.get("methods"), Mapping):  # edges_ok: reasons, no number
        out["methods"] = {
            name: C.keys.grid_params(s) if isinstance(s, Mapping) else s
            for name, s in out["methods"].items()
        }
    return out


def check_files(out: Path) -> None:
    """Refuse a results directory where a name ilnrun writes is a symbolic link (a write could
    leave the directory) or not a regular file."""
    for name in GUARDED:
        p = out / name
        if p.is_symlink():
            raise RunDirError(
                f"{p} is a symbolic link; ilnrun never writes through a link. "
                f"Remove it or choose another --out"
            )
        if p.exists() and not p.is_file():
            raise RunDirError(f"{p} is not a regular file; remove it or choose another --out")


def owned_files(out: Path) -> Written | None:
    """The files ilnrun wrote in ``out`` by its manifest (with the digest of what it wrote),
    ``None`` if ``out`` is not ilnrun's."""
    try:
        return read_written(out)
    except ManifestError as exc:
        raise RunDirError(
            f"{exc}; the directory cannot be identified as ilnrun's. "
            f"Remove the manifest or choose another --out"
        ) from None


def read_config(out: Path) -> dict:
    """The resolved config stored in ``out/config.yaml`` (exit status 2 if unreadable)."""
    path = out / "config.yaml"
    try:
        old = load_bounded(path)
    except (OSError, UnicodeDecodeError, yaml.YAMLError, YamlLimitError):
        old = None
    if not isinstance(old, dict):
        raise RunDirError(
            f"{path} is unreadable or not an ilnrun config; use --fresh to discard the results "
            f"in {out}, or choose another --out"
        )
    return old


def prepare_dir(out: Path, cfg: C.Experiment, fresh: bool, extend: bool = False) -> dict | None:
    """Check the (existing) directory ``out``, claim it or clear it (``fresh``); return the
    stored config when resuming earlier work (``None`` otherwise). With ``extend`` a directory
    of another config is resumed too (a note names the changes): its finished cells whose
    record digest matches ``cfg`` are kept, the rest run, and ``cfg`` replaces the stored
    config. Data that changed under the same name are refused either way
    (:func:`check_same_data`)."""
    check_files(out)
    from .readers import is_packed

    if is_packed(out):  # committed next to a report: no cell log, never written by a run
        raise RunDirError(
            f"{out} is a packed results folder (`ilnrun pack`), which holds no cell log to "
            "resume from and is not written by a run; choose another --out"
        )
    owned = owned_files(out)
    existing = [p for p in out.iterdir() if not p.name.startswith(".")]
    cfg_path = out / "config.yaml"
    if owned is None:
        if not existing:
            write_manifest(out, {})  # an empty directory: ours from now on
            return None
        if fresh:
            raise RunDirError(
                f"output directory {str(out)!r} is not empty and was not created by ilnrun "
                f"(no {MANIFEST}); --fresh deletes only files ilnrun wrote and will not touch "
                f"it. Choose another --out"
            )
        if not (cfg_path.exists() and (out / CELL_LOG).exists()):
            raise RunDirError(
                f"output directory {str(out)!r} is not empty and holds no ilnrun results; "
                f"choose another --out"
            )
        old = read_config(out)
        _check_same_config(out, old, cfg, hint="choose another --out")
        # results of an earlier ilnrun without a manifest: adopt exactly its own files
        write_manifest(out, {n: file_entry(out / n) for n in OUTPUTS if (out / n).exists()})
        return old
    sweep_temporaries(out, [*owned, *OUTPUTS])
    if fresh:
        clear_owned(out, owned)
        return None
    if not cfg_path.exists():
        return None
    old = read_config(out)
    check_same_data(out, old, cfg)
    if extend:
        changes = config_changes(old, cfg)
        if changes:  # said even with -q: the directory's config changes
            print(
                f"note: extending {out} to a changed config:\n{changes}\nfinished cells whose "
                "record digest matches the new config are kept; the others run",
                file=sys.stderr,
            )
        return old
    _check_same_config(
        out,
        old,
        cfg,
        hint="Use --extend to keep its finished cells under the changed config (added grid "
        "points, repetitions or axis values; cells that timed out under a lower "
        "limits.cell_timeout_s run again), --fresh to discard them and start over, or --out "
        "to write elsewhere.",
    )
    return old


def clear_owned(out: Path, owned: Written) -> None:
    """``--fresh``: delete the files the manifest lists whose content is still what ilnrun
    wrote (:func:`~ilnrun.results.written_by_ilnrun`; a file listed without a digest, by an
    ilnrun that recorded none, only under a name ilnrun writes, :data:`KNOWN_NAMES`), then list
    none. The files every run rewrites whole (:data:`REWRITTEN`: the tables, ``config.yaml``,
    ``meta.json``) are deleted whatever their content, as a resume would replace them; a cell
    log that is not what ilnrun wrote is refused before anything is deleted (the fresh run
    would read it). Never the lock this run holds, never through a link. Any other file is left
    in place, named in a note, and no longer listed."""
    doomed, kept = [], []
    for name, entry in sorted(owned.items()):
        p = out / name
        if name == LOCK or not os.path.lexists(p):
            continue
        if p.is_dir() and not p.is_symlink():
            raise RunDirError(f"{p} is a directory; ilnrun wrote a file there. Remove it")
        if name in REWRITTEN:
            ours = True  # check_files refused a link or a non-file under these names
        elif entry is None:
            ours = p.is_file() and not p.is_symlink() and name in KNOWN_NAMES
        else:
            ours = p.is_file() and not p.is_symlink() and written_by_ilnrun(p, entry)
        (doomed if ours else kept).append(name)
    if CELL_LOG in kept:
        raise RunDirError(
            f"{out / CELL_LOG} is not the cell log ilnrun wrote (it changed since: its content "
            f"does not match the digest in {MANIFEST}, nor are the lines after it records "
            "ilnrun appended); --fresh deletes only files whose content ilnrun wrote, and a "
            "fresh run would read it. Move it away or delete it yourself, or choose another --out"
        )
    for name in doomed:
        (out / name).unlink()
    write_manifest(out, {})
    if kept:  # said even with -q: files are left in the directory
        print(
            f"note: --fresh left {len(kept)} file(s) in {out} that its {MANIFEST} lists but whose "
            f"content is not what ilnrun wrote (changed since, or listed without a digest): "
            f"{bounded_repr(kept, 300)}; they are no longer counted as ilnrun's",
            file=sys.stderr,
        )


def check_same_data(out: Path, old: Mapping, cfg: Mapping) -> None:
    """Refuse to resume ``out`` (exit status 2), with or without ``--extend``, when data read
    under the same name — a data file's path, a table read by name (plotnine, openml,
    diabetes) — changed content since its results were written: every kept cell would carry
    the old data's numbers beside cells of the new data."""
    changed = changed_inputs(old, cfg)
    if changed:
        raise RunDirError(
            f"{out} holds results computed from other data than the config reads now:\n"
            + "\n".join(changed)
            + "\nNeither a resume nor --extend mixes cells of the two. Use --fresh to discard "
            "the results and start over, --out to write elsewhere, or restore the data the "
            "results were computed from to resume."
        )


def config_changes(old: Mapping, cfg: Mapping) -> str:
    """The differences that decide numbers between a stored config and ``cfg`` (resolved configs'
    dict forms: a resume compares the whole config), a line each (empty when a resume needs no
    ``--extend``)."""
    old, cfg = resume_views(_numbers_part(old), _numbers_part(cfg))
    cfg = C.grid.without_new_defaults(old, cfg)  # parameters added since, at their key_omit
    if by_content(old) == by_content(cfg):  # a data file moved with the same bytes resumes
        return ""
    return "\n".join(config_diff(old, cfg)) or "  (the resolved configs differ)"


def _check_same_config(out: Path, old: Mapping, cfg: Mapping, hint: str) -> None:
    diff = config_changes(old, cfg)
    if diff:
        try:
            older = _older_version(out / "meta.json")
        except (OSError, ValueError, RecursionError, AttributeError):
            older = None
        why = (
            f"\n(refused: the results were written by ilnrun {older}, this is {__version__}; "
            f"its resolved config differs from the one this version resolves — see the "
            f"changelog for what changed)"
            if older is not None
            else ""
        )
        raise RunDirError(f"{out} holds results of a different config:\n{diff}{why}\n{hint}")


def _git_commit() -> str | None:
    try:
        return (
            subprocess.run(
                ["git", "rev-parse", "HEAD"],
                capture_output=True,
                text=True,
                cwd=Path(__file__).parent,
                timeout=10,
            ).stdout.strip()
            or None
        )
    except (OSError, subprocess.SubprocessError):
        return None


def _versions() -> dict:
    out = {"python": platform.python_version(), "ilnrun": __version__}
    for pkg in ("numpy", "pandas", "joblib", "click", "pyyaml", "matplotlib"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def run(
    cfg: C.Experiment,
    out: Path,
    *,
    jobs: int = 1,
    backend: str = "auto",
    fresh: bool = False,
    quiet: bool = False,
    config_path: str | None = None,
    extend: bool = False,
    one_at_a_time: frozenset[str] = frozenset(),
) -> dict:
    """Run every unfinished cell of ``cfg`` (an experiment) into ``out`` (``extend``:
    :func:`prepare_dir`; ``one_at_a_time``: the ids of the cells too big to run ``jobs`` at
    once, :func:`ilnrun.cost.check_run`); write the tables; return a
    short summary (cells run, resumed, diverged and timed-out cells per learner, cells whose
    evaluation took longer than training and the seconds of both over all cells)."""
    try:  # (exists() itself fails on a name too long)
        if out.exists() and not out.is_dir():
            raise RunDirError(f"output path {str(out)!r} exists and is not a directory")
        out.mkdir(parents=True, exist_ok=True)
        check_files(out)
    except OSError as exc:
        raise RunDirError(f"cannot use output directory {str(out)!r}: {exc.strerror}") from None
    with _exclusive(out):
        return _run_locked(
            cfg, out, jobs, backend, fresh, quiet, config_path, extend, one_at_a_time
        )


@contextmanager
def _exclusive(out: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``out/.lock`` so two runs never write one directory; the
    operating system releases it when the process ends, however it ends. A lock file this call
    created is removed again when the directory is refused (:class:`RunDirError`)."""
    path = out / LOCK
    created = not os.path.lexists(path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        raise RunDirError(f"cannot create the lock {path}: {exc.strerror}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            created = False  # another run's lock
            raise RunDirError(f"another `ilnrun run` is writing to {out}") from None
        yield
    except RunDirError:
        if created:
            path.unlink(missing_ok=True)
        raise
    finally:
        os.close(fd)


CPU_JAX_NOTE = (
    "note: on a CPU the numpy engine (--engine numpy, with --jobs) is likely faster than jax; "
    "jax pays off on a GPU"
)


def fill_added_settings(done: dict[str, dict], cells: list[C.Cell]) -> None:
    """Give each kept record's row the dataset settings its cell has and the row lacks: a
    parameter added to a dataset after the record was written (e.g. ``teacher``'s
    ``kernel_samples``) is left out of cell keys at its default, so the record is still this
    cell's, but its row has no column for it and the tables would split, or fail on, the old
    and new rows. The value filled is the current cell's: the one its digest vouches for."""
    by_id = {c.id: c for c in cells}
    for cell_id, rec in done.items():
        cell = by_id.get(cell_id)
        if cell is None:
            continue
        row = rec["row"]
        for k, v in cell.data.items():
            if k != "kind" and k not in row:
                row[k] = v


def _run_locked(
    cfg: C.Experiment,
    out: Path,
    jobs: int,
    backend: str,
    fresh: bool,
    quiet: bool,
    config_path: str | None,
    extend: bool = False,
    one_at_a_time: frozenset[str] = frozenset(),
) -> dict:
    stored = prepare_dir(out, cfg, fresh, extend)
    resumed = stored is not None
    meta_path = out / "meta.json"
    previous = _previous_meta(meta_path) if resumed else {}
    first_start = _first_start(previous)
    older = _older_version(meta_path) if resumed else None
    if older is not None:  # said even with -q: the directory's provenance changes
        print(older_version_note(older, out), file=sys.stderr)
    write_atomic(out / "config.yaml", C.dump(cfg))
    all_cells = C.cells(cfg)
    order = {c.id: c.index for c in all_cells}
    log = CellLog(out)
    if log.detach() and not quiet:
        print(
            f"note: {log.path} had other hard links; ilnrun continues on its own copy and "
            "leaves the linked file as it was",
            file=sys.stderr,
        )
    # each cell's record digest, to check the records read back (none to read: a fresh log)
    digests = {c.id: C.record_digest(cfg, c) for c in all_cells} if log.has_lines() else {}
    done = log.read(repair=True, digests=digests)
    fill_added_settings(done, all_cells)
    log.vouch()  # the log as read (a torn tail cut off), unless edited since it was recorded
    late = rerun_timed_out(done, cfg.limits.cell_timeout_s, stored_timeout(stored or {}))
    for cell_id in late:
        del done[cell_id]
    log_notes(log, len(late), cfg.limits.cell_timeout_s, previous)
    pending = [c for c in all_cells if c.id not in done]
    start = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    env = numeric_env.collect()
    environments, env_changed = numeric_env.update_history(previous, env, start, len(done))
    if env_changed:  # said even with -q: the cells are computed under two environments
        print(environment_note(out, env_changed), file=sys.stderr)
    meta = {
        "ilnrun_version": __version__,
        "command": " ".join(sys.argv),
        "config_path": config_path,
        "start": start,
        "end": None,
        "cells": len(all_cells),
        "cells_resumed": len(done),
        "cells_left_out": log.left_out,
        "corrupt_lines": log.corrupt,
        "jobs": jobs,
        "threads_per_cell": threads_per_cell(),
        "backend": resolve_backend(backend),
        "git_commit": _git_commit(),
        "versions": _versions(),
        "platform": platform.platform(),
        "engine": cfg.engine,
        "compiled_kernels": _compiled_kernels(),
        "numeric_environment": env,
        "numeric_environments": environments,
    }
    if cfg.engine == "jax":
        from .engines.jax_env import device

        meta["device"] = device()
        if not quiet:
            print(f"engine jax on {meta['device']}", file=sys.stderr)
            if meta["device"].startswith("cpu"):
                print(CPU_JAX_NOTE, file=sys.stderr)
    if first_start is not None:
        meta["first_start"] = first_start
    if older is not None:
        meta["resumed_from_version"] = older
    write_atomic(meta_path, json.dumps(meta, indent=2))
    if not quiet:
        print(
            f"{cfg.name}: {len(all_cells)} cells, {len(done)} already done"
            f"{' (resuming)' if resumed else ''}, writing to {out}",
            file=sys.stderr,
        )
    progress = Progress(len(all_cells), len(done), quiet)

    def on_record(rec: dict) -> None:
        log.append(rec)
        done[rec["id"]] = rec
        progress.update()
        check_stop()  # a stop whose exception was swallowed

    try:
        # raises a stop asked for before (while jax was imported); the numpy engine's cells
        # stop where the signal lands, the jax engine's after their batch (ilnrun/stopping.py)
        with stop_on_signals(out, raising=cfg.engine != "jax"):
            execute(cfg, pending, jobs, backend, on_record, one_at_a_time)
            check_stop()
            modes = select_modes(cfg.evaluation.select_on, cfg.methods)
            runs = write_run_tables(
                out,
                list(done.values()),
                order,
                dataset_keys(cfg.dataset),
                modes,
                child=backend != "dask",  # (a dask client's threads run in this process)
            )
            log.vouch()  # the log's content now, for --fresh and the next resume
            meta["end"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
            write_atomic(meta_path, json.dumps(meta, indent=2))
            check_stop()
    except KeyboardInterrupt as exc:
        signum = getattr(exc, "signum", signal.SIGINT)
        raise RunInterrupted(signum, len(done), len(all_cells)) from None
    except WorkerLost as exc:
        raise RunBroken(str(exc), len(done), len(all_cells)) from None
    by_method = runs.groupby("method")
    eval_s = runs["eval_s"].fillna(0.0) if "eval_s" in runs else 0.0 * runs["wall_s"]
    return {
        "cells": len(all_cells),
        "resumed": meta["cells_resumed"],
        "diverged": by_method["diverged"].sum().astype(int).to_dict(),
        "timed_out": by_method["timed_out"].sum().astype(int).to_dict(),
        # cells whose evaluation (cell.evaluate) took longer than their training pass
        "eval_slower": (eval_s > runs["wall_s"]).groupby(runs["method"]).sum().to_dict(),
        "eval_s": float(eval_s.sum()),
        "train_s": float(runs["wall_s"].sum()),
    }


def _older_version(meta_path: Path) -> str | None:
    """The ilnrun version that wrote ``meta.json`` when it is not this one (``"unknown"`` for a
    directory written before ``meta.json`` carried a version); None when it is this version or
    there is no ``meta.json``. Read only after :func:`_first_start` has checked the file."""
    if not meta_path.exists():
        return None
    old = json.loads(meta_path.read_bytes())
    version = old.get("ilnrun_version") or (old.get("versions") or {}).get("ilnrun")
    if old.get("ilnrun_version") is None and version == __version__:
        version = None  # written by a development copy of this version, before the key existed
    if version == __version__:
        return None
    return str(version or "unknown")


def older_version_note(older: str, out: Path) -> str:
    """What ``ilnrun run`` says when it resumes a directory written by another version: it
    resumes because the resolved config still validates and equals the stored one, and every
    cell record is checked against its digest (records that differ run again)."""
    made = "an unknown earlier version" if older == "unknown" else f"version {older}"
    return (
        f"note: resuming {out}, written by ilnrun {made} (this is {__version__}): the config "
        f"still validates and equals the stored one, and each finished cell is kept only if its "
        f"record digest matches (others run again). Use --fresh to recompute every cell with "
        f"{__version__}."
    )


def environment_note(out: Path, changed: list[str]) -> str:
    """What ``ilnrun run`` says when it resumes a directory whose finished cells were computed
    under another numeric environment (:mod:`ilnrun.numeric_env`): one line, old -> new."""
    return (
        f"note: the numeric environment changed since the finished cells of {out} were "
        f"computed ({'; '.join(changed)}): the cells computed now may differ from what the "
        "earlier environment gives in the last digits; meta.json records both "
        "(numeric_environments) and the report says so"
    )


def _compiled_kernels() -> bool:
    """Whether the numpy engine's compiled kernels run (numba importable, not switched off)."""
    from .learners import shrinking_gradient_kernels

    return shrinking_gradient_kernels.available()


def _previous_meta(meta_path: Path) -> dict:
    """The ``meta.json`` of the run before this one (empty when there is none); exit status 2
    when it is unreadable."""
    if not meta_path.exists():
        return {}
    try:
        old = load_json(meta_path)
    except (OSError, ValueError, YamlLimitError):
        old = None
    if not isinstance(old, dict):
        raise RunDirError(
            f"{meta_path} is unreadable; use --fresh to discard the results in "
            f"{meta_path.parent}, or choose another --out"
        )
    return old


def _first_start(previous: dict) -> str | None:
    """When the first run into the directory started, from the earlier ``meta.json``."""
    first = previous.get("first_start", previous.get("start"))
    return first if isinstance(first, str) and len(first) <= 64 else None


def _limit(v: object) -> float | None:
    """A time limit as stored (a positive number), else ``None`` (none, or unreadable)."""
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
    return float(v) if ok else None


def stored_timeout(stored: dict) -> float | None:
    """``limits.cell_timeout_s`` of a stored config (the one the directory ran under before
    this run), ``None`` when it has none or it cannot be read."""
    limits = stored.get("limits")
    return _limit(limits.get("cell_timeout_s")) if isinstance(limits, dict) else None


def rerun_timed_out(done: dict[str, dict], limit: float | None, before: float | None) -> list[str]:
    """The ids of the records in ``done`` that timed out under a lower time limit than
    ``limit`` (``None``: no limit): their cells run again under it. A record names the limit it
    ran under (``timeout_s``); one written before records did is taken to have run under
    ``before``, the stored config's limit (a timed-out record whose limit is unknown runs again
    only when the config now sets none)."""
    late = []
    for cell_id, rec in done.items():
        if rec["row"].get("timed_out") is not True:
            continue
        ran = _limit(rec["timeout_s"]) if "timeout_s" in rec else before
        if limit is None or (ran is not None and limit > ran):
            late.append(cell_id)
    return late


def _count(recorded: object) -> int:
    """A count recorded in an earlier ``meta.json`` (0 where absent or not an integer)."""
    return recorded if isinstance(recorded, int) and not isinstance(recorded, bool) else 0


def _digest_cases(log: CellLog) -> str:
    """Why the ``altered`` records were skipped, by case: their ``values_sha256`` is missing
    (where the manifest does not vouch for them) or does not match their values."""
    unsigned, mismatched = log.unsigned, log.altered - log.unsigned
    if not unsigned:
        return f"their {VALUES_KEY} does not match their values"
    if not mismatched:
        return f"their {VALUES_KEY} is missing"
    return f"{VALUES_KEY} missing in {unsigned}, not matching the values in {mismatched}"


def log_notes(log: CellLog, timed_out: int, limit: float | None, previous: Mapping) -> None:
    """What reading the cell log found, on stderr (said even with ``-q``: they concern what the
    tables hold): records whose values changed and records of another config (their cells run
    again), cells that timed out under a lower limit (they run again), and — only when their
    number changed since the last run (``previous``, its ``meta.json``), since they stay in the
    log — corrupt lines and the cells the config no longer has."""
    where = log.path
    if log.corrupt and log.corrupt != _count(previous.get("corrupt_lines")):
        print(
            f"warning: skipped {log.corrupt} corrupt line(s) in {where}; their cells run again",
            file=sys.stderr,
        )
    if log.altered:
        print(
            f"warning: skipped {log.altered} record(s) in {where} whose values changed since "
            f"they were written ({_digest_cases(log)}); their cells run again",
            file=sys.stderr,
        )
    if log.ignored:
        print(
            f"warning: ignored {log.ignored} records of another config in {where} "
            f"(other seed, feature map, data or evaluation); their cells run again",
            file=sys.stderr,
        )
    if timed_out:
        now = "no limit" if limit is None else f"limits.cell_timeout_s = {limit:g}"
        print(
            f"note: {timed_out} cell(s) that timed out under a lower limits.cell_timeout_s run "
            f"again under {now}; their earlier records stay in {where}, out of the tables",
            file=sys.stderr,
        )
    if log.left_out and log.left_out != _count(previous.get("cells_left_out")):
        print(
            f"note: {log.left_out} cell(s) recorded in {where} are not cells of the config (grid "
            "points, repetitions or axis values it no longer has): left out of the tables, kept "
            f"in {CELL_LOG}",
            file=sys.stderr,
        )
