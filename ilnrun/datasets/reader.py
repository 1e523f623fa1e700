"""The strict table reader: a CSV (header row of column names) or NPZ (one 1-D array per
column, named by its key) file as columns.

A file with another suffix, a file larger than :data:`MAX_TABLE_BYTES` (the reader holds the
text in memory), a header with an unnamed (``Unnamed: 0``, empty) or repeated name, a header of
numbers (no header row), a single column where ``;``, tabs or ``|`` suggest another delimiter
and rows longer or shorter than the header are refused with a :class:`DataError` naming the
path; no message quotes the file's content. :func:`check_table_file` runs the checks that need
no reading (suffix, existence, size): before the file is read or hashed.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import numpy as np

from .base import DataError

TABLE_SUFFIXES = (".csv", ".npz")
Table = dict  # column name -> 1-D array, in file order
MAX_TABLE_BYTES = 1 << 30  # 1 GiB: the CSV text, its parse and the columns are held in memory
_UNNAMED = re.compile(r"^Unnamed: \d+")


def check_table_file(path: str | Path, key: str = "path") -> Path:
    """``path`` as a :class:`Path` once its suffix is ``.csv`` / ``.npz``, it is a regular file
    and it holds at most :data:`MAX_TABLE_BYTES`; else a :class:`DataError` under ``key``.
    Nothing of the file is read."""
    p = Path(path)
    if p.suffix.lower() not in TABLE_SUFFIXES:
        raise DataError(key, f"{str(path)!r}: unsupported file type; use a .csv or .npz file")
    if not p.exists():
        raise DataError(key, f"file {str(path)!r} does not exist")
    if not p.is_file():
        raise DataError(key, f"{str(path)!r} is not a regular file")
    try:
        size = p.stat().st_size
    except OSError as exc:
        raise DataError(key, f"{str(path)!r} cannot be read: {exc.strerror}") from None
    if size > MAX_TABLE_BYTES:
        raise DataError(
            key,
            f"{str(path)!r} holds {size:,} bytes, more than the {MAX_TABLE_BYTES:,} a table may "
            f"hold (it is read into memory whole); use fewer rows or columns",
        )
    return p


def read_table(path: str) -> Table:
    """Columns of a CSV (header row) or NPZ (one 1-D array per key) file; errors name ``path``
    and never quote the file's content (rows and columns are named by index or name)."""
    p = check_table_file(path)
    if p.suffix.lower() == ".csv":
        return _read_csv(p, path)
    try:
        with np.load(p, allow_pickle=False) as z:
            table = {k: z[k] for k in z.files}
    except ValueError:  # object arrays (allow_pickle=False) and malformed archives
        raise DataError(
            "path", f"{path!r} is not a readable NPZ file of numeric arrays (object arrays?)"
        ) from None
    except (OSError, EOFError):
        raise DataError("path", f"{path!r} is not a readable NPZ file") from None
    if not table:
        raise DataError("path", f"{path!r} holds no arrays")
    lengths = set()
    for i, (k, v) in enumerate(table.items()):
        if not k.strip() or _UNNAMED.match(k):
            raise DataError("path", f"{path!r}: array {i} has no name (or an index-like one)")
        if v.ndim != 1:
            raise DataError(
                "path", f"{path!r}: array {k!r} must be 1-D (one column), got {v.shape}"
            )
        lengths.add(len(v))
    if len(lengths) > 1:
        raise DataError("path", f"{path!r}: columns have different lengths {sorted(lengths)}")
    return table


def _read_csv(p: Path, path: str) -> Table:
    """A CSV file whose header and rows are checked before pandas parses it: named, distinct
    columns; every row as long as the header; a header of names, not numbers; commas."""
    import pandas as pd

    try:
        text = p.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError:
        raise DataError("path", f"{path!r} is not UTF-8 text") from None
    except OSError as exc:
        raise DataError("path", f"{path!r} cannot be read: {exc.strerror}") from None
    try:
        rows = csv.reader(io.StringIO(text, newline=""))
        header = next(rows, None)
        if header is None or not any(h.strip() for h in header):
            raise DataError("path", f"{path!r} is empty (no header row)")
        check_header(header, text, path)
        for i, row in enumerate(rows):
            if row and len(row) != len(header):
                raise DataError(
                    "path",
                    f"{path!r}: data row {i} (0-based, header not counted) has {len(row)} "
                    f"fields but the header names {len(header)} columns; fix the header or "
                    f"the row (a header one name short would shift every column)",
                )
    except csv.Error:
        raise DataError("path", f"{path!r} is not a readable CSV file (bad quoting?)") from None
    try:
        df = pd.read_csv(io.StringIO(text), index_col=False, skip_blank_lines=True)
    except pd.errors.EmptyDataError:
        raise DataError("path", f"{path!r} is empty") from None
    except (pd.errors.ParserError, ValueError):
        raise DataError("path", f"{path!r} is not a readable CSV file") from None
    if list(df.columns) != header:  # pandas renamed something; never use its guesses
        raise DataError("path", f"{path!r}: the header could not be read as given")
    return {name: df[name].to_numpy() for name in header}


def check_header(header: list[str], text: str, path: str) -> None:
    """Refuse a header with unnamed, index-like or repeated names, a header of numbers (the
    file has no header row) and a single column where another delimiter is likely."""
    if len(header) == 1:
        for sep, what in ((";", "semicolons"), ("\t", "tabs"), ("|", "'|'")):
            if sep in text:
                raise DataError(
                    "path",
                    f"{path!r} reads as a single column but contains {what}: ilnrun reads "
                    f"comma-separated files; convert the delimiter to ','",
                )
        raise DataError(
            "path", f"{path!r} has a single column; a dataset needs a target and features"
        )
    for i, name in enumerate(header):
        if not name.strip() or _UNNAMED.match(name):
            raise DataError(
                "path",
                f"{path!r}: column {i} (0-based) has no name - an index column written by "
                f"pandas? Write the file with index=False or name the column",
            )
    seen: dict[str, int] = {}
    for i, name in enumerate(header):
        if name in seen:
            raise DataError(
                "path", f"{path!r}: columns {seen[name]} and {i} are both named {name!r}"
            )
        seen[name] = i
    if all(_is_number(h) for h in header):
        raise DataError(
            "path",
            f"{path!r}: the first row holds numbers, not column names; the file seems to "
            f"have no header row - add one",
        )


def _is_number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True
