"""Converted Verilog of the DRE blocks in Icarus (cycle-by-cycle replay) and yosys synthesis, small sizes."""
from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

from vrex_lib.config import ReSVConfig, VRexCoreConfig
from vrex_lib.hw import blocks, bulk, harness, vectors, verify
from vrex_lib.hw.__main__ import main
from vrex_lib.hw import fixedpoint as fx
from vrex_lib.hw.hcu import HCUParams, hcu, hcu_ports
from vrex_lib.hw.kvmu import kvmu, kvmu_ports
from vrex_lib.hw.wtu import WTUParams, wtu, wtu_ports

pytestmark = pytest.mark.hdl

_missing = [t for t in ("iverilog", "vvp", "yosys") if shutil.which(t) is None]
needs_tools = pytest.mark.skipif(bool(_missing), reason=f"{_missing} not installed: `make setup` (apt-get install "
                                                          f"iverilog yosys)")


@needs_tools
@pytest.mark.long
def test_verify_smoke_all_blocks(tmp_path):
    # the bulk vectors on Icarus here (no compile step); the Verilator path is exercised by the mutant test below
    s = verify.run(tmp_path, size="smoke", synth=False, return_results=True, simulator="icarus")
    tr = vectors.load_traces()
    for b in verify.BLOCKS:
        e = s["blocks"][b]
        assert e["vectors"] > 0 and e["mismatches"] == 0, b
        if tr is not None:  # real text AND video-frame vectors went through the bit-exact check
            assert set(s["_results"][b]["real_source"]) == set(vectors.trace_sources(tr)) == {"text", "frame"}, b
        assert e["verilog"]["cycles"] > 0 and e["verilog"]["mismatches"] == 0, b
        assert (tmp_path / f"{b}.v").exists()
        bk = e["bulk"]  # every recorded real vector of the smoke cap plus random ones up to the size's count
        assert bk["mismatches"] == 0 and bk["vectors"] >= verify.SIZES["smoke"]["bulk"], b
        assert bk["real_vectors"] + bk["random_vectors"] == bk["vectors"] and bk["real_vectors"] > 0, b
        assert bk["simulator"] == s["bulk_simulator"] == "icarus" and s["bulk_warning"] is None
        assert len(s["_results"][b]["real"]) == len(s["_results"][b]["real_inputs"]), b
        speeds = s["simulator_cycles_per_s"]
        assert speeds["myhdl"][b] > 0 and speeds["icarus"][b] == bk["cycles_per_s"] > 0, b
    assert s["dre"]["memory_bytes"] == 20608 and s["dre"]["verilog_compiles"]
    rc = ReSVConfig()  # th / ratio come from the one ReSV configuration
    assert (s["th_hd"], s["ratio"], s["verilog_checks"]) == (rc.th_hp, rc.th_r_wics, "run")
    assert json.loads((tmp_path / "summary.json").read_text())["schema"] == verify.SCHEMA


@needs_tools
@pytest.mark.long
def test_synthesis_gives_cell_counts(tmp_path):
    s = verify.run(tmp_path, blocks=["hcu", "kvmu"], size="smoke", synth=True, use_traces=False, simulator="icarus")
    for b in ("hcu", "kvmu"):
        sy = s["blocks"][b]["synth"]
        assert sy["cells"] > 100 and sy["flip_flops"] > 0
        assert any("XOR" in k or "XNOR" in k for k in sy["cells_by_type"])
    assert s["blocks"]["hcu"]["synth"]["memories"] == 17  # 16 key-memory banks + current memory, kept as $mem


@needs_tools
def test_replay_detects_a_wrong_output(tmp_path):
    rec: list = []
    sels = [(np.array([True, False, True, True]), np.array([1, 2, 3, 4]))]
    blocks.check_kvmu(sels, 64, record=rec)
    ports = kvmu_ports()
    v = harness.convert(lambda P: kvmu(**P), ports, "kvmu", tmp_path / "v")
    ok = harness.replay(v, "kvmu", ports, blocks.KVMU.protocol.outputs, rec, tmp_path)
    assert ok["mismatches"] == 0
    names = [k for k in ports if k != "clk"]
    i = names.index("req_len")
    bad = [r[:i] + (r[i] + 1,) + r[i + 1:] if j == 3 else r for j, r in enumerate(rec)]
    assert harness.replay(v, "kvmu", ports, blocks.KVMU.protocol.outputs, bad, tmp_path)["mismatches"] == 1


