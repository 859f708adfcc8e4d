"""ReSV: hashing, HC-table clustering, WiCSum, selection -- properties and fast-vs-reference agreement."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from vrex_lib.config import ReSVConfig
from vrex_lib.resv import (HashClusterTable, HashClusterTableRef, cluster_ref, hamming, hamming_ref, hash_bits,
                           hash_bits_ref, make_hyperplanes, quantize_weights, ratio_q, select_tokens,
                           select_tokens_ref, wicsum_select, wicsum_select_ref)

FAST = settings(max_examples=40, deadline=None)


# ------------------------------------------------------------------------------------------------ hashing
@FAST
@given(seed=st.integers(0, 10_000), n_hp=st.sampled_from([1, 7, 32, 63, 64]), n=st.integers(1, 20),
       dim=st.integers(1, 40))
def test_codes_are_sign_of_projection(seed, n_hp, n, dim):
    g = torch.Generator().manual_seed(seed)
    keys = torch.randn(n, dim, generator=g)
    keys[0] = 0  # x <= 0 -> bit 0
    H = make_hyperplanes(n_hp, dim, seed)
    codes = hash_bits(keys, H)
    proj = keys.double().numpy() @ H.double().numpy().T
    for t in range(n):
        bits = [(int(codes[t]) >> i) & 1 for i in range(n_hp)]  # Python >> on negative ints keeps 2's complement
        assert bits == [int(p > 0) for p in proj[t]]
    assert codes.tolist() == hash_bits_ref(keys.numpy(), H.numpy())
    assert int(codes[0]) == 0


def test_hyperplanes_seeded_gaussian():
    a, b = make_hyperplanes(32, 128, 3), make_hyperplanes(32, 128, 3)
    assert torch.equal(a, b) and not torch.equal(a, make_hyperplanes(32, 128, 4))
    assert a.shape == (32, 128) and abs(float(a.mean())) < 0.05 and abs(float(a.std()) - 1) < 0.05
    with pytest.raises(ValueError, match="n_hp"):
        make_hyperplanes(65, 8, 0)


@FAST
@given(a=st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=8),
       b=st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=8))
def test_hamming_matches_popcount_and_broadcasts(a, b):
    d = hamming(torch.tensor(a)[:, None], torch.tensor(b)[None, :])
    assert d.tolist() == [[hamming_ref(x, y) for y in b] for x in a]
    assert d.tolist() == [[bin((x ^ y) & (2**64 - 1)).count("1") for y in b] for x in a]
    small = [x & 0xFFFFFFFF for x in a]
    assert hamming(torch.tensor(small)[:, None], torch.tensor(small)[None, :], 32).tolist() == \
        [[hamming_ref(x, y) for y in small] for x in small]


# ------------------------------------------------------------------------------------------ clustering
def test_cluster_ref_rules():
    # spatial: token 1 joins the cluster token 0 opened in the same frame; ties -> lowest index
    assign, codes = cluster_ref([0b0000, 0b0001, 0b1111_0000], [], th=2)
    assert assign == [0, 0, 1] and codes == [0b0000, 0b1111_0000]
    assign, codes = cluster_ref([0b0011], [0b0001, 0b0010], th=2)  # distance 1 to both -> lowest index
    assert assign == [0] and codes == [0b0001, 0b0010]
    assign, _ = cluster_ref([0b0111], [0b0000, 0b0110], th=3)  # nearest (1) beats first (3 is not < 3)
    assert assign == [1]
    assign, codes = cluster_ref([0b0011], [0b0000], th=2)  # distance 2 == th -> new cluster (strict <)
    assert assign == [1] and codes == [0, 0b0011]


@FAST
@given(seed=st.integers(0, 10_000), th=st.integers(1, 12), n_hp=st.sampled_from([8, 16, 32]))
def test_clustering_never_joins_at_distance_ge_th(seed, th, n_hp):
    g = torch.Generator().manual_seed(seed)
    cfg = ReSVConfig(n_hp=n_hp, th_hp=th)
    tab = HashClusterTable(2, 8, cfg)
    base = torch.randn(2, 4, 8, generator=g)
    frames = []
    for f in range(6):
        keys = base + 0.5 * torch.randn(2, 4, 8, generator=g)
        frames.append(keys)
        codes = hash_bits(keys, tab.hyperplanes)
        before = tab.n_clusters.clone()
        a = tab.add_frame(keys)
        for h in range(2):
            for t in range(4):
                c = int(a[h, t])
                d = int(hamming(codes[h, t], tab.codes[h, c]))
                founder = tab.members(h, c)[0] == f * 4 + t
                assert founder or d < th
                if founder:  # nothing within th existed before this token
                    assert c >= int(before[h])
    assert tab.counts.sum(1).tolist() == [24, 24]
    all_keys = torch.cat(frames, 1)  # [2, 24, 8], position p = token p
    for h in range(2):  # Key_cluster is the mean of its members
        for c in range(int(tab.n_clusters[h])):
            members = tab.members(h, c)
            assert members and int(tab.counts[h, c]) == len(members)
            torch.testing.assert_close(tab.centroids[h, c], all_keys[h, members].mean(0), rtol=1e-5, atol=1e-5)


def _random_stream(seed, Hkv=2, D=8, frames=8, N=5, scale=0.4):
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(Hkv, N, D, generator=g)
    return [base + scale * f ** 0.5 * torch.randn(Hkv, N, D, generator=g) for f in range(frames)]


CFGS = [ReSVConfig(), ReSVConfig(hash_mode="concat"), ReSVConfig(code_rule="mean"),
        ReSVConfig(n_hp=8, th_hp=3), ReSVConfig(n_hp=64, th_hp=20), ReSVConfig(granularity="q_head"),
        ReSVConfig(granularity="layer"), ReSVConfig(score="raw", th_r_wics=0.5), ReSVConfig(th_r_wics=0.0),
        ReSVConfig(th_r_wics=1.0)]


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), ci=st.integers(0, len(CFGS) - 1), quant=st.booleans())
def test_fast_path_agrees_with_reference(seed, ci, quant):
    cfg = CFGS[ci]
    fast, ref = HashClusterTable(2, 8, cfg, layer=3), HashClusterTableRef(2, 8, cfg, layer=3)
    for keys in _random_stream(seed):
        assert fast.add_frame(keys).tolist() == ref.add_frame(keys.numpy())
    for h in range(2):
        assert np.array_equal(fast.head_centroids(h).numpy(), ref.head_centroids(h))  # bit-exact running mean
        assert fast.head_counts(h).tolist() == ref.head_counts(h)
        g = 0 if cfg.hash_mode == "concat" else h
        assert fast.head_codes(h).tolist() == ref.codes[g]
        assert [fast.members(h, c) for c in range(len(ref.members[g]))] == ref.members[g]
    q = torch.randn(4, 3, 8, generator=torch.Generator().manual_seed(seed + 1))
    qb = 16 if quant and cfg.score == "softmax" else None
    got = select_tokens(q, fast, cfg=cfg, quant_bits=qb)
    assert [i.tolist() for i in got.indices] == select_tokens_ref(q.numpy(), ref, cfg=cfg, quant_bits=qb)


def test_running_mean_and_hc_sizes():
    cfg = ReSVConfig(th_hp=33)  # everything joins cluster 0
    tab = HashClusterTable(1, 4, cfg)
    keys = torch.arange(12, dtype=torch.float32).reshape(1, 3, 4)
    tab.add_frame(keys, torch.tensor([5, 6, 9]))
    assert tab.n_clusters.tolist() == [1] and tab.members(0, 0) == [5, 6, 9]
    assert torch.allclose(tab.head_centroids(0)[0], keys[0].mean(0))
    assert tab.nbytes() == 4 * 2 + 4 + 2 + 3 * 4 and tab.kv_nbytes() == 3 * 4 * 2 * 2
    with pytest.raises(ValueError, match="keys must be"):
        tab.add_frame(torch.zeros(2, 3, 4))


def test_concat_mode_shares_clusters_across_heads():
    tab = HashClusterTable(3, 4, ReSVConfig(hash_mode="concat"))
    a = tab.add_frame(torch.randn(3, 6, 4))
    assert a.shape == (3, 6) and (a == a[0]).all() and tab.hyperplanes.shape == (32, 12)
    assert torch.equal(tab.head_centroids(1), tab.centroids[0, : int(tab.n_clusters[0])].view(-1, 3, 4)[:, 1])


# --------------------------------------------------------------------------------------------- WiCSum
def _check_minimal_prefix(w, c, ratio, sel, integer):
    rows, C = w.shape
    for i in range(rows):
        order = sorted(range(C), key=lambda j: (-w[i, j], j))
        wc = [int(w[i, j]) * int(c[j]) if integer else float(w[i, j]) * float(c[j]) for j in order]
        total = sum(wc)
        exceed = (lambda acc: acc * 65536 > ratio_q(ratio) * total) if integer else (lambda acc: acc > ratio * total)
        k = next((t + 1 for t in range(C) if exceed(sum(wc[: t + 1]))), C)  # minimal exceeding prefix
        expect = np.zeros(C, bool)
        expect[order[:k]] = True
        assert sel[i].tolist() == expect.tolist(), (i, w[i], c, ratio)


@FAST
@given(seed=st.integers(0, 10_000), rows=st.integers(1, 6), C=st.integers(1, 9),
       ratio=st.sampled_from([0.0, 0.1, 0.3, 0.5, 0.8, 1.0]), kind=st.sampled_from(["float", "int", "ties"]))
def test_wicsum_minimal_exceeding_prefix(seed, rows, C, ratio, kind):
    rng = np.random.default_rng(seed)
    c = rng.integers(1, 40, C)
    if kind == "float":
        w = rng.random((rows, C)) + 1e-3
    elif kind == "int":
        w = rng.integers(0, 2**16, (rows, C))
    else:  # many ties, incl. all-equal rows
        w = rng.integers(1, 3, (rows, C)).astype(np.int64)
        w[0] = 7
    integer = kind != "float"
    sel = wicsum_select(torch.as_tensor(w), torch.as_tensor(c), ratio)
    _check_minimal_prefix(w, c, ratio, sel.numpy(), integer)
    assert np.array_equal(sel.numpy(), wicsum_select_ref(w, c, ratio))


def test_wicsum_edge_cases():
    one = wicsum_select(torch.tensor([[0.7]]), torch.tensor([3]), 0.3)
    assert one.tolist() == [[True]]
    eq = wicsum_select(torch.ones(1, 4), torch.ones(4, dtype=torch.int64), 0.5)
    assert eq.tolist() == [[True, True, True, False]]  # 2 > 2 fails, 3 > 2: lower indices first
    assert wicsum_select(torch.rand(3, 5), torch.ones(5), 1.0).all()  # Acc never > Sum -> all
    z = wicsum_select(torch.tensor([[0.2, 0.9, 0.5]]), torch.ones(3), 0.0)
    assert z.tolist() == [[False, True, False]]  # first positive contribution exceeds 0
    # Fig. 11 toy: weighted sum 1000, Th_r-wics 0.8 -> exit once the cumulative sum passes 800
    w = torch.tensor([[40, 30, 20, 1]])
    c = torch.tensor([10, 12, 15, 40])  # 400 + 360 + 300 + 40 = 1100 -> Th 880
    assert wicsum_select(w, c, 0.8).tolist() == [[True, True, True, False]]
    assert wicsum_select(torch.zeros(2, 0), torch.zeros(0), 0.3).shape == (2, 0)


def test_quantisation_is_the_hardware_rule():
    w = torch.tensor([[1.0, 0.5, 0.25, 1e-6]])
    q = quantize_weights(w)
    assert q.tolist() == [[65535, 32768, 16384, 0]] and q.dtype == torch.int64  # 32767.5 -> 32768 (half-even)
    assert quantize_weights(w.numpy()).tolist() == q.tolist()
    assert ratio_q(0.3) == 19661 and ratio_q(1.0) == 65536
    c = torch.tensor([1, 2, 3, 4])
    assert torch.equal(wicsum_select(w, c, 0.3, quant_bits=16), wicsum_select(q, c, 0.3))
    assert np.array_equal(wicsum_select_ref(w.numpy(), c.numpy(), 0.3, quant_bits=16),
                          wicsum_select_ref(q.numpy(), c.numpy(), 0.3))
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        quantize_weights(torch.tensor([-0.5, 2.0]))


# -------------------------------------------------------------------------------------------- select
def test_select_tokens_union_and_candidates():
    torch.manual_seed(0)
    tab = HashClusterTable(2, 16, ReSVConfig())
    for f in range(20):
        tab.add_frame(torch.randn(2, 10, 16), torch.arange(100 + 10 * f, 110 + 10 * f))
    q = torch.randn(6, 4, 16)
    sel = select_tokens(q, tab)
    assert len(sel.indices) == 2 and sel.stats["rows"] == 24 and sel.n_candidates == 200
    for h, idx in enumerate(sel.indices):
        assert torch.equal(idx, torch.sort(idx).values) and len(set(idx.tolist())) == idx.numel()
        per_q = select_tokens(q, tab, cfg=ReSVConfig(granularity="q_head")).indices[3 * h:3 * h + 3]
        assert set(idx.tolist()) == set().union(*[set(p.tolist()) for p in per_q])  # union over the group
    cand = torch.arange(100, 150)
    sub = select_tokens(q, tab, candidates=cand)
    assert sub.n_candidates == 50 and all(torch.isin(i, cand).all() for i in sub.indices)
    assert select_tokens(q, tab, ratio=1.0).ratio() == 1.0
    assert select_tokens(q, tab, ratio=0.05).ratio() < select_tokens(q, tab, ratio=0.6).ratio()
    with pytest.raises(ValueError, match="multiple"):
        select_tokens(torch.randn(3, 4, 16), tab)


def test_descending_order_is_a_stable_sort():
    from vrex_lib.resv.wicsum import descending_order

    rng = np.random.default_rng(0)
    for key in (torch.from_numpy(rng.integers(-3, 3, (20, 9))), torch.from_numpy(rng.random((20, 9))),
                torch.tensor([[float("-inf"), 0.5, float("-inf"), 0.5, -2.0]]),
                torch.tensor([[torch.iinfo(torch.int64).min, 7, 7, -1]])):
        got = descending_order(key)
        exp = torch.sort(key, dim=1, descending=True, stable=True).indices
        finite = torch.gather(key, 1, exp) > torch.gather(key, 1, exp).min()  # padding order is irrelevant
        assert torch.equal(got[finite], exp[finite]) or torch.equal(got, exp)


def test_non_monotonic_positions_still_sorted():
    tab = HashClusterTable(1, 4, ReSVConfig(th_hp=33))
    tab.add_frame(torch.randn(1, 3, 4), torch.tensor([9, 2, 5]))
    assert tab.tokens_of(0, torch.tensor([True])).tolist() == [2, 5, 9]
    assert tab.tokens_of_heads(torch.tensor([[True]]))[0].tolist() == [2, 5, 9]


# ------------------------------------------------------------------- the fast path at scale (D50, D51, D369)
def _rows_ref(w, counts, ratio, n_valid, quant_bits=None):
    """Reference WiCSum row by row on the unpadded part of each row."""
    out = np.zeros(w.shape, bool)
    for i in range(w.shape[0]):
        c = int(n_valid[i])
        if c:
            out[i, :c] = wicsum_select_ref(w[i:i + 1, :c], counts[i, :c], ratio, quant_bits)[0]
    return out


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), C=st.integers(33, 400), rows=st.integers(1, 12),
       ratio=st.sampled_from([0.0, 0.05, 0.3, 0.5, 0.9, 1.0]),
       kind=st.sampled_from(["softmax", "quant", "int_ties", "float_ties", "dyadic", "raw"]),
       early_exit=st.sampled_from([0, 1, 2]))
def test_wicsum_rows_equals_reference(seed, C, rows, ratio, kind, early_exit):
    """The compiled WiCSum (early exit on the top of σ, or the whole of σ) selects exactly the reference's
    clusters: float and integer weights, ties, negative raw scores, padding, rows that cross the threshold
    exactly."""
    from vrex_lib.resv.wicsum import wicsum_rows

    rng = np.random.default_rng(seed)
    n_valid = rng.integers(0, C + 1, rows)
    n_valid[0] = C
    valid = np.arange(C)[None, :] < n_valid[:, None]
    counts = np.where(valid, rng.integers(1, 60, (rows, C)), 0)
    if kind == "softmax":
        s = rng.normal(0, rng.uniform(0.3, 4.0), (rows, C))
        w = np.exp(s - np.where(valid, s, -np.inf).max(1, keepdims=True))
    elif kind == "quant":
        s = rng.normal(0, 2.0, (rows, C))
        w = quantize_weights(np.exp(s - s.max(1, keepdims=True)))
    elif kind == "int_ties":
        w = rng.integers(0, 4, (rows, C))
    elif kind == "float_ties":
        w = rng.choice([1.0, 0.5, 0.25, 0.1, 1e-3], (rows, C))
    elif kind == "raw":  # raw scores (score='raw'): negative weights take the whole of σ
        w = rng.normal(0.2, 1.0, (rows, C))
    else:  # dyadic weights and unit counts: sums are exact, so Acc hits Th_r-wics·Sum exactly
        w = rng.integers(1, 5, (rows, C)) / 4.0
        counts = valid.astype(np.int64)
    w = np.where(valid, w, 0)
    mask, n_sel = wicsum_rows(w, counts, ratio, n_valid, early_exit=early_exit)
    ref = _rows_ref(w, counts, ratio, n_valid)
    assert np.array_equal(mask, ref)
    assert n_sel.tolist() == ref.sum(1).tolist()


def test_wicsum_rows_names_a_bad_stage_or_padding():
    from vrex_lib.resv.wicsum import wicsum_rows

    w, c = np.ones((2, 3)), np.ones(3, np.int64)
    with pytest.raises(ValueError, match="early_exit must be 0, 1 or 2"):
        wicsum_rows(w, c, 0.3, early_exit=3)
    with pytest.raises(ValueError, match=r"n_valid must lie in \[0, 3\]"):
        wicsum_rows(w, c, 0.3, n_valid=np.array([1, 4]))


def test_wicsum_rows_threshold_boundary():
    """Acc(t) == Th_r-wics·Sum exactly is not an exit (strict >), in float and integer arithmetic."""
    from vrex_lib.resv.wicsum import wicsum_rows

    for C in (40, 100):
        counts = np.ones((2, C), np.int64)
        for w in (np.full((2, C), 0.5), np.full((2, C), 1024, np.int64)):
            mask, n_sel = wicsum_rows(w, counts, 0.5)
            h = C // 2 + 1  # Acc(C/2 - 1) == Sum/2 is not > Sum/2
            assert n_sel.tolist() == [h, h] and mask[:, :h].all() and not mask[:, h:].any()
            assert np.array_equal(mask, _rows_ref(w, counts, 0.5, np.full(2, C)))
    w = np.arange(100, dtype=np.int64)[None, :] - 50  # negative integer weights: Sum and Acc are still exact
    c = np.ones((1, 100), np.int64)
    got = wicsum_rows(w, c, 0.3)[0]
    assert np.array_equal(got, wicsum_select_ref(w, c[0], 0.3))


def _eye_table(n_hp, th, n_heads=2):
    """Tables whose hash bits are the signs of the key's coordinates (identity hyperplanes): codes by design."""
    cfg = ReSVConfig(n_hp=n_hp, th_hp=th)
    H = torch.eye(n_hp)
    return HashClusterTable(n_heads, n_hp, cfg, hyperplanes=H), HashClusterTableRef(n_heads, n_hp, cfg, hyperplanes=H)


