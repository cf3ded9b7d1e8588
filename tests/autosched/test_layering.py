"""The shape of the code: family knowledge in family folders, one pipeline for a device and
a system, names resolved at the edges."""

from __future__ import annotations

import ast
from pathlib import Path

from autosched.families import FAMILIES

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("autosched", "search_spaces", "cost_models")
# where a string naming a workload op belongs: a family's folder and its space folder
FAMILY_FOLDERS = (ROOT / "autosched" / "families", ROOT / "search_spaces")
# the edges: where names, files and URLs become objects, once
EDGES = ("autosched/cli/", "autosched/api.py", "autosched/tune.py", "autosched/tune_profile.py",
         "autosched/backend/__init__.py", "autosched/regress/", "autosched/database/",
         "autosched/measure/contract.py", "sim/hwio.py", "sim/system.py")
RESOLVERS = {"load_hardware", "open_database", "load_system"}


def _modules(*packages: str):
    for pkg in packages:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            yield path, ast.parse(path.read_text(), str(path))


def _in_family_folder(path: Path) -> bool:
    for top in FAMILY_FOLDERS:
        rel = path.relative_to(top) if path.is_relative_to(top) else None
        if rel is not None and len(rel.parts) > 1:  # inside one family's own folder
            return True
    return False


def test_only_family_folders_name_a_family_op() -> None:
    """Contract suites shipped with the package (``*/contract.py``) are test code: they
    exercise an interface with real workloads and may name any."""
    ops = set(FAMILIES)
    leaks = []
    for path, tree in _modules(*PACKAGES):
        if _in_family_folder(path) or path.name == "contract.py":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in ops:
                leaks.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}")
    assert not leaks, "family ops named outside their folders:\n" + "\n".join(leaks)


def test_no_system_twin_of_a_device_module() -> None:
    twins = [p for p in (ROOT / "autosched").rglob("system_*.py")]
    assert not twins


def test_names_are_resolved_only_at_the_edges() -> None:
    """Any use of a resolver (a call, or the function handed on) outside the edges and the
    shipped contract suites (test code) counts."""
    uses = []
    for path, tree in _modules(*PACKAGES, "sim"):
        rel = path.relative_to(ROOT).as_posix()
        if any(rel.startswith(e) for e in EDGES) or path.name == "contract.py":
            continue
        for node in ast.walk(tree):
            name = node.id if isinstance(node, ast.Name) else \
                node.attr if isinstance(node, ast.Attribute) else ""
            if name in RESOLVERS:
                uses.append(f"{rel}:{node.lineno} {name}")
    assert not uses, "resolved below the edges:\n" + "\n".join(uses)