# ----------------------------------------------------------------------- bulk Verilog vectors (hw/bulk.py)
_MUTANTS = {  # one plausible RTL bug per block, applied to the converted Verilog
    "hcu": ("if ((fd < th)) begin", "if ((fd <= th)) begin"),  # the strict < Th_hd made <=
    "wtu": ("acc <= (acc + r_lane);", "acc <= acc;"),  # RES_L forgets the lanes it walked
    "kvmu": ("ln = (run_len + nbytes);", "ln = (run_len + nbytes + 1);"),  # a merged run one byte too long
}


def _bulk_case(block, tmp_path):
    rng = np.random.default_rng(11)
    if block == "hcu":
        p = HCUParams()
        return (harness.convert(lambda P: hcu(**P, p=p), hcu_ports(p), "hcu", tmp_path / "v"),
                vectors.random_hcu_frames(300, rng, p), dict(th=7, p=p))
    if block == "wtu":
        p = WTUParams(n_max=256)
        return (harness.convert(lambda P: wtu(**P, p=p), wtu_ports(p), "wtu", tmp_path / "v"),
                vectors.random_wtu_rows(40, rng, 256), dict(ratio_q=fx.quantize_ratio(0.3), p=p))
    return (harness.convert(lambda P: kvmu(**P), kvmu_ports(), "kvmu", tmp_path / "v"),
            vectors.random_kvmu_selections(120, rng), dict(bytes_per_token=64))


@needs_tools
@pytest.mark.parametrize("block", verify.BLOCKS)
def test_bulk_icarus_passes_and_detects_a_mutant(block, tmp_path):
    v, vecs, kw = _bulk_case(block, tmp_path)
    ok = bulk.run_block(block, vecs, v, tmp_path / "ok", "icarus", **kw)
    assert ok["vectors"] == (sum(len(n) for _, n in vecs) if block == "hcu" else len(vecs))
    assert ok["mismatches"] == 0 and ok["cycles"] > ok["vectors"] // 10
    src = v.read_text()
    a, b = _MUTANTS[block]
    assert src.count(a) == 1, f"mutation site {a!r} not found in the converted {block}.v"
    bad = tmp_path / f"{block}_mutant.v"
    bad.write_text(src.replace(a, b))
    assert bulk.run_block(block, vecs, bad, tmp_path / "bad", "icarus", **kw)["mismatches"] > 0


@pytest.mark.skipif(shutil.which("verilator") is None, reason="verilator not installed: `make setup`")
def test_bulk_verilator_detects_a_mutant(tmp_path):
    v, vecs, kw = _bulk_case("kvmu", tmp_path)
    a, b = _MUTANTS["kvmu"]
    (tmp_path / "m.v").write_text(v.read_text().replace(a, b))
    r = bulk.run_block("kvmu", vecs, tmp_path / "m.v", tmp_path / "bad", "verilator", **kw)
    assert r["simulator"] == "verilator" and r["vectors"] == len(vecs) and 0 < r["mismatches"] < len(vecs)


@needs_tools
def test_bulk_reference_side_can_fail(tmp_path):
    # a wrong expected value (not a wrong RTL) is also counted: the decoder compares, it does not trust
    v, vecs, kw = _bulk_case("kvmu", tmp_path)
    stim, meta = blocks.kvmu_stimulus(vecs, 64)
    i = next(j for j, m in enumerate(meta) if m["ref"])
    meta[i]["ref"] = [(a, n + 64) for a, n in meta[i]["ref"]]
    run = harness.simulate(v, "kvmu", kvmu_ports(), blocks.KVMU.protocol, stim, tmp_path / "w", "icarus")
    assert blocks.check_kvmu_log(run, meta)["mismatches"] == 1


def test_pick_simulator_falls_back_loudly(monkeypatch):
    real = shutil.which
    monkeypatch.setattr(harness.shutil, "which", lambda t: None if t == "verilator" else real(t))
    if real("iverilog") and real("vvp"):
        sim, warn = harness.pick_simulator()
        assert sim == "icarus" and "VERILATOR NOT FOUND" in warn
    with pytest.raises(harness.SimulatorMissing, match="make setup"):
        harness.pick_simulator("verilator")
    monkeypatch.setattr(harness.shutil, "which", lambda t: None)
    with pytest.raises(harness.SimulatorMissing, match="--no-verilog"):
        harness.pick_simulator()


