"""Code generation shared by every family: program rewriting, the linker and the memory
plan (the families themselves live in :mod:`autosched.families`)."""

from .link import Fragment, Linked, link

__all__ = ["Fragment", "Linked", "link"]