def _keys_from_codes(codes: np.ndarray, n_hp: int, rng) -> torch.Tensor:
    """Keys ``[H, N, n_hp]`` whose sign pattern is ``codes [H, N]`` (magnitudes random, so means differ)."""
    bits = (codes[..., None] >> np.arange(n_hp)) & 1
    mag = rng.uniform(0.1, 2.0, bits.shape)
    return torch.as_tensor(np.where(bits == 1, mag, -mag), dtype=torch.float32)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), th=st.integers(1, 6), n_hp=st.sampled_from([16, 32]),
       N=st.integers(1, 40))
def test_clustering_equals_reference_at_the_threshold(seed, th, n_hp, N):
    """Codes a few bit flips from a handful of centres: distances equal to Th_hp, ties between clusters and
    in-frame joins are frequent; every assignment, code, count, member list and (bit-exact) mean agrees."""
    rng = np.random.default_rng(seed)
    fast, ref = _eye_table(n_hp, th)
    centres = rng.integers(0, 1 << n_hp, (2, 4))
    for f in range(12):
        pick = np.take_along_axis(centres, rng.integers(0, 4, (2, N)), 1)
        flips = np.zeros((2, N), np.int64)
        for _ in range(int(rng.integers(0, th + 2))):
            flips ^= np.int64(1) << rng.integers(0, n_hp, (2, N))
        keys = _keys_from_codes(pick ^ flips, n_hp, rng)
        assert fast.add_frame(keys).tolist() == ref.add_frame(keys.numpy())
    for h in range(2):
        assert fast.head_codes(h).tolist() == ref.codes[h]
        assert fast.head_counts(h).tolist() == ref.head_counts(h)
        assert np.array_equal(fast.head_centroids(h).numpy(), ref.head_centroids(h))
        assert [fast.members(h, c) for c in range(len(ref.members[h]))] == ref.members[h]


