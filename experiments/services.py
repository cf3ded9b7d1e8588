"""Throwaway servers for the tests and the distributed benchmarks: PostgreSQL and Dask.

``start_postgres`` runs a private PostgreSQL server (``initdb`` + ``pg_ctl`` of the
installed PostgreSQL) with its data folder in a new temporary directory, listening on
127.0.0.1 only, on a free port; as root it runs the server as the ``postgres`` user (the
server refuses to run as root). ``start_dask`` starts ``dask scheduler`` and ``dask
worker`` processes on this machine, over TLS if given certificates (``make_tls_certs`` signs
them by a throwaway CA with ``openssl``). Both raise ``RuntimeError`` naming what failed when
a server cannot start, and ``stop()`` stops every process they started before removing
everything they created.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["DaskCluster", "PostgresServer", "TlsCerts", "free_port", "make_tls_certs",
           "start_dask", "start_postgres"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pg_bin(name: str) -> str:
    found = shutil.which(name) or next(iter(sorted(glob.glob(
        f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)), None)
    if found is None:
        raise RuntimeError(f"PostgreSQL's {name} is not installed (Debian: apt-get install "
                           "postgresql)")
    return found


@dataclass
class PostgresServer:
    """A running private server; ``url(name)`` is an SQLAlchemy URL of database ``name``."""

    root: Path
    port: int
    as_postgres: bool

    def url(self, name: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{name}"

    def new_database(self) -> str:
        """Create an empty database with a fresh name; returns its URL."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres",
                             autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        """Stop the server, then delete its data folder (idempotent). A server that does not
        stop within a few seconds of a fast shutdown is killed; the folder is deleted only
        once no process of the server is left, else ``RuntimeError`` says which remain."""
        data = self.root / "data"
        if (data / "postmaster.pid").exists():
            try:
                _run_pg(["pg_ctl", "-D", str(data), "-m", "fast", "-w", "-t", "5", "stop"],
                        self.as_postgres, check=False)
            except subprocess.TimeoutExpired:
                pass
        left = _server_pids(data)
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while _server_pids(data) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _server_pids(data):
            raise RuntimeError(f"PostgreSQL on port {self.port} did not stop (processes "
                               f"{sorted(_server_pids(data))}); {self.root} is kept")
        shutil.rmtree(self.root, ignore_errors=True)


def _stat(pid: int) -> tuple[str, int] | None:
    """(state letter, parent pid) of a live process, None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[0], int(fields[1])


def _server_pids(data: Path) -> set[int]:
    """The live processes of the server whose data folder is ``data``: the postmaster its
    pid file names and the postmaster's children (zombies excepted)."""
    try:
        first = int((data / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return set()
    pids = {first} | {int(p.name) for p in Path("/proc").iterdir()
                      if p.name.isdigit() and (_stat(int(p.name)) or ("", 0))[1] == first}
    return {p for p in pids if (_stat(p) or ("Z", 0))[0] != "Z"}


def _run_pg(cmd: list[str], as_postgres: bool, *, check: bool = True
            ) -> subprocess.CompletedProcess:
    full = [_pg_bin(cmd[0]), *cmd[1:]]
    if as_postgres:
        full = ["runuser", "-u", "postgres", "--", *full]
    res = subprocess.run(full, capture_output=True, text=True, timeout=120)
    if check and res.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed ({res.returncode}): {res.stderr.strip()[-500:]}")
    return res


def start_postgres(*, durable: bool = True) -> PostgresServer:
    """Initialise and start a server; ``durable=False`` turns fsync off (tests only)."""
    as_postgres = os.geteuid() == 0
    root = Path(tempfile.mkdtemp(prefix="autosched-pg-"))
    if as_postgres:
        shutil.chown(root, "postgres", "postgres")
    port = free_port()
    try:
        _run_pg(["initdb", "-D", str(root / "data"), "-A", "trust", "-U", "postgres",
                 "-E", "UTF8", "--no-sync"], as_postgres)
        opts = (f"-p {port} -c listen_addresses=127.0.0.1 -k {root} -c max_connections=400"
                + ("" if durable else " -c fsync=off -c synchronous_commit=off"))
        _run_pg(["pg_ctl", "-D", str(root / "data"), "-l", str(root / "server.log"), "-w",
                 "-t", "60", "-o", opts, "start"], as_postgres)
    except Exception as e:
        log = root / "server.log"
        tail = log.read_text()[-500:] if log.exists() else ""
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(f"cannot start PostgreSQL: {e} {tail}") from None
    return PostgresServer(root, port, as_postgres)


@dataclass(frozen=True)
class TlsCerts:
    """PEM files of a throwaway TLS farm, signed by one throwaway CA: the scheduler's and
    workers' certificate and key, and a client's."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path

    def server_args(self) -> list[str]:
        return ["--tls-ca-file", str(self.ca), "--tls-cert", str(self.server_cert),
                "--tls-key", str(self.server_key)]

    def security(self):
        """distributed's ``Security`` of a client holding the client certificate."""
        from distributed.security import Security

        return Security(tls_ca_file=str(self.ca), tls_client_cert=str(self.client_cert),
                        tls_client_key=str(self.client_key), require_encryption=True)


def make_tls_certs(folder: Path) -> TlsCerts:
    """A CA and two certificates it signs (for 127.0.0.1), made by ``openssl``."""
    folder.mkdir(parents=True, exist_ok=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]

    def openssl(*args: str) -> None:
        res = subprocess.run(["openssl", *args], capture_output=True, text=True, timeout=60,
                             cwd=folder)
        if res.returncode != 0:
            raise RuntimeError(f"openssl {args[0]} failed: {res.stderr.strip()[-300:]}")

    openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
            "-subj", "/CN=autosched test CA", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    (folder / "leaf.ext").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
        "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\n"
        "authorityKeyIdentifier=keyid\nsubjectKeyIdentifier=hash\n")
    for name in ("server", "client"):
        openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr",
                "-subj", f"/CN=autosched test {name}")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", "leaf.ext")
    return TlsCerts(folder / "ca.pem", folder / "server.pem", folder / "server.key",
                    folder / "client.pem", folder / "client.key")


