"""Optuna studies in the tuning database itself, one per task: a trial per measured schedule.

The tuner's own study (the sampler's working state, with its many invalid and unselected
asks) stays in memory, where asking is fast; the database's measurements are the truth,
and this module mirrors them into Optuna's RDB storage in the same database, so that
``optuna-dashboard <url>`` and ``optuna.load_study(study_name=..., storage=url)`` show every
task's measured schedules. A study is named after the task's record key (see
:func:`study_name`); each trial carries the schedule key as the user attribute
``schedule``, and a failed measurement is a ``FAIL`` trial with its ``error``.

Only the holder of a task's lease mirrors it, and it adds only the schedules the study
lacks, so the mirror never holds a schedule twice and catches up after a crash.
"""

from __future__ import annotations

import time

import optuna
import sqlalchemy as sa

from autosched.database.engine import BUSY_TIMEOUT_S, configure_sqlite, is_sqlite
from sim import SIM_VERSION

from .optuna_adapter import finished_trial
from .tuner import TaskTuner

__all__ = ["StudyMirror", "open_storage", "study_name"]

_RETRIES = 20


def study_name(tuner: TaskTuner) -> str:
    """``<workload>@<hardware fingerprint>/<space>v<version>/sim<version>/<objective>``."""
    objective = "multi" if tuner.multi_objective else "latency"
    return (f"{tuner.workload.key}@{tuner.hw.fingerprint}/{tuner.space.name}"
            f"v{tuner.space.version}/sim{SIM_VERSION}/{objective}")


def open_storage(url: str, *, exists: bool = False) -> optuna.storages.RDBStorage:
    """Optuna's RDB storage on ``url``, created safely when several processes start at once
    (table creation races are retried); on SQLite with our locking and WAL settings.
    ``exists``: Optuna's tables are known to be there (skips creating and checking them)."""
    kw = {"connect_args": {"timeout": BUSY_TIMEOUT_S}} if is_sqlite(url) else {}
    for attempt in range(_RETRIES):
        try:
            storage = optuna.storages.RDBStorage(url, engine_kwargs=kw, skip_table_creation=exists,
                                                 skip_compatibility_check=exists)
            break
        except (sa.exc.SQLAlchemyError, optuna.exceptions.StorageInternalError):
            if attempt == _RETRIES - 1:
                raise
            time.sleep(0.05 * (attempt + 1))
    if is_sqlite(url):
        configure_sqlite(storage.engine)
        storage.engine.dispose()  # later connections get the settings
    return storage


class StudyMirror:
    """Keeps one study per task equal to the task's measurements; see the module doc."""

    def __init__(self, url: str, *, exists: bool = False) -> None:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.storage = open_storage(url, exists=exists)
        self._known: dict[str, tuple[optuna.Study, int, set[str]]] = {}  # by study name

    def sync(self, tuner: TaskTuner) -> int:
        """Add the tuner's measurements the study lacks; returns how many were added."""
        name = study_name(tuner)
        study, sid, have = self._schedules(name, tuner)
        trials = []
        for m in tuner.measurements:
            if m.schedule.key in have:
                continue
            point = m.schedule.point
            if tuner.space.validate(point, constraints=False):
                continue  # no longer expressible in the space: no distributions for it
            values = ([m.latency_ns, m.energy_pj] if tuner.multi_objective
                      else [m.latency_ns]) if m.ok else None
            attrs = {"schedule": m.schedule.key, "hw_name": m.hw_name}
            attrs.update({"error": m.error} if not m.ok else {"energy_pj": m.energy_pj})
            trials.append(finished_trial(tuner.space, point, values, attrs))
        if trials:
            study.add_trials(trials)
            have.update(t.user_attrs["schedule"] for t in trials)
        return len(trials)

    def _schedules(self, name: str, tuner: TaskTuner) -> tuple[optuna.Study, int, set[str]]:
        """The study, its id and its mirrored schedule keys (re-read when the study holds
        trials this process did not add)."""
        known = self._known.get(name)
        if known is not None and self.storage.get_n_trials(known[1]) == len(known[2]):
            return known
        study = known[0] if known else optuna.create_study(
            storage=self.storage, study_name=name, load_if_exists=True,
            directions=["minimize"] * (2 if tuner.multi_objective else 1))
        sid = self.storage.get_study_id_from_name(name)
        have = {t.user_attrs.get("schedule", "") for t in study.get_trials(deepcopy=False)}
        self._known[name] = (study, sid, have)
        return self._known[name]