def test_clustering_tie_and_in_frame_rules():
    """Hand-made codes: nearest beats first, ties -> lowest index, an old cluster beats an in-frame one at equal
    distance, an in-frame cluster wins when strictly nearer, distance == Th_hp opens a new cluster."""
    rng = np.random.default_rng(0)
    fast, ref = _eye_table(8, 3, n_heads=1)
    frames = [[0b0000_0000, 0b1111_0000],  # opens clusters 0 and 1
              [0b0000_0011,   # d(c0)=2 < 3 -> 0
               0b0011_0000,   # d(c0)=2, d(c1)=2: tie -> the lower index, 0
               0b0000_0111,   # d(c0)=3 == Th_hp (strict <), d(c1)=7 -> opens cluster 2 in this frame
               0b0000_1111,   # d(c0)=4, d(c1)=8, d(c2)=1: the in-frame cluster is strictly nearer -> 2
               0b1111_0011]]  # d(c0)=6, d(c1)=2, d(c2)=5 -> 1
    for codes in frames:
        keys = _keys_from_codes(np.array([codes]), 8, rng)
        assert fast.add_frame(keys).tolist() == ref.add_frame(keys.numpy())
    assert fast.assignment.tolist() == [[0, 1, 0, 0, 2, 2, 1]]
    assert fast.head_codes(0).tolist() == [0b0000_0000, 0b1111_0000, 0b0000_0111]


