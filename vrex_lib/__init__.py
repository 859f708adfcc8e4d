"""vrex: an open, runnable reproduction of V-Rex (HPCA 2026, arXiv 2512.12284).

Layers (imports point down only):
    report / paper                         -- paper-vs-reproduced tables, the paper's printed numbers
    perf / estimate / hw                   -- simulator, energy-area estimator, MyHDL DRE
    runtime / retrieval / resv             -- streaming video LLM, retrieval policies, ReSV itself
    coin / video / config                  -- data, frames, configuration
"""
__version__ = "0.1.0"
