"""Property-based fuzzing of the whole command line (issue 29).

Hypothesis draws argument values and hostile files (:mod:`fuzz_arena`) for every
subcommand and runs the real CLI in-process (``autosched.cli.main``, nothing stubbed).
Whatever is drawn: the exit status is 0 or 2; an error is exactly one line on stderr and
never a traceback; each case ends within :data:`CASE_S`; the stored data (a database, a
report, the repository's data files, the hostile inputs themselves) is byte for byte as
it was, and a refused command leaves nothing behind. Commands that would do real work
(``tune``, ``compile``, ``simulate``, ``run``, ``kernels``, ``regress``) always get at
least one input that must be refused before any work. Seeds are fixed: CI draws the same
cases every run.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import time

import pytest
from fuzz_arena import Arena, build_arena, snapshot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autosched.cli import main

CASE_S = 20.0  # one case (generous: the first of each command imports its packages)
EXAMPLES = {"hw": 200, "models": 50, "sim": 200, "lookup": 300, "db": 300, "tune": 250,
            "compile": 200, "simulate": 200, "run": 200, "kernels": 150, "regress": 150}
RUNS: list[tuple[str, int, float]] = []  # (command, exit status, seconds) of every case


def _fuzz(n: int):
    return settings(max_examples=n, derandomize=True, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck), print_blob=True)


@pytest.fixture(scope="module")
def arena(tmp_path_factory) -> Arena:
    a = build_arena(tmp_path_factory.mktemp("fuzz"))
    first = snapshot(a, digest=True)
    yield a
    assert snapshot(a, digest=True) == first  # every byte as it was, after every case
    if RUNS:
        counts: dict[str, list[int]] = {}
        for cmd, code, _ in RUNS:
            counts.setdefault(cmd, [0, 0])[code == 2] += 1
        print(f"\nfuzz: {len(RUNS)} cases, {sum(t for *_, t in RUNS):.1f} s in the CLI, "
              f"slowest {max(t for *_, t in RUNS):.2f} s; exit 0 / 2 per command: "
              + ", ".join(f"{c} {n0}/{n2}" for c, (n0, n2) in sorted(counts.items())))


_LAST: dict[str, dict] = {}  # the snapshot after the last case: the next one's "before"


def run_case(arena: Arena, argv: list[str]) -> None:
    """Run ``argv`` and check every property of the module docstring."""
    before = _LAST.get(str(arena.root)) or snapshot(arena)
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")  # strict, as a real stdout
    err = io.StringIO()
    here = os.getcwd()
    os.chdir(arena.cwd)
    t0 = time.monotonic()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as e:  # argparse
                code = e.code
            out.flush()
    finally:
        os.chdir(here)
    took = time.monotonic() - t0
    RUNS.append((argv[0] if argv else "", code if isinstance(code, int) else -1, took))
    text = err.getvalue()
    assert code in (0, 2), (argv, code, text[-2000:])
    assert "Traceback" not in text, (argv, text[-2000:])
    if code == 2:
        assert len(text.strip().splitlines()) == 1, (argv, text)
        assert list(arena.out.iterdir()) == [], (argv, "a refused command left files")
    assert took < CASE_S, (argv, took)
    after = _LAST[str(arena.root)] = snapshot(arena)
    assert after == before, (argv, "stored data changed")
    for p in arena.out.iterdir():
        shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()


# ---- values -------------------------------------------------------------------------------

ARG = st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",))
JUNK = st.text(ARG, max_size=12)
BAD_NUMBERS = ["0", "-1", "1e12", "1000000000000", "nan", "inf", "-inf", "", "abc", "1.5",
               "9" * 30, "9" * 5000, "0x10", "1e-300", "٣٣", "4097", "2000000"]
HOSTILE_FILES = ["huge.yaml", "huge.json", "deep.json", "deep.yaml", "bomb.yaml", "nan.json",
                 "neg.json", "types.json", "negative.json", "list.json", "garbage.bin",
                 "tck.yaml", "rows.yaml", "nan.yaml", "neg.yaml", "self.yaml", "a.yaml",
                 "escape_sys", "fifo", "link-to-device", "dangling", "loop-a", "device",
                 "folder", "missing", "long", "empty.db", "text.db", "foreign.db"]
# outputs that must never be written: not regular files, or databases
HOSTILE_TARGETS = ["fifo", "link-to-store", "link-to-device", "dangling", "loop-a", "device",
                   "folder", "missing", "long"]
HOSTILE_OUT = [*HOSTILE_TARGETS, "store.db", "foreign.db"]
HOSTILE_DB = ["folder", "fifo", "device", "empty.db", "text.db", "foreign.db", "garbage.bin",
              "link-to-device", "loop-a", "long", "missing", "sqlite://", "nosuch://x/y",
              "postgresql+psycopg://u:p@h:notaport/x"]


def number(*good: str):
    return st.one_of(st.sampled_from(good), st.sampled_from(BAD_NUMBERS),
                     st.integers(-10**13, 10**13).map(str), JUNK)


def path(arena: Arena, names: list[str], *extra: str):
    return st.sampled_from([arena.files.get(n, n) for n in names] + list(extra))


def flags(**choices) -> st.SearchStrategy[list[str]]:
    """Some of ``--flag value`` pairs (``True``: a switch), in a drawn order."""
    items = [st.just([f"--{k.replace('_', '-')}"]) if v is True
             else v.map(lambda x, k=k: [f"--{k.replace('_', '-')}", x])
             for k, v in choices.items()]
    return st.lists(st.one_of(*items), max_size=len(items)).map(lambda xs: sum(xs, []))


def poisoned(base, poison) -> st.SearchStrategy[list[str]]:
    """``base`` argv with one input that must be refused before work appended last (the
    last value of a flag is the one used)."""
    return st.tuples(base, poison).map(lambda t: t[0] + t[1])


def models(a: Arena):
    return path(a, ["tiny.json", "ünï cødé 名前.json"], "llama-tiny")


def hws(a: Arena):
    return path(a, ["tiny.yaml"], "hbm-pim", "aim-gddr6")


def file_poisons(a: Arena, *flag_names: str):
    return st.one_of(*[path(a, HOSTILE_FILES).map(lambda p, f=f: [f, p]) for f in flag_names])


POISON_INT = ["1e12", "1000000000000", "nan", "abc", "1.5", "9" * 30, "", "-5", "4e3"]
POISON_REAL = ["1e12", "nan", "inf", "0", "-5", "abc", "", "1e999"]


def number_poisons(*flag_names: str):
    """A value no integer flag (``--timeout``: no real flag) among ``flag_names`` takes."""
    return st.one_of(*[st.sampled_from(POISON_REAL if f in ("--timeout", "--band")
                                       else POISON_INT).map(lambda v, f=f: [f, v])
                       for f in flag_names])


# ---- one test per command -----------------------------------------------------------------

@_fuzz(EXAMPLES["hw"])
@given(st.data())
def test_hw(arena, data):
    which = data.draw(st.sampled_from(["list", "show", "junk"]))
    if which == "list":
        argv = ["hw", "list", *data.draw(st.lists(JUNK, max_size=1))]
    elif which == "show":
        hw = data.draw(st.one_of(hws(arena), path(arena, HOSTILE_FILES), JUNK,
                                 st.just("hbm-pim-x16")))
        argv = ["hw", "show", hw, *data.draw(st.sampled_from([[], ["--json"]]))]
    else:
        argv = ["hw", *data.draw(st.lists(JUNK, max_size=3))]
    run_case(arena, argv)


@_fuzz(EXAMPLES["models"])
@given(st.lists(st.one_of(st.just("--json"), JUNK), max_size=2))
def test_models(arena, extra):
    run_case(arena, ["models", *extra])


@_fuzz(EXAMPLES["sim"])
@given(st.data())
def test_sim_gemv(arena, data):
    size = st.one_of(st.sampled_from(["1", "8", "64", "96", "128", "256"]),
                     number("1", "8", "64", "96", "128", "256"))
    argv = ["sim", "gemv", "--out", data.draw(size), "--in", data.draw(size)]
    argv += data.draw(flags(batch=number("1", "2", "4"), json=True,
                            hw=st.one_of(hws(arena), path(arena, HOSTILE_FILES))))
    run_case(arena, argv)


SHAPES = {"gemv": "m=1,n=64,k=64", "attention": "b=1,q=1,h=4,kvh=2,d=16,l=16",
          "rmsnorm": "m=1,n=64", "rope": "m=1,h=6,d=16", "embedding": "m=1,n=64,v=256",
          "elementwise": "m=1,n=64"}


@_fuzz(EXAMPLES["lookup"])
@given(st.data())
def test_lookup(arena, data):
    op = data.draw(st.one_of(st.sampled_from(sorted(SHAPES)), JUNK))
    shape = data.draw(st.one_of(st.just(SHAPES.get(op, "m=1")), st.just(SHAPES.get(op, "m=1")),
                                st.sampled_from(
        ["m=1,n=64,k=100000000000000", "m=1,n=64,k=-5", "m=1,n=x,k=4", "m=1,m=2,n=4,k=4",
         "b=1,q=1,h=4,kvh=2,d=33,l=16", "m=1,n=" + "9" * 5000 + ",k=4", ",,,", "="]), JUNK))
    argv = ["lookup", "--op", op, "--shape", shape]
    argv += data.draw(flags(dtype=st.sampled_from(["fp16", "bf16", "int3", "fp32", ""]),
                            attr=st.sampled_from(["fn=silu", "bias=1", "x", "=", "a=1,a=2"]),
                            hw=st.one_of(hws(arena), path(arena, HOSTILE_FILES)),
                            db=st.one_of(path(arena, ["store.db"], str(arena.out / "none.db")),
                                         path(arena, HOSTILE_DB)),
                            json=True))
    run_case(arena, argv)


@_fuzz(EXAMPLES["db"])
@given(st.data())
def test_db(arena, data):
    action = data.draw(st.sampled_from(["list", "check", "export", "junk"]))
    db = data.draw(st.one_of(path(arena, ["store.db"]), path(arena, HOSTILE_DB,
                                                              str(arena.out / "n.db"))))
    if action == "list":
        argv = ["db", "list", "--db", db, *data.draw(flags(
            op=st.sampled_from(["gemv", "nosuch", ""]),
            hw=st.one_of(hws(arena), path(arena, HOSTILE_FILES))))]
    elif action == "check":
        argv = ["db", "check", "--db", db]
    elif action == "export":
        target = data.draw(st.one_of(path(arena, HOSTILE_OUT),
                                     st.sampled_from([str(arena.out / "x.csv"),
                                                      str(arena.out / "x.parquet")])))
        argv = ["db", "export", "--db", db, "-o", target,
                *data.draw(st.lists(st.sampled_from(["--force", "--csv", "--parquet"]),
                                    max_size=2, unique=True))]
    else:
        argv = ["db", *data.draw(st.lists(JUNK, max_size=3))]
    run_case(arena, argv)


@_fuzz(EXAMPLES["tune"])
@given(st.data())
def test_tune(arena, data):
    base = ["tune", "--model", data.draw(models(arena)), "--db", str(arena.out / "t.db"),
            "--quiet", "--cost-model", "none"]
    base += data.draw(flags(
        hw=hws(arena), phase=st.sampled_from(["decode", "prefill", "train"]),
        batch=number("1", "2"), context=number("8", "16"), trials=number("0", "1"),
        workers=number("1"), timeout=number("1", "2.5"), seed=number("0", "7"),
        sampler=st.sampled_from(["tpe", "random", "x"]), fusion=st.sampled_from(["none", "x"]),
        report=st.sampled_from([str(arena.out / "r.json")]),
        runner=st.sampled_from(["local", "dask://h", "pool", "tls://h:0"])))
    poison = st.one_of(
        number_poisons("--batch", "--context", "--trials", "--workers", "--timeout", "--seed"),
        file_poisons(arena, "--model", "--hw", "--cost-model"),
        path(arena, HOSTILE_DB).map(lambda p: ["--db", p]),
        path(arena, HOSTILE_OUT).map(lambda p: ["--report", p]),
        st.sampled_from([["--runner", "tls://127.0.0.1:1"], ["--runner", "dask://h:99999"],
                         ["--runner", "local", "--tls-ca-file", arena["missing"]],
                         ["--runner", "tls://127.0.0.1:1", "--tls-ca-file", arena["fifo"],
                          "--tls-cert", arena["folder"]]]))
    run_case(arena, data.draw(poisoned(st.just(base), poison)))


def _step_flags(arena: Arena):
    return flags(hw=hws(arena), phase=st.sampled_from(["decode", "prefill", "x"]),
                 batch=number("1", "2"), context=number("8", "16"),
                 placement=st.sampled_from(["auto", "pim", "host", "x"]),
                 schedules=st.sampled_from(["tuned", "library", "x"]),
                 db=path(arena, ["store.db"], "none"))


def _step_poisons(arena: Arena, *numbers: str):
    return st.one_of(
        number_poisons(*numbers), file_poisons(arena, "--model", "--hw"),
        path(arena, HOSTILE_DB).map(lambda p: ["--schedules", "tuned", "--db", p]),
        st.sampled_from([["--partition", p] for p in ("0x1", "axb", "99999999999x1", "x",
                                                      "2x1", "-1x-1", "")]))


@_fuzz(EXAMPLES["compile"])
@given(st.data())
def test_compile(arena, data):
    base = ["compile", "--model", data.draw(models(arena)), "-o", str(arena.out / "p.json")]
    base += data.draw(_step_flags(arena)) + data.draw(flags(asm=st.just(str(arena.out /
                                                                            "p.s"))))
    poison = st.one_of(_step_poisons(arena, "--batch", "--context"),
                       path(arena, HOSTILE_OUT).map(lambda p: ["-o", p]),
                       path(arena, HOSTILE_OUT).map(lambda p: ["--asm", p]))
    run_case(arena, data.draw(poisoned(st.just(base), poison)))


@_fuzz(EXAMPLES["simulate"])
@given(st.data())
def test_simulate(arena, data):
    base = ["simulate", "--model", data.draw(models(arena))]
    base += data.draw(_step_flags(arena)) + data.draw(flags(json=True))
    run_case(arena, data.draw(poisoned(st.just(base),
                                       _step_poisons(arena, "--batch", "--context"))))


@_fuzz(EXAMPLES["run"])
@given(st.data())
def test_run(arena, data):
    base = ["run", "--model", data.draw(models(arena))]
    base += data.draw(flags(hw=hws(arena), steps=number("1", "2"), seed=number("0", "3"),
                            db=path(arena, ["store.db"], "none"), check=True, json=True,
                            schedules=st.sampled_from(["tuned", "library"])))
    poison = st.one_of(_step_poisons(arena, "--steps", "--seed"),
                       path(arena, ["pickles", "escapes"]).map(lambda p: ["--model", p]))
    run_case(arena, data.draw(poisoned(st.just(base), poison)))


@_fuzz(EXAMPLES["kernels"])
@given(st.data())
def test_kernels(arena, data):
    base = ["kernels", "--model", data.draw(models(arena))]
    base += data.draw(flags(hw=hws(arena), phase=st.sampled_from(["decode", "prefill"]),
                            batch=number("1"), context=number("8"), json=True))
    poison = st.one_of(number_poisons("--batch", "--context"),
                       file_poisons(arena, "--model", "--hw", "--db", "--tuned"),
                       path(arena, HOSTILE_DB + ["export.json"]).map(lambda p: ["--db", p]))
    run_case(arena, data.draw(poisoned(st.just(base), poison)))


@_fuzz(EXAMPLES["regress"])
@given(st.data())
def test_regress(arena, data):
    base = ["regress", "--quiet"] + data.draw(flags(
        suite=st.sampled_from(["quick", "full"]), repeats=number("1"), band=number("1.5"),
        json=True))
    poison = st.one_of(
        number_poisons("--repeats", "--band"),
        st.sampled_from([["--suite", "nosuch"], ["--suite", ""], ["--cases", "nomatch*"],
                         ["--update"], ["--update", "--reason", " "]]),
        file_poisons(arena, "--baseline", "--tuned"),
        path(arena, HOSTILE_TARGETS).map(lambda p: ["--history", p]),
        st.sampled_from(["x.txt", "x.png", "x.svg"]).flatmap(
            lambda n: path(arena, HOSTILE_TARGETS, str(arena.out / "no" / n)).map(
                lambda p: ["--plot", p])))
    run_case(arena, data.draw(poisoned(st.just(base), poison)))
