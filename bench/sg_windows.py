"""Windows of one Shrinking Gradient pass, timed from the same state: the compiled pass, the numpy
pass and a roofline (``bench/compiled.py`` uses them; ``python bench/sg_windows.py`` times one
whole pass against its roofline, a few minutes at the default size).

A pass at T = 100 000, m = 50 000 draws 5 billion samples; its late rounds search and gather
among 100 000 stored rows of 640 MB, its first ones among a few. Both ends are timed as windows
of rounds played from a state (``shrinking_gradient.CompiledPass``: what ``fit_compiled``
carries between its calls):

- the first window: rounds ``0 .. k - 1`` of the pass;
- the last window: rounds ``T - k .. T - 1``, from a stand-in state: the rounds before it played
  by the compiled pass with ``m / 100`` samples a round (coefficients of the same kind, for a
  hundredth of the work); every path timed starts from that same state.

Three paths play a window:

- compiled: ``CompiledPass.rounds``, as ``fit_compiled`` calls it;
- numpy: the rounds of ``fit_numpy`` (its estimate and step, the same calls) from the state,
  with the square loss and the iid sampler: :func:`numpy_rounds`; its losses must equal the
  compiled ones, bit for bit;
- roofline: for every round, the pass's draws, made by the same generator calls as the numpy
  code (``random()`` m times, ``integers(0, D, m)``: numba's calls of numpy's generator), and
  the sum of the pass's own ``X[i_k, w_k]`` in draw order by a plain loop (:func:`roofline`):
  what any pass must at least do, with the pass's own memory reads. The indices ``i_k`` are
  found beforehand, untimed, from the prefix sums the compiled window left (the same keys, the
  same ``searchsorted``); "gather" is the sum alone, "same draws" the draws and the sum.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ilnrun.features import Coordinate  # noqa: E402
from ilnrun.learners import shrinking_gradient as sg  # noqa: E402
from ilnrun.learners import shrinking_gradient_kernels as kernels  # noqa: E402
from ilnrun.numeric_env import one_thread  # noqa: E402
from ilnrun.schedules import step_sizes  # noqa: E402

D = 800
ETA, SCHEDULE = 0.3, "inv_sqrt"


def data(T: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Clipped-Gaussian-like inputs (D = 800) and labels of a sparse linear target."""
    rng = np.random.default_rng(seed)
    X = np.clip(rng.standard_normal((T, D)) / 2.0, -1.0, 1.0)
    y = np.tanh(X[:, :10].sum(axis=1) / 3.0)
    return X, y


ARRAYS = ("a", "sgn", "cum", "alpha_new", "alpha_l1", "losses", "shrinks_before", "state",
          "counts", "G", "guide")  # fmt: skip


def new_pass(X, y, rng, m: int, threads: int = 1, like=None) -> sg.CompiledPass:
    """``fit_compiled``'s pass over ``(X, y)`` (coordinate features, iid sampler) drawing from
    ``rng``, with ``m`` samples a round on ``threads`` threads; with ``like``, from a copy of
    that pass's state."""
    hp = sg.Settings(eta=ETA, m=m, schedule=SCHEDULE, threads=threads)
    run = sg.CompiledPass(X, y, Coordinate(X.shape[1]), rng, hp)
    if like is not None:
        for name in ARRAYS:
            getattr(run, name)[...] = getattr(like, name)
    return run


