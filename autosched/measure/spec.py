"""Runners by name: ``local`` (the process pool) or a Dask cluster, ``dask://host:port``
(plain TCP, or TLS when TLS files are given) or ``tls://host:port`` (TLS always).

TLS settings are distributed's own :class:`~distributed.security.Security`: the CA that
signed the scheduler's certificate, this client's certificate and key, given as
:class:`TlsFiles` (``autosched tune --tls-ca-file --tls-cert --tls-key``) or, for any
of them not given, distributed's configuration (``distributed.comm.tls.ca-file``,
``.client.cert``, ``.client.key``; environment variables
``DASK_DISTRIBUTED__COMM__TLS__CA_FILE`` and so on). With TLS the client verifies the
scheduler's certificate and refuses a scheduler without TLS.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass
from pathlib import Path

from .base import Runner
from .dask import RunnerError

__all__ = ["TlsFiles", "check_runner", "farm_security", "make_runner"]

_CONFIG = {"ca": "distributed.comm.tls.ca-file", "cert": "distributed.comm.tls.client.cert",
           "key": "distributed.comm.tls.client.key"}


@dataclass(frozen=True)
class TlsFiles:
    """PEM files of a TLS farm: the CA, this client's certificate and its key (None: from
    distributed's configuration; ``key`` also None when ``cert`` holds the key)."""

    ca: str | None = None
    cert: str | None = None
    key: str | None = None

    def given(self) -> bool:
        return any((self.ca, self.cert, self.key))


def check_runner(spec: str | None) -> str | None:
    """The Dask scheduler address ``tcp://host:port`` or ``tls://host:port`` named by
    ``spec``, or None for the local pool; raises :class:`RunnerError` naming what is wrong
    with ``spec``."""
    if spec is None or spec == "local":
        return None
    scheme, sep, rest = spec.partition("://")
    host, colon, port = rest.rpartition(":")
    if scheme not in ("dask", "tcp", "tls") or not sep or not colon or not host \
            or not port.isdigit() or len(port) > 5 or not 0 < int(port) < 65536:
        raise RunnerError(f"runner {spec[:80]!r} is not 'local' or dask://HOST:PORT (e.g. "
                          "dask://127.0.0.1:8786; tls://HOST:PORT for a farm speaking TLS)")
    return f"{'tls' if scheme == 'tls' else 'tcp'}://{host}:{int(port)}"


def _pem(kind: str, path: str) -> str:
    p = Path(path).expanduser()
    try:
        mode = p.stat().st_mode
    except OSError as e:
        raise RunnerError(f"TLS {kind} file {path}: {e.strerror}") from None
    if not stat.S_ISREG(mode):
        raise RunnerError(f"TLS {kind} file {path} is not a regular file")
    return str(p)


def farm_security(address: str, tls: TlsFiles | None = None) -> tuple[str, object | None]:
    """(address to connect to, distributed ``Security`` or None for plain TCP): TLS when
    ``address`` is ``tls://`` or any TLS file is given here or in distributed's
    configuration."""
    import dask

    tls = tls or TlsFiles()
    files = {k: getattr(tls, k) or dask.config.get(_CONFIG[k], None) for k in _CONFIG}
    if not address.startswith("tls://") and not any(files.values()):
        return address, None
    if not files["ca"] or not files["cert"]:
        raise RunnerError("a TLS farm needs the CA that signed the scheduler's certificate "
                          "and this client's certificate: --tls-ca-file PEM --tls-cert PEM "
                          "[--tls-key PEM] (or distributed's tls configuration)")
    from distributed.security import Security

    security = Security(tls_ca_file=_pem("CA", files["ca"]),
                        tls_client_cert=_pem("certificate", files["cert"]),
                        tls_client_key=_pem("key", files["key"]) if files["key"] else None,
                        require_encryption=True)
    return "tls://" + address.partition("://")[2], security


def make_runner(spec: str | None = None, workers: int | None = None, *,
                timeout: float | None = None, tls: TlsFiles | None = None) -> Runner:
    """The runner named by ``spec`` (None: ``local``); ``workers`` sizes the local pool,
    ``timeout`` limits one measurement (None: the default limit), ``tls`` secures a farm."""
    from .deadline import MEASURE_TIMEOUT_S
    from .local import LocalRunner

    limit = MEASURE_TIMEOUT_S if timeout is None else timeout
    address = check_runner(spec)
    if address is None:
        if tls is not None and tls.given():
            raise RunnerError("--tls-* files secure a Dask farm; the local runner needs none")
        return LocalRunner(workers, timeout=limit)
    from .dask import DaskRunner

    address, security = farm_security(address, tls)
    return DaskRunner(address, timeout=limit, security=security)
