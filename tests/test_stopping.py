"""ilnrun/stopping.py in-process: a stop that lands while numba compiles or loads a kernel waits
for the compilation to end (an exception raised half-way through LLVM's JIT crashed the process
later: a segmentation fault in about 1 of 50 SIGINTs that came while a kernel was loaded)."""

from __future__ import annotations

import signal

import pytest

from ilnrun import compiled_cache, stopping


@pytest.fixture
def guard():
    old = {sig: signal.getsignal(sig) for sig in stopping.SIGNALS}
    g = stopping.install(raising=True)
    yield g
    g.close()
    stopping.reset_stop()
    for sig, h in old.items():
        signal.signal(sig, h)


class _Dispatcher:
    """A dispatcher whose compilation is where the signal lands."""

    def __init__(self) -> None:
        self.done: list[str] = []

    def compile(self, sig: str) -> str:
        stopping.stop_handler(signal.SIGINT, None)  # the C-level handler's call, mid-compile
        self.done.append(sig)
        return sig


def test_a_stop_during_a_compilation_is_raised_when_it_ends(guard):
    d = compiled_cache._uninterrupted(_Dispatcher())
    with pytest.raises(stopping.Stop):
        d.compile("(float64,)")
    assert d.done == ["(float64,)"]  # the compilation ran to its end
    assert stopping.stop_requested() == signal.SIGINT


def test_without_a_deferred_block_the_stop_lands_where_it_comes(guard):
    plain = _Dispatcher()
    with pytest.raises(stopping.Stop):
        plain.compile("(float64,)")
    assert plain.done == []


def test_the_kernels_compile_in_a_deferred_block(guard, monkeypatch):
    """Every dispatcher ilnrun makes wraps its ``compile`` (a cache load happens there too)."""
    pytest.importorskip("numba")
    seen: list[int] = []
    real = stopping.deferred

    def spy():
        seen.append(1)
        return real()

    monkeypatch.setattr(compiled_cache, "deferred", spy)

    def plus_one(x):
        return x + 1

    d = compiled_cache.jit(plus_one)
    assert d(1.0) == 2.0 and seen
