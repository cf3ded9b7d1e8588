"""Operator families: one folder each (its lowering, bound and everything the compiler
asks of it, :class:`~autosched.families.base.Family`), listed once in :mod:`.registry`."""

from .base import Family, Option
from .registry import FAMILIES, REGISTRY, build, families, family_of, host_ops, space_of

__all__ = ["FAMILIES", "REGISTRY", "Family", "Option", "build", "families", "family_of",
           "host_ops", "space_of"]
