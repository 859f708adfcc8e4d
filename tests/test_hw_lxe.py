"""The LXE's RTL through the harness (hw/lxe.py): verification, synthesis by units, gate-level activity, at small
sizes on Icarus; mutants the checkers must catch; the netlist evaluator on a hand-made netlist; and, marked
``lxe10k`` (``pytest --lxe-10k``), the acceptance run: >= 10,000 vectors per block under Verilator."""
from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest
from helpers import full_adder_netlist

from vrex_lib.config import VRexCoreConfig
from vrex_lib.hw import blocks, bulk, gates, harness, lxe, lxe_units
from vrex_lib.hw import lxe_vectors as L
from vrex_lib.hw.dpe import DPEParams
from vrex_lib.hw.vpe import VPEParams

pytestmark = pytest.mark.hdl
_missing = [t for t in ("iverilog", "vvp", "yosys") if shutil.which(t) is None]
needs_tools = pytest.mark.skipif(bool(_missing), reason=f"{_missing} not installed: `make setup`")
SMALL = VRexCoreConfig(n_dpe_w=8, n_dpe_h=2, n_vpe_w=4)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    out = tmp_path_factory.mktemp("lxe")
    return out, lxe.run(out, size="smoke", cfg=SMALL)


@needs_tools
@pytest.mark.long
def test_small_run_verifies_synthesises_and_caches(small):
    out, s = small
    assert lxe.mismatches_total(s) == 0 and s["schema"] == lxe.SCHEMA
    for name, e in s["blocks"].items():
        assert e["myhdl"]["vectors"] > 0 and e["replay"]["cycles"] > 0
        assert e["bulk"]["vectors"] == lxe.SIZES["smoke"]["bulk"][name] and e["bulk"]["real_vectors"] > 0
        # the VCD of the Verilog run counts exactly the register toggles the reference's values imply
        assert e["activity"]["registers_match_vcd"] and e["activity"]["vcd_flop_toggles"] > 0
        assert set(e["units"]) == {u for u, k in lxe_units.composition(name, blocks.spec(name).params(SMALL)).items()
                                   if k}
        for u in e["units"].values():
            assert u["activity"]["equivalent"] and u["cells"] > 0 and (out / "netlists" / u["netlist"]).is_file()
        assert len(e["activity"]["sources"]) == 6 if name == "dpe" else 8  # 2 layers x 3 projections / 4 programs
    assert (out / "dpe.v").is_file() and json.loads((out / lxe.SUMMARY).read_text())["inputs_key"] == s["inputs_key"]
    again = lxe.run(out, size="smoke", cfg=SMALL)  # same inputs: the cached summary, nothing rerun
    assert again == s


def test_a_summary_whose_netlists_are_gone_is_not_reused(tmp_path):
    """The estimates read the netlists back, so a summary naming one that is missing is recomputed, not reused."""
    summary = dict(schema=lxe.SCHEMA, inputs_key="k", blocks={"dpe": {"units": {"bf16_mul": {"netlist": "m.json"}}}})
    (tmp_path / lxe.SUMMARY).write_text(json.dumps(summary))
    assert lxe.cached(tmp_path, "k") is None
    (tmp_path / "netlists").mkdir()
    (tmp_path / "netlists" / "m.json").write_text("{}")
    assert lxe.cached(tmp_path, "k") == summary and lxe.cached(tmp_path, "other") is None


@needs_tools
def test_inputs_key_follows_the_inputs():
    tv = lxe.tools()
    k = lxe.inputs_key("smoke", 0, SMALL, "icarus", tv)
    assert k == lxe.inputs_key("smoke", 0, SMALL, "icarus", tv)
    assert len({k, lxe.inputs_key("smoke", 1, SMALL, "icarus", tv), lxe.inputs_key("default", 0, SMALL, "icarus", tv),
                lxe.inputs_key("smoke", 0, VRexCoreConfig(), "icarus", tv),
                lxe.inputs_key("smoke", 0, SMALL, "verilator", tv)}) == 5


def test_bad_arguments_are_named():
    with pytest.raises(lxe.VerifyError, match="--size"):
        lxe.run("unused", size="huge")
    with pytest.raises(lxe.VerifyError, match="--seed"):
        lxe.run("unused", size="smoke", seed=-1)


_MUTANTS = {  # one plausible bug per block, in the converted Verilog (regex, replacement)
    "dpe": (r"\(n\[2\] && \(n\[1\] \|\| n\[0\] \|\| n\[3\]\)\)", "(n[2] && (n[1] || n[0]))"),  # ties not to even
    "vpe": (r"\[31\] && \(\((\w+) & mask\) != 0\)", r"[31] || ((\1 & mask) != 0)"),  # FLOOR rounds positives up
}


