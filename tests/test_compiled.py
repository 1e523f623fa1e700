"""The compiled Shrinking Gradient kernels give the numpy code's numbers bit for bit.

Every feature map x sampler on small passes (one that shrinks, one that diverges, one long
enough for the ordered search): the compiled and the numpy path against each other and both
against golden values written by the numpy code before the compiled kernels existed
(``tests/compiled_cases.py``; compared within ``golden_values.RTOL``: another CPU's BLAS kernel
sums in another order); threads 1 and 2 identical; the numpy path where numba is absent
or switched off.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ilnrun.features import Coordinate
from ilnrun.learners import base
from ilnrun.learners import pcg64_kernels as pcg
from ilnrun.learners import shrinking_gradient as sg
from ilnrun.learners import shrinking_gradient_kernels as kernels

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compiled_cases as cases  # noqa: E402
import golden_values as gv  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = gv.golden("sg_numpy")
CASES = cases.cases()
IDS = [cases.case_id(*c) for c in CASES]
needs_numba = pytest.mark.skipif(not kernels.available(), reason="numba is not available")


@pytest.mark.parametrize("name", cases.compiled_learners())
def test_every_learner_with_compiled_code_has_cases(name):
    """The learners with compiled code come from the registry: each must be checked below."""
    assert name in cases.CHECKED_LEARNERS, f"{name} has compiled code but no compiled cases"


def test_every_map_the_kernels_know_is_a_case():
    """The maps come from the registry through ``kernels.kind_of``: the built-in three at least,
    and every case's map is one of them."""
    assert {"coordinate", "relu", "fourier"} <= set(cases.MAPS)
    assert {c[0] for c in CASES} == set(cases.MAPS)


@pytest.mark.parametrize("case", cases.golden_cases(), ids=lambda c: cases.case_id(*c))
def test_numpy_path_matches_golden(case):
    gv.assert_matches(cases.run_case(*case, path="numpy"), GOLDEN[cases.case_id(*case)])


@needs_numba
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_compiled_path_matches_numpy_and_golden(case):
    compiled = cases.run_case(*case, path="compiled")
    numpy = cases.run_case(*case, path="numpy")
    assert compiled.keys() == numpy.keys()
    for key in numpy:
        np.testing.assert_array_equal(compiled[key], numpy[key], err_msg=key, strict=True)
    if case[0] in cases.GOLDEN_MAPS:
        gv.assert_matches(compiled, GOLDEN[cases.case_id(*case)])


@needs_numba
@pytest.mark.parametrize("kind", cases.MAPS)
def test_fit_chooses_the_compiled_path(kind):
    assert kernels.use_compiled(cases.make_map(kind, 4))
    assert kernels.estimates_compiled(cases.make_map(kind, 4)) == (kind != "coordinate")
    # beyond MAX_D numpy sums one pair's w . x in buffered pieces: the numpy code runs
    assert kernels.use_compiled(cases.make_map(kind, kernels.MAX_D + 1)) == (kind == "coordinate")


@needs_numba
@pytest.mark.parametrize("kind", cases.MAPS)
@pytest.mark.parametrize("sampler", cases.SAMPLERS)
def test_threads_give_identical_numbers(kind, sampler):
    """A parallel search and gather (m >= PARALLEL_FROM) with 1 and 2 threads: the same pass."""
    X, y, _ = cases.data(40, 9)
    fmap = cases.make_map(kind, 9)
    m = sg.PARALLEL_FROM + 17
    kw = dict(eta=0.3, m=m, schedule="inv_sqrt", sampler=sampler)
    one, two = (sg.fit(X, y, fmap, np.random.default_rng(4), threads=n, **kw) for n in (1, 2))
    ref = sg.fit_numpy(X, y, fmap, np.random.default_rng(4), **kw)
    for res in (two, ref):
        np.testing.assert_array_equal(res.losses, one.losses, strict=True)
        np.testing.assert_array_equal(res.predictor.alpha, one.predictor.alpha, strict=True)
        assert res.counters == one.counters


