"""vrex: an open, runnable reproduction of V-Rex (HPCA 2026, arXiv 2512.12284).

Library layers, top to bottom (a module imports only from its own layer or the layers below it; checked by
tests/test_layers.py against every import, and the README shows the same diagram):

```
notebook, envcheck, dse, live       notebook set-up; what this machine can run; design-space exploration;
                                    any video streamed live
claims                              which measured number is held against which printed one, and why a
                                    row FAILs (one module per notebook)
perf, estimate, report              performance simulator; energy/area estimator (cited constants);
                                    paper-vs-reproduced tables, figures and REPORT.md
accuracy, eval, workload, streams, longctx
                                    measurement runners: COIN evaluation, accuracy study, workload file,
                                    long-context retrieval study
hw                                  MyHDL DRE (HCU, WTU, KVMU), timing, Verilog/yosys verification
runtime, retrieval                  streaming video LLM + hierarchical KV store; one policy per method
resv, keys, selection               ReSV (hash bits, HC table, WiCSum); post-RoPE Q/K capture; Selection
coin, video, llm_weights            COIN annotations/tasks/metric; frame decoding; offline LLM weights
paper, config, profiles, methods, choices, memtech, _io
                                    the paper's printed numbers; every default; the profile records; the
                                    method table; the open choices and their ranges; one record per memory
                                    technology; atomic file writes
```
"""
__version__ = "1.1.0"

#: The layers of the diagram above, top to bottom. A name not (yet) present in the package is allowed here.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("notebook", "envcheck", "dse", "live"),
    ("claims",),
    ("perf", "estimate", "report"),
    ("accuracy", "eval", "workload", "streams", "longctx"),
    ("hw",),
    ("runtime", "retrieval"),
    ("resv", "keys", "selection"),
    ("coin", "video", "llm_weights"),
    ("paper", "config", "profiles", "methods", "choices", "memtech", "_io"),
)
