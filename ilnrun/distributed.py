"""dask.distributed as a joblib backend (``ilnrun run --backend dask [--scheduler ADDRESS]``).

- ``--scheduler ADDRESS`` (e.g. ``tcp://10.0.0.5:8786``) connects to a running cluster: a
  ``dask scheduler`` with ``dask worker`` processes, or dask-jobqueue's ``SLURMCluster`` (README,
  "Running on a cluster"). Every worker needs the same ``ilnrun`` installed
  (``pip install 'ilnrun[dask]'``); the cells are shipped to the workers by joblib's dask backend
  and their records come back to this process, which writes every output file.
- Without an address a local cluster of ``--jobs`` single-threaded worker processes is started on
  the loopback interface only (every port on ``127.0.0.1``, the dashboard's too) and closed at
  the end.

Results do not depend on the backend: every cell's randomness comes from its own seed
(:func:`ilnrun.config.grid.seed_sequence`), never from a worker or the order in which cells run.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import click

INSTALL_HINT = "pip install 'ilnrun[dask]'"


class DaskUnavailable(click.ClickException):
    """dask.distributed is not installed, or the scheduler cannot be reached (the command line
    prints the message and exits with status 1, without a traceback)."""


@contextmanager
def dask_client(address: str | None, jobs: int) -> Iterator[object]:
    """A ``dask.distributed.Client`` connected to ``address``, or to a local cluster of ``jobs``
    single-threaded worker processes on 127.0.0.1 when no address is given; closed on exit."""
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError as exc:
        raise DaskUnavailable(f"--backend dask needs dask.distributed: {INSTALL_HINT}") from exc
    if address:
        try:
            client = Client(address)
        except (OSError, TimeoutError) as exc:
            raise DaskUnavailable(f"cannot reach the dask scheduler at {address}: {exc}") from exc
        with client:
            yield client
    else:
        with (
            LocalCluster(
                n_workers=jobs,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address="127.0.0.1:0",  # loopback, any free port: never clashes
            ) as cluster,
            Client(cluster) as client,
        ):
            yield client
