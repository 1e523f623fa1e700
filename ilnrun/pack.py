"""``ilnrun pack``: a results directory as the small folder a committed report ships with
(``experiments/<name>/results/``), from which ``ilnrun report`` regenerates the report and its
figures (docs/protocol.md §10.6).

The folder holds exactly what ``ilnrun report`` and ``ilnrun plot`` read (:data:`TABLES`
compressed, :data:`PLAIN` as they are) and nothing else: no cell log (``cells.jsonl``), no
figures. Each table is compressed as one gzip member (RFC 1952) with a fixed header — no file
name, modification time 0, operating system "unknown" (255) — around the raw deflate stream of
``zlib`` at level :data:`LEVEL`, so packing the same results gives the same bytes (with the same
zlib). The tables' bytes are those the run wrote, unchanged: the report reads the same numbers.

Packing writes like every ilnrun output (:func:`ilnrun.readers.claim_outputs`): into a new or
empty directory, or one ilnrun packed earlier. A file that would change is never replaced
silently: packing other results over a packed folder is refused unless ``replace``.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

from .readers import (
    CURVES_COLUMNS,
    GZ,
    RUNS_COLUMNS,
    SUMMARY_COLUMNS,
    ResultsError,
    claim_outputs,
    read_config,
    read_meta,
    read_table,
    table_bytes,
)
from .results import write_atomic_bytes
from .safe_yaml import MAX_BYTES, YamlLimitError, read_capped

# the tables the report and the figures read, with the columns their readers require
TABLES = {"runs.csv": RUNS_COLUMNS, "summary.csv": SUMMARY_COLUMNS, "curves.csv": CURVES_COLUMNS}
PLAIN = ("config.yaml", "meta.json")  # small: kept as they are, readable in a diff
LEVEL = 9  # zlib compression level (fixed: the same bytes each time)

# RFC 1952 header: magic 1f 8b, method 8 (deflate), no flags, mtime 0, XFL 2 (level 9), OS 255
HEADER = b"\x1f\x8b\x08\x00" + b"\x00" * 4 + b"\x02\xff"


def gzip_bytes(data: bytes) -> bytes:
    """``data`` as a gzip member with the fixed :data:`HEADER`: header + raw deflate (level
    :data:`LEVEL`) + CRC-32 and size mod 2³² (little-endian), the same bytes for the same
    ``data``."""
    deflate = zlib.compressobj(LEVEL, zlib.DEFLATED, -15)
    body = deflate.compress(data) + deflate.flush()
    return HEADER + body + struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)


def pack_contents(src: Path) -> dict[str, bytes]:
    """Name -> bytes of the packed folder of the results directory ``src``, after checking
    every file as the report and the figures will read it (a :class:`ResultsError` naming the
    file otherwise)."""
    src = Path(src)
    read_config(src)
    read_meta(src)
    out: dict[str, bytes] = {}
    for name in PLAIN:
        try:
            out[name] = read_capped(src / name, MAX_BYTES)
        except YamlLimitError as exc:  # (read_config / read_meta apply the same cap)
            raise ResultsError(f"{src / name}: refused: {exc}") from None
    for name, columns in TABLES.items():
        read_table(src, name, columns, empty_ok=name == "curves.csv")
        out[name + GZ] = gzip_bytes(table_bytes(src, name)[1])
    return out


def pack_results(src: Path, out: Path, replace: bool = False) -> dict[str, int]:
    """Write the packed folder of ``src`` into ``out``; return name -> bytes written. Refused
    (:class:`ResultsError`): ``out`` being ``src``, a directory ilnrun may not write
    (:func:`~ilnrun.readers.claim_outputs`), and, unless ``replace``, a packed file in ``out``
    whose content would change."""
    src, out = Path(src), Path(out)
    if out.exists() and out.resolve() == src.resolve():
        raise ResultsError(f"{out} is the results directory itself; pack into another --out")
    contents = pack_contents(src)
    changed = [name for name, data in contents.items() if _differs(out / name, data)]
    if changed and not replace:
        raise ResultsError(
            f"{out} holds other packed results ({', '.join(changed)} would change); pass "
            "--replace to replace them, or choose another --out"
        )
    claim_outputs(out, list(contents), results=False)
    for name, data in contents.items():
        write_atomic_bytes(out / name, data)
    return {name: len(data) for name, data in contents.items()}


def _differs(path: Path, data: bytes) -> bool:
    """Whether the regular file ``path`` exists with content other than ``data`` (its size
    compared first: a large file is not read)."""
    if path.is_symlink() or not path.is_file():
        return False  # absent (or refused by claim_outputs)
    return path.stat().st_size != len(data) or path.read_bytes() != data