def numpy_rounds(st, X: np.ndarray, y: np.ndarray, rng, t0: int, t1: int, m: int) -> None:
    """Rounds ``t0 .. t1 - 1`` of ``fit_numpy`` (square loss, iid sampler, coordinate features)
    from ``st``: its estimate and its step, the same calls in the same order."""
    fmap = Coordinate(X.shape[1])
    etas = step_sizes(SCHEDULE, ETA, st.T, None)
    a, sgn, cum = st.a, st.sgn, st.cum
    s, total, shrinks = float(st.state[0]), float(st.state[1]), int(st.counts[0])
    threshold = sg.SHRINK_BOUND
    for t in range(t0, t1):
        st.shrinks_before[t] = shrinks
        y_t = float(y[t])
        E = 0.0
        if total > 0.0:  # fit_numpy's estimate()
            u = rng.random(m)
            u *= total
            i, order, i_sorted = sg.draw_indices(cum[: t - 1], u)
            w = fmap.sample(rng, m)
            psi_i = sg.gather_pairs(fmap.pairs, X, i, w, order, i_sorted)
            psi_t = fmap.point(X[t], w)
            signed = sgn.take(i)
            signed *= psi_i
            E = s * total / m * float(np.dot(signed, psi_t))
        st.losses[t] = 0.5 * (E - y_t) ** 2
        if abs(E) < threshold:
            step = etas[t] * (y_t - E)
            st.alpha_new[t] = step
            a[t] = step / s
            sgn[t] = np.sign(a[t])
            total = total + abs(a[t])
        else:
            s /= 4.0
            shrinks += 1
        cum[t] = total
        st.alpha_l1[t] = s * total
        if s < sg.RESCALE_BELOW:
            a[: t + 1] *= s
            np.sign(a[: t + 1], out=sgn[: t + 1])
            np.cumsum(np.abs(a[: t + 1]), out=cum[: t + 1])
            total, s = float(cum[t]), 1.0
    st.state[0], st.state[1], st.counts[0] = s, total, shrinks


if kernels.available():
    import numba

    @numba.njit(cache=True)
    def _indices(X, cum, t0, t1, m, rng, rows, cols, G, guide, state):
        """The pass's draws of rounds ``t0 .. t1 - 1`` (the numpy code's calls) and its indices
        ``i = searchsorted(cum[:t - 1], u cum[t - 1], side='right')`` into ``rows`` (found as
        the compiled pass finds them: ``kernels.guided_search``), the coordinates into
        ``cols``, a row of each per round."""
        for t in range(t0, t1):
            total = cum[t - 1] if t > 0 else 0.0
            if total > 0.0:
                u = np.empty(m)
                for k in range(m):
                    u[k] = rng.random() * total
                cols[t - t0] = rng.integers(0, X.shape[1], m)
                n = t - 1
                kernels.guide_update(cum, n, total, G, guide, state)
                top1 = float(guide[1] + 1)
                for k in range(m):
                    rows[t - t0, k] = kernels.guided_search(cum, n, u[k], G, top1, state[3])

    @numba.njit(cache=True)
    def _draws_and_gather(X, cum, t0, t1, m, rng, rows):
        """The same draws (the same calls), and the sum of ``X[i_k, w_k]`` in draw order."""
        acc, u = 0.0, np.empty(m)
        for t in range(t0, t1):
            total = cum[t - 1] if t > 0 else 0.0
            if total > 0.0:
                for k in range(m):
                    u[k] = rng.random() * total
                w = rng.integers(0, X.shape[1], m)
                r = rows[t - t0]
                for k in range(m):
                    acc += X[r[k], w[k]]
        return acc

    @numba.njit(cache=True)
    def _gather(X, cum, t0, t1, rows, cols):
        """The sum of ``X[i_k, w_k]`` in draw order, alone."""
        acc = 0.0
        for t in range(t0, t1):
            if t > 0 and cum[t - 1] > 0.0:
                r, c = rows[t - t0], cols[t - t0]
                for k in range(len(r)):
                    acc += X[r[k], c[k]]
        return acc