@needs_numba
@pytest.mark.parametrize("sampler", cases.SAMPLERS)
def test_threads_give_identical_numbers_beyond_the_cache(sampler):
    """A parallel pass over stored rows beyond a core's cache that shrinks: 1, 2 and 3 threads
    and the numpy code agree, and leave the generator in the same state."""
    T, D = 300, 1000
    X, y, _ = cases.data(T, D)
    fmap = cases.make_map("coordinate", D)
    kw = dict(eta=3.0, m=sg.PARALLEL_FROM + 5, B=1 / 2048, sampler=sampler)
    rngs = [np.random.default_rng(7) for _ in range(4)]
    runs = [sg.fit(X, y, fmap, rngs[n - 1], threads=n, **kw) for n in (1, 2, 3)]
    ref = sg.fit_numpy(X, y, fmap, rngs[3], **kw)
    assert runs[0].counters["shrinks"] > 0 and len(runs[0].losses) == T
    for res in (*runs[1:], ref):
        np.testing.assert_array_equal(res.losses, runs[0].losses, strict=True)
        np.testing.assert_array_equal(res.predictor.alpha, runs[0].predictor.alpha, strict=True)
        assert res.counters == runs[0].counters
    assert all(r.bit_generator.state == rngs[3].bit_generator.state for r in rngs)


@needs_numba
@pytest.mark.parametrize("kind", cases.MAPS)
@pytest.mark.parametrize("sampler", cases.SAMPLERS)
@pytest.mark.parametrize("generator", ["pcg64", "mt19937"])
def test_generator_is_left_as_numpy_leaves_it(kind, sampler, generator):
    """The compiled pass leaves the cell's generator in the numpy pass's state (the cell draws
    on from it): where the kernels make the draws themselves (coordinate features, PCG64), and
    where they call the generator (other maps, other bit generators)."""
    X, y, _ = cases.data(120, 9)
    fmap = cases.make_map(kind, 9)
    kw = dict(eta=0.5, m=700, schedule="inv_sqrt", sampler=sampler)

    def rng():
        bits = np.random.PCG64(2) if generator == "pcg64" else np.random.MT19937(2)
        return np.random.Generator(bits)

    one, two = rng(), rng()
    res = sg.fit_compiled(X, y, fmap, one, **kw)
    ref = sg.fit_numpy(X, y, fmap, two, **kw)
    np.testing.assert_array_equal(res.losses, ref.losses, strict=True)
    np.testing.assert_equal(one.bit_generator.state, two.bit_generator.state)  # (arrays too)


def _first_redrawn_number(seed: int, d: int) -> int:
    """The index of the first 32-bit number of ``default_rng(seed)``'s stream that numpy's
    ``integers(0, d)`` redraws (Lemire's rejection: ``(x d) mod 2**32 < (2**32 - d) % d``)."""
    bits = np.random.default_rng(seed).bit_generator
    threshold, done, chunk = ((1 << 32) - d) % d, 0, 1 << 22
    while True:
        v = bits.random_raw(chunk).view(np.uint32).astype(np.uint64)  # low half, then high
        hit = np.flatnonzero((v * np.uint64(d)) & np.uint64(0xFFFFFFFF) < threshold)
        if len(hit):
            return done + int(hit[0])
        done += len(v)


