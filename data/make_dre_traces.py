"""Record DRE testbench traces from REAL keys: SmolLM2-135M-Instruct on text and on video frame tokens.

    .venv/bin/python data/make_dre_traces.py [--out data/traces/dre_traces.npz]

Post-RoPE queries/keys of a few layers are captured (``vrex_lib.keys.capture_qk``), split into "frames" of
``--frame`` tokens (10, as VideoLLM-online's 10 tokens per frame), hashed and clustered per KV head with the
software ReSV (``vrex_lib.resv.HashClusterTable``, paper defaults N_hp=32, Th_hp=7). At a few frames, the
WiCSum rows of that frame's queries (softmax numerators of q·Key_cluster/√d, quantised to 16 bits) are stored
with the cluster token counts, and their OR-aggregated software selection for the KVMU. The file holds only
integers (codes, weights, counts, masks) — no model weights — and is small enough to commit (< 2 MB).

Two sources, the same arrays for each (``meta_sources``): ``text`` (unprefixed keys): SmolLM2 over
data/text/alice_ch1.txt, split into "frames" of 10 tokens; ``frame`` (keys prefixed ``frame_``): the default-profile
streaming model (``vrex_lib.runtime.build_model("default", vision="siglip-random")``: real SmolLM2, a seeded RANDOM SigLIP + connector
stand-in for the vision tower) over ``--video-frames`` frames of the COIN fixture (data/coin_mini, 2 fps), 10 frame
tokens per frame, no prompt; ``frame_meta_videos`` names the clips.

Arrays (``*_start`` are offsets with a final end entry):
  hcu_codes [T] int64, hcu_frame_start [F+1], hcu_frame_first [F] (1 = new (layer, head) sequence),
  hcu_frame_layer/head [F], hcu_ref_assign [T] (software assignment), hcu_ref_ncl [F] (clusters after);
  wtu_weights [R_total], wtu_counts [R_total], wtu_row_start [R+1], wtu_row_frame [R] (index into hcu frames);
  kvmu_selected, kvmu_counts, kvmu_start (one aggregated selection per recorded WTU frame),
  kvmu_assign, kvmu_assign_start (token -> cluster of the (layer, head) up to that frame, arrival order).
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent


TRACE_KEYS = ["hcu_codes", "hcu_frame_start", "hcu_frame_first", "hcu_frame_layer", "hcu_frame_head",
              "hcu_ref_assign", "hcu_ref_ncl", "wtu_weights", "wtu_counts", "wtu_row_start", "wtu_row_frame",
              "kvmu_selected", "kvmu_counts", "kvmu_start", "kvmu_assign", "kvmu_assign_start"]


def record_traces(qk: dict, layers: list[int], frame: int, n_frames: int, wtu_frames: list[int], cfg) -> dict:
    """Hash/cluster the keys of ``qk`` (``{layer: (q [Hq,T,D], k [Hkv,T,D])}``) frame by frame of ``frame``
    tokens per (layer, KV head) with the software ReSV, and record the HCU / WTU / KVMU trace arrays
    (:data:`TRACE_KEYS`, int64) for the first ``n_frames`` frames; WTU rows at the frames in ``wtu_frames``."""
    from vrex_lib.resv import HashClusterTable, hash_bits, quantize_weights, wicsum_select
    from vrex_lib.resv.wicsum import cluster_weights

    rec: dict = {k: [] for k in TRACE_KEYS}
    n_codes = n_w = n_sel = n_as = 0
    for layer in layers:
        q, k = qk[layer][:2]  # [Hq, T, D], [Hkv, T, D]
        Hq, Hkv, D = q.shape[0], k.shape[0], k.shape[2]
        grp = Hq // Hkv
        for head in range(Hkv):
            table = HashClusterTable(1, D, cfg, layer=layer)
            for f in range(n_frames):
                sl = slice(f * frame, (f + 1) * frame)
                keys = k[head:head + 1, sl]
                codes = hash_bits(keys[0], table.hyperplanes)
                assign = table.add_frame(keys)[0]
                rec["hcu_frame_start"].append(n_codes)
                rec["hcu_frame_first"].append(int(f == 0))
                rec["hcu_frame_layer"].append(layer)
                rec["hcu_frame_head"].append(head)
                rec["hcu_codes"] += codes.tolist()
                rec["hcu_ref_assign"] += assign.tolist()
                rec["hcu_ref_ncl"].append(int(table.n_clusters[0]))
                n_codes += len(codes)
                frame_idx = len(rec["hcu_frame_start"]) - 1
                if f in wtu_frames:
                    rows = q[head * grp:(head + 1) * grp, sl].reshape(-1, D)
                    # Score_cluster = Q · Key_cluster^T / sqrt(D), float64 (§IV.C)
                    s = (rows.to(torch.float64) @ table.head_centroids(0).to(torch.float64).T) * (1.0 / math.sqrt(D))
                    w = quantize_weights(cluster_weights(s, cfg.score), 16).numpy().astype(np.int64)
                    c = np.minimum(table.head_counts(0).numpy().astype(np.int64), 65535)
                    for r in range(w.shape[0]):
                        rec["wtu_row_start"].append(n_w)
                        rec["wtu_row_frame"].append(frame_idx)
                        rec["wtu_weights"] += w[r].tolist()
                        rec["wtu_counts"] += c.tolist()
                        n_w += w.shape[1]
                    sel = wicsum_select(torch.as_tensor(w), torch.as_tensor(c), cfg.ratio).any(0).numpy()
                    rec["kvmu_start"].append(n_sel)
                    rec["kvmu_selected"] += sel.astype(np.int64).tolist()
                    rec["kvmu_counts"] += c.tolist()
                    n_sel += sel.size
                    rec["kvmu_assign_start"].append(n_as)
                    asg = table.assignment[0].numpy().astype(np.int64)
                    rec["kvmu_assign"] += asg.tolist()
                    n_as += asg.size
    rec["hcu_frame_start"].append(n_codes)
    rec["wtu_row_start"].append(n_w)
    rec["kvmu_start"].append(n_sel)
    rec["kvmu_assign_start"].append(n_as)
    return {k: np.asarray(v, dtype=np.int64) for k, v in rec.items()}


def _summary(arrays: dict, prefix: str = "") -> str:
    return (f"{len(arrays[prefix + 'hcu_frame_first'])} HCU frames, {len(arrays[prefix + 'hcu_codes'])} codes, "
            f"{len(arrays[prefix + 'wtu_row_frame'])} WTU rows, {len(arrays[prefix + 'kvmu_start']) - 1} KVMU selections")


def frame_qk(layers: list[int], n_frames: int, fps: float = 2.0) -> tuple[dict, list[str]]:
    """Post-RoPE Q/K of the default-profile streaming model (real SmolLM2, seeded random SigLIP + connector) over
    ``n_frames`` frames of the COIN fixture (``data/coin_mini``, videos in name order, 2 fps) -> (qk, video names)."""
    from vrex_lib.coin import dataset_paths
    from vrex_lib.keys import capture_qk
    from vrex_lib.runtime import build_model
    from vrex_lib.video import read_frames

    _, vdir = dataset_paths("default")
    videos = sorted(vdir.glob("*.mp4"))
    if not videos:
        raise FileNotFoundError(f"{vdir} holds no .mp4: build the COIN fixture with `make data`")
    frames, used = [], []
    for v in videos:
        fr, _ = read_frames(v, fps=fps, max_side=384)
        frames.append(fr[: n_frames - sum(len(x) for x in frames)])
        used.append(v.name)
        if sum(len(x) for x in frames) >= n_frames:
            break
    if sum(len(x) for x in frames) < n_frames:
        raise ValueError(f"{vdir}: only {sum(len(x) for x in frames)} frames at {fps} fps, need {n_frames}")
    m = build_model("default", seed=0, vision="siglip-random")  # the encoder these stored traces were made with
    emb = torch.cat([m.embed_frames(f) for f in frames])  # [T, 10, hidden]; per video (sizes may differ)
    return capture_qk(m.llm, inputs_embeds=emb.reshape(-1, emb.shape[-1]), layers=layers), used


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "data" / "traces" / "dre_traces.npz")
    ap.add_argument("--layers", type=int, nargs="*", default=[3, 15, 27])
    ap.add_argument("--frame", type=int, default=10)
    ap.add_argument("--max-tokens", type=int, default=600)
    ap.add_argument("--wtu-frames", type=int, nargs="*", default=[10, 30, 59],
                    help="frame indices whose query rows are recorded for the WTU (text)")
    ap.add_argument("--video-frames", type=int, default=20, help="video frames of the frame-token traces")
    ap.add_argument("--video-wtu-frames", type=int, nargs="*", default=[9, 19],
                    help="video frame indices whose query rows are recorded for the WTU")
    a = ap.parse_args()

    from vrex_lib.config import ReSVConfig, seed_everything
    from vrex_lib.keys import capture_qk
    from vrex_lib.llm_weights import load_smollm2

    seed_everything(0)
    cfg = ReSVConfig()
    text_path = ROOT / "data" / "text" / "alice_ch1.txt"
    if not text_path.exists():
        raise FileNotFoundError(f"{text_path} is missing: it ships with the repository (data/text/README.md)")
    model, tok = load_smollm2()
    ids = tok(text_path.read_text(), return_tensors="pt").input_ids[0][: a.max_tokens]
    qk = capture_qk(model, input_ids=ids, layers=a.layers)
    arrays = record_traces(qk, a.layers, a.frame, ids.numel() // a.frame, a.wtu_frames, cfg)
    del model, qk

    # frame tokens: 10 per frame by construction of the runtime (CLS + 3x3 pool), so --frame does not apply
    seed_everything(0)
    fqk, videos = frame_qk(a.layers, a.video_frames)
    farr = record_traces(fqk, a.layers, 10, a.video_frames, a.video_wtu_frames, cfg)
    arrays.update({"frame_" + k: v for k, v in farr.items()})
    arrays["meta_sources"] = np.asarray(["text", "frame"])  # key prefixes: "" (text), "frame_" (video frames)
    arrays["frame_meta_videos"] = np.asarray(videos)
    arrays["frame_meta_n_frames"] = np.asarray([a.video_frames], dtype=np.int64)
    arrays["meta_layers"] = np.asarray(a.layers, dtype=np.int64)
    arrays["meta_frame_tokens"] = np.asarray([a.frame], dtype=np.int64)
    arrays["meta_th_hp"] = np.asarray([cfg.th_hp], dtype=np.int64)
    arrays["meta_ratio_q16"] = np.asarray([round(cfg.ratio * 65536)], dtype=np.int64)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = a.out.with_suffix(".tmp.npz")
    np.savez_compressed(tmp, **arrays)
    tmp.replace(a.out)
    print(f"wrote {a.out} ({a.out.stat().st_size / 1e3:.0f} kB)\n  text:  {_summary(arrays)}\n"
          f"  frame: {_summary(arrays, 'frame_')} ({a.video_frames} frames of {', '.join(videos)})")


if __name__ == "__main__":
    main()
