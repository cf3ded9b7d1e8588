"""``autosched sim KERNEL``: time a library kernel (``sim.figures.LIBRARY``: the GEMV) on
the cycle-level simulator."""

from __future__ import annotations

import argparse

from sim.figures import LIBRARY
from sim.hwio import load_hardware

from .numbers import integer
from .output import kv_table, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sim", help="run the simulator on library kernels")
    ss = p.add_subparsers(dest="sim_command", required=True, metavar="KERNEL")
    for name, (figures, what) in LIBRARY.items():
        g = ss.add_parser(name, help=what)
        g.add_argument("--out", type=integer("--out", "size"), required=True, metavar="N",
                       help="rows of W")
        g.add_argument("--in", dest="inp", type=integer("--in", "size"), required=True,
                       metavar="K", help="input features")
        g.add_argument("--batch", type=integer("--batch"), default=1, metavar="B")
        g.add_argument("--hw", default="hbm-pim", metavar="NAME|FILE")
        g.add_argument("--json", action="store_true", help="print JSON")
        g.set_defaults(run=_kernel, figures=figures)


def _kernel(args: argparse.Namespace) -> int:
    fig = args.figures(load_hardware(args.hw), args.out, args.inp, args.batch)
    if args.json:
        print_json(fig)
    else:
        print(kv_table(list(fig.items())))
    return 0
