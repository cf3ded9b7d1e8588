"""``autosched hw list`` and ``autosched hw show NAME|FILE [--json]``."""

from __future__ import annotations

import argparse

from sim.hwio import list_presets, list_variants, load_hardware

from .output import kv_table, print_json, table


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("hw", help="list and show hardware presets or files")
    hs = p.add_subparsers(dest="hw_command", required=True, metavar="ACTION")
    ls = hs.add_parser("list", help="list the shipped presets and their variants")
    ls.set_defaults(run=_list)
    sh = hs.add_parser("show", help="show every field and the derived figures")
    sh.add_argument("hw", metavar="NAME|FILE")
    sh.add_argument("--json", action="store_true", help="print JSON")
    sh.set_defaults(run=_show)


def _list(args: argparse.Namespace) -> int:
    rows = []
    for name in (*list_presets(), *list_variants()):
        hw = load_hardware(name)
        dtype = "+".join((hw.pim.dtype, *hw.formats.weights))  # and the integer weights taken
        rows.append([name, hw.org.channels, hw.org.banks_per_channel, dtype,
                     hw.external_bandwidth_gbps, hw.internal_bandwidth_gbps, hw.pim_peak_gflops,
                     hw.description])
    print(table(["name", "channels", "banks", "dtype", "ext GB/s", "int GB/s", "PIM GFLOP/s",
                 "description"], rows))
    return 0


def _show(args: argparse.Namespace) -> int:
    hw = load_hardware(args.hw)
    if args.json:
        print_json({**hw.to_dict(), **hw.derived()})
        return 0
    print(f"{hw.name}: {hw.description}")
    for section, values in hw.to_dict().items():
        if isinstance(values, dict):
            print(f"\n[{section}]")
            print(kv_table([(k, v) for k, v in values.items()]))
    print("\n[derived]")
    print(kv_table(list(hw.derived().items())))
    return 0
