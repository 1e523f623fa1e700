"""Algorithm-2 test NMSE against ``m_test`` (``evaluation.m_test_sweep``): the kernel-free
predictor's NMSE as the samples per test point grow, beside the exact NMSE and the mean
predictor (Theorem 1.3 asks m_test to grow with T; docs/protocol.md §9.4)."""

from __future__ import annotations

from ...stats import mean_ci
from ..data import ReportData, fmt, label, md_table
from .figures import copy_figure


def render(r: ReportData) -> list[str]:
    from ...plots import m_test_sweep

    sweep = m_test_sweep(r.runs)
    if not sweep:
        return []
    runs = r.runs[r.runs["selected"]]
    cols = [c for _, c in sweep]
    exact = r.eval_kernel == "exact"
    head = ["learner", "k", *([r.xa] if r.xa else []), *(f"m_test = {m:,}" for m, _ in sweep)]
    head += ["exact test NMSE (closed-form kernel)"] if exact else []
    head += ["mean predictor's NMSE"]
    rows = []
    for m in r.methods:
        g = runs[runs["method"] == m]
        if g.empty or not g[cols].notna().any().any():
            continue
        for k in r.ks if r.budgeted(m) else [None]:
            for x in r.xs:
                h = g
                for key, v in r.keys(k if r.budgeted(m) else None, x).items():
                    h = h[h[key] == v]
                if h.empty:
                    continue
                cells = [_cell(h, c) for c in cols]
                cells += [_cell(h, "test_nmse")] if exact else []
                cells += [_cell(h, "test_nmse_const") if "test_nmse_const" in h else "—"]
                where = [x] if r.xa else []
                rows.append([label(m), k if k is not None else "—", *where, *cells])
    n_est = r.cfg["evaluation"].get("n_test_estimated", "all")
    L = [
        "## Algorithm-2 test NMSE against m_test",
        "",
        "The kernel-free predictor of each learner whose predictor is a kernel expansion, at its "
        "selected setting, scored by Algorithm 2 with m_test samples per test point (2·m_test "
        f"ψ-evaluations a point) on the first {n_est} test points, each m with its own generator "
        "(`test_nmse_estimated_m<m>`); mean ± 95% CI over repetitions. Theorem 1.3 evaluates "
        "with the training m, which grows with T: where the NMSE falls below the mean "
        "predictor's only at large m_test, a fixed small m_test hides what the method learned."
        + (" The exact NMSE is the same predictor with the closed-form kernel." if exact else ""),
        "",
        md_table(head, rows),
        "",
    ]
    if (name := copy_figure(r, "m_test")) is not None:
        L += [f"![{name}]({name})", ""]
    return L


def _cell(h, column: str) -> str:
    st = mean_ci(h[column].to_numpy(dtype=float))
    return fmt(st["mean"], st["ci95"])
