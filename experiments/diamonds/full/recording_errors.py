"""How much of each split's loss comes from diamonds' recording errors.

Usage (after ``ilnrun run configs/diamonds_full_X.yaml``)::

    python experiments/diamonds/full/recording_errors.py results/diamonds_full_relu

For every repetition it rebuilds the splits the learners saw (``ilnrun.load``; a split's
``info["rows"]`` are its rows of the shipped table), flags the rows whose dimensions x, y, z
(mm) are recording errors — a dimension of 0, or one above ``FAR_MM`` (diamonds' y = 58.9,
y = 31.8 and z = 31.8; the largest plausible dimension is 10.7) — and refits the run's Nyström
reference at its smallest rank and the middle of its ridge grid (seconds) to show how much of
its validation and test loss those rows carry. Prints a Markdown table.
"""

from __future__ import annotations

import sys

import numpy as np
import plotnine.data

import ilnrun

FAR_MM = 20.0


def bad_rows() -> set[int]:
    """Row numbers of the shipped table with a 0 or implausibly large dimension."""
    d = plotnine.data.diamonds.dropna()
    xyz = d[["x", "y", "z"]].to_numpy()
    return set(np.flatnonzero(((xyz == 0) | (xyz > FAR_MM)).any(axis=1)).tolist())


def main(results_dir: str) -> None:
    res = ilnrun.load(results_dir)
    bad = bad_rows()
    nys = res.runs[res.runs.method == "nystroem_ridge"]
    rank = int(nys["rank"].min())
    ridges = sorted(nys.ridge.unique())
    ridge = float(ridges[len(ridges) // 2])
    print(f"{len(bad)} rows of diamonds have a dimension of 0 or above {FAR_MM:g} mm.")
    print(f"Nyström kernel ridge refitted at rank {rank}, ridge {ridge:g}:\n")
    print(
        "| repetition | such rows in train / val / test | Nyström val loss"
        " (share of those rows) | Nyström test loss (share of those rows) |"
    )
    print("|---|---|---|---|")
    for rep in sorted(nys.repetition.unique()):
        sel = nys[(nys.repetition == rep) & (nys["rank"] == rank) & (nys.ridge == ridge)]
        cell = res.cell(sel.cell_id.iloc[0])
        rows = np.asarray(cell.instance.data.info["rows"])
        T, n_val = len(cell.y_train), len(cell.y_val)
        where = {
            "train": rows[:T],
            "val": rows[T : T + n_val],
            "test": rows[T + n_val :],
        }
        is_bad = {s: np.isin(r, list(bad)) for s, r in where.items()}
        est = cell.estimator().fit(cell.X_train, cell.y_train)
        cols = [" / ".join(str(int(is_bad[s].sum())) for s in ("train", "val", "test"))]
        for s in ("val", "test"):
            X, y = getattr(cell, f"X_{s}"), getattr(cell, f"y_{s}")
            sq = 0.5 * (est.predict(X) - y) ** 2
            cols.append(f"{sq.mean():.4g} ({100 * sq[is_bad[s]].sum() / sq.sum():.0f}%)")
        print(f"| {rep} | " + " | ".join(cols) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
