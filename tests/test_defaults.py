"""One source for each default the runtime shares: the KVMU capacity is RuntimeConfig.kv_capacity."""
from __future__ import annotations

from vrex_lib.config import RuntimeConfig
from vrex_lib.eval.cli import _parser
from vrex_lib.runtime.kvstore import KVStore


def test_kv_capacity_default_has_one_source(monkeypatch):
    assert KVStore(2, 2, 4).capacity == RuntimeConfig().kv_capacity
    assert KVStore(2, 2, 4, capacity=100).capacity == 100
    # a changed default reaches the store and the CLI: neither keeps its own copy of the number
    monkeypatch.setattr(RuntimeConfig, "kv_capacity", 1234)
    assert KVStore(2, 2, 4).capacity == 1234
    assert _parser().get_default("kv_capacity") == 1234