def _stream_both(keys: torch.Tensor, cfg: ReSVConfig, frame_len: int = 11):
    fast = HashClusterTable(keys.shape[0], keys.shape[2], cfg, layer=2)
    ref = HashClusterTableRef(keys.shape[0], keys.shape[2], cfg, layer=2)
    for a in range(0, keys.shape[1], frame_len):
        k = keys[:, a:a + frame_len]
        pos = torch.arange(a, a + k.shape[1])
        assert fast.add_frame(k, pos).tolist() == ref.add_frame(k.numpy(), pos.tolist())
    return fast, ref


def _check_select(q, fast, ref, cfg, quant_bits=None, candidates=None):
    got = select_tokens(q, fast, cfg=cfg, quant_bits=quant_bits, candidates=candidates)
    exp = select_tokens_ref(q.numpy(), ref, cfg=cfg, quant_bits=quant_bits)
    if candidates is not None:
        cs = set(candidates.tolist())
        exp = [[p for p in e if p in cs] for e in exp]
    assert [i.tolist() for i in got.indices] == exp
    return got


@pytest.mark.parametrize("cfg", [ReSVConfig(), ReSVConfig(th_hp=4), ReSVConfig(th_r_wics=0.05),
                                 ReSVConfig(granularity="layer"), ReSVConfig(hash_mode="concat")],
                         ids=["default", "th4", "ratio0.05", "layer", "concat"])
