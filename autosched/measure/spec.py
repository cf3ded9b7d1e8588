"""Runners by name: ``local`` (the process pool) or ``dask://host:port`` (a Dask cluster)."""

from __future__ import annotations

from .base import Runner
from .dask import RunnerError

__all__ = ["check_runner", "make_runner"]


def check_runner(spec: str | None) -> str | None:
    """The Dask scheduler address ``tcp://host:port`` named by ``spec``, or None for the
    local pool; raises :class:`RunnerError` naming what is wrong with ``spec``."""
    if spec is None or spec == "local":
        return None
    scheme, sep, rest = spec.partition("://")
    host, colon, port = rest.rpartition(":")
    if scheme not in ("dask", "tcp") or not sep or not colon or not host \
            or not port.isdigit() or not 0 < int(port) < 65536:
        raise RunnerError(f"runner {spec!r} is not 'local' or dask://HOST:PORT (e.g. "
                          "dask://127.0.0.1:8786)")
    return f"tcp://{host}:{int(port)}"


def make_runner(spec: str | None = None, workers: int | None = None, *,
                timeout: float | None = None) -> Runner:
    """The runner named by ``spec`` (None: ``local``); ``workers`` sizes the local pool,
    ``timeout`` limits one measurement (None: the default limit)."""
    from .deadline import MEASURE_TIMEOUT_S
    from .local import LocalRunner

    limit = MEASURE_TIMEOUT_S if timeout is None else timeout
    address = check_runner(spec)
    if address is None:
        return LocalRunner(workers, timeout=limit)
    from .dask import DaskRunner

    return DaskRunner(address, timeout=limit)
