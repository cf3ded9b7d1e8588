"""Lookup speed on a large database: exact and nearest-workload lookups with 100,000 records.

Fills a database with ``--records`` GEMV measurements on hbm-pim (cached under
``experiments/.cache``) in two layouts: many schedules per workload (``--per`` records
for each of records/per workloads, as tuning writes them) and one record per workload
(the worst case for the nearest-workload search). Then times ``autosched.lookup.lookup``
(what ``compile`` calls per workload, the space built included) for stored workloads
(exact) and for shapes not stored (nearest), and the generic full scan the nearest search
replaced, and prints one table row per layout::

    python -m experiments.bench_lookup [--records 100000] [--per 50] [--postgres]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path

from autosched.database import Database, RecordKey, SqlDatabase
from autosched.families.registry import family_of
from autosched.lookup import lookup
from autosched.measure.record import Measurement
from search_spaces import Schedule, Workload
from sim import SIM_VERSION
from sim.hwio import load_hardware

CACHE = Path(__file__).parent / ".cache"
HW = load_hardware("hbm-pim")


def shapes(n: int, rng: random.Random) -> list[tuple[int, int]]:
    """``n`` distinct (out, in) GEMV shapes, multiples of 16 from 64 to 65536."""
    out: set[tuple[int, int]] = set()
    while len(out) < n:
        out.add((16 * round(2 ** rng.uniform(2, 12)), 16 * round(2 ** rng.uniform(2, 12))))
    return sorted(out)


def variations(default: dict) -> list[dict]:
    """64 points around ``default``: every register count and three switches."""
    return [dict(default, registers=r, interleave=a, double_buffer=b, tile_outer=c)
            for r in range(1, 9) for a in (False, True) for b in (False, True)
            for c in (False, True)]


def fill(db: Database, n_workloads: int, per: int, rng: random.Random) -> None:
    """``per`` records for each of ``n_workloads`` GEMVs; the best one is a default schedule
    (the lowering's default of the first workload of the same size class: computing it
    for every one of 100,000 shapes would take longer than the benchmark)."""
    batch: list[Measurement] = []
    defaults: dict[tuple[int, int], dict] = {}
    low = family_of(Workload.make("gemv", m=1, n=64, k=64))
    space = low.space(Workload.make("gemv", m=1, n=64, k=64), HW)  # one name and version
    for n, k in shapes(n_workloads, rng):
        w = Workload.make("gemv", m=1, n=n, k=k)
        cls = (n.bit_length(), k.bit_length())
        default = defaults.setdefault(cls, low.default(w, HW))
        points = [default] + [p for p in variations(default) if p != default][: per - 1]
        for i, point in enumerate(points):
            lat = 1000.0 + n * k / 4096 * (1.0 + 0.01 * i)
            batch.append(Measurement(w, Schedule(space.name, space.version,
                                                 tuple(point.items())),
                                     HW.fingerprint, HW.name, SIM_VERSION, lat, 2 * lat, 1.0))
        if len(batch) >= 10_000:
            db.commit_many(batch)
            batch.clear()
    db.commit_many(batch)


def timed(fn, items) -> tuple[float, float]:
    """(median, 95th percentile) milliseconds of ``fn(item)`` over ``items``."""
    ts = []
    for it in items:
        t0 = time.perf_counter()
        fn(it)
        ts.append((time.perf_counter() - t0) * 1e3)
    ts.sort()
    return statistics.median(ts), ts[int(0.95 * (len(ts) - 1))]


def _key(w: Workload) -> tuple[RecordKey, object]:
    space = family_of(w).space(w, HW)
    return RecordKey(w, HW.fingerprint, space.name, space.version, SIM_VERSION), space


def _first_valid(db: Database, key: RecordKey, space) -> Measurement | None:
    """What lookup does after a miss: nearest workloads until one's schedule fits."""
    return next((m for m in db.nearest(key) if not space.validate(m.schedule.point)), None)