def test_fast_select_equals_reference_on_many_clusters(cfg):
    """Hundreds of clusters per head (the bucketed WiCSum path), with and without the DRE's 16-bit weights."""
    from vrex_lib.resv.analysis import drifting_keys

    keys = torch.cat(list(drifting_keys(40, 3, 11, 16, rho=0.9, noise=0.6, seed=4)), 1)  # [3, 440, 16]
    fast, ref = _stream_both(keys, cfg)
    assert int(fast.n_clusters.max()) > 64
    q = torch.randn(9, 11, 16, generator=torch.Generator().manual_seed(5)) * 2
    for qb in (None, 16):
        _check_select(q, fast, ref, cfg, qb)
    _check_select(q, fast, ref, cfg, candidates=torch.arange(30, 400))
    _check_select(q, fast, ref, cfg, candidates=torch.arange(0, 440, 3))


def test_fast_path_equals_reference_on_model_keys(tiny):
    """Post-RoPE keys and queries of a real (smoke-profile) model forward over 330 tokens."""
    from vrex_lib.keys import capture_qkv

    ids = torch.randint(3, tiny.llm.config.vocab_size, (330,), generator=torch.Generator().manual_seed(0))
    rec = capture_qkv(tiny.llm, input_ids=ids, layers=[1])
    q, k, _ = rec[1]
    for cfg in (ReSVConfig(), ReSVConfig(th_hp=10)):
        fast, ref = _stream_both(k, cfg)
        for qb in (None, 16):
            _check_select(q[:, -11:].contiguous(), fast, ref, cfg, qb, candidates=torch.arange(4, 319))


