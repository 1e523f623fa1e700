"""Reading a results directory for ``ilnrun plot`` and ``ilnrun report``: every file through a
bounded reader (:mod:`ilnrun.safe_yaml` for ``config.yaml`` and ``meta.json``, a size cap and
column checks for the CSV tables), every problem a :class:`ResultsError` that names the file
and never quotes its content.

A table is ``<name>.csv``, or where that is absent ``<name>.csv.gz`` (a results folder packed
by ``ilnrun pack``, :mod:`ilnrun.pack`), decompressed under the same byte cap.

Writing next to the results follows the ownership rule of ``ilnrun run`` (docs/protocol.md
§10): :func:`claim_outputs` lets ilnrun write only into a directory it owns (its manifest), an
empty one (claimed), or a results directory of an earlier ilnrun without a manifest, and never
over a file the manifest does not list.
"""

from __future__ import annotations

import errno
import gzip
import io
import os
import zlib
from pathlib import Path

import pandas as pd
import yaml

from .results import (
    MANIFEST,
    ManifestError,
    file_entry,
    read_manifest,
    sweep_temporaries,
    write_manifest,
)
from .safe_yaml import YamlLimitError, load_bounded, load_json, read_capped

MAX_TABLE_BYTES = 1 << 30  # 1 GiB

# columns every reader of a table relies on
SUMMARY_COLUMNS = ("method", "dsgd_k", "n")
RUNS_COLUMNS = ("method", "setting", "repetition", "selected", "diverged", "timed_out")
CURVES_COLUMNS = ("method", "t", "online_loss")


class ResultsError(Exception):
    """A results directory (or a file in it) that cannot be read as ilnrun's: exit status 2."""


def linked_outside(path: Path) -> str | None:
    """Where ``path`` points when it is a symbolic link whose target lies outside its own
    directory (or cannot be resolved: a loop), else ``None``: the readers read what a results
    directory holds, never a file elsewhere (another run's table would be reported as this
    one's). A link to a file inside the directory is read."""
    path = Path(path)
    if not path.is_symlink():
        return None
    try:
        if path.resolve(strict=False).is_relative_to(path.parent.resolve(strict=True)):
            return None
    except (OSError, RuntimeError):  # a loop of links
        pass
    try:
        return os.readlink(path)
    except OSError as exc:
        return f"({exc.strerror})"


def _regular(path: Path) -> None:
    if not os.path.lexists(path):
        raise ResultsError(f"{path} is missing; run `ilnrun run` first")
    target = linked_outside(path)
    if target is not None:
        raise ResultsError(
            f"{path} is a symbolic link to {target!r}, outside the results directory "
            f"{path.parent}; ilnrun reads only files inside it (copy the file there instead)"
        )
    if not path.is_file():
        raise ResultsError(f"{path} is not a regular file")


def _parsed(path: Path, load, errors: tuple[type[Exception], ...], invalid: str):
    """``load(path)`` of a regular file, bounded; a refusal or a parse error (one of
    ``errors``: "``path`` ``invalid``") raised as :class:`ResultsError` naming the file."""
    _regular(path)
    try:
        return load(path)
    except YamlLimitError as exc:
        raise ResultsError(f"{path}: refused: {exc}") from None
    except errors:
        raise ResultsError(f"{path} {invalid}") from None


def read_config(d: Path) -> dict:
    """The resolved config ``d/config.yaml`` (a mapping with ``dataset`` and ``methods``)."""
    path = Path(d) / "config.yaml"
    parse_errors = (yaml.YAMLError, UnicodeDecodeError, ValueError)
    cfg = _parsed(path, load_bounded, parse_errors, "is not valid YAML (not an ilnrun config)")
    if not (
        isinstance(cfg, dict)
        and isinstance(cfg.get("name", ""), str)
        and all(isinstance(cfg.get(k), dict) for k in ("dataset", "methods"))
        and isinstance(cfg.get("evaluation", {}), dict)
    ):
        raise ResultsError(f"{path} is not an ilnrun config (no dataset / methods mappings)")
    return cfg


def read_meta(d: Path) -> dict:
    """``d/meta.json`` (a mapping)."""
    path = Path(d) / "meta.json"
    meta = _parsed(path, load_json, (ValueError,), "is not valid JSON")
    if not isinstance(meta, dict):
        raise ResultsError(f"{path} is not an ilnrun meta.json (not a mapping)")
    return meta


GZ = ".gz"  # a compressed table: ``<name>.csv.gz`` (gzip, RFC 1952)


def table_path(d: Path, name: str) -> Path:
    """Where the table ``name`` (``runs.csv``, ...) of the results directory ``d`` is:
    ``d/name``, else ``d/name.gz`` when only that exists (a packed folder), else ``d/name``
    (missing: the readers say so)."""
    plain = Path(d) / name
    packed = plain.with_name(name + GZ)
    return packed if not os.path.lexists(plain) and os.path.lexists(packed) else plain


def has_table(d: Path, name: str) -> bool:
    """Whether ``d`` holds the table ``name``, plain or compressed."""
    return os.path.lexists(table_path(d, name))


def is_packed(d: Path) -> bool:
    """Whether ``d`` is a packed results folder (``ilnrun pack``): its ``summary.csv`` is
    compressed. ilnrun reads such a folder and never writes into it (figures and reports go
    to another directory)."""
    return table_path(Path(d), "summary.csv").name.endswith(GZ)


