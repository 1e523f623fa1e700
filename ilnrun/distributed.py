"""dask.distributed as a joblib backend (``ilnrun run --backend dask [--scheduler ADDRESS]``).

Results do not depend on the backend: every cell's randomness comes from its own seed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class DaskUnavailable(Exception):
    """dask.distributed is not installed (``pip install 'ilnrun[dask]'``)."""


@contextmanager
def dask_client(address: str | None, jobs: int) -> Iterator[object]:
    """A ``dask.distributed.Client`` connected to ``address``, or to a local cluster of ``jobs``
    single-threaded worker processes when no address is given; closed on exit."""
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError as exc:
        raise DaskUnavailable(
            "--backend dask needs dask.distributed: pip install 'ilnrun[dask]'"
        ) from exc
    if address:
        with Client(address) as client:
            yield client
    else:
        with (
            LocalCluster(
                n_workers=jobs,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address=None,
            ) as cluster,
            Client(cluster) as client,
        ):
            yield client
