"""Runner names and TLS settings of a Dask farm, resolved before anything connects."""

from __future__ import annotations

import dask
import pytest

from autosched.measure import RunnerError, TlsFiles, check_runner, farm_security, make_runner


def test_tls_addresses_are_accepted() -> None:
    assert check_runner("tls://farm.example:8786") == "tls://farm.example:8786"
    assert check_runner("dask://10.0.0.5:8786") == "tcp://10.0.0.5:8786"


def test_plain_tcp_without_tls_settings(monkeypatch) -> None:
    with dask.config.set({"distributed.comm.tls.ca-file": None,
                          "distributed.comm.tls.client.cert": None}):
        assert farm_security("tcp://h:1") == ("tcp://h:1", None)


def test_tls_needs_a_ca_and_a_certificate(tmp_path) -> None:
    with dask.config.set({"distributed.comm.tls.ca-file": None,
                          "distributed.comm.tls.client.cert": None}), \
            pytest.raises(RunnerError, match="--tls-ca-file PEM --tls-cert PEM"):
        farm_security("tls://h:1")


def test_tls_files_from_flags_or_distributeds_configuration(tmp_path) -> None:
    ca, cert = tmp_path / "ca.pem", tmp_path / "me.pem"
    ca.write_text("x")
    cert.write_text("x")
    addr, sec = farm_security("tcp://h:1", TlsFiles(str(ca), str(cert)))
    assert addr == "tls://h:1" and sec.tls_ca_file == str(ca) and sec.require_encryption
    with dask.config.set({"distributed.comm.tls.ca-file": str(ca),
                          "distributed.comm.tls.client.cert": str(cert)}):
        addr, sec = farm_security("tcp://h:1")
    assert addr == "tls://h:1" and sec.tls_client_cert == str(cert)
    with pytest.raises(RunnerError, match="TLS key file .*missing.pem"):
        farm_security("tls://h:1", TlsFiles(str(ca), str(cert), str(tmp_path / "missing.pem")))


def test_tls_files_do_not_go_to_the_local_runner(tmp_path) -> None:
    with pytest.raises(RunnerError, match="the local runner needs none"):
        make_runner("local", tls=TlsFiles(ca=str(tmp_path / "ca.pem")))
