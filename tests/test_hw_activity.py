"""Toggle counts of the converted Verilog (vrex_lib.hw.activity): a VCD and a tiny block counted by hand, the
vector set and the cache key."""
from __future__ import annotations

import json
import shutil

import pytest
from myhdl import ResetSignal, Signal, always_seq, block, intbv

from vrex_lib.hw import activity, harness
from vrex_lib.hw.blocks import OperatingPoint

pytestmark = pytest.mark.hdl
needs_icarus = pytest.mark.skipif(shutil.which("iverilog") is None or shutil.which("vvp") is None,
                                  reason="iverilog not installed: `make setup` (apt-get install iverilog)")

VCD = """$timescale 1ps $end
$scope module tb $end
$var wire 1 ! clk $end
$scope module dut $end
$var wire 1 ! clk $end
$var reg 4 " q [3:0] $end
$var wire 2 # w [1:0] $end
$scope begin inner $end
$var reg 8 $ tmp [7:0] $end
$upscope $end
$upscope $end
$upscope $end
$enddefinitions $end
#0
$dumpvars
0!
bx "
b11 #
b0 "
b11111111 $
$end
#5
1!
b101 "
b0 #
b0 $
#10
0!
bx #
#15
b11 #
b1010 "
"""


def test_count_toggles_of_a_hand_written_vcd(tmp_path):
    f = tmp_path / "t.vcd"
    f.write_text(VCD)
    got = activity.count_toggles(f)
    # clk: 0 -> 1 -> 0 = 2; q: 0 (time 0's final value) -> 0101 (2 bits) -> 1010 (4 bits) = 6; w: 11 -> 00 (2),
    # then X (not counted), then 11 after X (not counted) = 2; the inner scope's tmp is not the block's signal
    assert got == {"clk": (1, 2), "q": (4, 6), "w": (2, 2)}
    assert activity.summarise(got, {"q"}, cycles=2) == dict(cycles=2, signal_bits=7, toggles=10, flop_bits=4,
                                                           flop_toggles=6)
    with pytest.raises(ValueError, match="not a VCD"):
        (tmp_path / "bad.vcd").write_text("hello\n")
        activity.count_toggles(tmp_path / "bad.vcd")


def test_flop_names_are_the_nonblocking_targets_without_memories():
    v = """reg [3:0] q = 0;
reg [7:0] mem [0:3];
always @(posedge clk) begin: seq
    if ((a <= b)) begin
        q <= (q + 1);
        mem[waddr] <= wdata;
        flag[2] <= 1;
    end
end
always @(a) begin: comb
    w = a;
end
"""
    assert activity.flop_names(v) == {"q", "flag"}


@block
def counter(clk, rst, en, q):
    @always_seq(clk.posedge, reset=rst)
    def seq():
        if en:
            q.next = q + 1

    return seq


@needs_icarus
def test_a_counter_toggles_as_counted_by_hand(tmp_path):
    P = dict(clk=Signal(bool(0)), rst=ResetSignal(0, active=1, isasync=False), en=Signal(bool(0)),
             q=Signal(intbv(0)[3:]))
    v = harness.convert(lambda ports: counter(**ports), P, "counter", tmp_path / "v")
    stim = harness.Stimulus(P, ["q"])
    stim.step(rst=1)  # one cycle in reset, then 8 counting cycles
    for _ in range(8):
        stim.step(rst=0, en=1)
    r = activity.measure(v, "counter", P, harness.Protocol(("q",)), stim, tmp_path / "w", "icarus")
    # clk: 2 per cycle = 18; rst 1 -> 0 and en 0 -> 1 once each; q counts 0 -> 1 -> ... -> 7 -> 0: bit flips
    # 1 + 2 + 1 + 3 + 1 + 2 + 1 + 3 = 14. Bits: clk, rst, en, q[3].
    assert {k: r[k] for k in ("cycles", "signal_bits", "toggles", "flop_bits", "flop_toggles")} == dict(
        cycles=9, signal_bits=6, toggles=18 + 1 + 1 + 14, flop_bits=3, flop_toggles=14)


@needs_icarus
def test_block_activity_vectors_seed_and_cache(tmp_path, monkeypatch):
    a0 = activity.block_activity("kvmu", n_vectors=60, seed=0, out=tmp_path, simulator="icarus")
    assert a0.vectors == 60 and a0.mismatches == 0 and a0.simulator == "icarus"
    assert 0 < a0.real_vectors < 60 and "random (seed 0)" in a0.source
    assert a0.flop_bits == 202  # = yosys' flip-flop count of the KVMU (results/hdl/summary.json)
    assert 0 < a0.flop_alpha < 1 and 0 < a0.alpha < 1
    assert a0.alpha == a0.toggles / (a0.signal_bits * a0.cycles)
    a1 = activity.block_activity("kvmu", n_vectors=60, seed=1, out=tmp_path, simulator="icarus")
    a2 = activity.block_activity("kvmu", n_vectors=80, seed=0, out=tmp_path, simulator="icarus")
    assert a1.toggles != a0.toggles and a2.toggles != a0.toggles and a2.cycles > a0.cycles
    # the same inputs again: read from the cache, no simulation
    monkeypatch.setattr(activity, "_measure_block", lambda *a, **k: pytest.fail("re-simulated a cached result"))
    assert activity.block_activity("kvmu", n_vectors=80, seed=0, out=tmp_path, simulator="icarus") == a2
    cached = json.loads((tmp_path / "hdl" / "activity" / "kvmu.json").read_text())
    assert cached["schema"] == activity.SCHEMA and cached["activity"]["toggles"] == a2.toggles


def test_inputs_key_changes_with_every_input(tmp_path):
    base = dict(block="wtu", n_vectors=2000, seed=0, simulator="icarus", params=dict(n_max=4096, lanes=16),
                ctx=OperatingPoint())
    k = activity.inputs_key(**base)
    trace = tmp_path / "t.npz"
    trace.write_bytes(b"another trace")
    for change in (dict(block="hcu"), dict(n_vectors=2001), dict(seed=1), dict(simulator="verilator"),
                   dict(params=dict(n_max=4096, lanes=8)), dict(ctx=OperatingPoint(th=6)), dict(trace_file=trace)):
        assert activity.inputs_key(**(base | change)) != k, change
    assert activity.inputs_key(**base) == k


def test_bad_arguments_are_named_before_any_work():
    with pytest.raises(ValueError, match="unknown block"):
        activity.block_activity("dpe")
    with pytest.raises(ValueError, match="n_vectors=0"):
        activity.block_activity("kvmu", n_vectors=0)
    with pytest.raises(ValueError, match="seed=-1"):
        activity.block_activity("kvmu", seed=-1)



@needs_icarus
@pytest.mark.skipif(shutil.which("verilator") is None, reason="verilator not installed: `make setup`")
def test_icarus_and_verilator_count_the_same_kvmu_toggles(tmp_path):
    a = [activity.block_activity("kvmu", n_vectors=40, seed=3, out=tmp_path / s, simulator=s)
         for s in ("icarus", "verilator")]
    assert (a[0].cycles, a[0].signal_bits, a[0].toggles, a[0].flop_toggles) == \
        (a[1].cycles, a[1].signal_bits, a[1].toggles, a[1].flop_toggles)