@needs_numba
def test_parallel_draws_redraw_the_blocks_after_a_redrawn_number():
    """Each thread draws its block of a round's integers from where the stream would be without
    a redrawn number before it; a block in which numpy redraws one moves every later block's
    start. Here the first of two blocks of round 2 holds one: the later block is drawn again,
    and 1 and 2 threads and the numpy code agree (numbers and generator state)."""
    D, m = 800, sg.PARALLEL_FROM + 17
    X, y, _ = cases.data(12, D)
    fmap = cases.make_map("coordinate", D)
    P = _first_redrawn_number(1, D)
    # round 2 (the first that draws) draws m doubles, then its integers from 32-bit number 2J
    # on: the redrawn one is its integer P - 2J (about 100, in the first block of two)
    J = (P - 100) // 2
    assert m <= J

    def rng():
        r = np.random.default_rng(1)
        r.bit_generator.advance(J - m)
        return r

    check = rng()
    check.random(m)
    st = pcg.state_of(check)
    jt = pcg.jump_table(st[2], st[3])
    w = np.zeros(m, np.int64)
    *_, used = pcg.bounded(st[0], st[1], st[2], st[3], st[4], st[5], jt, D, w, 0, m // 2)
    assert used == m // 2 + 1  # the first block redraws one number
    kw = dict(eta=0.5, m=m, schedule="inv_sqrt")
    rngs = [rng() for _ in range(3)]
    runs = [sg.fit_compiled(X, y, fmap, rngs[n - 1], threads=n, **kw) for n in (1, 2)]
    ref = sg.fit_numpy(X, y, fmap, rngs[2], **kw)
    for res in (runs[1], ref):
        np.testing.assert_array_equal(res.losses, runs[0].losses, strict=True)
        np.testing.assert_array_equal(res.predictor.alpha, runs[0].predictor.alpha, strict=True)
    assert all(r.bit_generator.state == rngs[2].bit_generator.state for r in rngs)


@needs_numba
def test_threaded_pass_stops_its_threads(monkeypatch):
    """A threaded coordinate pass started and stopped many times (a deadline: calls of a few
    rounds) and one that diverges in the middle of a call: the numpy code's numbers, and no
    thread left running."""
    import threading

    X, y, _ = cases.data(60, 9)
    fmap = cases.make_map("coordinate", 9)
    before = threading.active_count()
    m = sg.PARALLEL_FROM + 9
    monkeypatch.setattr(base, "COMPILED_WORK_PER_CALL", 3 * m)
    kw = dict(eta=0.5, m=m, schedule="inv_sqrt")
    res = sg.fit(X, y, fmap, np.random.default_rng(2), threads=2, deadline=1e300, **kw)
    ref = sg.fit_numpy(X, y, fmap, np.random.default_rng(2), **kw)
    np.testing.assert_array_equal(res.losses, ref.losses, strict=True)
    X, y, _ = cases.data(80, 6)  # the printed (ascent) sign: diverges (compiled_cases)
    fmap = cases.make_map("coordinate", 6)
    kw = dict(eta=3.0, m=m, schedule="constant", B=1e6, printed_sign=True)
    res = sg.fit(X, y, fmap, np.random.default_rng(2), threads=2, **kw)
    ref = sg.fit_numpy(X, y, fmap, np.random.default_rng(2), **kw)
    assert res.diverged and ref.diverged
    np.testing.assert_array_equal(res.losses, ref.losses, strict=True)
    assert threading.active_count() == before


@needs_numba
@pytest.mark.parametrize("sampler", cases.SAMPLERS)
def test_rescale_rebuilds_the_search_guide(monkeypatch, sampler):
    """A pass whose global scale is folded into the coefficients again and again (every shrink
    here): the prefix sums are recomputed, the index search's guide built again; compiled with
    1 and 2 threads and numpy agree."""
    monkeypatch.setattr(sg, "RESCALE_BELOW", 0.5)
    X, y, _ = cases.data(200, 30)
    fmap = cases.make_map("coordinate", 30)
    kw = dict(eta=3.0, m=sg.PARALLEL_FROM + 3, B=1 / 512, sampler=sampler)
    runs = [sg.fit_compiled(X, y, fmap, np.random.default_rng(3), threads=n, **kw) for n in (1, 2)]
    ref = sg.fit_numpy(X, y, fmap, np.random.default_rng(3), **kw)
    assert ref.counters["shrinks"] > 3
    for res in (runs[1], ref):
        np.testing.assert_array_equal(res.losses, runs[0].losses, strict=True)
        np.testing.assert_array_equal(res.predictor.alpha, runs[0].predictor.alpha, strict=True)


@needs_numba
def test_compiled_pass_honours_the_deadline(monkeypatch):
    """A deadline already past stops the compiled pass after round 1, as the numpy pass; a
    later one is looked at between calls of rounds."""
    X, y, _ = cases.data(50, 5)
    res = sg.fit(X, y, Coordinate(5), np.random.default_rng(0), eta=0.3, m=8, deadline=0.0)
    assert res.timed_out and len(res.losses) == 1 and len(res.predictor.alpha) == 1
    monkeypatch.setattr(base, "COMPILED_WORK_PER_CALL", 10 * 8)
    res = sg.fit(X, y, Coordinate(5), np.random.default_rng(0), eta=0.3, m=8, deadline=1e300)
    ref = sg.fit_numpy(X, y, Coordinate(5), np.random.default_rng(0), eta=0.3, m=8)
    assert not res.timed_out
    np.testing.assert_array_equal(res.losses, ref.losses, strict=True)


def test_constants_agree():
    assert kernels.DIVERGENCE_BOUND == base.DIVERGENCE_BOUND


def test_sums_in_numpy_order():
    """The written-out sums are numpy's, bit for bit, at lengths around every block edge."""
    if not kernels.available():
        pytest.skip("numba is not available")
    rng = np.random.default_rng(0)
    for n in [*range(1, 40), 127, 128, 129, 255, 256, 257, 1000, 4097, kernels.MAX_D, 100_003]:
        a, b = rng.standard_normal(n), rng.standard_normal((2, n + 1))
        assert kernels.pairwise_sum(a, 0, n) == a.sum(), n
        if n <= kernels.MAX_D:  # the row form of FeatureMap.pairs (Fourier: without the phase)
            for rows in (1, 2):
                want = np.einsum("ij,ij->i", np.stack([a, a])[:rows], b[:rows, :n])
                assert kernels.einsum_dot(a, b[0], n) == want[0], n
        cum = np.cumsum(rng.integers(0, 3, n).astype(float))
        for key in rng.uniform(-1, cum[-1] + 1, 5):
            want = cum.searchsorted(key, side="right")
            assert kernels.upper_bound(cum, n, key) == want


@pytest.mark.parametrize("seed", range(6))
def test_guided_search_is_upper_bound(seed):
    """The guide's search (``guide_update``, ``guided_search``) finds
    ``cum[:n].searchsorted(key, side='right')`` (at most ``n``) for every key in ``[0, cum[n]]``,
    the prefix sums themselves included, with repeated sums (zero coefficients), sums spread
    over many decades, a guide grown round by round and one built at once."""
    if not kernels.available():
        pytest.skip("numba is not available")
    rng = np.random.default_rng(seed)
    T = 3000
    a = rng.choice([0.0, 1.0], T) * np.exp(rng.uniform(-30 if seed % 2 else -2, 2, T))
    a[0] = 1.0
    cum = np.concatenate([np.cumsum(a), np.full(4, np.inf)])
    G, guide = np.empty(2 * T + 2, np.int64), np.array([0, -1, T + 1])
    state = np.zeros(4)
    for n in (*range(0, 200, 7), *range(200, T - 1, 97), T - 1):
        grown = kernels.guide_update(cum, n, cum[n], G, guide, state)
        fresh = [np.empty(2 * T + 2, np.int64), np.array([0, -1, T + 1]), np.zeros(4)]
        assert grown and kernels.guide_update(cum, n, cum[n], fresh[0], fresh[1], fresh[2])
        keys = np.concatenate([cum[: n + 1], rng.uniform(0, cum[n], 50), [0.0, cum[n]]])
        keys = keys[keys <= cum[n]]
        want = np.minimum(cum[:n].searchsorted(keys, side="right"), n)
        for g, gd, st in ((G, guide, state), tuple(fresh)):
            top1 = float(gd[1] + 1)
            got = [kernels.guided_search(cum, n, k, g, top1, st[3]) for k in keys]
            np.testing.assert_array_equal(got, want)


def test_disagreeing_build_runs_numpy(monkeypatch, capsys):
    """A numpy build whose sums the kernels do not reproduce runs the numpy code, with a note."""
    monkeypatch.setattr(kernels, "_AGREES", {})
    monkeypatch.setattr(kernels, "_NOTED", set())
    monkeypatch.setattr(kernels, "agrees", lambda kind: False)
    if kernels.available():
        assert not kernels.use_compiled(Coordinate(3))
        assert "numpy code runs instead" in capsys.readouterr().err
    case = CASES[1]
    gv.assert_matches(cases.run_case(*case), GOLDEN[cases.case_id(*case)])


def _run(code: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'tests'}", **env},
        check=False,
    )


FALLBACK = """
import compiled_cases as c, golden_values as g
from ilnrun.learners import shrinking_gradient_kernels as k
gold = g.golden("sg_numpy")["fourier-iid-shrinks"]
case = [x for x in c.cases() if c.case_id(*x) == "fourier-iid-shrinks"][0]
print(k.available(), not g.beyond(c.run_case(*case), gold))
"""


def test_switched_off_runs_numpy_quietly():
    """``ILNRUN_NO_NUMBA=1``: the numpy path, the golden numbers, no note."""
    proc = _run(FALLBACK, {"ILNRUN_NO_NUMBA": "1"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "True"]
    assert "note:" not in proc.stderr


def test_without_numba_runs_numpy_with_one_note():
    """numba not importable (a Python it does not support): the numpy path with a one-line
    note, the golden numbers."""
    hide = "import sys; sys.modules['numba'] = None\n"
    proc = _run(hide + FALLBACK + "c.run_case(*case)\n", {"ILNRUN_NO_NUMBA": ""})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "True"]
    notes = [line for line in proc.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "numba is not available" in notes[0]