def bench(db: Database, stored: list[Workload], rng: random.Random) -> dict:
    """Medians and 95th percentiles (ms): the database's answer for keys whose spaces are
    built (exact: ``best``; nearest: ``nearest`` until a schedule validates), the whole
    ``lookup`` (space construction included), and the generic full scan."""
    exact_q = [_key(w) for w in rng.sample(stored, min(200, len(stored)))]
    near_q = [_key(Workload.make("gemv", m=1, n=16 * rng.randint(5, 4000) + 8,
                                 k=16 * rng.randint(5, 4000) + 8)) for _ in range(100)]
    for (k, sp) in exact_q[:5] + near_q[:5]:  # warm the connection pool and caches
        db.best(k)
        _first_valid(db, k, sp)
    found = [_first_valid(db, k, sp) for k, sp in near_q]
    out = {"exact": timed(lambda q: db.best(q[0]), exact_q),
           "nearest": timed(lambda q: _first_valid(db, *q), near_q),
           "lookup exact": timed(lambda q: lookup(db, q[0].workload, HW), exact_q),
           "lookup nearest": timed(lambda q: lookup(db, q[0].workload, HW), near_q),
           "scan": timed(lambda q: next(Database.nearest(db, q[0])), near_q[:3]),
           "found": sum(m is not None for m in found) / len(found)}
    assert all(lookup(db, k.workload, HW).kind == "exact" for k, _ in exact_q[:20])
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--per", type=int, default=50,
                    help="records per workload in the first layout (at most 64)")
    ap.add_argument("--postgres", action="store_true", help="also on a throwaway PostgreSQL")
    args = ap.parse_args(argv)
    CACHE.mkdir(exist_ok=True)
    (CACHE / ".gitignore").write_text("*\n")
    servers = []
    rows = []
    try:
        for per in (args.per, 1):
            n_w = args.records // per
            # the records carry the space and simulator versions: a cache per version
            k = _key(Workload.make("gemv", m=1, n=64, k=64))[0]
            tag = f"{args.records}-{per}-{k.space}v{k.space_version}-sim{k.sim_version}"
            wheres = [("sqlite", str(CACHE / f"bench_lookup-{tag}.db"))]
            if args.postgres:
                from experiments.services import start_postgres

                servers.append(start_postgres())
                wheres.append(("postgresql", servers[-1].new_database()))
            for kind, where in wheres:
                db = SqlDatabase(where)
                if len(db) != args.records:
                    t0 = time.perf_counter()
                    fill(db, n_w, per, random.Random(0))
                    print(f"filled {kind} with {len(db):,} records in "
                          f"{time.perf_counter() - t0:.0f} s", flush=True)
                stored = [Workload.make("gemv", m=1, n=n, k=k)
                          for n, k in shapes(n_w, random.Random(0))]
                r = bench(db, stored, random.Random(1))
                rows.append((kind, len(db), n_w, r))
                print(f"measured {kind}, {n_w:,} workloads: {r}", flush=True)
                db.close()
    finally:
        for s in servers:
            s.stop()
    print("\nmilliseconds, median / 95th percentile; database: the query for a key whose "
          "space is built; lookup(): the whole call compile makes, space construction "
          "included")
    print("\n| database | records | workloads | exact: database | nearest: database | "
          "exact: lookup() | nearest: lookup() | nearest found | nearest by full scan |")
    print("|---|---|---|---|---|---|---|---|---|")
    for kind, n, n_w, r in rows:
        cells = " | ".join(f"{r[c][0]:.2f} / {r[c][1]:.2f}" for c in
                           ("exact", "nearest", "lookup exact", "lookup nearest"))
        print(f"| {kind} | {n:,} | {n_w:,} | {cells} | {r['found']:.0%} | "
              f"{r['scan'][0]:,.0f} |")
    print("\ngoals: exact < 1 ms, nearest < 10 ms")

if __name__ == "__main__":
    main()
