"""Op timing on one system: DRAM streams, V-Rex's LXE, a GPU's kernels and host calls (docs/PERF_MODEL.md)."""
from __future__ import annotations

from ..dram import StreamRates
from ..lxe import lxe_time
from ..model_ops import Op, stack_counts
from ..systems import System


class OpCosts:
    """Op timing on one system for one step (DRAM stream rates computed once per stream within the step; each op's
    time and its parts computed once, :meth:`parts`)."""

    def __init__(self, sys: System, decode_dram_eff: float | str = "model") -> None:
        self.sys = sys
        self.rates = StreamRates(sys.dram_timing, sys.mem_side_eff)
        self._memo: dict[int, tuple] = {}
        # A long read stream at decode rate: the model's rate, capped by a published decode share of the peak (D424).
        long = self.rates.rate()
        self.long_rate = long if decode_dram_eff == "model" else min(long, sys.dram_bw * decode_dram_eff)

    def dram_s(self, op: Op) -> float:
        r = self.rates.rate
        return ((op.weight_bytes + op.act_bytes + op.kv_bytes) / self.long_rate
                + (op.sel_kv_bytes / r(op.sel_run_bytes) if op.sel_kv_bytes else 0.0)
                + (op.kv_write_bytes / r(op.kv_write_run_bytes, True) if op.kv_write_bytes else 0.0)
                + (op.dma_bytes / r(op.dma_run_bytes, True) if op.dma_bytes else 0.0))

    def parts(self, op: Op) -> tuple[float, str, float, float, float]:
        """(seconds, what limits the op, DRAM seconds, kernel start-up seconds, host seconds), once per op."""
        hit = self._memo.get(id(op))
        if hit is not None and hit[0] is op:
            return hit[1]
        sys, dram_s = self.sys, self.dram_s(op)
        if sys.kind == "vrex":
            t = lxe_time(op.gemms, op.vpe, dram_s, sys.core, sys.n_cores, sys.core_port_bytes_per_cycle)
            out = (t.time_s, t.limit, dram_s, 0.0, 0.0)
        else:
            (sec, lim), pr = self.gpu_parts(op, dram_s)
            out = (sec, lim, dram_s, pr["kernel"], pr["host"])
        self._memo[id(op)] = (op, out)
        return out

    def time(self, op: Op) -> tuple[float, str]:
        """(seconds, what limits the op: dram / dpe / vpe on V-Rex, dram / kernel / compute / host on a GPU)."""
        return self.parts(op)[:2]

    def gpu_parts(self, op: Op, dram_s: float | None = None) -> tuple[tuple[float, str], dict]:
        """A GPU op: the device runs its kernels, each paying its fixed start-up (``kernel_*_s``) on top of its DRAM
        streaming, unless compute binds; the eager host issues its calls meanwhile. ((seconds, limit), parts)."""
        sys = self.sys
        dram_s = self.dram_s(op) if dram_s is None else dram_s
        calls, kernels, dram_k = stack_counts(sys.stack, op)
        fixed_s = dram_k * sys.kernel_dram_s + (kernels - dram_k) * sys.kernel_small_s
        # The step outside the layers is charged its measured host time as a whole, not per framework call: much
        # of it (generate()'s logits processors and stopping criteria) is Python (docs/DECISIONS.md D247).
        host_s = sys.host_fixed_s if op.name == "lm_head" else calls * sys.host_op_s
        parts = dict(compute=op.flops / sys.flops, dram=dram_s, kernel=fixed_s, host=host_s)
        device_s = max(parts["compute"], dram_s + fixed_s)
        if parts["host"] >= device_s:
            return (parts["host"], "host"), parts
        lim = "compute" if parts["compute"] >= dram_s + fixed_s else ("kernel" if fixed_s > dram_s else "dram")
        return (device_s, lim), parts

    def seconds(self, op: Op) -> float:
        return self.parts(op)[0]


def _op_time_s(op: Op, sys: System) -> float:
    """One op's time on ``sys`` (see :class:`OpCosts`)."""
    return OpCosts(sys).seconds(op)

