"""The DRE top level (paper Fig. 10): HCU + WTU (the KVPU) and the KVMU on one clock, with Fig. 10's memories.

The three engines work on different stages of a layer (② clustering, ④ WiCSum, ⑤ prefetch) and talk to the
LXE and to the HC table in DRAM, which are outside the DRE; so the top level places them side by side on a
shared clock/reset and exposes their ports (prefixed ``h_``, ``w_``, ``k_``). Its on-chip memory is the sum of
the blocks' memories: 128 B + 4 KB (HCU) + 8 KB + 8 KB (WTU) = 20.125 KB (:func:`dre_memory_bytes`).
"""
from __future__ import annotations

from myhdl import block

from ..config import VRexCoreConfig
from .hcu import HCUParams, hcu, hcu_ports
from .kvmu import kvmu, kvmu_ports
from .wtu import WTUParams, wtu, wtu_ports


def dre_memory_bytes(cfg: VRexCoreConfig | None = None) -> dict[str, int]:
    """On-chip memory per block at the paper's configuration (bytes)."""
    h, w = HCUParams.from_core(cfg), WTUParams.from_core(cfg)
    out = dict(hcu=h.memory_bits // 8, wtu=w.memory_bits // 8, kvmu=0)
    out["total"] = sum(out.values())
    return out


def dre_ports(hp: HCUParams, wp: WTUParams) -> dict:
    """Fresh top-level signals: shared clk/rst, then the HCU, WTU and KVMU ports with prefixes."""
    h, w, k = hcu_ports(hp), wtu_ports(wp), kvmu_ports()
    ports = dict(clk=h.pop("clk"), rst=h.pop("rst"))
    for d in (w, k):
        d.pop("clk"), d.pop("rst")
    ports.update({f"h_{n}": s for n, s in h.items()})
    ports.update({f"w_{n}": s for n, s in w.items()})
    ports.update({f"k_{n}": s for n, s in k.items()})
    return ports


def make_dre(hp: HCUParams | None = None, wp: WTUParams | None = None):
    """(block function with explicit ports, port dict) of the DRE top level, ready for simulation/conversion."""
    hp = hp or HCUParams.from_core()
    wp = wp or WTUParams.from_core()
    ports = dre_ports(hp, wp)
    names = list(ports)
    hn = [n for n in names if n.startswith("h_")]
    wn = [n for n in names if n.startswith("w_")]
    kn = [n for n in names if n.startswith("k_")]
    # MyHDL needs the top-level ports as named arguments: build the signature from the port names.
    src = (f"def dre({', '.join(names)}):\n"
           f"    u_hcu = hcu(clk, rst, {', '.join(hn)}, p=hp)\n"
           f"    u_wtu = wtu(clk, rst, {', '.join(wn)}, p=wp)\n"
           f"    u_kvmu = kvmu(clk, rst, {', '.join(kn)})\n"
           f"    return u_hcu, u_wtu, u_kvmu\n")
    ns = dict(hcu=hcu, wtu=wtu, kvmu=kvmu, hp=hp, wp=wp)
    exec(compile(src, __file__, "exec"), ns)  # noqa: S102 - generated from our own port names
    return block(ns["dre"]), ports
