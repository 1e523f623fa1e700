"""``ilnrun run``: a results directory, resumed or fresh, filled with every cell of a config.

Results are never overwritten silently: a directory holding the same resolved config is resumed
(finished cells are skipped); a different config is refused unless ``--fresh`` is given.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import platform
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path

import yaml

from . import config as C
from .results import CELL_LOG, CellLog, build_tables, write_atomic, write_tables
from .runner import Progress, execute

OUTPUTS = (CELL_LOG, "runs.csv", "summary.csv", "curves.csv", "config.yaml", "meta.json")
LOCK = ".lock"
FIGURE_PREFIXES = ("figure1", "curves", "budget_sweep", "regret")


def dataset_keys(cfg: dict) -> list[str]:
    """The dataset parameters that identify a dataset setting (columns of the tables)."""
    return [k for k in cfg["dataset"] if k != "kind"]


class RunDirError(Exception):
    """The results directory cannot be used as asked (exit status 2)."""


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
    s = repr(v)
    return s if len(s) <= width else s[: width - 3] + "..."


def _numbers_part(cfg: dict) -> dict:
    """The config without its free-text ``description`` (which changes no number)."""
    return {k: v for k, v in cfg.items() if k != "description"}


def prepare_dir(out: Path, cfg: dict, fresh: bool) -> bool:
    """Check the (existing) directory ``out``; return True when resuming earlier work."""
    existing = [p for p in out.iterdir() if not p.name.startswith(".")]
    if not existing:
        return False
    cfg_path = out / "config.yaml"
    if not cfg_path.exists():
        raise RunDirError(
            f"output directory {str(out)!r} is not empty and holds no ilnrun "
            f"config.yaml; choose another --out"
        )
    if fresh:
        for p in existing:
            if p.name in OUTPUTS or (
                p.suffix in (".png", ".pdf") and p.name.startswith(FIGURE_PREFIXES)
            ):
                p.unlink()
        return False
    old = yaml.safe_load(cfg_path.read_text()) or {}
    if _numbers_part(old) != _numbers_part(cfg):
        diff = "\n".join(config_diff(_numbers_part(old), _numbers_part(cfg)))
        raise RunDirError(
            f"{out} holds results of a different config:\n{diff}\n"
            f"Use --fresh to discard them and start over, or --out to write "
            f"elsewhere."
        )
    return True


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
    out = {"python": platform.python_version()}
    for pkg in ("ilnrun", "numpy", "pandas", "joblib", "click", "pyyaml", "matplotlib"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def run(
    cfg: dict,
    out: Path,
    *,
    jobs: int = 1,
    backend: str = "loky",
    fresh: bool = False,
    quiet: bool = False,
    config_path: str | None = None,
) -> dict:
    """Run every unfinished cell of ``cfg`` into ``out``; write the tables; return a short
    summary (cells run, resumed, diverged and timed-out cells per learner, cells whose
    evaluation took longer than training and the seconds of both over all cells)."""
    if out.exists() and not out.is_dir():
        raise RunDirError(f"output path {str(out)!r} exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    with _exclusive(out):
        return _run_locked(cfg, out, jobs, backend, fresh, quiet, config_path)


@contextmanager
def _exclusive(out: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``out/.lock`` so two runs never write one directory; the
    operating system releases it when the process ends, however it ends."""
    fh = open(out / LOCK, "a")  # noqa: SIM115 - held for the whole run
    try:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunDirError(f"another `ilnrun run` is writing to {out}") from None
        yield
    finally:
        fh.close()


def _run_locked(cfg, out, jobs, backend, fresh, quiet, config_path) -> dict:
    resumed = prepare_dir(out, cfg, fresh)
    write_atomic(out / "config.yaml", C.dump(cfg))
    all_cells = C.cells(cfg)
    order = {c.id: c.index for c in all_cells}
    log = CellLog(out)
    done = {k: v for k, v in log.read(repair=True).items() if k in order}
    pending = [c for c in all_cells if c.id not in done]
    meta = {
        "command": " ".join(sys.argv),
        "config_path": config_path,
        "start": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "end": None,
        "cells": len(all_cells),
        "cells_resumed": len(done),
        "jobs": jobs,
        "backend": backend,
        "git_commit": _git_commit(),
        "versions": _versions(),
        "platform": platform.platform(),
    }
    meta_path = out / "meta.json"
    if resumed and meta_path.exists():
        old = json.loads(meta_path.read_text())
        meta["first_start"] = old.get("first_start", old.get("start"))
    write_atomic(meta_path, json.dumps(meta, indent=2))
    if not quiet:
        print(
            f"{cfg['name']}: {len(all_cells)} cells, {len(done)} already done"
            f"{' (resuming)' if resumed else ''}, writing to {out}",
            file=sys.stderr,
        )
    progress = Progress(len(all_cells), len(done), quiet)

    def on_record(rec: dict) -> None:
        log.append(rec)
        done[rec["id"]] = rec
        progress.update()

    execute(cfg, pending, jobs, backend, on_record)
    runs, summary, curves = build_tables(list(done.values()), order, dataset_keys(cfg))
    write_tables(out, runs, summary, curves)
    meta["end"] = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    write_atomic(meta_path, json.dumps(meta, indent=2))
    by_method = runs.groupby("method")
    eval_s = runs["eval_s"].fillna(0.0) if "eval_s" in runs else 0.0 * runs["wall_s"]
    return {
        "cells": len(all_cells),
        "resumed": meta["cells_resumed"],
        "diverged": by_method["diverged"].sum().astype(int).to_dict(),
        "timed_out": by_method["timed_out"].sum().astype(int).to_dict(),
        # cells whose evaluation (runner.evaluate) took longer than their training pass
        "eval_slower": (eval_s > runs["wall_s"]).groupby(runs["method"]).sum().to_dict(),
        "eval_s": float(eval_s.sum()),
        "train_s": float(runs["wall_s"].sum()),
    }
