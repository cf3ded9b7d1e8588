"""The compiler against the shipped library kernels on the 7B-class models, both presets.

For llama2-7b and llama3-8b decode (context 1024) on every preset: the step on the
library kernels (the hand-kernel baseline), the defaults, the tuned schedules of the
regression suite's checked-in export and the tuned fused plan, then every operator that
has a library kernel, as the README's markdown tables. The same cases are in
``autosched regress --suite full``. ``autosched kernels`` prints one step in full.

    python experiments/bench_kernels.py [--models a,b] [--presets a,b] [--json]
"""

from __future__ import annotations

import argparse
import json

from autosched.regress import Runner
from autosched.regress.handoff import handoff
from autosched.regress.suites import README_CONTEXT
from autosched.regress.tables import handoff_tables
from sim.hwio import list_device_presets

MODELS = ("llama2-7b", "llama3-8b")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--presets", default=",".join(list_device_presets()))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    runner = Runner(repeats=1)
    hs = [handoff(m, hw, runner=runner, context=README_CONTEXT)
          for m in args.models.split(",") for hw in args.presets.split(",")]
    if args.json:
        print(json.dumps([h.to_dict() for h in hs], indent=2))
        return
    print(handoff_tables(hs))


if __name__ == "__main__":
    main()
