"""A temporary folder per run for joblib's memory-mapped arguments, removed when the run ends and,
after a killed run, by the next run.

joblib puts ``joblib_memmapping_folder_*`` directories in ``/dev/shm`` (else the system temporary
directory) and removes them only when the parent exits normally: each killed run left one behind.
:func:`joblib_temp_folder` gives joblib a folder of ours instead, named
``ilnrun-joblib-<pid>-<random>``, and first removes the folders of that name whose process no
longer exists (only this user's, only our exact naming).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PREFIX = "ilnrun-joblib-"
_NAME = re.compile(rf"{re.escape(PREFIX)}(\d+)-[a-z0-9_]{{8}}")


def base_dir() -> Path:
    """Where joblib would put its folders: ``/dev/shm`` when usable, else the temp directory."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK):
        return shm
    return Path(tempfile.gettempdir())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale(base: Path) -> int:
    """Remove ``base/ilnrun-joblib-<pid>-*`` folders of this user whose process is gone."""
    removed = 0
    try:
        entries = list(os.scandir(base))
    except OSError:
        return 0
    for entry in entries:
        m = _NAME.fullmatch(entry.name)
        if not m or _alive(int(m.group(1))):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid():
            shutil.rmtree(entry.path, ignore_errors=True)
            removed += 1
    return removed


@contextmanager
def joblib_temp_folder() -> Iterator[str]:
    """A fresh folder for joblib's ``temp_folder``, removed on the way out (stale ones of
    killed runs are removed first)."""
    base = base_dir()
    sweep_stale(base)
    path = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=base)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
