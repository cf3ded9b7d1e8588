"""The ``Kernel`` noun and the small helpers every kernel builder shares.

A kernel is a program plus what a caller needs to run it on data: the host buffers it
binds, the buffer that holds the result, and a ``place`` callable that writes the
weights into the banks in the layout the program expects. Inputs whose program buffer is
padded (zeros beyond the logical shape) are padded by :meth:`Kernel.run`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields

import numpy as np

from ..errors import AutoschedError, check
from ..hardware import Hardware
from ..isa import Affine, BufRef, aff
from ..program import Loop, Node, Program

__all__ = ["Kernel", "affine_sum", "ceil_div", "loop", "loop_nest", "pad_to", "round_up",
           "shift_refs"]

Place = Callable[[object, dict[str, np.ndarray]], None]


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def round_up(a: int, b: int) -> int:
    return ceil_div(a, b) * b


def affine_sum(*parts: int | Affine, **strides: int) -> Affine:
    """Sum of ints and Affines plus ``var * stride`` terms, as one Affine."""
    base, terms = 0, dict(strides)
    for p in parts:
        p = aff(p)
        base += p.base
        for v, s in p.terms:
            terms[v] = terms.get(v, 0) + s
    return aff(base, **terms)


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls))


@functools.cache
def _open_fields(cls: type) -> tuple[str, ...]:
    """The fields of ``cls`` that may hold a loop variable (not annotated int, str, bool)."""
    return tuple(f.name for f in fields(cls) if f.type not in ("int", "str", "bool", "float"))


_ATOMS = frozenset({int, float, str, bool, type(None)})


def _fix(v: object, zero: frozenset[str]) -> object:
    """``v`` with every loop variable of ``zero`` set to 0 (Affines, BufRefs, tuples,
    nodes, nested loops' bodies included); parts that mention none of them are returned
    as they are, not rebuilt."""
    t = type(v)
    if t in _ATOMS:
        return v
    if t is Affine or isinstance(v, Affine):
        for term in v.terms:
            if term[0] in zero:
                return Affine(v.base, tuple(x for x in v.terms if x[0] not in zero))
        return v
    if t is tuple:
        out = None
        for i, x in enumerate(v):
            if type(x) in _ATOMS:
                continue
            y = _fix(x, zero)
            if y is not x:
                if out is None:
                    out = list(v)
                out[i] = y
        return v if out is None else tuple(out)
    if t is Loop:
        body = _fix(v.body, zero)
        return v if body is v.body else Loop(v.var, v.count, body)
    if t is BufRef or hasattr(t, "__dataclass_fields__"):
        changed = None
        for name in _open_fields(t):
            old = getattr(v, name)
            to = type(old)
            if to in _ATOMS:
                continue
            if to is Affine:  # the common operand, inlined
                for term in old.terms:
                    if term[0] in zero:
                        break
                else:
                    continue
                new = Affine(old.base, tuple(x for x in old.terms if x[0] not in zero))
            else:
                new = _fix(old, zero)
            if new is not old:
                if changed is None:
                    changed = {}
                changed[name] = new
        return _rebuilt(v, changed) if changed else v
    return v


def _rebuilt(v: object, changed: dict[str, object]) -> object:
    """``dataclasses.replace`` without ``__init__``: the fields ``_fix`` hands over are
    already in the normal form the ISA's ``__post_init__`` would give them."""
    new = object.__new__(type(v))
    for name in _field_names(type(v)):
        object.__setattr__(new, name, changed.get(name, getattr(v, name)))
    return new


def shift_refs(body: Sequence[Node], delta: dict[str, int]) -> tuple[Node, ...]:
    """``body`` with every window of buffer ``b`` moved ``delta[b]`` elements (loops kept;
    nodes that touch none of them are shared, not rebuilt): the streams of an SPMD kernel
    that differ only in where they read and write, built once and shifted."""
    out = []
    for n in body:
        if type(n) is Loop:
            inner = shift_refs(n.body, delta)
            out.append(n if all(a is b for a, b in zip(inner, n.body, strict=True))
                       else Loop(n.var, n.count, inner))
            continue
        changed = None
        for name in _open_fields(type(n)):
            v = getattr(n, name)
            if type(v) is BufRef and v.buf in delta:
                new = _rebuilt(v, {"offset": Affine(v.offset.base + delta[v.buf], v.offset.terms)})
                changed = {**(changed or {}), name: new}
        out.append(_rebuilt(n, changed) if changed else n)
    return tuple(out)


def loop(var: str, count: int, body: tuple[Node, ...] | list[Node]) -> list[Node]:
    """``[Loop(var, count, body)]``, or ``body`` itself with ``var = 0`` when count is 1."""
    return loop_nest(((var, count),), body)


def loop_nest(nest: Sequence[tuple[str, int]], body: tuple[Node, ...] | list[Node]
              ) -> list[Node]:
    """``loop`` applied from the last (innermost) ``(var, count)`` of ``nest`` outwards, in
    one pass over ``body`` for every count-1 variable together (nesting ``loop`` calls
    walks the body again at each level)."""
    zero = frozenset(var for var, count in nest if count == 1)
    out = [_fix(n, zero) for n in body] if zero else list(body)
    for var, count in reversed(nest):
        if count != 1:
            out = [Loop(var, count, tuple(out))]
    return out


def pad_to(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``x`` in the top-left corner of a zero array of ``shape`` (float32)."""
    x = np.asarray(x, dtype=np.float32)
    check(x.ndim == len(shape) and all(a <= b for a, b in zip(x.shape, shape, strict=True)),
          f"array of shape {x.shape} does not fit the padded shape {shape}")
    out = np.zeros(shape, np.float32)
    out[tuple(slice(0, d) for d in x.shape)] = x
    return out


@dataclass(frozen=True)
class Kernel:
    """A program with its bindings; ``run`` places weights, executes and reshapes.

    ``input_shapes[i]`` is the logical shape of ``inputs[i]`` and ``padded_shapes[i]`` the
    shape of its program buffer (equal when no padding). ``place(mem, tensors)`` writes
    the weight tensors (e.g. ``"W"``) into a ``sim.functional.DeviceMemory``. ``staged``
    buffers take no device memory when the kernel is linked into a program.
    """

    program: Program
    inputs: tuple[str, ...]
    output: str
    output_shape: tuple[int, ...]
    place: Place
    input_shapes: tuple[tuple[int, ...], ...] = ()
    padded_shapes: tuple[tuple[int, ...], ...] = ()
    rows: int = 0  # rows per bank to reserve beyond what the program opens (e.g. a KV cache)
    # host buffers that model data in flight from the banks to the host's compute (read
    # there once, as it streams): the host holds them, not the device's memory
    staged: tuple[str, ...] = ()

    def bind(self, tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The host-buffer inputs for ``execute``: each input checked and zero-padded."""
        out = {}
        for i, name in enumerate(self.inputs):
            if name not in tensors:
                raise AutoschedError(f"kernel {self.program.name!r} needs tensor {name!r}")
            x = np.asarray(tensors[name], dtype=np.float32)
            if i < len(self.input_shapes):
                want = self.input_shapes[i]
                check(x.shape == want,
                      f"tensor {name!r} has shape {x.shape}, kernel expects {want}")
                x = pad_to(x, self.padded_shapes[i])
            out[name] = x.reshape(-1)
        return out

    def run(self, hw: Hardware, tensors: dict[str, np.ndarray], mem=None) -> np.ndarray:
        """Place the weights (into a fresh memory unless ``mem`` is given), execute, reshape."""
        from ..functional import DeviceMemory, execute

        if mem is None:
            mem = DeviceMemory(hw)
        self.place(mem, tensors)
        out = execute(self.program, hw, mem, inputs=self.bind(tensors))
        return out[self.output].reshape(self.output_shape)
