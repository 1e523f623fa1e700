"""Results on disk (docs/protocol.md §10): the cell log, ``runs.csv``, ``summary.csv``,
``curves.csv``.

- ``cells.jsonl`` holds one JSON record per finished cell, appended with a single ``write`` the
  moment the cell finishes; a line cut short by a kill is ignored on reading, so an interrupted run
  loses only cells in flight.
- The CSVs are derived from the cell log and written atomically (temporary file + rename).
- Selection (docs/protocol.md §5): for every (method, dataset setting, budget) the
  hyperparameter setting with the lowest mean validation loss over repetitions is selected;
  settings with a diverged or timed-out repetition are skipped; every grid point stays in
  ``runs.csv`` (column ``selected``). The validation loss is ``val_loss``, or for a learner
  selected on its Algorithm-2 estimate (``evaluation.select_on: estimated``, §5.2)
  ``val_loss_estimated``; where the rows carry ``val_loss_estimated`` both selections are
  kept (``selected_exact``, ``selected_estimated``) and summarized side by side.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import re
import signal
import stat
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from .learners import LEARNERS, hyper_columns, size_columns
from .safe_yaml import YamlLimitError, load_json, loads_json
from .stats import mean_ci

CELL_LOG = "cells.jsonl"
METRICS = (
    "test_loss",
    "online_loss",
    "val_loss",
    "test_loss_avg",
    "test_loss_estimated",
    "test_nmse",
    "test_nmse_estimated",
    "test_loss_zero",
    "test_loss_const",
    "test_nmse_const",
    "test_error",
    "test_error_const",
    "test_loss_const_subset",
    "test_loss_subset",
    "regret",
    "regret_estimated",
    "best_loss_B",
    "lemma5_max_ratio",
    "val_loss_estimated",
)

# the validation loss each selection mode selects on (docs/protocol.md §5.2)
SELECT_COLUMN = {"exact": "val_loss", "estimated": "val_loss_estimated"}
# the metrics summarized under both selections (``sel_<mode>_<metric>_mean`` / ``_ci95``)
BOTH_SELECTIONS = (
    "val_loss",
    "val_loss_estimated",
    "test_loss",
    "test_nmse",
    "test_loss_estimated",
    "test_nmse_estimated",
)


def select_modes(select_on: str | dict, methods) -> dict[str, str]:
    """``evaluation.select_on`` as a mode per learner of ``methods`` (``exact`` for a learner
    without an Algorithm-2 validation loss, whatever the config says: docs/protocol.md §5.2)."""
    from .config.typed import select_mode

    return {
        m: select_mode(select_on, m, LEARNERS[m].estimated_validation if m in LEARNERS else False)
        for m in methods
    }


STATUS_COLUMNS = ("diverged", "diverged_reason", "timed_out", "rounds", "wall_s", "eval_s")


def int_columns() -> list[str]:
    """Integer columns that are missing for some learners (budget sizes, for instance)."""
    return ["dsgd_k", "budget_target", *size_columns(), "m_test", "test_evals_free"]


MANIFEST = ".ilnrun-manifest.json"
MANIFEST_VERSION = 2  # 2: each file's SHA-256 and size under ``written``; 1: names only

# the figures ``ilnrun plot`` writes (``<name>.<format>``) and the report ``ilnrun report`` writes
FIGURES = ("figure1", "curves", "budget_sweep", "regret", "frontier", "m_test")
FIGURE_FORMATS = ("png", "pdf", "svg")
REPORT = "REPORT.md"

# name -> {"sha256", "bytes"} of the content ilnrun wrote, or None for a file a manifest of
# version 1 lists (written by an ilnrun that recorded no digest)
Written = dict[str, dict | None]


class ManifestError(Exception):
    """A results directory's manifest exists but cannot be used (unreadable or malformed)."""