def table_bytes(d: Path, name: str) -> tuple[Path, bytes]:
    """The path and the (decompressed) bytes of the table ``name`` of ``d``
    (:func:`table_path`). Both the file and, for ``.csv.gz``, its decompressed content are
    capped at :data:`MAX_TABLE_BYTES`: decompression stops one byte past the cap, so a
    compression bomb costs at most the cap in memory and is refused by name."""
    path = table_path(d, name)
    _regular(path)
    try:
        data = read_capped(path, MAX_TABLE_BYTES)
    except YamlLimitError as exc:
        raise ResultsError(f"{path}: refused: {exc}") from None
    if path.name.endswith(GZ):
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(data), mode="rb") as fh:
                data = fh.read(MAX_TABLE_BYTES + 1)
        except (OSError, EOFError, zlib.error):  # gzip.BadGzipFile is an OSError
            raise ResultsError(f"{path} is not a gzip-compressed table (damaged)") from None
        if len(data) > MAX_TABLE_BYTES:
            raise ResultsError(
                f"{path}: refused: it decompresses to more than {MAX_TABLE_BYTES:,} bytes, "
                "the limit of a table"
            )
    return path, data


def read_table(
    d: Path, name: str, columns: tuple[str, ...], empty_ok: bool = False
) -> pd.DataFrame:
    """The CSV table ``d/name`` (or ``d/name.gz``, :func:`table_bytes`) with the ``columns``
    named and (unless ``empty_ok``) a row."""
    path, data = table_bytes(d, name)
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        raise ResultsError(f"{path} is not a text table (not UTF-8)") from None
    if b"\0" in data:
        raise ResultsError(f"{path} is not a text table (binary content)")
    try:
        df = pd.read_csv(io.BytesIO(data), low_memory=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError, OverflowError):
        raise ResultsError(f"{path} is not a CSV table ilnrun wrote") from None
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ResultsError(f"{path} lacks the column(s) {', '.join(missing)}")
    if df.empty and not empty_ok:
        raise ResultsError(f"{path} holds no rows")
    for c in ("dsgd_k", "n", "repetition", "t"):  # (a table of no rows has no column types)
        if c in df and not df.empty and not pd.api.types.is_numeric_dtype(df[c]):
            raise ResultsError(f"{path}: column {c} is not numeric")
    for c in ("selected", "diverged", "timed_out"):
        if c in df and not pd.api.types.is_bool_dtype(df[c]):
            raise ResultsError(f"{path}: column {c} is not true/false")
    return df


def claim_outputs(directory: Path, names: list[str], results: bool) -> None:
    """Check that ilnrun may write ``names`` into ``directory`` (created if missing): refuse a
    non-empty directory without a manifest (unless ``results`` and it holds ilnrun results of
    an earlier version), a name that is a link or not a regular file, and an existing file the
    manifest does not list. An empty directory is claimed (an empty manifest); temporary files
    of ours left by a killed write are removed."""
    directory = Path(directory)
    if os.path.lexists(directory) and not directory.is_dir():
        raise ResultsError(f"{directory} exists and is not a directory")
    directory.mkdir(parents=True, exist_ok=True)
    try:
        owned = read_manifest(directory)
    except ManifestError as exc:
        raise ResultsError(f"{exc}; the directory cannot be identified as ilnrun's") from None
    for name in names:
        p = directory / name
        if p.is_symlink() or (p.exists() and not p.is_file()):
            raise ResultsError(f"{p} is a link or not a regular file; ilnrun will not replace it")
    if owned is None:
        entries = [p for p in directory.iterdir() if p.name != ".lock"]
        if not entries:
            write_manifest(directory, {})
            return
        if results and (directory / "config.yaml").is_file():
            return  # results of an earlier ilnrun, written before manifests existed
        if _earlier_output(directory, names):  # adopt exactly the files it writes
            adopted = [n for n in names if (directory / n).is_file()]
            write_manifest(directory, {n: file_entry(directory / n) for n in adopted})
            return
        raise ResultsError(
            f"{directory} is not empty and was not created by ilnrun (no {MANIFEST}); "
            "choose an empty or new directory"
        )
    for name in names:
        if (directory / name).exists() and name not in owned:
            raise ResultsError(
                f"{directory / name} was not written by ilnrun (not in its {MANIFEST}); "
                "move it away or choose another directory"
            )
    sweep_temporaries(directory, owned, min_age_s=60.0)


REPORT_MARK = b"_Generated by `ilnrun report`"


def _earlier_output(directory: Path, names: list[str]) -> bool:
    """Whether ``directory`` (no manifest: a git checkout, where manifests are not kept) holds
    only what an earlier ilnrun wrote there: every visible entry is one of ``names`` or a
    packed results folder (:func:`is_packed`, kept next to its report), and either
    ``REPORT.md`` carries the generated mark in its first lines, or there is no ``REPORT.md``
    and the directory is itself a packed folder or holds one."""
    report = directory / "REPORT.md"
    if report.is_symlink() or (os.path.lexists(report) and not report.is_file()):
        return False
    visible = [p for p in directory.iterdir() if not p.name.startswith(".")]
    folders = [p for p in visible if p.name not in names]
    if not all(p.is_dir() and not p.is_symlink() and is_packed(p) for p in folders):
        return False
    if not report.is_file():
        return bool(folders) or is_packed(directory)
    with open(report, "rb") as fh:
        head = fh.read(4096)
    return REPORT_MARK in head


def environment_error(exc: OSError, where: Path | str | None = None) -> str:
    """One line for an operating-system failure (full disk, read-only directory, ...): the file
    (else ``where``, the directory being written) and the system's words."""
    what = exc.strerror or errno.errorcode.get(exc.errno or 0, type(exc).__name__)
    place = exc.filename or where
    return f"{place}: {what}" if place else what