@dataclass
class DaskCluster:
    """A ``dask scheduler`` and its ``dask worker`` processes, on 127.0.0.1 (over TLS when
    ``tls`` holds the farm's certificates)."""

    address: str
    scheduler: subprocess.Popen
    workers: list[subprocess.Popen] = field(default_factory=list)
    log_dir: Path | None = None
    tls: TlsCerts | None = None

    def add_worker(self, *, nanny: bool = True) -> subprocess.Popen:
        """Start one more single-threaded worker (``nanny``: restarted if it dies)."""
        cmd = [sys.executable, "-m", "distributed.cli.dask_worker", self.address,
               "--nthreads", "1", "--no-dashboard", "--memory-limit", "0"]
        cmd += [] if nanny else ["--no-nanny"]
        cmd += self.tls.server_args() if self.tls else []
        log = open(self.log_dir / f"worker{len(self.workers)}.log", "w")  # noqa: SIM115
        p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.workers.append(p)
        return p

    def wait_for_workers(self, n: int, timeout: float = 60.0) -> None:
        from distributed import Client

        security = self.tls.security() if self.tls else None
        with Client(self.address, timeout=timeout, security=security) as c:
            c.wait_for_workers(n, timeout=timeout)

    def stop(self) -> None:
        for p in [*self.workers, self.scheduler]:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            p.wait(30)
        if self.log_dir is not None:
            shutil.rmtree(self.log_dir, ignore_errors=True)


def start_dask(n_workers: int = 2, *, nanny: bool = True, timeout: float = 60.0,
               tls: TlsCerts | None = None) -> DaskCluster:
    """A scheduler on a free port and ``n_workers`` single-threaded workers, ready to use
    (``tls``: the scheduler and workers speak TLS only, with these certificates)."""
    port = free_port()
    log_dir = Path(tempfile.mkdtemp(prefix="autosched-dask-"))
    log = open(log_dir / "scheduler.log", "w")  # noqa: SIM115
    secure = ["--protocol", "tls", *tls.server_args()] if tls else []
    sched = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
         "--port", str(port), "--no-dashboard", *secure],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    cluster = DaskCluster(f"{'tls' if tls else 'tcp'}://127.0.0.1:{port}", sched,
                          log_dir=log_dir, tls=tls)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 1).close()
                break
            except OSError:
                if sched.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the Dask scheduler did not start: "
                                       + (log_dir / "scheduler.log").read_text()[-500:]
                                       ) from None
                time.sleep(0.1)
        for _ in range(n_workers):
            cluster.add_worker(nanny=nanny)
        cluster.wait_for_workers(n_workers, timeout)
    except Exception:
        cluster.stop()
        raise
    return cluster