def _no_simulation(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("a simulation ran before the input check")
    for f in ("check_hcu", "check_wtu", "check_kvmu"):
        monkeypatch.setattr(blocks, f, boom)


def test_cli_without_iverilog_is_an_error_not_a_silent_pass(tmp_path, monkeypatch, capsys):
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    _no_simulation(monkeypatch)
    assert main(["verify", "--out", str(tmp_path / "o"), "--size", "smoke", "--no-synth"]) == 2
    err = capsys.readouterr().err
    assert "iverilog" in err and "--no-verilog" in err and "make setup" in err
    assert not (tmp_path / "o" / "summary.json").exists()


@pytest.mark.long
def test_cli_no_verilog_flag_is_recorded(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # no tools at all
    assert main(["verify", "--out", str(tmp_path / "o"), "--size", "smoke", "--no-synth", "--no-verilog",
                 "--blocks", "kvmu"]) == 0
    assert "Verilog checks skipped" in capsys.readouterr().err
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s["verilog_checks"].startswith("skipped") and s["blocks"]["kvmu"]["verilog"] is None
    assert s["blocks"]["kvmu"]["bulk"] is None and s["blocks"]["kvmu"]["mismatches"] == 0


def test_cli_unwritable_out_fails_before_simulating(tmp_path, monkeypatch, capsys):
    (tmp_path / "f").write_text("a file, not a directory")
    _no_simulation(monkeypatch)
    assert main(["verify", "--out", str(tmp_path / "f" / "hdl"), "--size", "smoke"]) == 2
    assert "--out" in capsys.readouterr().err


def test_cli_negative_seed_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    _no_simulation(monkeypatch)
    assert main(["verify", "--out", str(tmp_path / "o"), "--size", "smoke", "--seed", "-1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--seed -1" in err and ">= 0" in err
    assert not (tmp_path / "o").exists()  # refused before the output folder was touched


def _old_outputs(out):
    out.mkdir()
    for f in ("kvmu.v", "summary.json"):
        (out / f).write_text(f"previous {f}\n")


def _unchanged(out) -> bool:
    return sorted(p.name for p in out.iterdir()) == ["kvmu.v", "summary.json"] and all(
        (out / f).read_text() == f"previous {f}\n" for f in ("kvmu.v", "summary.json"))


@pytest.mark.long
def test_cli_full_disk_names_the_file_and_tears_nothing(tmp_path, monkeypatch, capsys):
    out = tmp_path / "o"
    _old_outputs(out)

    def full_disk(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(os, "fsync", full_disk)  # every atomic write fsyncs its temp file before the rename
    assert main(["verify", "--out", str(out), "--size", "smoke", "--no-synth", "--no-verilog",
                 "--blocks", "kvmu"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(out / "kvmu.v") in err and "disk is full" in err
    assert _unchanged(out)  # no torn kvmu.v, no temp file left, the old summary kept


def test_a_failed_run_leaves_the_previous_outputs(tmp_path, monkeypatch):
    out = tmp_path / "o"
    _old_outputs(out)

    def broken(*a, **k):
        raise RuntimeError("simulated failure after the blocks were converted")
    monkeypatch.setattr(verify, "_dre_top", broken)
    with pytest.raises(RuntimeError, match="simulated failure"):
        verify.run(out, blocks=["kvmu"], size="smoke", synth=False, verilog=False)
    assert _unchanged(out)


@pytest.mark.long  # a conversion and a Verilator parse of every block (~45 s in all)
@pytest.mark.skipif(shutil.which("verilator") is None, reason="verilator not installed: `make setup`")
@pytest.mark.parametrize("block", verify.BLOCKS)
def test_every_block_compiles_under_verilator(block, tmp_path):
    # Verilator parses SystemVerilog keywords (a signal named e.g. `cross` breaks it, Icarus does not mind)
    b = blocks.spec(block)
    p = b.params(VRexCoreConfig())
    v = harness.convert(lambda P: b.make(P, p), b.ports(p), block, tmp_path)
    r = subprocess.run(["verilator", "--lint-only", "-Wno-fatal", "-Wno-lint", "-Wno-style", "--top-module", block,
                        str(v)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]


def test_a_full_scratch_disk_is_named_and_writes_nothing(tmp_path, monkeypatch, capsys):
    out = tmp_path / "o"
    _old_outputs(out)

    def full(*a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(verify, "_dre_top", full)  # e.g. the converter or a simulator filling $TMPDIR
    assert main(["verify", "--out", str(out), "--size", "smoke", "--no-synth", "--no-verilog",
                 "--blocks", "kvmu"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "scratch folder" in err and "TMPDIR" in err
    assert _unchanged(out)
