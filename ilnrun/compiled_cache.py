"""numba's on-disk compilation cache for ilnrun's kernels, proof against damaged files and safe
for several processes compiling at once: :func:`jit` (``numba.njit(cache=True)`` with
:class:`CheckedCache` as the dispatcher's cache).

What numba itself guarantees (0.68, ``numba/core/caching.py``, ``IndexDataCacheFile``): a cached
function has an index file (``<function>-<line>.py311.nbi``: numba's version, then a pickle of
the source file's stamp and a map from signature and target to a data file name) and one data
file per signature (``….<n>.nbc``: a pickle of the compiled code). Each file is written whole to
a uniquely named temporary file beside it and moved into place with ``os.replace``, so a reader
sees the old file or the new one, never a partly written one, whatever the processes writing; a
data file the index names but that is missing is a miss (compiled again).

What it does not guarantee, and this module adds:

- **A damaged file** (truncated, emptied or overwritten from outside numba: a copy or restore cut
  short, a disk error) is unpickled as it is: a truncated pickle raised ``EOFError`` out of the
  call that compiles (click printed a bare ``Aborted!``, exit status 1), garbage an
  ``UnpicklingError``, in every later run until the file was deleted; bytes that still unpickle
  would be loaded as machine code. Here every file ilnrun's kernels write carries the SHA-256 of
  its content (:data:`MAGIC`, digest, body; the files of plain numba are never read, their names
  differ), and a file whose digest or unpickling fails is a miss: the function's index and data
  files are removed (under the lock, after a second look: another process may have just
  replaced them) and the function is compiled and saved again, with a one-line note naming the
  directory. Where they cannot be removed, the note says to delete the directory; the kernels
  are then compiled in memory.
- **Concurrent writers.** Saving is a read-modify-write of the index: two processes saving
  different signatures of one function at once could both pick data file 1, and the index would
  then name one signature's code for the other. Here saving (index and data) holds an exclusive
  ``fcntl.flock`` on :data:`LOCK_NAME` in the cache directory, so saves are one at a time and
  each sees the index the previous one wrote; loading takes no lock (files are replaced whole).
  Several processes compiling the same function on an empty cache each compile it (the same
  code) and save one after the other.
- **A cache that cannot be written** (full disk, read-only directory) leaves the kernel compiled
  in memory for this process, with a one-line note, instead of failing the run.

What is compiled: every kernel with the same numba options (:data:`OPTIONS`, numba's own
functions then compiled once for all of them); a kernel that only compiled code calls without a
CPython wrapper (``jit(internal=True)``: its Python calls go to a twin) and without machine code
of its own (its callers carry its code: :func:`_link_only`); and every kernel by numba's
compiler less what costs time and changes no code (:func:`_kernel_compiler`: options shared
between compilations, passes that find nothing to do left out, numba's Python form of the LLVM
IR emptied once LLVM has it, helpers that answer the same question again and again answering it
once). None of this changes a number: the options are those of numba's defaults but for the
GIL, which the kernels release, and the C-callable wrapper, which nothing calls. A compilation
(or cache load) runs with Python's garbage collector paused (:func:`_no_gc`) and is not cut
short by a stop (:func:`_uninterrupted`).
"""

from __future__ import annotations

import fcntl
import functools
import gc
import hashlib
import os
import pickle
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import CodeType, SimpleNamespace

from .stopping import deferred

LOCK_NAME = "ilnrun-numba.lock"
MAGIC = b"ilnrun-checked-1\n"  # starts every index body and data file written here
SUFFIX = "-ilnrun1"  # appended to numba's file names: plain numba's files are never read
COMPILE_STACK = 16 << 20  # bytes of C stack of the thread a compilation runs in (_in_own_thread)
_NOTED: set[str] = set()
_remove = os.unlink  # (a test makes it fail)


class DamagedCacheFile(ValueError):
    """A cache file whose digest or content is not what this module wrote."""


def _note(msg: str) -> None:
    """A one-line note on stderr, once per process."""
    if msg not in _NOTED:
        _NOTED.add(msg)
        print(f"note: {msg}", file=sys.stderr)