def _mutant_check(name: str, tmp_path, simulator: str, n: int, width: int = 8) -> tuple[int, int]:
    b = blocks.spec(name)
    p = DPEParams(width, 1) if name == "dpe" else VPEParams(width)
    rng = np.random.default_rng(7)
    vecs = b.real(L.load_operands(), 40, p)[0][:40] + b.random(n, rng, p, None)
    v = harness.convert(lambda P: b.make(P, p), b.ports(p), name, tmp_path / "v")
    good = bulk.check_vectors(b, vecs, None, p, v, tmp_path / "good", simulator)["mismatches"]
    old, new = _MUTANTS[name]
    text, k = re.subn(old, new, v.read_text())
    assert k > 0
    v.write_text(text)
    return good, bulk.check_vectors(b, vecs, None, p, v, tmp_path / "bad", simulator)["mismatches"]


@pytest.mark.long  # two Icarus runs of an LXE block (~20 s each); the DRE's Icarus mutant test is in `make test`
@needs_tools
@pytest.mark.parametrize("name", ["dpe", "vpe"])
def test_bulk_check_catches_a_mutant(name, tmp_path):
    good, bad = _mutant_check(name, tmp_path, "icarus", 120, width=8 if name == "dpe" else 4)
    assert good == 0 and bad > 0


@pytest.mark.lxe10k  # a Verilator compile; the DRE's Verilator mutant test covers the shared harness in `make test`
@pytest.mark.skipif(shutil.which("verilator") is None, reason="verilator not installed: `make setup`")
def test_verilator_bulk_catches_a_mutant(tmp_path):
    good, bad = _mutant_check("dpe", tmp_path, "verilator", 400, width=4)
    assert good == 0 and bad > 0


def test_netlist_evaluation_by_hand():
    net = gates.Netlist.from_yosys(full_adder_netlist())
    v = np.arange(8)
    a, b, c = v & 1, (v >> 1) & 1, (v >> 2) & 1
    out, act = net.evaluate(dict(a=a, b=b, c=c))
    assert list(out["s"]) == list(a ^ b ^ c) and list(out["co"]) == list((a + b + c) >= 2)
    # toggles of input a over 0..7 (0,1,0,1,...): 7; as two streams of 4 (segments): 6
    assert act.patterns == 8 and act.steps == 7 and net.fanout[2] == 2 and net.fanout[6] == 1
    _, act2 = net.evaluate(dict(a=a, b=b, c=c), segments=2)
    assert act2.steps == 6 and act2.by_fanout[2] + act2.by_fanout[1] < act.by_fanout[2] + act.by_fanout[1]
    path = net.longest_path(lambda t, f: 10.0)
    assert path["cells_on_path"] == 3 and path["delay_ps"] == 30.0  # xor -> and -> or
    with pytest.raises(ValueError, match="only combinational"):
        gates.Netlist.from_yosys({**full_adder_netlist(), "cells": {"f": dict(type="$_DFF_P_", connections={})}})


def test_unit_streams_follow_the_reference():
    ops = L.load_operands()
    v = L.real_dpe(ops, 9, 64)[0][:18]
    st = lxe_units.dpe_streams(v)
    assert st["bf16_mul"][1] == 64 and st["product_add"][1] == 32 and st["fp32_add"][1] == 31
    assert len(st["fp32_add"][0]["a"]) == 31 * 18 and not np.any(st["bf16_mul"][2]["p"] & 0xFF)
    regs = lxe_units.dpe_register_toggles(v, DPEParams())
    assert regs["products"][0] == 24 * 64 and regs["x_in"][1] > 0
    assert len(lxe_units.dpe_level_toggles(v)) == 6


@needs_tools
@pytest.mark.long
def test_composing_by_count_is_what_the_whole_synthesises(tmp_path, small):
    r = lxe.whole_vs_units(DPEParams(2, 1), tmp_path, netdir=small[0] / "netlists")  # the units' cached netlists
    assert r["whole_flip_flops"] == r["register_bits"]
    assert 0.9 < r["units_cells"] / r["whole_cells"] < 1.1  # the units are the tree's cells within 10 %


@pytest.mark.lxe10k
@pytest.mark.skipif(shutil.which("verilator") is None, reason="verilator not installed: `make setup`")
def test_ten_thousand_vectors_each_in_verilator(tmp_path):
    s = lxe.run(tmp_path, size="10k")
    for e in s["blocks"].values():
        assert e["bulk"]["simulator"] == "verilator" and e["bulk"]["vectors"] >= 10_000
    assert lxe.mismatches_total(s) == 0