def write_atomic_bytes(
    path: Path, data: bytes, *, tmp: Path | None = None, record: bool = True
) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same directory and
    ``os.replace``; a failed write leaves neither a partial ``path`` nor a temporary file.
    A symlink at ``path`` is replaced by the file, never followed. The file and the digest of
    ``data`` are then recorded in the directory's manifest when the directory is ilnrun's (see
    :func:`record_output`), unless ``record`` is false. The temporary file is ``tmp`` where
    given (created, never reused: :class:`ChildWrite`'s, of a name its parent knows), else one
    of ``tempfile.mkstemp``'s names."""
    path = Path(path)
    if tmp is None:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    else:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
    if record and path.name != MANIFEST:
        record_output(path, data)


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (:func:`write_atomic_bytes`)."""
    write_atomic_bytes(path, text.encode())


FORK_CURVE_POINTS = 20_000  # rows of curves.csv from which a child writes it (write_run_tables)


class ChildWrite:
    """``write_atomic_bytes(path, make())`` done by a child forked from this process while this
    one goes on (Linux, where :func:`ilnrun.threads.fork_refused` finds nothing against a fork;
    else, or with ``fork=False``, by :meth:`join` here). The child writes the file
    (:func:`write_atomic_bytes` through a temporary file named after it) and sends its manifest
    entry back; :meth:`join`
    waits for it and records the file in the manifest here, so only this process writes the
    manifest. A child that fails (a full disk, any error) is answered by making and writing the
    file here, where the error is raised as it would have been: the same bytes either way.
    :meth:`cancel` (after :meth:`join`, or instead of it on an error or a stop) kills a child
    still running and removes its temporary file. The child leaves signals to this process:
    Ctrl-C reaches the whole process group, and this process then cancels the child."""

    def __init__(self, path: Path, make, fork: bool = True) -> None:
        from .stopping import leave_signals_to_parent
        from .threads import fork_refused, forking

        self.path, self.make = Path(path), make
        self.pid: int | None = None
        self.fd = -1
        if not fork or fork_refused() is not None:
            return
        read_fd, write_fd = os.pipe()
        with forking():
            pid = os.fork()
        if pid == 0:  # the child: writes the file and its entry, then ends without clean-up
            code = 1
            try:
                os.close(read_fd)
                leave_signals_to_parent()
                data = make()
                write_atomic_bytes(self.path, data, tmp=self._tmp(os.getpid()), record=False)
                os.write(write_fd, json.dumps(content_entry(data)).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(write_fd)
        self.pid, self.fd = pid, read_fd

    def _tmp(self, pid: int) -> Path:
        """The child's temporary file: named as :func:`write_atomic_bytes` names its own (its
        8 characters the child's process id), so that :func:`sweep_temporaries` knows it."""
        return self.path.parent / f".{self.path.name}.{pid:08x}.tmp"

    def join(self) -> None:
        """Wait for the child and record its file in the manifest; without a child, or where
        it failed, make and write the file here."""
        entry = None
        if self.pid is not None:
            with os.fdopen(self.fd, "rb") as fh:
                self.fd = -1
                message = fh.read()
            _, status = os.waitpid(self.pid, 0)
            pid, self.pid = self.pid, None
            if os.waitstatus_to_exitcode(status) == 0 and message:
                entry = json.loads(message)
            else:
                _remove_quietly(self._tmp(pid))
        if entry is None:
            write_atomic_bytes(self.path, self.make())
        else:
            record_output(self.path, entry=entry)

    def cancel(self) -> None:
        """Kill the child if it still runs, reap it and remove its temporary file."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if self.pid is not None:
            pid, self.pid = self.pid, None
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            _remove_quietly(self._tmp(pid))


def _remove_quietly(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def save_figure_atomic(fig, path: Path, **savefig_kwargs) -> None:
    """``fig.savefig`` into memory, then :func:`write_atomic_bytes` (a killed ``ilnrun plot``
    never leaves a truncated figure)."""
    buf = io.BytesIO()
    fig.savefig(buf, **savefig_kwargs)
    write_atomic_bytes(Path(path), buf.getvalue())


def copy_atomic(src: Path, dst: Path) -> None:
    """Copy the file ``src`` to ``dst`` atomically (:func:`write_atomic_bytes`)."""
    write_atomic_bytes(Path(dst), Path(src).read_bytes())


def read_manifest(directory: Path) -> list[str] | None:
    """The names of the files ilnrun wrote in ``directory``, or ``None`` when the directory
    holds no manifest (it is not ilnrun's). Raises :class:`ManifestError` when the manifest is
    a symlink, not a file, or not a list of plain file names (:func:`read_written`)."""
    written = read_written(directory)
    return None if written is None else sorted(written)


def read_written(directory: Path) -> Written | None:
    """What the manifest of ``directory`` says ilnrun wrote there: each file's name with the
    SHA-256 and size of the content written (``None`` for a file listed by a manifest of
    version 1, which recorded names only); ``None`` when there is no manifest. Raises
    :class:`ManifestError` when the manifest is a symlink, not a file, or malformed."""
    path = Path(directory) / MANIFEST
    if not os.path.lexists(path):
        return None
    if path.is_symlink() or not path.is_file():
        raise ManifestError(f"{path} is not a regular file")
    try:
        doc = load_json(path)
    except (OSError, ValueError, YamlLimitError):
        raise ManifestError(f"{path} is unreadable") from None
    files = doc.get("files") if isinstance(doc, dict) else None
    if not isinstance(files, list) or not all(_plain_name(f) for f in files):
        raise ManifestError(f"{path} is not an ilnrun manifest")
    entries = doc.get("written", {})
    if not isinstance(entries, dict) or not all(
        name in files and _entry_ok(e) for name, e in entries.items()
    ):
        raise ManifestError(f"{path} is not an ilnrun manifest (its digests are malformed)")
    return {name: entries.get(name) for name in files}


def _entry_ok(entry: object) -> bool:
    return (
        isinstance(entry, dict)
        and set(entry) == {"sha256", "bytes"}
        and isinstance(entry["sha256"], str)
        and re.fullmatch(r"[0-9a-f]{64}", entry["sha256"]) is not None
        and isinstance(entry["bytes"], int)
        and not isinstance(entry["bytes"], bool)
        and entry["bytes"] >= 0
    )


def _plain_name(name: object) -> bool:
    return (
        isinstance(name, str)
        and name not in ("", ".", "..", MANIFEST)
        and "/" not in name
        and "\\" not in name
        and "\0" not in name
    )


def write_manifest(directory: Path, written: Written | list[str]) -> None:
    """Mark ``directory`` as ilnrun's, listing the files of ``written`` (names inside it) with
    the digest of the content ilnrun wrote (:func:`content_entry`; ``None``, or a plain list of
    names: unknown, as a manifest of version 1 lists them)."""
    if isinstance(written, list):
        written = dict.fromkeys(written)
    doc = {
        "ilnrun": MANIFEST_VERSION,
        "files": sorted(written),
        "written": {n: e for n, e in sorted(written.items()) if e is not None},
    }
    write_atomic_bytes(Path(directory) / MANIFEST, (json.dumps(doc, indent=1) + "\n").encode())


def content_entry(data: bytes) -> dict:
    """The manifest's record of content ilnrun wrote: its SHA-256 and size."""
    return {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def file_entry(path: Path) -> dict:
    """:func:`content_entry` of the file ``path`` as it is now (read in chunks; an absent file
    is empty)."""
    return _entry(*_hash_file(path))


def _hash_file(path: Path) -> tuple:
    """``(SHA-256 object, size)`` of the file ``path`` as it is now (an absent file is empty);
    the object can go on hashing what is appended after."""
    h, size = hashlib.sha256(), 0
    try:
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
                size += len(chunk)
    except FileNotFoundError:
        pass
    return h, size


def _entry(h, size: int) -> dict:
    """The manifest entry of content whose SHA-256 object is ``h`` and length ``size``."""
    return {"sha256": h.hexdigest(), "bytes": size}


def written_by_ilnrun(path: Path, entry: dict) -> bool:
    """Whether the file ``path`` holds the content its manifest ``entry`` records. The cell log
    may have grown since (records are appended without rewriting the manifest): it is ilnrun's
    when its first ``bytes`` bytes match and every complete line after them is a record whose
    value digest verifies (a torn last line allowed)."""
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            if not _starts_with(fh, entry):
                return False
            if path.name != CELL_LOG:
                return not fh.read(1)
            while line := fh.readline(MAX_RECORD_BYTES + 1):
                if not line.endswith(b"\n"):
                    return len(line) <= MAX_RECORD_BYTES  # a torn last record
                rec = _parse_record(line)
                if rec is None or VALUES_KEY not in rec or not values_verify(rec):
                    return False
    except OSError:
        return False
    return True


def _starts_with(fh: io.BufferedReader, entry: dict) -> bool:
    """Whether the open file ``fh`` begins with the content a manifest ``entry`` records (its
    first ``bytes`` bytes hash to its ``sha256``); ``fh`` is left just past them."""
    h, left = hashlib.sha256(), entry["bytes"]
    while left > 0 and (chunk := fh.read(min(left, 1 << 20))):
        h.update(chunk)
        left -= len(chunk)
    return left == 0 and h.hexdigest() == entry["sha256"]


def _temporary_pattern(names: list[str]) -> re.Pattern:
    """The names :func:`write_atomic_bytes` gives its temporary files for ``names``
    (``tempfile.mkstemp``: a dot, the name, a dot, 8 random characters, ``.tmp``)."""
    alternatives = "|".join(re.escape(n) for n in sorted(set(names)))
    return re.compile(rf"\.({alternatives})\.[a-z0-9_]{{8}}\.tmp")


def sweep_temporaries(directory: Path, names: list[str], min_age_s: float = 0.0) -> int:
    """Remove the temporary files a killed :func:`write_atomic_bytes` left in ``directory`` for
    one of ``names`` (and the manifest): only regular files, single-linked, of exactly our
    naming, untouched for ``min_age_s`` seconds (a concurrent writer's file is younger).
    Returns how many were removed."""
    pattern = _temporary_pattern([*names, MANIFEST])
    removed = 0
    now = time.time()
    for entry in os.scandir(directory):
        if not pattern.fullmatch(entry.name):
            continue
        st = entry.stat(follow_symlinks=False)
        if stat.S_ISREG(st.st_mode) and st.st_nlink == 1 and now - st.st_mtime >= min_age_s:
            try:
                os.unlink(entry.path)
                removed += 1
            except FileNotFoundError:
                pass
    return removed


def record_output(path: Path, data: bytes | None = None, entry: dict | None = None) -> None:
    """Record ``path``'s name and the digest of its content (``data`` as just written, or its
    manifest ``entry`` where the caller has it, else the file as it is now) in the manifest of
    its directory when that directory is ilnrun's (a directory without a manifest, or with a
    broken one, is left alone)."""
    path = Path(path)
    try:
        written = read_written(path.parent)
    except ManifestError:
        return
    if written is None:
        return
    if entry is None:
        entry = content_entry(data) if data is not None else file_entry(path)
    if path.name not in written or written[path.name] != entry:
        write_manifest(path.parent, {**written, path.name: entry})


class CellLog:
    """Append-only log of finished cells (``cells.jsonl``).

    After :meth:`read`, ``corrupt`` counts the lines that are not a well-formed record (bad JSON
    or bytes, not an object, missing or mistyped ``id`` / ``row`` / ``curve``); the other
    counts concern records whose cell has no record that is kept, so a record superseded by a
    later one of the same cell (its cell ran again) is counted once, not on every resume:
    ``altered`` the records whose values no longer match their value digest
    (:func:`values_verify`) or that lack one where the manifest does not vouch for them (of
    which ``unsigned``; ``altered_ids`` names their cells), ``ignored`` the records of another
    config (their digest differs from the cell's), and ``left_out`` the cells that are not
    cells of the config."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / CELL_LOG
        self.corrupt = 0
        self.altered = 0
        self.unsigned = 0
        self.altered_ids: set[str] = set()
        self.ignored = 0
        self.left_out = 0
        # the log as this process knows it since it last vouched for it: the manifest entry it
        # recorded then, and the SHA-256 object and length of that content plus every line it
        # appended since (None: unknown)
        self._known: tuple[dict, object, int] | None = None

    def read(self, repair: bool = False, digests: dict[str, str] | None = None) -> dict[str, dict]:
        """Records by cell id (a later record of a cell replaces an earlier one). A torn last
        line (a write cut short) is never returned; with ``repair`` it is also cut off the log
        (by writing a new file: the old inode, which a hard link may share, is never written),
        so that later appends start on a fresh line. Malformed lines anywhere, lines over
        :data:`MAX_RECORD_BYTES` and records whose columns have the wrong types are skipped
        (counted in ``corrupt``), as are records whose values changed since they were written
        (``altered``). With ``digests`` (cell id -> :func:`ilnrun.config.record_digest`) only
        records whose id is a key and whose ``digest`` matches are returned; the others are
        counted in ``ignored`` (another digest) or ``left_out`` (another id)."""
        out: dict[str, dict] = {}
        self._known = None  # a repair rewrites the log: known again from the next vouch
        self.corrupt = self.altered = self.unsigned = self.ignored = self.left_out = 0
        self.altered_ids = set()
        altered: list[tuple[str, bool]] = []  # (cell id, whether the record lacks a digest)
        ignored: list[str] = []
        left_out: set[str] = set()
        if not os.path.lexists(self.path):
            return out
        vouched = self.vouched_bytes()
        end = 0  # bytes up to the end of the last whole line
        with open(self.path, "rb") as fh:
            while True:
                line = fh.readline(MAX_RECORD_BYTES + 1)
                if not line:
                    break
                if not line.endswith(b"\n"):
                    if len(line) <= MAX_RECORD_BYTES:
                        break  # a torn last record
                    self.corrupt += 1  # an overlong line: skip to its end
                    while line and not line.endswith(b"\n"):
                        line = fh.readline(MAX_RECORD_BYTES + 1)
                    if not line:
                        break
                    end = fh.tell()
                    continue
                end = fh.tell()
                if not line.strip():
                    continue
                rec = _parse_record(line)
                if rec is None:
                    self.corrupt += 1
                elif digests is not None and rec["id"] not in digests:
                    left_out.add(rec["id"])
                elif not values_verify(rec) or (VALUES_KEY not in rec and end > vouched):
                    altered.append((rec["id"], VALUES_KEY not in rec))
                elif digests is not None and digests[rec["id"]] != rec.get("digest"):
                    ignored.append(rec["id"])
                else:
                    out[rec["id"]] = rec
        skipped = [unsigned for i, unsigned in altered if i not in out]
        self.altered, self.unsigned = len(skipped), sum(skipped)
        self.altered_ids = {i for i, _ in altered if i not in out}
        self.ignored = sum(1 for i in ignored if i not in out)
        self.left_out = len(left_out)
        if repair and end < os.path.getsize(self.path):
            with open(self.path, "rb") as fh:
                kept = fh.read(end)
            write_atomic_bytes(self.path, kept)
        return out

    def has_lines(self) -> bool:
        """Whether the log exists and holds anything (a fresh run's does not)."""
        try:
            return os.lstat(self.path).st_size > 0
        except FileNotFoundError:
            return False

    def vouched_bytes(self) -> float:
        """How many leading bytes of the log its manifest vouches for, the only place where a
        record without a value digest (written by ilnrun 0.2.0 or earlier) is read: all of it
        where no digest of the log is recorded (no manifest, or one of 0.2.0), the recorded
        length where the log still starts with the content recorded, else none. Every record
        ilnrun appends carries a value digest, so a record stripped of its digest (and a digit
        changed) is never read as an old one."""
        try:
            written = read_written(self.path.parent)
        except ManifestError:
            return 0
        entry = None if written is None else written.get(CELL_LOG)
        if entry is None:
            return math.inf
        try:
            with open(self.path, "rb") as fh:
                ours = _starts_with(fh, entry)
        except OSError:
            return 0
        return entry["bytes"] if ours else 0

    def vouch(self) -> None:
        """Record the log's content now in the manifest (for ``--fresh`` and
        :meth:`vouched_bytes`) when the manifest records none for it yet or the log is still
        what it recorded plus records ilnrun appended (:func:`written_by_ilnrun`); a log edited
        since is never vouched for, so an edit stays detected on every later resume."""
        try:
            written = read_written(self.path.parent)
        except ManifestError:
            return
        if written is None:
            return
        entry = written.get(CELL_LOG)
        h, size = _hash_file(self.path)
        now = _entry(h, size)
        if self._appended_only(entry, now) or entry is None or written_by_ilnrun(self.path, entry):
            record_output(self.path, entry=now)
            self._known = (now, h, size)
        else:
            self._known = None

    def _appended_only(self, entry: dict | None, now: dict) -> bool:
        """Whether the log is what this process last vouched for (the manifest still records
        that ``entry``) plus exactly the records it appended since: its content now, ``now``,
        is what the process knows it wrote. Then every line after the recorded content is a
        record ilnrun appended, which :func:`written_by_ilnrun` would otherwise read back."""
        known = self._known
        if known is None or entry is None or entry != known[0]:
            return False
        return now == _entry(known[1], known[2])

    def detach(self) -> bool:
        """Give the log its own inode when a hard link shares it (a copy of the content,
        renamed over the name; the other names keep the old file untouched). Returns whether
        it did."""
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return False
        if not stat.S_ISREG(st.st_mode) or st.st_nlink <= 1:
            return False
        with open(self.path, "rb") as fh:
            data = fh.read()
        write_atomic_bytes(self.path, data)
        return True

    def append(self, record: dict) -> None:
        """Append one record, sealed with its value digest (:func:`seal`), with a single
        ``write`` (a kill leaves it whole or torn, never interleaved). A log that a hard link
        shares is first detached (:meth:`detach`): ilnrun never writes into a file that also
        lives outside the results directory."""
        line = sealed_line(record)
        for _ in range(2):
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
            try:
                if os.fstat(fd).st_nlink <= 1:
                    n = os.write(fd, line)
                    self._wrote(line, n)
                    return
            finally:
                os.close(fd)
            self.detach()
        raise OSError(f"{self.path} keeps more than one hard link; ilnrun will not append to it")

    def _wrote(self, line: bytes, n: int) -> None:
        """Add the ``n`` bytes of ``line`` just appended to the content this process knows."""
        if self._known is None:
            return
        if n != len(line):  # a short write: the log is no longer known
            self._known = None
            return
        entry, h, size = self._known
        h.update(line)
        self._known = (entry, h, size + n)


VALUES_KEY = "values_sha256"  # a record's digest of its own values (id, row, curve, digest, ...)


def values_digest(record: dict) -> str:
    """SHA-256 of a record's values (every key but :data:`VALUES_KEY`), over their canonical
    JSON (sorted keys, no spaces): a changed digit anywhere in the record changes it."""
    body = {k: v for k, v in record.items() if k != VALUES_KEY}
    return hashlib.sha256(_canonical(body).encode()).hexdigest()


def seal(record: dict) -> dict:
    """``record`` as it reads back from the log (JSON values) with its value digest added."""
    body = json.loads(json.dumps(record, allow_nan=True))
    body.pop(VALUES_KEY, None)
    return {**body, VALUES_KEY: values_digest(body)}


def sealed_line(record: dict) -> bytes:
    """The line of ``record`` in the log: ``json.dumps(seal(record))`` and a newline, in bytes.

    For a record whose every mapping has string keys (every record a cell makes), its JSON
    reads back as itself (numbers, strings, lists), so the round trip of :func:`seal` changes
    no character: the line is then the record's JSON with the digest of its canonical JSON
    appended as the last key — the same bytes from two ``json.dumps`` instead of three and a
    ``json.loads``. Any other record is sealed as :func:`seal` does."""
    if not record or VALUES_KEY in record or not _string_keys(record):
        return (json.dumps(seal(record), allow_nan=True) + "\n").encode()
    texts = _curve_texts(record.get("curve"))
    if texts is None:
        text = json.dumps(record, allow_nan=True)
        canonical = _canonical(record)
    else:  # the same two texts, the curve's numbers formatted once for both
        text = (
            "{"
            + ", ".join(
                f"{json.dumps(k)}: {texts[0] if k == 'curve' else json.dumps(v, allow_nan=True)}"
                for k, v in record.items()
            )
            + "}"
        )
        canonical = (
            "{"
            + ",".join(
                f"{json.dumps(k)}:{texts[1] if k == 'curve' else _canonical(record[k])}"
                for k in sorted(record)
            )
            + "}"
        )
    value = hashlib.sha256(canonical.encode()).hexdigest()
    return f'{text[:-1]}, "{VALUES_KEY}": "{value}"}}\n'.encode()


def _canonical(value: object) -> str:
    """The canonical JSON of ``value`` (sorted keys, no spaces: :func:`values_digest`'s)."""
    return json.dumps(value, sort_keys=True, allow_nan=True, separators=(",", ":"))


def _curve_texts(curve: object) -> tuple[str, str] | None:
    """A record's curve, ``{name: [numbers]}``, as ``json.dumps`` writes it and as its canonical
    JSON (sorted names, no spaces), each list's numbers formatted once: a list of plain numbers
    (JSON numbers, ``NaN``, ``Infinity``: no comma among their characters) is its compact text
    with ``", "`` for ``","``. ``None`` for anything else (then encoded as a whole)."""
    if type(curve) is not dict:
        return None
    compact = {}
    for name, values in curve.items():
        if type(name) is not str or type(values) is not list:
            return None
        if not _JSON_NUMBERS.issuperset(map(type, values)):
            return None
        compact[name] = json.dumps(values, allow_nan=True, separators=(",", ":"))
    spaced = ", ".join(f"{json.dumps(k)}: {t.replace(',', ', ')}" for k, t in compact.items())
    canonical = ",".join(f"{json.dumps(k)}:{compact[k]}" for k in sorted(compact))
    return "{" + spaced + "}", "{" + canonical + "}"


_CONTAINERS = (dict, list, tuple)
_LEAVES = frozenset((str, int, float, bool, type(None)))  # no container among their types
_KEYS = frozenset((str,))


def _string_keys(value: object) -> bool:
    """Whether every mapping in ``value`` (nested in mappings, lists and tuples) has only
    string keys: JSON turns other keys into strings, and ``sort_keys`` sorts them otherwise.
    (A list of plain numbers and strings, a curve, is passed over by the types it holds.)"""
    if isinstance(value, dict):
        if not _KEYS.issuperset(map(type, value)):  # (a subclass of str: sealed as before)
            return False
        values = value.values()
    else:
        values = value
    if _LEAVES.issuperset(map(type, values)):
        return True
    return all(_string_keys(v) for v in values if isinstance(v, _CONTAINERS))


def values_verify(record: dict) -> bool:
    """Whether a record's values are those it was written with: its :data:`VALUES_KEY` matches
    :func:`values_digest`. A record written before records carried the digest (ilnrun 0.2.0 and
    earlier) has none and is accepted as before."""
    return VALUES_KEY not in record or record[VALUES_KEY] == values_digest(record)


MAX_RECORD_BYTES = 16 << 20  # one cells.jsonl line


# column -> accepted types of a record's row (a column absent from this table is not checked;
# the first group must be present in every record)
_NUMBER = (int, float)
_REQUIRED = {
    "cell_id": (str,),
    "method": (str,),
    "setting": (str,),
    "repetition": (int,),
    "diverged": (bool,),
    "timed_out": (bool,),
    "val_loss": _NUMBER,
    "test_loss": _NUMBER,
    "wall_s": _NUMBER,
}
_OPTIONAL = {
    **{m: (*_NUMBER, type(None)) for m in METRICS},
    "eval_s": (*_NUMBER, type(None)),
    "rounds": (int, type(None)),
    "seed": (int,),
    "dsgd_k": (int, type(None)),
    "budget_target": (int, type(None)),
    "diverged_reason": (str, type(None)),
    "train_evals": (int, type(None)),
    "features_sampled": (int, type(None)),
    "shrinks": (int, type(None)),
    "taylor_copies": (int, type(None)),  # Shrinking Gradient with a non-square loss
    "test_evals": (int, type(None)),
    # the evaluation protocol and its costs (docs/protocol.md §3.2)
    "eval_kernel": (str,),
    **{
        c: (int, type(None))
        for c in (
            "m_test",
            "val_evals",
            "test_evals_psi",
            "val_kernel_evals",
            "test_kernel_evals",
            "evals_total",
            "kernel_evals_total",
            "test_evals_free",
            "diagnostic_evals",
        )
    },
}


def _row_ok(row: dict) -> bool:
    """Whether a record's row has the columns every table needs, each of its type (a bool is
    not a number; a number column may hold null where the learner has no value)."""
    for col, types in _REQUIRED.items():
        v = row.get(col, _ABSENT)
        if not isinstance(v, types) or (bool not in types and isinstance(v, bool)):
            return False
    sizes = {c: (int, type(None)) for c in size_columns()}
    for col, types in (_OPTIONAL | sizes).items():
        if col in row:
            v = row[col]
            if not isinstance(v, types) or (bool not in types and isinstance(v, bool)):
                return False
    return True


_ABSENT = object()
# the exact types JSON reads back as (json.loads makes no subclass; a bool is not a number)
_JSON_SCALARS = frozenset((str, int, float, bool, type(None)))
_JSON_NUMBERS = frozenset((int, float))


def _parse_record(line: bytes) -> dict | None:
    """A cell record from one log line, or ``None`` when the line is not a well-formed one
    (bad JSON or bytes, nesting, not an object, a column missing or of the wrong type)."""
    try:
        rec = loads_json(line, MAX_RECORD_BYTES)
    except (ValueError, YamlLimitError):  # bad JSON, bad UTF-8, absurd nesting
        return None
    if not (
        isinstance(rec, dict)
        and isinstance(rec.get("id"), str)
        and isinstance(rec.get("row"), dict)
        and isinstance(rec.get("curve"), dict)
        and isinstance(rec.get("digest", ""), str)
        and isinstance(rec.get(VALUES_KEY, ""), str)
        and rec["row"].get("cell_id") == rec["id"]
        and _JSON_SCALARS.issuperset(map(type, rec["row"].values()))
        and _row_ok(rec["row"])
    ):
        return None
    curve = rec["curve"]
    lengths = set()
    for v in curve.values():
        if type(v) is not list or not _JSON_NUMBERS.issuperset(map(type, v)):
            return None
        lengths.add(len(v))
    if len(lengths) > 1 or "t" not in curve:
        return None
    return rec


def group_columns(runs: pd.DataFrame, dataset_keys: list[str]) -> list[str]:
    """A (method, dataset setting, budget) group."""
    return ["method", *dataset_keys, "dsgd_k"]


def select(
    runs: pd.DataFrame, dataset_keys: list[str], modes: dict[str, str] | None = None
) -> pd.DataFrame:
    """Add the boolean column ``selected``: per group the setting with the lowest mean
    validation loss — ``val_loss``, or ``val_loss_estimated`` for a learner whose mode in
    ``modes`` (:func:`select_modes`; default ``exact`` for all) is ``estimated`` — skipping a
    setting with a diverged or timed-out repetition or a non-finite mean. When some row has a
    ``val_loss_estimated``, both selections are kept as well: ``selected_exact`` and
    ``selected_estimated`` (a learner without the column selects on ``val_loss`` in both)."""
    runs = runs.copy()
    modes = modes or {}
    both = "val_loss_estimated" in runs and runs["val_loss_estimated"].notna().any()
    failed = runs["diverged"] | runs["timed_out"]
    gid = (
        runs.groupby(group_columns(runs, dataset_keys), dropna=False, sort=False)
        .ngroup()
        .to_numpy()
    )
    groups = int(gid.max()) + 1 if len(gid) else 0
    exact = _best_settings(runs, gid, failed, "val_loss", groups)
    # without an Algorithm-2 validation loss a group has no estimated selection of its own
    has_est = np.zeros(groups, dtype=bool)
    est = np.full(groups, None, dtype=object)
    if "val_loss_estimated" in runs:
        has_est = (
            runs["val_loss_estimated"]
            .notna()
            .groupby(gid)
            .any()
            .reindex(range(groups), fill_value=False)
            .to_numpy(dtype=bool)
        )
        est = _best_settings(runs, gid, failed, "val_loss_estimated", groups)
        est[~has_est] = None
    side = np.where(has_est, est, exact)  # the side-by-side column: exact's without one
    # the learner's own mode (an old results directory without the column: none selected)
    first_row = np.unique(gid, return_index=True)[1]
    method = runs["method"].to_numpy(dtype=object)[first_row]
    own = np.array([modes.get(m, "exact") == "estimated" for m in method], dtype=bool)
    best = np.where(own, est, exact)
    setting = runs["setting"].to_numpy(dtype=object)
    runs["selected"] = _marks(setting, best[gid], runs.index)
    if both:
        runs["selected_exact"] = _marks(setting, exact[gid], runs.index)
        runs["selected_estimated"] = _marks(setting, side[gid], runs.index)
    return runs


def _marks(setting: np.ndarray, chosen: np.ndarray, index: pd.Index) -> pd.Series:
    """Rows whose setting is their group's ``chosen`` one (``None``: no row of the group)."""
    return pd.Series(
        np.array(
            [c is not None and s == c for s, c in zip(setting, chosen, strict=True)], dtype=bool
        ),
        index=index,
    )


def _best_settings(
    runs: pd.DataFrame, gid: np.ndarray, failed: pd.Series, column: str, groups: int
) -> np.ndarray:
    """Per group (numbered ``gid``, ``groups`` of them) the setting with the lowest mean
    ``column`` over repetitions (ties: grid order, the lowest ``cell_index``), among those
    without a failed repetition; ``None`` where none is left. The means are pandas' grouped
    means of the group's rows of a setting in row order, as per group."""
    frame = pd.DataFrame(
        {
            "gid": gid,
            "setting": runs["setting"].to_numpy(),
            "val": runs[column],
            "failed": failed,
            "first": runs["cell_index"],
        },
        index=runs.index,
    )
    per = frame.groupby(["gid", "setting"], sort=False).agg(
        val=("val", "mean"), failed=("failed", "any"), first=("first", "min")
    )
    ok = per[~per["failed"] & np.isfinite(per["val"])].reset_index()
    ok = ok.sort_values(["val", "first"], kind="stable").drop_duplicates("gid")
    out = np.full(groups, None, dtype=object)
    out[ok["gid"].to_numpy(dtype=int)] = ok["setting"].to_numpy(dtype=object)
    return out


def summarize(runs: pd.DataFrame, dataset_keys: list[str]) -> pd.DataFrame:
    """One row per (method, dataset setting, budget): the selected setting and, for each metric,
    mean, std, the 95% t-interval half-width ``t_{0.975,n-1} std / sqrt(n)``, and ``n``."""
    rows = []
    keys = group_columns(runs, dataset_keys)
    for gkey, g in runs.groupby(keys, dropna=False, sort=False):
        row = dict(zip(keys, gkey, strict=True))
        row["settings"] = g["setting"].nunique()
        row["diverged_cells"] = int(g["diverged"].sum())
        row["diverged_settings"] = int(g.groupby("setting")["diverged"].any().sum())
        row["timed_out_cells"] = int(g["timed_out"].sum())
        sel = g[g["selected"]]
        if sel.empty:
            row.update(setting=None, n=0)
            row.update(_both_selections(g))
            rows.append(row)
            continue
        first = sel.iloc[0]
        for c in (
            "setting",
            "loss",
            *hyper_columns(),
            "budget_match",
            "budget_target",
            *size_columns(),
        ):
            if c in first:
                row[c] = first[c]
        row["n"] = len(sel)
        for c in ("train_evals", "features_sampled", "shrinks", "test_evals", "wall_s"):
            row[f"{c}_mean"] = float(sel[c].mean())
        for c in ("evals_total", "kernel_evals_total"):  # absent from records written before them
            if c in sel:
                row[f"{c}_mean"] = float(sel[c].mean())
        if "taylor_copies" in sel and sel["taylor_copies"].notna().any():  # SG, non-square loss
            row["taylor_copies_mean"] = float(sel["taylor_copies"].mean())
        for metric in (m for m in METRICS if m in sel):
            st = mean_ci(sel[metric].to_numpy(dtype=float))
            row[f"{metric}_mean"] = st["mean"]
            row[f"{metric}_std"] = st["std"]
            row[f"{metric}_ci95"] = st["ci95"]
        row.update(_both_selections(g))
        rows.append(row)
    out = pd.DataFrame(rows)
    for col in int_columns():
        if col in out:
            out[col] = out[col].astype("Int64")
    return out


def _both_selections(g: pd.DataFrame) -> dict:
    """For a group whose rows carry both selections: per mode ``sel_<mode>_setting``,
    ``sel_<mode>_n`` and ``sel_<mode>_<metric>_mean`` / ``_ci95`` of :data:`BOTH_SELECTIONS`
    (docs/protocol.md §10.3); nothing for other groups."""
    if "selected_estimated" not in g or not g["val_loss_estimated"].notna().any():
        return {}
    out: dict = {}
    for mode in ("exact", "estimated"):
        sel = g[g[f"selected_{mode}"].astype(bool)]
        out[f"sel_{mode}_setting"] = sel["setting"].iloc[0] if len(sel) else None
        out[f"sel_{mode}_n"] = len(sel)
        for metric in BOTH_SELECTIONS:
            st = mean_ci(sel[metric].to_numpy(dtype=float))
            out[f"sel_{mode}_{metric}_mean"] = st["mean"]
            out[f"sel_{mode}_{metric}_ci95"] = st["ci95"]
    return out


def build_tables(
    records: list[dict],
    order: dict[str, int],
    dataset_keys: list[str],
    modes: dict[str, str] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """``runs``, ``summary`` and ``curves`` tables from cell records, in cell order; selection
    per learner by ``modes`` (:func:`select_modes`; default: every learner on ``val_loss``)."""
    recs, runs = _runs_table(records, order, dataset_keys, modes)
    summary = summarize(runs, dataset_keys)
    curves = _curves_table(_selected_records(recs, runs), dataset_keys)
    return runs.drop(columns=["cell_index"]), summary, curves


def write_run_tables(
    directory: Path,
    records: list[dict],
    order: dict[str, int],
    dataset_keys: list[str],
    modes: dict[str, str] | None = None,
    child: bool = True,
) -> pd.DataFrame:
    """:func:`build_tables`'s three tables written at the end of a run (``write_atomic``), the
    same files byte for byte, with ``curves.csv`` made and written by a child forked from this
    process (:class:`ChildWrite`) while this one makes and writes ``runs.csv`` and
    ``summary.csv``, where the selected cells' curves have at least :data:`FORK_CURVE_POINTS`
    points (the rows of ``curves.csv``) and ``child`` is true (a run on dask keeps its client's
    threads in this process: no fork). Returns ``runs``."""
    directory = Path(directory)
    recs, runs = _runs_table(records, order, dataset_keys, modes)

    selected = _selected_records(recs, runs)

    def curves_csv() -> bytes:
        return _curves_table(selected, dataset_keys).to_csv(index=False).encode()

    points = sum(len(r["curve"].get("t") or ()) for r in selected)
    fork = child and points >= FORK_CURVE_POINTS
    curves = ChildWrite(directory / "curves.csv", curves_csv, fork=fork)
    try:
        summary = summarize(runs, dataset_keys)
        runs = runs.drop(columns=["cell_index"])
        write_atomic(directory / "runs.csv", runs.to_csv(index=False))
        write_atomic(directory / "summary.csv", summary.to_csv(index=False))
        curves.join()
    finally:
        curves.cancel()
    return runs


def _runs_table(
    records: list[dict], order: dict[str, int], dataset_keys: list[str], modes: dict | None
) -> tuple[list[dict], pd.DataFrame]:
    """The records in cell order and the ``runs`` table with its selection and a last column
    ``cell_index`` (:func:`build_tables`)."""
    recs = sorted(records, key=lambda r: order[r["id"]])
    runs = pd.DataFrame([{**r["row"], "cell_index": order[r["id"]]} for r in recs])
    # columns in order of appearance, the status columns last (whichever learner came first)
    status = [c for c in STATUS_COLUMNS if c in runs]
    runs = runs[
        [c for c in runs if c not in status and c != "cell_index"] + status + ["cell_index"]
    ]
    for col in int_columns():  # integers that are missing for some learners
        if col in runs:
            runs[col] = runs[col].astype("Int64")
    return recs, select(runs, dataset_keys, modes)


def _selected_records(recs: list[dict], runs: pd.DataFrame) -> list[dict]:
    """The records (in their order) of the cells that ``runs`` marks ``selected``."""
    sel_ids = set(runs.loc[runs["selected"], "cell_id"])
    return [r for r in recs if r["id"] in sel_ids]


def _curves_table(selected: list[dict], dataset_keys: list[str]) -> pd.DataFrame:
    """The ``curves`` table: the learning curves of the ``selected`` records, in their order."""
    id_cols = ["method", *dataset_keys, "dsgd_k", "repetition", "setting"]
    parts = _curve_frames(selected, id_cols)
    return _concat_runs(parts) if parts else pd.DataFrame(columns=[*id_cols, "t", "online_loss"])


def _curve_frames(records: list[dict], id_cols: list[str]) -> list[pd.DataFrame]:
    """The learning curves of ``records`` as frames to be concatenated, in order: each run of
    consecutive records whose curves have the same columns and kinds of values
    (:func:`_curve_kinds`) as one frame built from its columns' arrays, the frame that
    :func:`_curve_frame` of each and their concatenation would give (the same columns, types
    and values) without a frame per record; a record of another shape by :func:`_curve_frame`."""
    frames: list[pd.DataFrame] = []
    run: list[dict] = []
    kinds: tuple | None = None
    for r in records:
        k = _curve_kinds(r, id_cols)
        if run and k != kinds:
            frames.append(_run_frame(run, kinds))
            run = []
        if k is None:
            frames.append(_curve_frame(r, id_cols))
        else:
            run.append(r)
            kinds = k
    if run:
        frames.append(_run_frame(run, kinds))
    return frames


# the kind of a value, for the types whose frame column pandas types the same way each time
_SCALAR_KINDS = {str: "str", bool: "bool", int: "int", float: "float", type(None): "none"}
_INT64 = (-(2**63), 2**63 - 1)


def _curve_kinds(record: dict, id_cols: list[str]) -> tuple | None:
    """``((name, kind), ...)`` of a record's curve frame (:func:`_curve_frame`): the identifying
    columns by the kind of their value (``str``, ``bool``, ``int`` in int64, ``float``,
    ``none``), then the curve's lists (``int``: Python ints in int64; ``float``: floats, or ints
    and floats). ``None`` for any other record (a curve without ``t``, lists of other values or
    of unequal lengths), which is then built as before."""
    curve, row = record["curve"], record["row"]
    if not curve.get("t") or any(col in curve for col in id_cols):
        return None
    out = []
    for col in id_cols:
        v = row[col]
        kind = _SCALAR_KINDS.get(type(v))
        if kind is None or (kind == "int" and not _INT64[0] <= v <= _INT64[1]):
            return None
        out.append((col, kind))
    n = len(curve["t"])
    for name, values in curve.items():
        if type(values) is not list or len(values) != n:
            return None
        types = set(map(type, values))
        if types == {int} and _INT64[0] <= min(values) and max(values) <= _INT64[1]:
            out.append((name, "int"))
        elif types and types <= _JSON_NUMBERS and float in types:
            out.append((name, "float"))
        else:
            return None
    return tuple(out)


def _run_frame(run: list[dict], kinds: tuple) -> pd.DataFrame:
    """One frame of the curves of ``run`` (records of the same :func:`_curve_kinds`): each
    identifying value repeated over its record's points, each curve's lists joined; strings and
    ``None`` go in as lists, for pandas to type them as it types a repeated scalar."""
    lengths = np.array([len(r["curve"]["t"]) for r in run])
    dtypes = {"bool": bool, "int": np.int64, "float": np.float64}
    columns: dict[str, object] = {}
    for name, kind in kinds:
        if name in run[0]["curve"]:
            values = [v for r in run for v in r["curve"][name]]
            columns[name] = np.array(values, dtype=dtypes[kind])
        elif kind in dtypes:
            scalars = np.array([r["row"][name] for r in run], dtypes[kind])
            columns[name] = np.repeat(scalars, lengths)
        else:
            scalars = np.empty(len(run), dtype=object)
            scalars[:] = [r["row"][name] for r in run]
            columns[name] = np.repeat(scalars, lengths).tolist()
    return pd.DataFrame(columns)


def _concat_runs(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """``pd.concat(parts, ignore_index=True)``, with the runs of consecutive frames that have
    the same columns joined first: joining frames whose columns differ (a learner's own curve
    column, missing from the others' frames) costs per frame, so it is done once per run. The
    columns and their types are concat's (a column missing from some frames is filled as it
    would be)."""
    runs: list[pd.DataFrame] = []
    start = 0
    for i in range(1, len(parts) + 1):
        if i == len(parts) or not parts[i].columns.equals(parts[start].columns):
            runs.append(pd.concat(parts[start:i], ignore_index=True))
            start = i
    return runs[0] if len(runs) == 1 else pd.concat(runs, ignore_index=True)


def _curve_frame(record: dict, id_cols: list[str]) -> pd.DataFrame:
    """A record's learning curve with its identifying columns first (each the row's value on
    every point): one frame built at once, the columns and types of the curve's frame with the
    columns inserted in front one by one (a scalar column is typed as ``insert`` types it)."""
    curve = record["curve"]
    if not curve.get("t") or any(col in curve for col in id_cols):
        c = pd.DataFrame(curve)
        for col in reversed(id_cols):
            c.insert(0, col, record["row"][col])
        return c
    return pd.DataFrame({**{col: record["row"][col] for col in id_cols}, **curve})
