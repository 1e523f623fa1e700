"""Results on disk (docs/protocol.md §7): the cell log, ``runs.csv``, ``summary.csv``,
``curves.csv``.

- ``cells.jsonl`` holds one JSON record per finished cell, appended with a single ``write`` the
  moment the cell finishes; a line cut short by a kill is ignored on reading, so an interrupted run
  loses only cells in flight.
- The CSVs are derived from the cell log and written atomically (temporary file + rename).
- Selection (docs/protocol.md §4): for every (method, dataset setting, budget) the
  hyperparameter setting with the lowest mean validation loss over repetitions is selected;
  settings with a diverged or timed-out repetition are skipped; every grid point stays in
  ``runs.csv`` (column ``selected``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd

from .learners import hyper_columns, size_columns
from .stats import mean_ci

CELL_LOG = "cells.jsonl"
METRICS = (
    "test_loss",
    "online_loss",
    "val_loss",
    "test_loss_avg",
    "test_loss_estimated",
    "test_nmse",
    "test_loss_zero",
    "regret",
    "regret_estimated",
    "best_loss_B",
    "lemma5_max_ratio",
)


STATUS_COLUMNS = ("diverged", "diverged_reason", "timed_out", "rounds", "wall_s", "eval_s")


def int_columns() -> list[str]:
    """Integer columns that are missing for some learners (budget sizes, for instance)."""
    return ["dsgd_k", "budget_target", *size_columns()]


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file and ``os.replace``."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def copy_atomic(src: Path, dst: Path) -> None:
    """Copy ``src`` to ``dst`` via a temporary file and ``os.replace``."""
    tmp = dst.with_name(f".{dst.name}.tmp{os.getpid()}")
    tmp.write_bytes(Path(src).read_bytes())
    os.replace(tmp, dst)


class CellLog:
    """Append-only log of finished cells (``cells.jsonl``)."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / CELL_LOG

    def read(self, repair: bool = False) -> dict[str, dict]:
        """Records by cell id. A torn last line (a write cut short) is never returned; with
        ``repair`` it is also cut off the file, so that later appends start on a fresh line."""
        out: dict[str, dict] = {}
        if not self.path.exists():
            return out
        data = self.path.read_bytes()
        end = data.rfind(b"\n") + 1  # everything after the last newline is a torn record
        if repair and end < len(data):
            with open(self.path, "r+b") as fh:
                fh.truncate(end)
        for line in data[:end].splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            out[rec["id"]] = rec
        return out

    def append(self, record: dict) -> None:
        """Append one record with a single ``write`` (a kill leaves it whole or torn, never
        interleaved)."""
        line = (json.dumps(record, allow_nan=True) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)


def group_columns(runs: pd.DataFrame, dataset_keys: list[str]) -> list[str]:
    """A (method, dataset setting, budget) group."""
    return ["method", *dataset_keys, "dsgd_k"]


def select(runs: pd.DataFrame, dataset_keys: list[str]) -> pd.DataFrame:
    """Add the boolean column ``selected`` (selection on mean validation loss; a
    setting with a diverged or timed-out repetition is skipped)."""
    runs = runs.copy()
    runs["selected"] = False
    failed = runs["diverged"] | runs["timed_out"]
    for _, g in runs.assign(failed=failed).groupby(
        group_columns(runs, dataset_keys), dropna=False, sort=False
    ):
        per = g.groupby("setting", sort=False).agg(
            val=("val_loss", "mean"), failed=("failed", "any"), first=("cell_index", "min")
        )
        ok = per[~per["failed"] & np.isfinite(per["val"])]
        if ok.empty:
            continue
        best = ok.sort_values(["val", "first"]).index[0]
        runs.loc[g.index[g["setting"] == best], "selected"] = True
    return runs


def summarize(runs: pd.DataFrame, dataset_keys: list[str]) -> pd.DataFrame:
    """One row per (method, dataset setting, budget): the selected setting and, for each metric,
    mean, std, the 95% t-interval half-width ``t_{0.975,n-1} std / sqrt(n)``, and ``n``."""
    rows = []
    keys = group_columns(runs, dataset_keys)
    for gkey, g in runs.groupby(keys, dropna=False, sort=False):
        row = dict(zip(keys, gkey, strict=True))
        row["settings"] = g["setting"].nunique()
        row["diverged_cells"] = int(g["diverged"].sum())
        row["diverged_settings"] = int(g.groupby("setting")["diverged"].any().sum())
        row["timed_out_cells"] = int(g["timed_out"].sum())
        sel = g[g["selected"]]
        if sel.empty:
            row.update(setting=None, n=0)
            rows.append(row)
            continue
        first = sel.iloc[0]
        for c in ("setting", *hyper_columns(), "budget_match", "budget_target", *size_columns()):
            if c in first:
                row[c] = first[c]
        row["n"] = len(sel)
        for c in ("train_evals", "features_sampled", "shrinks", "test_evals", "wall_s"):
            row[f"{c}_mean"] = float(sel[c].mean())
        for metric in (m for m in METRICS if m in sel):
            st = mean_ci(sel[metric].to_numpy(dtype=float))
            row[f"{metric}_mean"] = st["mean"]
            row[f"{metric}_std"] = st["std"]
            row[f"{metric}_ci95"] = st["ci95"]
        rows.append(row)
    out = pd.DataFrame(rows)
    for col in int_columns():
        if col in out:
            out[col] = out[col].astype("Int64")
    return out


def build_tables(
    records: list[dict], order: dict[str, int], dataset_keys: list[str]
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """``runs``, ``summary`` and ``curves`` tables from cell records, in cell order."""
    recs = sorted(records, key=lambda r: order[r["id"]])
    runs = pd.DataFrame([{**r["row"], "cell_index": order[r["id"]]} for r in recs])
    # columns in order of appearance, the status columns last (whichever learner came first)
    status = [c for c in STATUS_COLUMNS if c in runs]
    runs = runs[
        [c for c in runs if c not in status and c != "cell_index"] + status + ["cell_index"]
    ]
    for col in int_columns():  # integers that are missing for some learners
        if col in runs:
            runs[col] = runs[col].astype("Int64")
    runs = select(runs, dataset_keys)
    summary = summarize(runs, dataset_keys)
    sel_ids = set(runs.loc[runs["selected"], "cell_id"])
    id_cols = ["method", *dataset_keys, "dsgd_k", "repetition", "setting"]
    parts = []
    for r in recs:
        if r["id"] not in sel_ids:
            continue
        c = pd.DataFrame(r["curve"])
        for col in reversed(id_cols):
            c.insert(0, col, r["row"][col])
        parts.append(c)
    curves = (
        pd.concat(parts, ignore_index=True)
        if parts
        else pd.DataFrame(columns=[*id_cols, "t", "online_loss"])
    )
    return runs.drop(columns=["cell_index"]), summary, curves


def write_tables(
    directory: Path, runs: pd.DataFrame, summary: pd.DataFrame, curves: pd.DataFrame
) -> None:
    for name, df in (("runs.csv", runs), ("summary.csv", summary), ("curves.csv", curves)):
        write_atomic(Path(directory) / name, df.to_csv(index=False))
