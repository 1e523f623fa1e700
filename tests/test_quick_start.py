"""A quick start (docs/architecture.md, "Heavy imports"): ``ilnrun list`` and ``ilnrun validate``
import none of the heavy numeric packages, and whatever runs a cell still loads numba and scipy's
BLAS before it pins the native thread pools. Each check runs in a fresh interpreter, since the
test process itself has imported them all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest
from conftest import tiny_config, write_config

ROOT = Path(__file__).resolve().parent.parent
# numba, and scipy's BLAS that numba's np.dot and the ridge references call
NATIVE = ("numba", "scipy.linalg", "scipy.linalg.cython_blas")
HEAVY = ("numba", "llvmlite", "scipy", "sklearn", "pandas", "matplotlib", "jax", "dask", "joblib")

# the click main as the ``ilnrun`` command runs it, then the heavy packages that were imported
COMMANDS = """
import json, sys
from ilnrun.cli import main
for args in json.loads(sys.argv[1]):
    main(args, standalone_mode=False)
heavy = {heavy!r}
print(json.dumps(sorted(m for m in sys.modules if m.partition(".")[0] in heavy)))
"""


def _imported(code: str, *args: str, env: dict | None = None) -> list[str]:
    """The heavy modules a fresh interpreter has imported after running ``code``."""
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_list_and_validate_import_no_heavy_package(tmp_path):
    """``--version``, ``list`` and ``validate`` of a config using every learner (the registries
    complete, every estimate made) import no numba, scipy, scikit-learn, pandas, matplotlib,
    jax, dask or joblib."""
    cfg = tiny_config()
    cfg["methods"] |= {"kernel_ridge": {"ridge": 0.01}, "nystroem_ridge": {"rank": 10}}
    path = write_config(tmp_path / "tiny.yaml", cfg)
    commands = [["--version"], ["list"], ["validate", str(path)], ["validate", str(path), "-j2"]]
    assert _imported(COMMANDS.format(heavy=HEAVY), json.dumps(commands)) == []


def test_importing_the_command_line_and_the_api_loads_no_heavy_package():
    """``import ilnrun.cli`` (what the ``ilnrun`` command imports first), the package, its API
    module and the config and cost model import none of the heavy packages: numba and scipy's
    BLAS are loaded where a cell runs, the tables' libraries where a table is read."""
    code = """
import json, sys
import ilnrun, ilnrun.cli, ilnrun.api, ilnrun.config, ilnrun.cost, ilnrun.overrides
heavy = {heavy!r}
print(json.dumps(sorted(m for m in sys.modules if m.partition(".")[0] in heavy)))
"""
    assert _imported(code.format(heavy=HEAVY)) == []


@pytest.mark.parametrize("fmap", ["relu", "fourier", "random_net"])
def test_validate_of_every_map_imports_no_heavy_package(tmp_path, fmap):
    """``validate`` with each feature map (coordinate above): the data checks some maps make
    (Fourier's bandwidth builds the training inputs) import no heavy package either."""
    cfg = tiny_config(feature_map={"kind": fmap})
    if fmap == "random_net":  # no closed-form kernel: no exact-kernel learner
        cfg["methods"].pop("kernel_ogd")
    path = write_config(tmp_path / "tiny.yaml", cfg)
    commands = [["validate", str(path)], ["validate", str(path), "-j2"]]
    assert _imported(COMMANDS.format(heavy=HEAVY), json.dumps(commands)) == []


@pytest.mark.skipif(find_spec("numba") is None, reason="numba is not installed")
def test_a_cell_loads_numba_and_scipys_blas_before_the_threads_are_pinned():
    """Importing the cell (what every engine, ``ilnrun.load`` and the estimators stand on) loads
    numba and scipy's BLAS, so that ``numeric_env.one_thread`` pins scipy's BLAS too."""
    code = """
import json, sys
import ilnrun.cell
print(json.dumps(sorted(m for m in NATIVE if m in sys.modules)))
""".replace("NATIVE", repr(NATIVE))
    assert _imported(code, env={"ILNRUN_NO_NUMBA": ""}) == sorted(NATIVE)


def test_a_cell_loads_scipys_blas_without_numba_too():
    """``ILNRUN_NO_NUMBA=1``: no numba, but scipy's BLAS (the ridge references' factorizations)
    is loaded before the threads are pinned, as when the references imported it at the top."""
    code = """
import json, sys
import ilnrun.cell
print(json.dumps(sorted(m for m in ("numba", "scipy.linalg") if m in sys.modules)))
"""
    assert _imported(code, env={"ILNRUN_NO_NUMBA": "1"}) == ["scipy.linalg"]
