"""The space language imports no search library: Optuna stays with the strategy using it."""

from __future__ import annotations

import json
import subprocess
import sys

PROGRAM = """
import importlib, json, pkgutil, sys
import search_spaces
names = [m.name for m in pkgutil.walk_packages(search_spaces.__path__, "search_spaces.")]
for name in names:
    importlib.import_module(name)
print(json.dumps([names, sorted(m for m in sys.modules if m.split(".")[0] == "optuna")]))
"""


def test_importing_every_module_of_search_spaces_leaves_optuna_unloaded() -> None:
    run = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True,
                         check=True)
    names, loaded = json.loads(run.stdout)
    assert {"search_spaces.space", "search_spaces.domains", "search_spaces.encoding",
            "search_spaces.params"} <= set(names)
    assert loaded == []


def test_no_module_of_search_spaces_names_optuna_in_an_import() -> None:
    """Lazy and type-checking imports count too: the language describes, adapters drive."""
    import re
    from pathlib import Path

    import search_spaces

    root = Path(search_spaces.__file__).parent
    pattern = re.compile(r"^\s*(import optuna|from optuna\b)", re.MULTILINE)
    offenders = [str(p.relative_to(root)) for p in sorted(root.rglob("*.py"))
                 if pattern.search(p.read_text())]
    assert offenders == []