def roofline(
    X: np.ndarray, cum: np.ndarray, rng_state: dict, t0: int, t1: int, m: int, reps: int = 1
) -> tuple[float, float]:
    """CPU seconds of (the same draws and the gather, the gather alone) over rounds ``t0 ..
    t1 - 1``, whose prefix sums ``cum`` a compiled window left (``T`` of them, then ``+inf``),
    from the generator state the window started with (batches of rounds: indices found
    untimed, then the two timed, each ``reps`` times in a row: a short window's time is then
    above the timer's grain; the seconds returned are per repetition)."""
    batch = max(1, (1 << 21) // m)
    rng = np.random.default_rng()
    rng.bit_generator.state = rng_state
    rows, cols = np.zeros((batch, m), np.int64), np.zeros((batch, m), np.int64)
    T = len(cum) - 4
    G, guide, state = np.empty(2 * max(T, 64) + 2, np.int64), np.array([0, -1, T + 1]), np.zeros(4)
    both = alone = 0.0
    for b0 in range(t0, t1, batch):
        b1 = min(t1, b0 + batch)
        start = rng.bit_generator.state
        _indices(X, cum, b0, b1, m, rng, rows, cols, G, guide, state)
        after = rng.bit_generator.state
        c = time.process_time()
        for _ in range(reps):
            rng.bit_generator.state = start
            _draws_and_gather(X, cum, b0, b1, m, rng, rows)
        both += time.process_time() - c
        c = time.process_time()
        for _ in range(reps):
            _gather(X, cum, b0, b1, rows, cols)
        alone += time.process_time() - c
        rng.bit_generator.state = after
    return both / reps, alone / reps


def stand_in(X: np.ndarray, y: np.ndarray, t_start: int, m: int, seed: int = 1):
    """The pass and generator after rounds ``0 .. t_start - 1`` played by the compiled pass
    with ``max(1, m // 100)`` samples a round (the last window's stand-in start)."""
    rng = np.random.default_rng(seed)
    run = new_pass(X, y, rng, max(1, m // 100))
    run.rounds(0, t_start)
    return run, rng


def main() -> None:
    ap = argparse.ArgumentParser(description="One whole compiled pass against its roofline.")
    ap.add_argument("--T", type=int, default=100_000)
    ap.add_argument("--m", type=int, default=50_000)
    ap.add_argument("--windows", type=int, default=10, help="report the rate by tenths, etc.")
    args = ap.parse_args()
    if not kernels.available():
        print("numba is not available")
        return
    X, y = data(args.T)
    T, m = args.T, args.m
    with one_thread():  # native thread pools on one thread, as in every cell
        new_pass(X[:300], y[:300], np.random.default_rng(1), m).rounds(0, 300)  # compiles
        rng = np.random.default_rng(1)
        st = new_pass(X, y, rng, m)
        marks = np.linspace(0, T, args.windows + 1).astype(int)
        starts, cpu = [], []
        for t0, t1 in zip(marks, marks[1:], strict=False):
            starts.append(rng.bit_generator.state)
            c = time.process_time()
            st.rounds(t0, t1)
            cpu.append(time.process_time() - c)
        total_both = total_alone = 0.0
        for (t0, t1), s0, c in zip(zip(marks, marks[1:], strict=False), starts, cpu, strict=False):
            both, alone = roofline(X, st.cum, s0, t0, t1, m)
            total_both, total_alone = total_both + both, total_alone + alone
            n = (t1 - max(t0, 1)) * m
            print(
                f"rounds {t0:,}-{t1:,}: compiled {n / c / 1e6:.1f}, roofline (same draws) "
                f"{n / both / 1e6:.1f}, gather {n / alone / 1e6:.1f} M samples/s; "
                f"compiled / roofline {both / c:.2f}",
                flush=True,
            )
    n = int(st.counts[1])
    print(
        f"whole pass T={T:,} m={m:,}: {n:,} samples; compiled {sum(cpu):.1f} CPU-s "
        f"({n / sum(cpu) / 1e6:.1f} M/s), roofline same draws {total_both:.1f} CPU-s "
        f"({n / total_both / 1e6:.1f} M/s), gather alone {total_alone:.1f} CPU-s "
        f"({n / total_alone / 1e6:.1f} M/s); compiled / roofline (same draws) "
        f"{total_both / sum(cpu):.2f}"
    )


if __name__ == "__main__":
    main()
