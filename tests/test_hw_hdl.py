"""Converted Verilog of the DRE blocks in Icarus (cycle-by-cycle replay) and yosys synthesis, small sizes."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from vrex_lib.hw import verify
from vrex_lib.hw.kvmu import kvmu, kvmu_ports

pytestmark = pytest.mark.hdl

_missing = [t for t in ("iverilog", "vvp", "yosys") if shutil.which(t) is None]
needs_tools = pytest.mark.skipif(bool(_missing), reason=f"{_missing} not installed: `make setup` (apt-get install "
                                                          f"iverilog yosys)")


@needs_tools
def test_verify_smoke_all_blocks(tmp_path):
    s = verify.run(tmp_path, size="smoke", synth=False, return_results=True)
    tr = verify.load_traces()
    for b in verify.BLOCKS:
        e = s["blocks"][b]
        assert e["vectors"] > 0 and e["mismatches"] == 0, b
        if tr is not None:  # real text AND video-frame vectors went through the bit-exact check
            assert set(s["_results"][b]["real_source"]) == set(verify.trace_sources(tr)) == {"text", "frame"}, b
        assert e["verilog"]["cycles"] > 0 and e["verilog"]["mismatches"] == 0, b
        assert (tmp_path / f"{b}.v").exists()
    assert s["dre"]["memory_bytes"] == 20608 and s["dre"]["verilog_compiles"]
    assert json.loads((tmp_path / "summary.json").read_text())["schema"] == verify.SCHEMA


@needs_tools
def test_synthesis_gives_cell_counts(tmp_path):
    s = verify.run(tmp_path, blocks=["hcu", "kvmu"], size="smoke", synth=True, use_traces=False)
    for b in ("hcu", "kvmu"):
        sy = s["blocks"][b]["synth"]
        assert sy["cells"] > 100 and sy["flip_flops"] > 0
        assert any("XOR" in k or "XNOR" in k for k in sy["cells_by_type"])
    assert s["blocks"]["hcu"]["synth"]["memories"] == 17  # 16 key-memory banks + current memory, kept as $mem


@needs_tools
def test_replay_detects_a_wrong_output(tmp_path):
    rec: list = []
    sels = [(np.array([True, False, True, True]), np.array([1, 2, 3, 4]))]
    verify.check_kvmu(sels, 64, record=rec)
    ports = kvmu_ports()
    v = verify._convert(kvmu, ports, None, "kvmu", tmp_path / "v")
    ok = verify.replay_verilog(v, "kvmu", ports, verify.OUTPUTS["kvmu"], rec, tmp_path)
    assert ok["mismatches"] == 0
    names = [k for k in ports if k != "clk"]
    i = names.index("req_len")
    bad = [r[:i] + (r[i] + 1,) + r[i + 1:] if j == 3 else r for j, r in enumerate(rec)]
    assert verify.replay_verilog(v, "kvmu", ports, verify.OUTPUTS["kvmu"], bad, tmp_path)["mismatches"] == 1
