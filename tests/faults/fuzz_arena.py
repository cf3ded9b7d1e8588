"""The files the CLI fuzz suite hands to every subcommand: a store of real data that must
never change, hostile inputs (huge, deep, alias bombs, NaN, negative, wrong types,
symlinks, FIFOs, devices, folders, unicode), and the snapshot that proves nothing moved."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import stat
from dataclasses import dataclass
from pathlib import Path

import yaml

from autosched.database import open_database
from autosched.measure import measure_one
from autosched.measure.contract import contract_inputs
from experiments.scenarios import TINY_CONFIG
from sim.hwio import PRESET_DIR, load_hardware

REPO = Path(__file__).resolve().parents[2]
WATCHED = (REPO / "autosched" / "regress" / "data", PRESET_DIR)


@dataclass(frozen=True)
class Arena:
    root: Path
    store: Path  # real data: a database, a report, an export (never changes)
    hostile: Path  # hostile inputs (never change either)
    out: Path  # where a command that succeeds may write (emptied after every case)
    cwd: Path  # the working directory of every case (no autosched.db: none is read)
    files: dict[str, str]  # name -> path of every input, valid or hostile

    def __getitem__(self, name: str) -> str:
        return self.files[name]


def _hw(**changes) -> str:
    d = load_hardware("hbm-pim").to_dict()
    for key, v in changes.items():
        section, field = key.split("__")
        d[section][field] = v
    return yaml.safe_dump(d)


def _bomb() -> str:
    text = (PRESET_DIR / "hbm-pim.yaml").read_text()
    anchors = ['&x0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    anchors += [f"&x{i} [" + ", ".join([f"*x{i - 1}"] * 9) + "]" for i in range(1, 10)]
    return "\n".join(("name: [" + ", ".join(anchors) + "]") if ln.startswith("name:") else ln
                     for ln in text.splitlines()) + "\n"


def build_arena(root: Path) -> Arena:
    store, hostile, out, cwd = (root / n for n in ("store", "hostile", "out", "cwd"))
    for d in (store, hostile, out, cwd, hostile / "folder", hostile / "sys"):
        d.mkdir(parents=True)
    f: dict[str, str] = {}

    def put(name: str, content: str | bytes, where: Path = hostile) -> None:
        p = where / name
        p.write_bytes(content if isinstance(content, bytes) else content.encode())
        f[name] = str(p)

    # the store: real data
    db = open_database(store / "autosched.db")
    db.commit(measure_one(contract_inputs()[0]))
    db.close()
    f["store.db"] = str(store / "autosched.db")
    put("report.json", '{"kept": true}\n', store)
    put("tiny.json", json.dumps(TINY_CONFIG), store)
    put("tiny.yaml", _hw(), store)
    put("export.json", json.dumps({"format": 1, "tuning": {}, "hardware": {}}), store)

    # hostile inputs
    cfg = dict(TINY_CONFIG)
    put("huge.yaml", "name: x\n" + "#" * 1_100_000)
    put("huge.json", json.dumps({**cfg, "pad": "x" * 1_100_000}))
    put("deep.json", "[" * 100_000 + "]" * 100_000)
    put("deep.yaml", "a: " + "[" * 200 + "]" * 200)
    put("bomb.yaml", _bomb())
    put("nan.json", json.dumps({**cfg, "rope_scaling": {"rope_type": "linear",
                                                        "factor": float("nan")}}))
    put("neg.json", json.dumps({**cfg, "rope_scaling": {"rope_type": "linear", "factor": -2}}))
    put("types.json", json.dumps({**cfg, "hidden_size": "64"}))
    put("negative.json", json.dumps({**cfg, "num_hidden_layers": -3}))
    put("list.json", "[1, 2, 3]")
    put("garbage.bin", bytes(range(256)) * 64)
    put("tck.yaml", _hw(org__tck_ns=1e-300))
    put("rows.yaml", _hw(org__rows_per_bank=1))
    put("nan.yaml", _hw(org__tck_ns=float("nan")))
    put("neg.yaml", _hw(org__channels=-64))
    put("self.yaml", "name: s\ndevice: self.yaml\ndevices: 1\n")
    put("a.yaml", "name: a\ndevice: b.yaml\ndevices: 1\n")
    put("b.yaml", "name: b\ndevice: a.yaml\ndevices: 1\n")
    put("escape.yaml", "name: e\ndevice: ../tiny.yaml\ndevices: 1\n", hostile / "sys")
    put("ünï cødé 名前.json", json.dumps(cfg))
    put("empty.db", b"")
    put("text.db", "not a database\n")
    with sqlite3.connect(hostile / "foreign.db") as c:
        c.execute("CREATE TABLE customers (id INTEGER)")
    f["foreign.db"] = str(hostile / "foreign.db")
    os.mkfifo(hostile / "fifo")
    f["fifo"] = str(hostile / "fifo")
    links = {"link-to-store": store / "report.json", "link-to-device": Path("/dev/zero"),
             "dangling": hostile / "nowhere", "loop-a": hostile / "loop-b",
             "loop-b": hostile / "loop-a"}
    for name, target in links.items():
        (hostile / name).symlink_to(target)
        f[name] = str(hostile / name)
    try:  # a device node of our own (root only): replacing it would harm nothing else
        os.mknod(hostile / "device", stat.S_IFCHR | 0o666, os.makedev(1, 3))
        f["device"] = str(hostile / "device")
    except (PermissionError, OSError):
        f["device"] = "/dev/zero"  # read-only use below
    ck = hostile / "pickles"
    ck.mkdir()
    (ck / "config.json").write_text(json.dumps(cfg))
    (ck / "pytorch_model.bin").write_bytes(b"never opened")
    esc = hostile / "escapes"
    esc.mkdir()
    (esc / "config.json").write_text(json.dumps(cfg))
    (esc / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"lm_head.weight": "../garbage.bin"}}))
    f.update(folder=str(hostile / "folder"), pickles=str(ck), escapes=str(esc),
             missing=str(hostile / "no" / "such" / "file"), long="x" * 300,
             escape_sys=str(hostile / "sys" / "escape.yaml"))
    return Arena(root, store, hostile, out, cwd, f)


def snapshot(arena: Arena, *, digest: bool = False) -> dict[str, tuple]:
    """Every entry under the store, the hostile inputs, the working directory and the
    repository's data: its type, mode, inode, size and change time (any write, rename or
    chmod moves the change time), and with ``digest`` its bytes' SHA-256 (symlinks not
    followed). A reader of a WAL database may leave SQLite's shared-memory and (empty) log
    files beside it: their presence is not a change, a log holding anything is."""
    out: dict[str, tuple] = {}
    for top in (arena.store, arena.hostile, arena.cwd, *WATCHED):
        for dirpath, dirnames, filenames in os.walk(top):
            for name in sorted(dirnames + filenames):
                p = Path(dirpath, name)
                st = os.lstat(p)
                if name.endswith(("-wal", "-shm")):  # SQLite's own, beside a database
                    assert not name.endswith("-wal") or st.st_size == 0, f"{p} holds writes"
                    continue
                extra = ""
                if stat.S_ISLNK(st.st_mode):
                    extra = os.readlink(p)
                elif digest and stat.S_ISREG(st.st_mode):
                    extra = hashlib.sha256(p.read_bytes()).hexdigest()
                out[str(p)] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_ino,
                               st.st_size, st.st_ctime_ns, extra)
    return out
