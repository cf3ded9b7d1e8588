"""The built-in lowerings, one folder per operator family (lowering and bound); the
registry (``autosched.codegen.registry``) lists them."""
