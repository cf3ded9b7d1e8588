"""The serving benchmark: rows, the plan it keeps, the marks, the plot."""

from __future__ import annotations

import json

from experiments.bench_serving import SIDES, cases, line, main


def test_cases_cover_decode_grid_and_prompts() -> None:
    got = list(cases([1, 4], [64, 128], [32]))
    assert got == [("decode", 1, 64), ("decode", 4, 64), ("decode", 1, 128),
                   ("decode", 4, 128), ("prefill", 1, 32)]


def test_unfit_row_is_marked() -> None:
    why = {"fits": False, "why": "llama2-70b decode batch 1 does not fit hbm-pim"}
    row = {"model": "llama2-70b", "system": "hbm-pim", "phase": "decode", "batch": 1,
           "context": 1024, "plans": dict.fromkeys(SIDES, why)}
    text = line(row)
    assert text.count("n/f") == 3 and "does not fit" in text


def test_small_run_keeps_the_fastest_plan(tmp_path, capsys) -> None:
    rows = main(["--models", "llama-tiny", "--systems", "hbm-pim-x16", "--batches", "8",
                 "--contexts", "32", "--prompts", "", "--json", str(tmp_path / "r.json"),
                 "--plot", str(tmp_path / "p.png")])
    out = capsys.readouterr().out
    assert "llama-tiny" in out and (tmp_path / "p.png").stat().st_size > 0
    assert json.loads((tmp_path / "r.json").read_text()) == rows
    (r,) = rows
    assert r["system"] == "hbm-pim"  # one device of the system is enough
    lat = {p: v["latency_ns"] for p, v in r["plans"].items()}
    assert r["latency_ns"] == min(lat.values()) and r["best"] == min(lat, key=lat.get)
    # batch 8: the GEMMs reuse their weights on the host while attention stays in the
    # banks; the mix beats both sides alone
    assert r["best"] == "auto" and r["gain"] > 1.2
    assert all(v["latency_ns"] >= v["bound_ns"] for v in r["plans"].values())
