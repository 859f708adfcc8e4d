"""The choices the paper leaves open that can move a verdict: one :class:`Choice` per decision, with its default,
its admissible range and why the range is what it is (docs/DECISIONS.md names each one, ``Dnn``).

A verdict that depends on such a choice is re-graded over the choice's whole admissible range: ``robust`` when it
holds at every admissible value, ``depends on Dnn`` otherwise (the claims' robustness column). A choice reaches
the code it moves through ``override``: a keyword of :func:`vrex_lib.perf.simulate` (a ``SimParams`` field, or
``system_<field>``), a ``workload.<field>`` of the :class:`~vrex_lib.perf.Workload`, or a ``resv.<field>`` of
:class:`~vrex_lib.config.ReSVConfig`.

    from vrex_lib import choices
    choices.get("D6").admissible        # the KVMU capacities a designer could pick
    choices.table()                     # id, name, default, admissible, override, why
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

import pandas as pd


@dataclass(frozen=True)
class Choice:
    """One open decision.

    id: its docs/DECISIONS.md entry ('D6'); name: what is chosen, in words; default: the artifact's value;
    admissible: every value a careful designer or reader could defend, ordered, the default among them; why: the
    reason for the range (what bounds it on each side); override: where the value enters the code (see the module
    docstring; None for a reading that selects a named variant instead); unit: of the values ('' = none); source:
    where the range's ends come from (the paper's section, a specification, a cited measurement, a device's memory),
    never the value a PASS needs -- :func:`unsourced` lists the choices without one.
    """

    id: str
    name: str
    default: object
    admissible: tuple
    why: str
    override: str | None = None
    unit: str = ""
    source: str = ""

    def __post_init__(self) -> None:
        if self.default not in self.admissible:
            raise ValueError(f"choice {self.id}: the default {self.default!r} must be one of its admissible values")


_ROWS: tuple[Choice, ...] = (
    Choice("D6", "KVMU capacity: recent KV V-Rex keeps on the device per stream before offloading (the GPU "
           "baselines' is D420)", 4096,
           (2048, 4096, 8192, 16384, 32768),
           "the paper gives none (§V.C 'predefined maximum capacity'); below ~2K tokens a COIN step segment (26 "
           "frames x 10 tokens) plus its question does not stay on the device; above 32K the edge system's 32 GB "
           "LPDDR5, less the 16 GB of weights, holds no second stream", "recent_capacity", "tokens",
           source="paper §V.C (no value); COIN step length (docs/DECISIONS.md D6); Table I's 32 GB edge DRAM"),
    Choice("D101", "V-Rex core's DRAM/NoC port width", 64, (32, 64, 128),
           "one core design serves V-Rex8 and V-Rex48 (Table III is one core): 32 B/cycle is V-Rex8's per-core share "
           "of 204.8 GB/s at 800 MHz (Table I), 64 the next power of two above V-Rex48's 1935/48 = 40.3 GB/s = 50.4 "
           "B/cycle, 128 a generous design", "system_core_port_bytes_per_cycle", "B/cycle",
           source="Table I DRAM bandwidths at Table III's 800 MHz core clock"),
    Choice("D103", "dense layers' KV: kept resident on the device, or offloaded and re-fetched every step",
           True, (False, True),
           "Fig. 6 draws layer 0 with full attention and says nothing of where its KV lives; a designer keeps it "
           "resident (1/32 of the cache, read in full every step) rather than move 147 MB per frame over the 4 GB/s "
           "link at 40K; the literal reading (every layer offloaded alike) is the other end", "dense_resident",
           source="paper Fig. 6 (layer 0 full attention), §V.C"),
    Choice("D244", "fetch granule rule: how the KVMU's cluster-wise reordering places a selected cluster's offloaded "
           "tokens in the SSD's blocks (a measured workload's blocks per token replace it)", "extent",
           ("extent", "packed", "independent"),
           "§V.C makes one cluster's tokens contiguous but gives no placement: each cluster in its own block-aligned "
           "extent (what a designer reading whole clusters from an SSD builds; ceil(run / block) blocks), clusters "
           "packed back to back (D85's hardware model, runs span run/block + 1/2 blocks), or runs at independent "
           "offsets (the upper bound of the waste)", "granule_rule",
           source="paper §V.C (cluster-contiguous layout); NVMe 4-KiB logical blocks (docs/DECISIONS.md D85, D244)"),
    Choice("D246", "Fig. 19's per-token ablation: where the offloaded keys it scores come from", "fetch",
           ("fetch", "resident"),
           "§VI.E: clustering 'avoids fetching/computing the full key for WiCSum', so without it every offloaded key "
           "is fetched each step; a designer could instead keep every key on the device (InfiniGenP's choice)",
           "noclust_keys", source="paper §VI.E; InfiniGenP's resident keys (§VI.A)"),
    Choice("D243", "host memory copy rate for FlexGen's pinned-buffer relay on the server", 102.4e9,
           (25.6e9, 51.2e9, 102.4e9),
           "the relay copy runs on the host CPU: at most the socket's 8 x DDR4-3200 = 204.8 GB/s split between the "
           "read and the write (102.4 GB/s copied); one DDR4-3200 channel (25.6 GB/s) is a single-threaded copy's "
           "order", "system_host_copy_bytes_s", "B/s",
           source="DDR4-3200 channel rate (JEDEC JESD79-4) x the DGX A100 socket's 8 channels"),
    Choice("D104", "cross-step reuse of the previous step's retrieved KV (the KVMU's 'Retrieved KV', Fig. 12)",
           "kvmu", ("none", "kvmu", "all"),
           "the paper draws the region but gives no reuse; none (every step fetches afresh), the KVMU only "
           "(V-Rex), or every selecting method", "retrieved_cache",
           source="paper Fig. 12 ('Retrieved KV' region of the KVMU)"),
    Choice("D221", "frame-to-frame reuse: the share of a step's selected offloaded KV already on the device from the "
           "previous step, as the implied-by-printed checks allow it", 0.0, (0.0, 0.3, 0.6),
           "Table II prints a per-step retrieval ratio and no reuse: 0 is the literal reading; 0.6 is the "
           "frame-to-frame overlap of the selection this artifact measures on its stand-in streams (notebook 02), "
           "the most a reader can defend; the checks of claims.causes read it (no simulator keyword)", None,
           source="paper Table II (no reuse printed); the selection overlap measured in notebook 02"),
    Choice("D420", "GPU baselines' GPU-resident KV per stream, apart from V-Rex's KVMU capacity (D6)", 4096,
           (0, 4096, "fit"),
           "§II.B and the abstract have the baselines offload the full KV (0 tokens kept); D22 gives them V-Rex's "
           "default capacity (4,096); 'fit' is FlexGen's placement policy keeping on the GPU whatever fits after the "
           "weights, one layer's activations and its double-buffered streaming buffers at that batch (32 GB on the "
           "Orin, 80 GB on the A100)", "baseline_kv_capacity", "tokens",
           source="paper §II.B and abstract (full offload); docs/DECISIONS.md D22; FlexGen (Sheng et al., ICML 2023) "
           "§4 placement; Table I GPU memory capacities"),
    Choice("D421", "GPU-side ReSV's token layout: what a token-granular fetch of the offloaded KV moves", "independent",
           ("independent", "sector", "selected"),
           "without the KVMU the selected tokens lie at independent offsets: each 256-B token costs a 4-KiB block "
           "(the upper bound); a designer can format the drive with 512-B logical blocks (the same rule on 512-B "
           "commands), or gather only the selected tokens into whole blocks (the lower bound: nothing unselected "
           "moves); Fig. 16's printed KVPU -> All step bounds the share the paper's layout moved (claims.hwmodel "
           "reports it beside each rule)", "token_fetch_rule",
           source="NVM Express Base Specification (LBA formats: 512 B and 4 KiB); paper Fig. 16 printed steps"),
    Choice("D422", "GPU host's NVMe queue depth (reads in flight to the SSD)", 32, (8, 32, 64, 128),
           "the Linux NVMe driver of the Orin's L4T kernel admits up to its io_queue_depth (1,024) per queue, so the "
           "depth is the software's: 8 is the top of the everyday QD1-QD8 range reviewers sweep single-threaded, "
           "32 the depth client drives are rated and AHCI capped at, 64 the KVMU's (D105), 128 the top of published "
           "4-KiB random-read QD sweeps", "gpu_queue_depth", "commands",
           source="Linux drivers/nvme/host/pci.c (io_queue_depth, default 1024); KitGuru Crucial P5 Plus and Lexar "
           "NM790 reviews (QD1-32 sweeps); TechPowerUp Samsung 970 Pro review (QD1-128 sweep); docs/DECISIONS.md D105"),
    Choice("D423", "GPU-side ReSV prediction: eager host calls per new token and KV head (each one kernel) on top "
           "of its one clustering kernel per new token", 0, (0, 1, 4),
           "0: the designer's kernel clusters a token for every head at once; 1: one call per (token, KV head), the "
           "per-head HC table of §IV.B walked head by head; 4: that walk as the reference implementation writes it "
           "(nearest cluster, count, running-mean centroid, member list: vrex_lib/resv/reference.py "
           "HashClusterTableRef.add_frame); every call costs the measured eager host time per call and a kernel "
           "start-up", "gpu_resv_host_calls", "calls",
           source="paper §IV.B; vrex_lib/resv/reference.py; stack.eager_host_op_s and gpu.kernel_*_s (perf/constants.py,"
           " measured; scripts/measure_host_overhead.py)"),
    Choice("D424", "decode-rate DRAM efficiency: the share of the DRAM peak a long read stream reaches at decode "
           "rate, the same rule on V-Rex and the GPUs", "model", ("model", 0.77, 0.74, 0.70),
           "'model': the bank-level stream model (x the GPU's memory-side factor); the others are published decode "
           "runs' shares of their peak (weights + attended KV per token), kernel start-ups inside so each a lower "
           "bound of the DRAM's own: MLC int4 Llama-2-7B on an AGX Orin (LPDDR5) 0.77, gpt-fast bf16 Llama-3.1-8B / "
           "Llama-2-7B on an A100 (HBM2e) 0.74 / 0.70 (perf.validation.decode_dram_shares)", "decode_dram_eff",
           source="perf/validation.py rows dram.lpddr5.attainable and dram.hbm2e.gptfast.*.decode_share "
           "(dusty-nv/jetson-containers #532; pytorch-labs/gpt-fast README @32971d3)"),
    Choice("D427", "GPU board power while the GPU waits on the link (the step's exposed retrieval stall)", "context",
           ("idle", "context", "board"),
           "the stalled GPU runs no kernel but its process holds a CUDA context and waits on its copy stream: "
           "'idle' is the board's bare idle (nothing it draws can be lower), 'context' adds the DVFS step a held "
           "context forces (the default: the state a FlexGen process is in), 'board' keeps Table I's busy power (the "
           "upper end, the board at its measured power for the whole step); a board with no cited idle (the AGX "
           "Orin) keeps Table I's power at every value", "gpu_stall_power",
           source="perf/constants.py a100.idle_w (NVML idle readings of a DGX A100-80GB board) and "
           "a100.context_step_w (Vadari, 'The Model Parking Tax', arXiv:2605.23918: +26-50 W on HBM GPUs); paper "
           "Table I board power"),
    Choice("D429", "engine of FlexGen's relay copies on a unified-memory GPU (the Orin)", "gpu", ("gpu", "cpu_ce"),
           "FlexGen's copy worker copies page cache -> pinned buffer on the CPU (torch CPU copy_) and pinned buffer "
           "-> GPU tensor with cudaMemcpyAsync on its copy stream (the copy engine), both beside the kernels; on the "
           "Orin both read and write the LPDDR5 the GPU streams its weights from. 'gpu': their DRAM traffic in line "
           "with the GPU's kernels (every copied byte delays the DRAM-bound stream: the contention's upper end, the "
           "default); 'cpu_ce': the copies on their own engine after the SSD read, at the LPDDR5's long-stream copy "
           "rate, overlapping the kernels with no contention (the lower end)", "relay_copy_engine",
           source="FMInference/FlexLLMGen flexllmgen/pytorch_backend.py copy_worker_func (tmp_cpu_buf.copy_, "
           "dst_data.copy_ under torch.cuda.stream(copy_stream)); NVIDIA CUDA for Tegra application note (one "
           "physical SoC DRAM for host, device and pinned memory)"),
)

#: id -> :class:`Choice`, in table order.
CHOICES: MappingProxyType = MappingProxyType({c.id: c for c in _ROWS})


def get(choice_id: str) -> Choice:
    """The choice ``choice_id`` ('D6'); an unknown one is an error listing the ids."""
    if choice_id not in CHOICES:
        raise ValueError(f"unknown choice {choice_id!r}: choose one of {', '.join(CHOICES)}")
    return CHOICES[choice_id]


def table() -> pd.DataFrame:
    """The choices as a DataFrame: id, name, default, admissible, unit, override, why, source."""
    return pd.DataFrame([dict(id=c.id, name=c.name, default=c.default, admissible=c.admissible, unit=c.unit,
                              override=c.override, why=c.why, source=c.source) for c in _ROWS])


def unsourced() -> list[str]:
    """Ids of the choices whose range names no source (a test keeps this empty)."""
    return [c.id for c in _ROWS if not c.source.strip()]


__all__ = ["CHOICES", "Choice", "get", "table", "unsourced"]
