"""Where a first compilation of the compiled (numba) passes spends its CPU seconds
(``python bench/compile_profile.py FAMILY [--top 40] [--tree] [--passes] [--phases]``).

Runs ``bench/first_compile.py``'s config of ``FAMILY`` (coordinate, relu, fourier, random_net) in
this process, by ``ilnrun run --jobs 1``, on an empty ``NUMBA_CACHE_DIR``, and listens to numba's
events (``numba.core.event``): every ``numba:compile`` (one function compiled for one signature,
its callees compiled inside it while its types are inferred), every ``numba:run_pass`` (a
compiler pass) and every ``numba:llvm_lock`` (a call into LLVM). Prints, per compiled function,
its own CPU seconds (its compiles less the compiles nested in them) and the part of them spent in
LLVM, and its signatures; the (function, signature) pairs compiled more than once and by whom
(numba compiles its own functions once for each set of options of their callers); the compiles
that Python asked for, their callees' included; with ``--tree`` every compile where it nests,
``--passes`` the compiler passes' own seconds, ``--phases`` the seconds of numba's lowering and
LLVM steps (inclusive). Process CPU time (``time.process_time``); the listeners add a few per
cent (every call into LLVM is an event): ``bench/first_compile.py`` gives the figures to quote.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's ilnrun
from first_compile import config  # noqa: E402


class Profile:
    """Self-times of nested numba events (compile and run_pass), LLVM time per compile."""

    def __init__(self) -> None:
        self.stack: list[list] = []
        self.compile_self: dict[tuple, float] = defaultdict(float)
        self.compile_llvm: dict[tuple, float] = defaultdict(float)
        self.compile_order: list[tuple] = []
        self.roots: list[tuple] = []  # (key, inclusive seconds) of the compiles not nested
        self.pass_self: dict[str, float] = defaultdict(float)
        self.llvm_depth = 0
        self.llvm_start = 0.0
        self.llvm_outside = 0.0
        self.save = 0.0
        self.load = 0.0

    def on_compile(self, ev) -> None:
        if ev.is_start:
            d = ev.data["dispatcher"]
            name = d.py_func.__qualname__
            mod = d.py_func.__module__.rsplit(".", 1)[-1]
            key = (f"{mod}.{name}", ", ".join(str(a) for a in ev.data["args"]))
            parent = next((f[1][0] for f in reversed(self.stack) if f[0] == "compile"), "")
            depth = sum(f[0] == "compile" for f in self.stack)
            self.compile_order.append((depth, key, parent))
            self._push("compile", key)
        else:
            self._pop()

    def on_pass(self, ev) -> None:
        if ev.is_start:
            self._push("pass", ev.data["name"])
        else:
            self._pop()

    def on_llvm(self, ev) -> None:
        if ev.is_start:
            if self.llvm_depth == 0:
                self.llvm_start = time.process_time()
            self.llvm_depth += 1
        else:
            self.llvm_depth -= 1
            if self.llvm_depth == 0:
                dt = time.process_time() - self.llvm_start
                for frame in reversed(self.stack):
                    if frame[0] == "compile":
                        frame[5] += dt
                        break
                else:
                    self.llvm_outside += dt

    def _push(self, kind: str, key) -> None:
        # kind, key, start, seconds of the events nested in it, of the compiles nested in it,
        # of LLVM
        self.stack.append([kind, key, time.process_time(), 0.0, 0.0, 0.0])

    def _pop(self) -> None:
        kind, key, start, child, nested, llvm = self.stack.pop()
        total = time.process_time() - start
        if self.stack:
            self.stack[-1][3] += total
        if kind == "compile":
            self.compile_self[key] += total - nested
            self.compile_llvm[key] += llvm
            for frame in reversed(self.stack):  # the compile it is nested in
                if frame[0] == "compile":
                    frame[4] += total
                    break
            else:
                self.roots.append((key, total))
        else:
            self.pass_self[key] += total - child


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("family", choices=["coordinate", "relu", "fourier", "random_net"])
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--passes", action="store_true", help="print the compiler passes too")
    ap.add_argument("--phases", action="store_true", help="time the phases of numba's lowering")
    ap.add_argument("--tree", action="store_true", help="print the compiles as they nest")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="compile_profile-"))
    os.environ["NUMBA_CACHE_DIR"] = str(tmp / "cache")
    os.environ.pop("ILNRUN_NO_NUMBA", None)
    cfg = tmp / "c.yaml"
    cfg.write_text(yaml.safe_dump(config(args.family), sort_keys=False))

    c0 = time.process_time()
    import numba.core.event as ev
    from numba.core import caching

    prof = Profile()
    ev.register("numba:compile", _listener(prof.on_compile))
    ev.register("numba:run_pass", _listener(prof.on_pass))
    ev.register("numba:llvm_lock", _listener(prof.on_llvm))

    # (numba's saving and loading, under ilnrun.compiled_cache's checks)
    def timed(method, field: str):
        """``method`` whose CPU seconds are added to ``prof.<field>``."""

        def run(self, sig, arg):
            t = time.process_time()
            try:
                return method(self, sig, arg)
            finally:
                setattr(prof, field, getattr(prof, field) + time.process_time() - t)

        return run

    caching.Cache.save_overload = timed(caching.Cache.save_overload, "save")
    caching.Cache.load_overload = timed(caching.Cache.load_overload, "load")
    phases = _time_phases() if args.phases else {}
    from ilnrun.cli import main as cli

    c1 = time.process_time()
    try:
        cli(
            ["run", str(cfg), "--out", str(tmp / "out"), "--jobs", "1", "--quiet"],
            standalone_mode=False,
        )
    except SystemExit as exc:
        if exc.code:
            raise
    c2 = time.process_time()
    shutil.rmtree(tmp, ignore_errors=True)

    total_self = sum(prof.compile_self.values())
    total_llvm = sum(prof.compile_llvm.values())
    print(
        f"{args.family}: process {c2:.2f} CPU-s (imports before the run {c1 - c0:.2f}, run "
        f"{c2 - c1:.2f}); in numba:compile {total_self:.2f} (LLVM {total_llvm:.2f}), "
        f"cache saves {prof.save:.2f}, cache loads {prof.load:.2f}, LLVM outside compiles "
        f"{prof.llvm_outside:.2f}"
    )
    print(
        f"{len(prof.compile_self)} (function, signature) pairs, "
        f"{len({k[0] for k in prof.compile_self})} functions"
    )
    by_fn: dict[str, list] = defaultdict(lambda: [0, 0.0, 0.0])
    for (fn, sig), s in prof.compile_self.items():
        by_fn[fn][0] += 1
        by_fn[fn][1] += s
        by_fn[fn][2] += prof.compile_llvm[(fn, sig)]
    print("\nper function: signatures, own CPU-s, of which LLVM")
    for fn, (n, s, llvm) in sorted(by_fn.items(), key=lambda kv: -kv[1][1])[: args.top]:
        print(f"  {s:6.3f} {llvm:6.3f}  x{n}  {fn}")
    seen: dict[tuple, list] = defaultdict(list)
    for _, key, parent in prof.compile_order:
        seen[key].append(parent)
    again = {k: v for k, v in seen.items() if len(v) > 1}
    print(f"\n(function, signature) compiled more than once: {len(again)}")
    for (fn, sig), parents in again.items():
        callers = ", ".join(p.split(".")[-1] for p in parents)
        print(f"  x{len(parents)} {fn}({sig[:80]})  from {callers}")
    print("\nfunctions compiled for more than one signature:")
    for fn, (n, _, _) in by_fn.items():
        if n > 1:
            for (f, sig), s in prof.compile_self.items():
                if f == fn:
                    print(f"  {s:6.3f}  {fn}({sig[:300]})")
    print("\ncompiles called from Python (their callees' compiles included), in order:")
    for (fn, sig), total in prof.roots:
        print(f"  {total:6.3f}  {fn}({sig[:150]})")
    if phases:
        print("\nphases of the compiles (inclusive CPU-s, calls):")
        for name, (sec, n) in sorted(phases.items(), key=lambda kv: -kv[1][0]):
            print(f"  {sec:6.3f}  x{n:<4d} {name}")
    if args.tree:
        print("\nthe compiles, nested:")
        for depth, (fn, sig), _ in prof.compile_order:
            print(f"  {'  ' * depth}{prof.compile_self[(fn, sig)]:6.3f}  {fn}({sig[:100]})")
    if args.passes:
        print("\nper compiler pass, all functions: own CPU-s")
        by_pass: dict[str, float] = defaultdict(float)
        for name, sec in prof.pass_self.items():
            by_pass[name.split(" [")[0]] += sec
        for name, sec in sorted(by_pass.items(), key=lambda kv: -kv[1])[:30]:
            print(f"  {sec:6.3f}  {name}")


def _time_phases() -> dict:
    """Wrap numba's lowering and LLVM steps to count their CPU seconds (inclusive)."""
    from numba.core import codegen, lowering, typed_passes, typeinfer

    out: dict[str, list] = defaultdict(lambda: [0.0, 0])
    targets = [
        (lowering.Lower, "lower"),
        (lowering.Lower, "create_cpython_wrapper"),
        (lowering.Lower, "create_cfunc_wrapper"),
        (codegen.CPUCodeLibrary, "_optimize_functions"),
        (codegen.CPUCodeLibrary, "_optimize_final_module"),
        (codegen.CPUCodeLibrary, "_finalize_final_module"),
        (codegen.CPUCodeLibrary, "finalize"),
        (codegen.CPUCodeLibrary, "add_ir_module"),
        (codegen.CPUCodeLibrary, "serialize_using_object_code"),
        (typeinfer.TypeInferer, "propagate"),
        (typed_passes.BaseNativeLowering, "run_pass"),
    ]
    for cls, name in targets:
        orig = getattr(cls, name)

        def wrapped(*a, __orig=orig, __key=f"{cls.__name__}.{name}", **k):
            t = time.process_time()
            try:
                return __orig(*a, **k)
            finally:
                out[__key][0] += time.process_time() - t
                out[__key][1] += 1

        setattr(cls, name, wrapped)
    return out


def _listener(fn):
    """A numba event listener calling ``fn(event)`` at start and end."""
    import numba.core.event as ev

    class Listener(ev.Listener):
        def on_start(self, event):
            fn(event)

        def on_end(self, event):
            fn(event)

    return Listener()


if __name__ == "__main__":
    main()