def checked_body(data: bytes, path: str) -> bytes:
    """``data`` (as written by :func:`_seal`) without its header; raises
    :class:`DamagedCacheFile` when the header or the digest is wrong."""
    head = len(MAGIC) + 32
    if len(data) < head or not data.startswith(MAGIC):
        raise DamagedCacheFile(f"{path}: no ilnrun header")
    body = data[head:]
    if hashlib.sha256(body).digest() != data[len(MAGIC) : head]:
        raise DamagedCacheFile(f"{path}: digest differs")
    return body


def _seal(body: bytes) -> bytes:
    return MAGIC + hashlib.sha256(body).digest() + body


@contextmanager
def locked(directory: str) -> Iterator[None]:
    """An exclusive ``flock`` on ``directory/LOCK_NAME`` (released when the block ends or the
    process dies); no lock where the file cannot be created (a read-only cache, which nothing
    writes either)."""
    try:
        fd = os.open(os.path.join(directory, LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


@functools.cache
def _cache_class() -> type:
    """:class:`CheckedCache`, made on first use so that importing this module imports no numba."""
    from numba.core.caching import FunctionCache, IndexDataCacheFile

    class CheckedFile(IndexDataCacheFile):
        """numba's index and data files with a digest on each (see the module's docstring)."""

        def _dump(self, obj: object) -> bytes:
            return _seal(super()._dump(obj))

        def _load_index(self) -> dict:
            # numba's own, with the digest checked before the body is unpickled
            try:
                with open(self._index_path, "rb") as f:
                    version = pickle.load(f)
                    data = f.read()
            except FileNotFoundError:
                return {}
            except (EOFError, pickle.UnpicklingError) as exc:
                raise DamagedCacheFile(f"{self._index_path}: {exc}") from None
            if version != self._version:  # another numba's: replaced when saved
                return {}
            stamp, overloads = pickle.loads(checked_body(data, self._index_path))
            if not isinstance(overloads, dict):
                raise DamagedCacheFile(f"{self._index_path}: not an index")
            return overloads if stamp == self._source_stamp else {}

        def _load_data(self, name: str) -> object:
            path = self._data_path(name)
            with open(path, "rb") as f:
                data = f.read()
            return pickle.loads(checked_body(data, path))

        def files(self) -> list[str]:
            """The paths of this function's index and data files present now."""
            index = os.path.basename(self._index_path)
            base = index[: -len(".nbi")] + "."
            try:
                names = os.listdir(self._cache_path)
            except OSError:
                return []
            data = [
                n
                for n in names
                if n.startswith(base) and n.endswith(".nbc") and n[len(base) : -4].isdigit()
            ]
            return [os.path.join(self._cache_path, n) for n in [index, *data] if n in names]

    class CheckedCache(FunctionCache):
        """A function's cache whose damaged files are rebuilt and whose saves are locked."""

        def __init__(self, py_func: Callable, suffix: str = SUFFIX, link_only=None) -> None:
            super().__init__(py_func)
            self._cache_file = CheckedFile(
                cache_path=self._cache_path,
                filename_base=self._impl.filename_base + suffix,
                source_stamp=self._impl.locator.get_source_stamp(),
            )
            if link_only is not None:  # an internal kernel's: saved and loaded as LLVM IR
                self._impl.rebuild = functools.partial(link_only.rebuild, self._impl.rebuild)

        def load_overload(self, sig, target_context):
            try:
                return super().load_overload(sig, target_context)
            except Exception:  # a damaged file (KeyboardInterrupt and the like pass)
                pass
            with locked(self._cache_path):
                try:  # again: another process may have replaced the files meanwhile
                    return super().load_overload(sig, target_context)
                except Exception as exc:
                    self._discard(exc)
            return None

        def save_overload(self, sig, data) -> None:
            """numba's save, under the cache's lock, of the compiled kernel ``data`` without
            the text of its typed IR (numba writes ``str(type_annotation)``, which only its
            ``inspect_types`` of a kernel loaded from the cache prints: about 0.07 CPU-s of a
            first compilation of a map family's passes)."""
            try:
                self._impl.locator.ensure_cache_path()
                with locked(self._cache_path):
                    try:
                        self._cache_file._load_index()
                    except Exception as exc:  # saving reads the index first
                        self._discard(exc)
                    if self._enabled:  # (no text of its types: see save_overload's doc)
                        super().save_overload(sig, data._replace(type_annotation=None))
            except Exception as exc:  # full disk, read-only directory: compiled in memory
                _note(
                    f"cannot write numba's compiled-kernel cache in {self._cache_path} "
                    f"({type(exc).__name__}: {exc}); the kernels are compiled in memory in each "
                    "process (set NUMBA_CACHE_DIR to a writable directory)"
                )

        def _discard(self, exc: Exception) -> None:
            """Remove this function's damaged files (caller holds the lock); where they
            cannot be removed, stop using the cache in this process."""
            try:
                for path in self._cache_file.files():
                    _remove(path)
            except OSError as err:
                self.disable()
                _note(
                    f"numba's compiled-kernel cache in {self._cache_path} holds a damaged file "
                    f"({exc}) that cannot be removed ({err.strerror}): delete that directory "
                    "(or set NUMBA_CACHE_DIR to another one); the kernels are compiled in memory "
                    "until then"
                )
                return
            _note(
                f"removed damaged files of numba's compiled-kernel cache in {self._cache_path} "
                f"({type(exc).__name__}); the kernels are compiled again and cached anew"
            )

    return CheckedCache


# numba's options of every kernel, unless a kernel sets its own:
# - the same options for all, each set explicitly: numba compiles its own implementations
#   (``np.empty``, ``min``, ``np.dot``, a generator's methods) once for each set of options of
#   the functions that call them, and a function compiled from another one takes that one's
#   ``error_model`` and ``forceinline`` unless it sets its own; kernels whose options differed
#   compiled numba's implementations again (tenths of a second each, in a first compilation),
#   and a kernel's code depended on which caller compiled it first;
# - ``nogil``: the kernels release the GIL while they run (they touch no Python object; a
#   threaded pass needs it of its main function);
# - ``error_model="python"``: numba's default (a division by zero raises ZeroDivisionError);
# - no C-callable wrapper (``no_cfunc_wrapper``): it serves only functions passed as values
#   (numba's first-class functions), which no kernel is; numba built one for every kernel.
OPTIONS = {"nogil": True, "error_model": "python", "forceinline": False, "no_cfunc_wrapper": True}


def jit(
    f: Callable, *, internal: bool = False, python: Callable | None = None, **options
) -> Callable:
    """``numba.njit(**OPTIONS, **options)(f)`` whose compiled code is cached on disk with
    :class:`CheckedCache` (see the module's docstring); compiled in memory in each process where
    numba finds no cache directory for ``f`` (nothing writable).

    ``internal``: ``f`` is called from compiled code only, and is compiled without numba's
    CPython wrapper (``no_cpython_wrapper``: the code that unboxes Python arguments, for a
    small kernel several times its own code, and most of what a first compilation of it costs).
    Its compiled callers carry its code; called from Python (the tests do), it runs a twin
    compiled with a wrapper (:func:`_internal_class`), or ``python`` where given (a Python
    function computing the same: the numpy code that shares a function with compiled code)."""
    import numba

    options = {**OPTIONS, **options}
    link_only = None
    if internal:
        twin = python or jit(f, _suffix=SUFFIX + "py", **options)
        options["no_cpython_wrapper"] = True
        link_only = _link_only()
    pipeline = _pipeline_class(internal)
    if pipeline is not None:
        options["pipeline_class"] = pipeline
    suffix = options.pop("_suffix", SUFFIX)
    dispatcher = numba.njit(**options)(f)
    if internal:
        dispatcher.__class__ = _internal_class(type(dispatcher))
        dispatcher._python_twin = twin
    try:
        cache = _cache_class()(dispatcher.py_func, suffix, link_only)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        return _uninterrupted(dispatcher)
    except (ImportError, AttributeError, TypeError):  # a numba whose cache classes differ
        options.pop("pipeline_class", None)
        if internal:  # (no twin's cache apart from this one's)
            options.pop("no_cpython_wrapper")
        return _uninterrupted(numba.njit(cache=True, **options)(f))
    dispatcher._cache = cache  # what numba.njit(cache=True) sets (Dispatcher.enable_caching)
    return _uninterrupted(dispatcher)


def typing_options() -> dict:
    """numba's options (``jit_options``) for a function numba compiles only to type it: an
    ``@overload``'s implementation that numba inlines as IR (``inline="always"``), compiled once
    on its own too. The kernels' options (:data:`OPTIONS`), without a CPython wrapper and to
    IR only (:func:`_link_only`), by the kernels' compiler (:func:`_kernel_compiler`):
    nothing calls that compiled function, so nothing of it but its types is used."""
    options = {**OPTIONS, "no_cpython_wrapper": True}
    pipeline = _pipeline_class(internal=True)
    if pipeline is not None:
        options["pipeline_class"] = pipeline
    return options


def _pipeline_class(internal: bool):
    """numba's ``pipeline_class`` of a kernel: :func:`_kernel_compiler`'s, to IR only for an
    internal one (:func:`_link_only`); ``None`` on a numba whose compiler classes differ
    (numba's own compiler)."""
    if internal and _link_only() is not None:
        return _link_only().Compiler
    return _kernel_compiler()


# numba's compiler passes that find nothing to do in a kernel, left out of the pipeline of
# every kernel that defines no function (no closure, lambda or comprehension: none does) by
# :func:`_kernel_compiler`: ``InlineClosureLikes`` inlines the functions a kernel defines (and
# ``functools.reduce``); ``NopythonRewrites`` rewrites array expressions (``a + b * c`` of
# arrays) into one loop, arrays made from a list of constants and a record's field taken by a
# string. No kernel has any of these (every loop is written out), but each pass runs numba's
# analyses of the whole function before it looks: about 0.2 CPU-s of a first compilation of a
# map family's passes (``bench/first_compile.py``). Every kernel's LLVM IR is the same without
# them (test_compiled_cache.test_unused_passes_change_no_kernel); a new kernel with an array
# expression would compile one loop per operation: write the loop out, as the kernels do.
UNUSED_PASSES = frozenset({"InlineClosureLikes", "NopythonRewrites"})


def decorator(numba_imported: bool) -> Callable:
    """The ``@_jit`` of a kernel module that decided for itself whether numba runs
    (``numba_imported``): ``_jit(f, **options)`` is :func:`jit` where it does, and where it does
    not, the plain function (never called: the module's callers run the numpy code) or its
    ``python`` twin. ``@_jit(internal=True)`` and ``@_jit(inline="always")`` take options."""

    def _jit(f: Callable | None = None, **options) -> Callable:
        if f is None:
            return lambda g: _jit(g, **options)
        if not numba_imported:
            return options.get("python") or f
        return jit(f, **options)

    return _jit


@functools.cache
def _internal_class(base: type) -> type:
    """The class of an internal kernel's dispatcher (:func:`jit`): numba's ``base`` whose calls
    from Python go to the kernel's twin compiled with a CPython wrapper (numba would call the
    missing wrapper: a crash)."""

    class Internal(base):
        def __call__(self, *args, **kwargs):
            return self._python_twin(*args, **kwargs)

    Internal.__name__ = Internal.__qualname__ = f"Internal{base.__name__}"
    return Internal


@functools.cache
def _kernel_compiler():
    """numba's compiler of every kernel (its ``pipeline_class``), or ``None`` on a numba whose
    compiler classes differ (numba's own compiler is then used). It is numba's, less four
    costs, none of which changes the code compiled (the same LLVM IR, optimised, for every
    function: test_compiled_cache.test_unused_passes_change_no_kernel). The last three, with
    the cache's saves that skip the text of the typed IR (``CheckedCache.save_overload``), took
    0.34-0.43 CPU-s off a first compilation of the ReLU, Fourier and random-net passes and 0.66
    off the coordinate ones (``bench/first_compile.py``, medians of 5 alternated pairs):

    - **Shared options.** numba keys each cache of its typing templates by the options of the
      compilation under way (``ConfigStack``'s top, a copy of the compilation's ``Flags`` made
      as it starts) and compares them value by value: a ``Flags`` object hashes to the same
      number whatever its options, and equality reads every option of both. Each typing of an
      operator, an indexing or a numba function (hundreds per kernel, in type inference and
      again in lowering) looked up those caches with the options of its own compilation, a new
      object each time: 74 000 reads of all options in a first compilation of the coordinate
      passes, about a tenth of its CPU time. Here a compilation's copy is the one object shared
      by every compilation with the same options (:class:`SharedFlags`): Python's dicts compare
      a key with itself by identity, and two shared objects are equal only if they are one, so
      a lookup reads no option; its hash is numba's, computed once. Only the objects are shared
      (nothing writes the copy numba keeps for a compilation's duration): 0.15-0.45 CPU-s.
    - **No passes that find nothing**: those of :data:`UNUSED_PASSES` are left out.
    - **Numba's Python form of the LLVM IR emptied once LLVM has it** (:class:`KernelLibrary`).
      numba builds each function's LLVM IR as Python objects (llvmlite's), prints it and hands
      the text to LLVM; those objects refer to one another (an instruction to its block, the
      block to its list of instructions), so once unused they are freed only by Python's cyclic
      garbage collector, which walks them first: about 250 000 objects in a first compilation
      of the coordinate passes, 0.2 CPU-s of collections. Emptied, they are freed as soon as
      numba lets them go.
    - **Helpers asked the same question again and again** answer it once
      (:func:`_memoized_helpers`, for the length of a compilation)."""
    try:
        from numba.core import compiler, typed_passes
        from numba.core.codegen import JITCodeLibrary
        from numba.core.compiler_machinery import LoweringPass, register_pass
    except ImportError:
        return None

    class SharedFlags(compiler.Flags):
        """The options of a compilation under way: one object per set of values, made by
        :class:`Flags`'s ``copy`` and never changed."""

        def __eq__(self, other: object) -> bool:
            if isinstance(other, SharedFlags):
                return self is other  # (one object per set of values)
            return super().__eq__(other)

        def __hash__(self) -> int:
            return self._hash  # numba's, computed once (the same for every Flags object)

        def copy(self) -> compiler.Flags:
            return compiler.Flags(self)  # (a copy to change)

    class Flags(compiler.Flags):
        """numba's ``Flags`` whose copies are :class:`SharedFlags`."""

        shared: list = []  # (one per distinct set of options compiled: a handful)

        def copy(self) -> compiler.Flags:
            values = self.values()
            for flags in Flags.shared:
                if flags.values() == values:
                    return flags
            flags = SharedFlags(self)
            flags._hash = compiler.Flags.__hash__(flags)
            Flags.shared.append(flags)
            return flags

    class KernelLibrary(JITCodeLibrary):
        """numba's library of a kernel's code, which empties each module of llvmlite's IR once
        it has handed it to LLVM (numba reads none of it afterwards)."""

        def add_ir_module(self, ir_module) -> None:
            super().add_ir_module(ir_module)
            _emptied(ir_module)

    @register_pass(mutates_CFG=False, analysis_only=True)
    class UseKernelLibrary(LoweringPass):
        """Lowering into a :class:`KernelLibrary` (numba's lowering makes a plain library, as
        here, where the state has none)."""

        _name = "ilnrun_kernel_library"

        def __init__(self) -> None:
            LoweringPass.__init__(self)

        def run_pass(self, state) -> bool:
            if state.library is None:
                codegen = state.targetctx.codegen()
                state.library = KernelLibrary(codegen, state.func_id.func_qualname)
                state.library.enable_object_caching()
            return False

    class Compiler(compiler.Compiler):
        """numba's compiler, with its options as :class:`Flags`, without the passes of
        :data:`UNUSED_PASSES`, lowering into a :class:`KernelLibrary`."""

        flags_class = Flags
        library_class = KernelLibrary

        def __init__(self, typingctx, targetctx, library, args, return_type, flags, locals):
            super().__init__(typingctx, targetctx, library, args, return_type, Flags(flags), locals)

        def define_pipelines(self) -> list:
            pipelines = super().define_pipelines()
            code = getattr(self.state.func_id.func, "__code__", None)
            nested = code is None or any(isinstance(c, CodeType) for c in code.co_consts)
            unused = frozenset() if nested else UNUSED_PASSES  # (defines a function: all)
            for pm in pipelines:
                pm.passes[:] = [p for p in pm.passes if p[0].__name__ not in unused]
                pm.add_pass_after(UseKernelLibrary, typed_passes.AnnotateTypes)
                pm.finalize()
            return pipelines

        def compile_extra(self, func):
            with _memoized_helpers():
                return super().compile_extra(func)

    return Compiler


_MEMOIZED = [False]  # whether _memoized_helpers' helpers are in place (nested: a callee's)


@contextmanager
def _memoized_helpers() -> Iterator[None]:
    """Three helpers of numba and llvmlite that answer the same question again and again,
    replaced for the length of a kernel's compilation (its callees' and numba's own included:
    the outermost one installs them, and puts numba's back when it ends) by ones that answer
    it once; their answers are the same, so the code compiled is too
    (test_unused_passes_change_no_kernel compiles with numba's):

    - ``numba.core.base._has_loc(fn)``: whether a lowering function takes ``loc``, from
      ``inspect.signature`` of it, at every operation lowered: remembered per function;
    - ``llvmlite.ir.types.Type.get_abi_size`` and ``get_abi_alignment``: each prints a module
      holding one global of the type and has LLVM parse it: remembered per type, data layout
      and context;
    - ``numba.core.typing.npydecl.NumpyRulesArrayOperator.generic``, numba's typing of a binary
      operator as a NumPy ufunc, tried before the scalar typings for every ``a + b``: it finds
      the ufunc's loop for the operands' types, then answers ``None`` (not this template) when
      neither operand is an array; here it answers ``None`` at once for those.

    About 0.25 CPU-s of a first compilation of a map family's passes
    (``bench/first_compile.py``). Compilations run one at a time (numba's compiler lock), so no
    other one sees them."""
    if _MEMOIZED[0]:  # (a callee's compilation: the outermost one puts numba's back)
        yield
        return
    try:
        from llvmlite.ir.types import Type
        from numba.core import base, types
        from numba.core.typing.npydecl import NumpyRulesArrayOperator
    except ImportError:  # (another numba: its helpers as they are)
        yield
        return
    helpers = [
        (base, "_has_loc"),
        (Type, "get_abi_size"),
        (Type, "get_abi_alignment"),
        (NumpyRulesArrayOperator, "generic"),
    ]
    own = {(owner, name): getattr(owner, name, None) for owner, name in helpers}
    if not all(callable(f) for f in own.values()):  # (another numba: as they are)
        yield
        return

    def remembered(f: Callable) -> Callable:
        answers: dict = {}

        def once(*args, **kwargs):
            key = (args, tuple(kwargs.items()))
            try:
                return answers[key]
            except KeyError:
                answers[key] = answer = f(*args, **kwargs)
                return answer
            except TypeError:  # (an argument that cannot be a key)
                return f(*args, **kwargs)

        return once

    generic = own[NumpyRulesArrayOperator, "generic"]

    def array_generic(self, args, kws):
        if not any(isinstance(a, types.ArrayCompatible) for a in args):
            return None  # (numba's answer, after typing the ufunc)
        return generic(self, args, kws)

    new = {key: remembered(f) for key, f in own.items()}
    new[NumpyRulesArrayOperator, "generic"] = array_generic
    _MEMOIZED[0] = True
    try:
        for (owner, name), f in new.items():
            setattr(owner, name, f)
        yield
    finally:
        for (owner, name), f in own.items():
            setattr(owner, name, f)
        _MEMOIZED[0] = False


def _emptied(module) -> None:
    """llvmlite's IR ``module`` (``llvmlite.ir.Module``) with no functions, blocks,
    instructions, globals or metadata: what referred to one another in it no longer does."""
    for value in list(module.globals.values()):
        for block in getattr(value, "blocks", ()):
            block.instructions = []
            block.terminator = None
        if hasattr(value, "blocks"):
            value.blocks = []
            value.args = ()
    module.globals.clear()
    module.metadata = []
    module.namedmetadata = {}
    module._metadatacache = {}


@functools.cache
def _link_only():
    """What compiles an internal kernel (:func:`jit`) to LLVM IR only, or ``None`` on a numba
    whose compiler classes differ (the kernel is then compiled as numba does). The result has
    ``Compiler`` (numba's ``pipeline_class``), ``Library`` and ``rebuild`` (the cache's).

    Why: numba compiles each function into a library of its own, optimises it and generates its
    machine code; a caller links in the IR of the libraries it calls (to inline them), optimises
    the whole and generates machine code for all of it. An internal kernel's own machine code
    is never run (only its callers', which carry its code). Here an internal kernel's library is
    linked and optimised as numba does, but never handed to LLVM's JIT: about 0.4-0.5 CPU-s less
    in a first compilation of a map family's passes (``bench/first_compile.py``, alternated
    pairs). It is cached as that IR (numba's ``"bitcode"`` form, which numba itself would load
    by generating machine code). Its callers link the IR as the optimiser left it; before, they
    linked it as the JIT's code generator had left it (it prepares a module in place), so their
    machine code differs a little: the same numbers (the golden and compiled-against-numpy
    tests, figure1's ``runs.csv``), the passes as fast within the machine's noise. (Leaving the
    library's own module unoptimised, its callers optimising its code with theirs, saved another
    0.2-0.4 CPU-s but changed what LLVM inlines where: the Algorithm-2 coordinate estimates ran
    8% slower, small Doubly SGD cells 15-25%.) Its
    environment (numba's per-function object, which compiled code reads only to raise an
    exception with values computed at run time or to call into Python: no kernel does) is set
    where it lives, in its callers' code, once they are compiled (:func:`_set_envs`)."""
    kernel_compiler = _kernel_compiler()
    if kernel_compiler is None:
        return None
    from numba.core import typed_passes
    from numba.core.compiler_machinery import LoweringPass, register_pass

    class Library(kernel_compiler.library_class):
        """A library whose IR callers link, with no machine code of its own."""

        def _finalize_final_module(self) -> None:  # numba's, less the JIT's part
            self._finalize_dynamic_globals()
            self._verify_declare_only_symbols()
            self._finalized = True

        def get_pointer_to_function(self, name: str) -> int:
            self._ensure_finalized()
            return 0  # (numba's answer for a symbol the library does not define)

        @property
        def codegen(self):  # what numba's get_executable and cache loads set environments on
            return _Envs(self._codegen)

        def serialize_using_object_code(self) -> tuple:
            return (self.name, "bitcode", self._get_module_for_linking().as_bitcode())

    class _Envs:
        """``library.codegen`` of a :class:`Library`: its environment has no machine code of
        this library to live in (:func:`_set_envs` sets it in the callers')."""

        def __init__(self, codegen) -> None:
            self._codegen = codegen

        def set_env(self, env_name: str, env) -> None:
            pass

        def __getattr__(self, name: str):
            return getattr(self._codegen, name)

    @register_pass(mutates_CFG=False, analysis_only=True)
    class UseLibrary(LoweringPass):
        """Lowering into a :class:`Library` (numba's lowering makes a plain one where the
        state has none)."""

        _name = "ilnrun_link_only_library"

        def __init__(self) -> None:
            LoweringPass.__init__(self)

        def run_pass(self, state) -> bool:
            if state.library is None:
                state.library = Library(state.targetctx.codegen(), state.func_id.func_qualname)
            return False

    class Compiler(kernel_compiler):
        """numba's compiler, lowering into a :class:`Library`."""

        def define_pipelines(self) -> list:
            pipelines = super().define_pipelines()
            for pm in pipelines:
                pm.add_pass_after(UseLibrary, typed_passes.AnnotateTypes)
                pm.finalize()
            return pipelines

    def rebuild(numba_rebuild: Callable, target_context, payload):
        """A cached internal kernel rebuilt from its IR into a :class:`Library` (numba's own
        rebuild, with the codegen making that class of library meanwhile; it runs under numba's
        compiler lock). A file of machine code (an older ilnrun's) is loaded as numba does."""
        if payload[0][1] != "bitcode":
            return numba_rebuild(target_context, payload)
        codegen = target_context.codegen()
        own = vars(codegen).get("_library_class")  # (numba sets it on the class)
        codegen._library_class = Library
        try:
            return numba_rebuild(target_context, payload)
        finally:
            if own is None:
                del codegen._library_class
            else:
                codegen._library_class = own

    return SimpleNamespace(Compiler=Compiler, Library=Library, rebuild=rebuild)


def _set_envs(dispatcher) -> None:
    """Each numba environment a compiled kernel's code refers to, set where that code reads it.

    numba sets a function's environment (a global of its machine code) when it compiles the
    function, and, for a function loaded from the cache, those of the functions it calls. A
    caller compiled here carries the code of internal kernels (:func:`_link_only`), whose
    environments exist nowhere else: set here, once per library, after each compilation of a
    kernel that has machine code. Setting one numba set already writes the same pointer."""
    from numba.core.environment import lookup_environment

    link_only = _link_only()
    if link_only is None:
        return
    for cres in list(getattr(dispatcher, "overloads", {}).values()):
        library = cres.library
        if getattr(library, "_ilnrun_envs_set", False) or isinstance(library, link_only.Library):
            continue
        library._ilnrun_envs_set = True
        codegen = library._codegen
        for gv in library._final_module.global_variables:
            if not gv.name.startswith("_ZN08NumbaEnv"):
                continue
            env = lookup_environment(gv.name)
            if env is not None and codegen._engine.is_symbol_defined(gv.name):
                codegen.set_env(gv.name, env)


@contextmanager
def _no_gc() -> Iterator[None]:
    """Python's cyclic garbage collector paused for the block (and restored as it was: a
    compilation nested in another leaves it to the outer one). numba's compiler makes hundreds
    of thousands of short-lived objects, and the collections they trigger (full ones among them,
    which walk every object the process holds: numpy's, pandas', numba's) took 0.73 CPU-s of a
    first compilation of the ReLU passes (``bench/first_compile.py``'s run, about 7 CPU-s);
    0.31 with the pause, most of it the collection of a compilation's leftovers once it is
    done."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _in_own_thread(compile_: Callable, sig):
    """``compile_(sig)`` run in a new thread (this one waits for it), unless this thread holds
    numba's compiler lock (a compilation nested in another, where numba types a caller: it runs
    here, in the compiling thread; a new thread would wait for the lock forever).

    Why: CPython 3.11 to 3.13 keep a thread's Python frames in 16 KiB chunks, and a call that
    lands at the start of a new chunk allocates it (``mmap``) and its return frees it
    (``munmap``); a hot call at exactly that depth does both every time (CPython issue
    gh-142183, fixed in later releases). numba's compiler, called from deep in a run's stack,
    hit that edge: 274 500 ``mmap`` / ``munmap`` pairs of 16 KiB in one first compilation of the
    coordinate passes (``strace``), 2.1 of its 9.5 CPU-s in the kernel. A new thread starts the
    compilation from an empty stack: 18 000 pairs there, 0.3 CPU-s. What is compiled is the
    same. Python runs signal handlers in the main thread only, so a stop never lands inside the
    compilation (the caller's :func:`~ilnrun.stopping.deferred` block raises it after)."""
    try:
        from numba.core.compiler_lock import global_compiler_lock
    except ImportError:  # (a numba that keeps it elsewhere)
        return compile_(sig)
    if global_compiler_lock.is_locked():  # (held by this thread)
        return compile_(sig)
    done: dict = {}

    def run() -> None:
        try:
            done["result"] = compile_(sig)
        except BaseException as exc:  # (raised again in the caller's thread)
            done["error"] = exc

    thread = threading.Thread(target=run, name="ilnrun-compile", daemon=True)
    try:  # (some platforms give a thread 512 KiB or less, short for numba's deepest compilations)
        old = threading.stack_size(COMPILE_STACK)
    except (ValueError, RuntimeError):  # (a platform where it cannot be set: its default)
        old = None
    try:
        thread.start()
    finally:
        if old is not None:
            threading.stack_size(old)
    thread.join()
    if "error" in done:
        raise done["error"]
    return done["result"]


def _uninterrupted(dispatcher):
    """``dispatcher`` whose compilations (a cache load included: numba's ``compile`` is where
    both happen, for every call with new argument types) run in a
    :func:`~ilnrun.stopping.deferred` block: a SIGINT or SIGTERM that lands there stops the run
    when the compilation is done, not half-way through LLVM's JIT; without the garbage
    collector's passes (:func:`_no_gc`); and in a thread of their own (:func:`_in_own_thread`).
    After a kernel with machine code is compiled, the environments its code carries are set
    (:func:`_set_envs`)."""
    compile_ = dispatcher.compile
    internal = hasattr(dispatcher, "_python_twin")

    @functools.wraps(compile_)
    def compile(sig):
        with deferred(), _no_gc():
            entry = _in_own_thread(compile_, sig)
            if not internal:
                _set_envs(dispatcher)
            return entry

    dispatcher.compile = compile
    return dispatcher
