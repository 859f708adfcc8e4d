"""ReSV's mechanism instruments (vrex_lib.resv.mechanism) and the re-scoring variant (vrex_lib.resv.rescore) on
constructed keys, where the answer is known."""
import numpy as np
import pytest
import torch

from vrex_lib.config import ReSVConfig
from vrex_lib.resv import HashClusterTable
from vrex_lib.resv.mechanism import always_attended_share, dilution, token_report
from vrex_lib.resv.rescore import cluster_radius, rescore_select

D = 16


def _keys(n_filler: int = 40, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Filler keys near one direction, one unique key (the last) orthogonal to it, and a query on the unique key."""
    g = torch.Generator().manual_seed(seed)
    u = torch.zeros(D)
    u[0] = 4.0
    filler = u + 0.05 * torch.randn(n_filler, D, generator=g)
    unique = torch.zeros(1, D)
    unique[0, 1] = 8.0
    keys = torch.cat([filler, unique])[None]                     # [1, S, D]
    q = torch.zeros(1, 1, D)
    q[0, 0, 1] = 8.0
    return keys, q


def _table(keys: torch.Tensor, th_hp: int) -> HashClusterTable:
    t = HashClusterTable(1, D, ReSVConfig(th_hp=th_hp))
    t.add_frame(keys)
    return t


def test_unique_key_in_large_cluster_is_diluted():
    keys, q = _keys()
    t = _table(keys, th_hp=33)  # any distance of 32 bits is < 33: one cluster holds everything
    assert int(t.n_clusters[0]) == 1
    [row] = token_report(q, keys, t, 0, [keys.shape[1] - 1])
    assert row.cluster_size == keys.shape[1]
    assert row.own_score[0] > row.centroid_score[0] + 5.0   # the key scores far above its centroid
    assert row.dilution[0] > 10.0                           # so count x exp(centroid) underestimates the cluster
    # by the exact ratio of the definition
    s = (q[0] @ keys[0].double().T.float()).double() / D ** 0.5
    c = keys[0].double().mean(0)
    want = torch.exp(s - s.max()).sum() / (keys.shape[1] * torch.exp((q[0, 0].double() @ c) / D ** 0.5 - s.max()))
    assert row.dilution[0] == pytest.approx(float(want), rel=1e-6)


def test_singletons_are_estimated_exactly():
    keys, q = _keys(8)
    t = _table(keys, th_hp=0)  # a strict distance < 0 never joins: every token is its own cluster
    assert int(t.n_clusters[0]) == keys.shape[1]
    np.testing.assert_allclose(dilution(q, keys, t, 0), 1.0, rtol=1e-12)


def test_always_attended_share_rises_with_dilution():
    keys, q = _keys()
    S = keys.shape[1]
    cand = torch.arange(1, S)  # position 0 is the sink
    sink = keys.clone()
    sink[0, 0] = torch.zeros(D)
    sink[0, 0, 1] = 8.0  # the sink scores like the unique key
    t = _table(sink, th_hp=33)
    merged = always_attended_share(q, sink, t, 0, cand, ratio=0.3)
    single = always_attended_share(q, sink, _table(sink, th_hp=0), 0, cand, ratio=0.3)
    # exactly: sink and unique key share the mass; estimated through one cluster: the sink is 1 of S members
    assert merged["exact"][0] == pytest.approx(0.5, abs=0.01)
    assert merged["estimated"][0] == pytest.approx(1 / S)
    assert single["estimated"][0] == pytest.approx(single["exact"][0], rel=1e-9)
    assert bool(merged["one_cluster"][0])          # one cluster: WiCSum stops there
    assert bool(single["one_cluster"][0])          # the sink alone holds half > 0.3 of the total


def test_cluster_radius_is_the_largest_member_distance():
    k = np.array([[0.0, 0.0], [2.0, 0.0], [5.0, 5.0]])
    cen = np.array([[1.0, 0.0], [5.0, 5.0]])
    np.testing.assert_allclose(cluster_radius(k, cen, np.array([0, 0, 1])), [1.0, 0.0])


def test_rescore_with_the_whole_shortlist_finds_the_unique_key():
    keys, q = _keys()
    S = keys.shape[1]
    cand = torch.arange(1, S - 2)  # sink 0 and the two newest tokens are always attended
    keys2 = keys.clone()
    keys2[0, [S - 1, 5]] = keys2[0, [5, S - 1]]  # move the unique key among the candidates (position 5)
    t = _table(keys2, th_hp=33)
    idx, st = rescore_select(q, keys2, t, cand, ratio=0.3, shortlist=1.0)
    assert idx[0].tolist() == [5]
    assert st["shortlist_keys"] == cand.numel()
    with pytest.raises(ValueError, match="shortlist"):
        rescore_select(q, keys2, t, cand, ratio=0.3, shortlist=0.0)
    with pytest.raises(ValueError, match="rank"):
        rescore_select(q, keys2, t, cand, ratio=0.3, shortlist=0.5, rank="nope")


def test_token_report_refuses_a_position_the_table_lacks():
    keys, q = _keys(4)
    with pytest.raises(ValueError, match="not in the HC table"):
        token_report(q, keys, _table(keys, 7), 0, [99])