@pytest.mark.slow
def test_fast_path_equals_reference_on_smollm2_keys():
    """The same on SmolLM2-135M (the default profile's LLM), layer 5, over the shipped public-domain text."""
    from vrex_lib.keys import capture_qkv
    from vrex_lib.llm_weights import load_smollm2
    from vrex_lib.resv.analysis import load_text_ids

    model, tok = load_smollm2()
    ids = load_text_ids(tok, max_tokens=264)
    q, k, _ = capture_qkv(model, input_ids=ids, layers=[5])[5]
    cfg = ReSVConfig()
    fast, ref = _stream_both(k, cfg)
    for qb in (None, 16):
        _check_select(q[:, -11:].contiguous(), fast, ref, cfg, qb, candidates=torch.arange(8, 253))


def test_single_thread_runs_one_thread_and_restores_the_counts():
    """resv/threads.py: torch's pool and NumPy's OpenBLAS (when reachable) run one thread inside, as before after."""
    from vrex_lib.resv.threads import openblas_threads, single_thread

    before_torch, before_blas = torch.get_num_threads(), openblas_threads()
    torch.set_num_threads(2)
    try:
        with single_thread():
            assert torch.get_num_threads() == 1 and openblas_threads() in (None, 1)
        assert torch.get_num_threads() == 2 and openblas_threads() == before_blas
    finally:
        torch.set_num_threads(before_torch)
