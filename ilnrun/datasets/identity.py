"""What identifies the data a config reads: a file named by ``dataset.path`` by the SHA-256 of
its bytes (read in chunks of :data:`CHUNK` bytes, after its suffix and size are checked, so a
huge file is refused before a byte is read), a table read by name by the SHA-256 of its content
(:func:`~ilnrun.datasets.tables.table_identity`). Both are recorded under the resolved config's
``inputs``; a resume compares configs by content (:func:`by_content`): a data file moved or
renamed with the same bytes is the same config, a changed one is not, and data read under the
same name with other content (:func:`changed_inputs`) are never resumed, not even with
``--extend``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from ..safe_yaml import bounded_repr
from .base import DataError
from .reader import check_table_file

CHUNK = 1 << 20  # bytes hashed at a time


def file_identity(path: str | Path, key: str = "path") -> dict:
    """``{"sha256", "bytes"}`` of a table file, hashed in chunks once
    :func:`~ilnrun.datasets.reader.check_table_file` accepted its suffix and size; problems are
    a :class:`DataError` under ``key``."""
    p = check_table_file(path, key)
    h, size = hashlib.sha256(), 0
    try:
        with open(p, "rb") as f:
            while chunk := f.read(CHUNK):
                h.update(chunk)
                size += len(chunk)
    except OSError as exc:
        raise DataError(key, f"{str(path)!r} cannot be read: {exc.strerror}") from None
    return {"sha256": h.hexdigest(), "bytes": size}


def by_content(cfg: dict) -> dict:
    """``cfg`` with every input file's path replaced by ``sha256:<digest>`` wherever it appears
    (the dataset section, ``data_used``) and ``inputs`` keyed by digest: what a resume compares,
    so that only the content of a data file counts, not its name or folder."""
    files = {
        k: f"sha256:{v['sha256']}"
        for k, v in (cfg.get("inputs") or {}).items()
        if isinstance(v, dict) and "source" not in v and isinstance(v.get("sha256"), str)
    }
    if not files:
        return cfg

    def sub(v: Any) -> Any:
        if isinstance(v, str):
            return files.get(v, v)
        if isinstance(v, list):
            return [sub(x) for x in v]
        if isinstance(v, dict):
            return {files.get(k, k) if isinstance(k, str) else k: sub(x) for k, x in v.items()}
        return v

    return {k: sub(v) for k, v in cfg.items()}


def resume_views(old: dict, new: dict) -> tuple[dict, dict]:
    """The two configs as a resume shows them: ``new`` without the tables read by name that the
    results do not record (written before ilnrun hashed such tables), so that such results
    resume and record the hash from then on. Compare the views with :func:`by_content`; show
    their differences as they are (paths named)."""
    recorded = old.get("inputs") or {}
    unrecorded = {
        k
        for k, v in (new.get("inputs") or {}).items()
        if isinstance(v, dict) and "source" in v and k not in recorded
    }
    if not unrecorded:
        return old, new
    inputs = {k: v for k, v in new["inputs"].items() if k not in unrecorded}
    new = {k: v for k, v in new.items() if k != "inputs"}
    if inputs:
        new["inputs"] = inputs
    return old, new


def changed_inputs(old: dict, new: dict) -> list[str]:
    """The data read under the same name — a data file's path, a table's name such as
    ``plotnine:mpg`` — whose content differs between the stored config ``old`` and ``new``, a
    line each (``inputs.<name>.sha256``, both digests and sizes). Data that ``old`` does not
    record (results written before tables read by name were hashed) are not compared."""
    before, now = old.get("inputs"), new.get("inputs") or {}
    if not isinstance(before, dict):
        return []
    lines = []
    for key in sorted(k for k in now if k in before):
        a, b = before[key], now[key]
        if not isinstance(b, dict) or (isinstance(a, dict) and a.get("sha256") == b["sha256"]):
            continue
        was = (
            f"{bounded_repr(a.get('sha256'), 80)} ({bounded_repr(a.get('bytes'), 30)} bytes)"
            if isinstance(a, dict)
            else bounded_repr(a, 80)
        )
        lines.append(
            f"  inputs.{key}.sha256: {was} in the results, {b['sha256']!r} ({b['bytes']} bytes) now"
        )
    return lines
