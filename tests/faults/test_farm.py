"""The Dask farm secured (issue 29): a tune runs end to end on a farm speaking TLS only,
with certificates the test makes; a plain client and a client another CA signed are
refused; a job leaves the scheduler's settings as it found them."""

from __future__ import annotations

import pytest
from distributed import Client

from autosched.measure import DaskRunner, measure_one
from autosched.measure.contract import contract_inputs
from experiments.scenarios import Run, inspect, start_tune, tune_argv
from experiments.services import make_tls_certs, start_dask

# a lambda travels to the scheduler by value (a function of this module would not import)
_settings = lambda dask_scheduler: (dask_scheduler.allowed_failures,  # noqa: E731
                                    dask_scheduler.WORKER_SATURATION)


def test_a_tune_runs_on_a_tls_farm_and_plain_clients_are_refused(config, tmp_path):
    certs = make_tls_certs(tmp_path / "tls")
    cluster = start_dask(2, tls=certs)
    runs: list[Run] = []
    try:
        url = f"sqlite:///{tmp_path / 'd.db'}"
        tls = ["--tls-ca-file", str(certs.ca), "--tls-cert", str(certs.client_cert),
               "--tls-key", str(certs.client_key)]
        run = start_tune([*tune_argv(config, url, trials=12, runner=cluster.address), *tls],
                         tmp_path / "t.log")
        runs.append(run)
        # a plain tune tries the farm while the secured one runs (both start up at once)
        plain = cluster.address.replace("tls://", "tcp://")
        refused = start_tune(tune_argv(config, f"sqlite:///{tmp_path / 'p.db'}", trials=2,
                                       runner=plain.replace("tcp", "dask")),
                             tmp_path / "p.log")
        runs.append(refused)
        with pytest.raises(OSError):
            Client(plain, timeout=5, set_as_default=False)
        other = make_tls_certs(tmp_path / "other")  # a client another CA signed
        with pytest.raises(OSError):
            Client(cluster.address, timeout=5, set_as_default=False,
                   security=other.security())

        refused.wait(120)
        assert refused.code == 2 and "cannot reach the Dask scheduler" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
        run.wait(600)
        assert run.code == 0, run.stderr
        got = inspect(url)
        assert got.records >= 12 and got.problems == [] and got.jobs == [(12, 12, True)]
    finally:
        for r in runs:  # none is left running when an assertion fails
            r.kill()
        cluster.stop()


def test_a_job_leaves_the_schedulers_settings_alone(dask_cluster):
    with Client(dask_cluster.address, set_as_default=False) as c:
        before = c.run_on_scheduler(_settings)
        inputs = list(contract_inputs())
        with DaskRunner(dask_cluster.address, crash_limit=1) as runner:
            assert runner.run(inputs) == [measure_one(i) for i in inputs]
        assert c.run_on_scheduler(_settings) == before
