"""Connecting to Ray: join a running cluster (``--address``, ``RERANK_LAB_RAY_ADDRESS``) or start a
local one for the duration of a command and stop it after.

Every task and actor gets this project's ``qa_core`` and ``db`` packages (Ray's ``py_modules``:
the code travels with the job, so a node needs only the dependencies of ``requirements.txt``) and
the data folder (``RERANK_LAB_DATA``: the parse cache; give every machine the same path, see
docs/scaling.md). Nothing else of this process's environment is sent: the store URL, which may
hold a password, never leaves this process.

Ray's usage statistics stay off (``RAY_USAGE_STATS_ENABLED=0``): the project runs offline, and Ray
Data would otherwise query a Prometheus server on every dataset.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager

from qa_core import config
from qa_core.types import InputError


def runtime_env() -> dict[str, object]:
    return {
        "py_modules": [str(config.PROJECT_ROOT / "qa_core"), str(config.PROJECT_ROOT / "db")],
        "excludes": ["__pycache__", "*.pyc"],
        "env_vars": {"RERANK_LAB_DATA": str(config.data_dir())},
    }


def quiet_logs() -> None:
    """Ray's Python logs at ERROR and above only (``--quiet``); call before importing ``ray.data``,
    which sets its loggers' level from ``RAY_DATA_LOG_LEVEL`` whenever it configures them."""
    os.environ["RAY_DATA_LOG_LEVEL"] = "ERROR"
    logging.getLogger("ray").setLevel(logging.ERROR)


@contextmanager
def ray_cluster(address: str | None, *, num_cpus: int | None = None, quiet: bool = False) -> Iterator[dict[str, float]]:
    """Connected to the cluster at ``address``, or to a local cluster of ``num_cpus`` CPUs (default:
    this machine's) started here; yields the cluster's resources (CPU, GPU, ...). On leaving, a
    joined cluster keeps running and a started one is stopped."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    if ray.is_initialized():  # a caller (a benchmark, a notebook) is already connected: use that
        yield ray.cluster_resources()
        return
    options: dict[str, object] = {
        "runtime_env": runtime_env(),
        "log_to_driver": not quiet,
        "logging_level": logging.ERROR if quiet else logging.INFO,
    }
    if quiet:
        quiet_logs()
    try:
        if address:
            ray.init(address=address, **options)
        else:
            ray.init(num_cpus=num_cpus or os.cpu_count(), include_dashboard=False, **options)
    except ConnectionError as error:
        raise InputError(f"cannot reach the Ray cluster at {address}: {' '.join(str(error).split())[:300]}") from None
    try:
        yield ray.cluster_resources()
    finally:
        ray.shutdown()
