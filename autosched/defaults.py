"""Defaults shared by the library and the command line, stated once.

``DB_DEFAULT`` is where ``tune`` stores measurements and where ``lookup``, ``db``,
``compile``, ``simulate`` and ``run`` look for them; ``DEFAULT_CONTEXT`` is the KV length
(decode) or prompt length (prefill) of a step when none is given; ``DEFAULT_TRIALS`` is
the measurement budget of one ``tune``; ``SAMPLERS`` are the Optuna samplers by name,
``STRATEGIES`` every search strategy (the samplers and the evolutionary search) and
``SCHEDULERS`` the task schedulers (``autosched.search.registry`` wires them).
"""

from __future__ import annotations

__all__ = ["DB_DEFAULT", "DEFAULT_CONTEXT", "DEFAULT_TRIALS", "SAMPLERS", "SCHEDULERS",
           "STRATEGIES"]

DB_DEFAULT = "autosched.db"
DEFAULT_CONTEXT = 128
DEFAULT_TRIALS = 96
SAMPLERS = ("tpe", "random", "cmaes", "nsga2", "motpe")
STRATEGIES = (*SAMPLERS, "evolutionary")
SCHEDULERS = ("gain", "round-robin")
