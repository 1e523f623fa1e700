"""scikit-learn's bundled tables (``digits``, ``diabetes``) read from the files scikit-learn
ships, without importing scikit-learn.

Importing ``sklearn.datasets`` costs about a second (scikit-learn imports scipy and its own
array machinery), which ``ilnrun validate`` of a config on these tables paid to count their rows
and hash their content, and every worker of a run paid to build them. Their loaders
(``sklearn.datasets.load_digits`` and ``load_diabetes(scaled=False)``) read a gzip-compressed
text file of ``sklearn/datasets/data`` with ``np.loadtxt`` (their
``load_gzip_compressed_csv_data``) and return columns of it: :func:`bundled` reads the same
file by the same call, so the arrays are the same numbers in the same layout (the tables'
content hashes, recorded under a config's ``inputs``, are unchanged). Where the file is not
there or not of the shape expected (another scikit-learn's layout), it returns ``None`` and the
caller loads the table with scikit-learn itself.
"""

from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path

import numpy as np


def data_folder() -> Path | None:
    """``sklearn/datasets/data`` of the installed scikit-learn, found without importing it
    (``None`` when scikit-learn is not installed)."""
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data"


def bundled(name: str, columns: int, **loadtxt) -> np.ndarray | None:
    """The 2-D array scikit-learn reads from its data file ``name`` (``np.loadtxt`` of the
    gzip-compressed text, ``loadtxt``: its keywords), or ``None`` where that file is missing,
    unreadable or not of ``columns`` columns (1: a vector)."""
    folder = data_folder()
    if folder is None or not (folder / name).is_file():
        return None
    try:
        with (
            open(folder / name, "rb") as compressed,
            gzip.open(compressed, mode="rt", encoding="utf-8") as text,
        ):
            data = np.loadtxt(text, **loadtxt)
    except (OSError, ValueError, EOFError):
        return None
    if columns == 1:
        return data if data.ndim == 1 and len(data) else None
    return data if data.ndim == 2 and data.shape[1] == columns and len(data) else None
