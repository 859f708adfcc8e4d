"""ReSV algorithm constants and statistics (paper §IV, §VI.B ablation, §VI.E, Fig. 7(b)).

Hyper-parameters are inputs; the statistics are claims measured on the authors' Llama-3-8B keys over COIN,
which we re-measure on SmolLM2-135M keys (default profile), so the tolerances are loose and say why.
"""
from ._core import pv

_model = "different model (SmolLM2-135M vs Llama-3-8B) and data (text/fixture frames vs COIN)"

pv("resv.n_hp", 32, "bits", "§VI.E", "input", note="N_hp random hyperplanes, 1 bit each")
pv("resv.th_hp", 7, "bits", "§VI.E; Fig. 8 '< Th_hd'", "input", note="strict Hamming threshold (Th_hp = Th_hd)")
pv("resv.th_r_wics", 0.3, "", "§VI.E", "input", note="WiCSum threshold ratio Th_r-wics")
pv("resv.fig7b.correlation", 0.8, "", "Fig. 7(b), §IV.B", qkind="correlation",
   note="|corr(cosine similarity, Hamming distance)|, 3rd layer's keys, COIN; axis ticks suggest 64 bits")
pv("resv.tokens_per_cluster", 32, "tokens", "§VI.B (ablation, Fig. 16 text)",
   qkind="statistic", note="average tokens per hash cluster; " + _model + "; depends on temporal redundancy of the input")
pv("resv.hc_table_pct_of_kv", 1.67, "%", "§VI.B (ablation, Fig. 16 text)",
   qkind="small_share",
   note="HC table memory as a share of the full KV cache; follows from tokens/cluster and the HC-row layout we assume "
        "(BF16 centroid, 32-bit code, 16-bit count, 32-bit token indices); matches per-layer (concat) clustering, "
        "docs/DECISIONS.md D10")
pv("resv.hash_pct_of_key_dim", 0.5, "%", "§IV.B ('≤ 0.5% of the original dimension')", "derived", "shown",
   note="an upper bound, shown for information; ""hash bits / key bits (BF16); 32 bits of a 1024-d key = 0.195%, of a 128-d head key = 1.56%")
pv("resv.wicsum_row_prefix_pct", 16, "%", "§IV.C ('average 16% per row')",
   qkind="statistic",
   note="share of a row's clusters walked before Acc > Th_wics (early exit); " + _model
        + "; the paper does not define the 16% precisely")
