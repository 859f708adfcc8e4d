"""Every parameter of notebooks 06 and 08 is checked before ``setup()`` (one line naming it), and the config
checks behind ``--method-kwargs`` (ReSVConfig's fields) and ``param_int_list``."""
from __future__ import annotations

import json

import pytest

from vrex_lib.config import MAX_HASH_BITS, ParamError, ReSVConfig, param_int_list


def _cells(repo, nb: str) -> tuple[str, str]:
    """(the parameters cell, the check cell without its final ``ctx = setup(...)`` line) of a notebook."""
    cells = json.loads((repo / "notebooks" / f"{nb}.ipynb").read_text())["cells"]
    params = next("".join(c["source"]) for c in cells if "parameters" in c.get("metadata", {}).get("tags", []))
    check = next("".join(c["source"]) for c in cells if "ctx = setup(" in "".join(c["source"]))
    body, last = check.rstrip().rsplit("\n", 1)
    assert last.startswith("ctx = setup("), "the check cell must end with setup(): nothing runs before the checks"
    return params, body


def _run_checks(repo, nb: str, **overrides) -> None:
    params, body = _cells(repo, nb)
    ns: dict = {}
    exec(params, ns)
    ns.update(overrides)
    exec(body, ns)


CASES = [
    ("06_performance", dict(PROFILE="default full"), "PROFILE='default full' is not one of smoke, default, full"),
    ("06_performance", dict(RESULTS_DIR=3), "RESULTS_DIR=3 is not a string"),
    ("06_performance", dict(WORKLOAD_FILE="/nonexistent/w.json"), "WORKLOAD_FILE='/nonexistent/w.json' does not exist"),
    ("06_performance", dict(WORKLOAD_FILE="/"), "WORKLOAD_FILE='/' is not an existing file"),
    ("06_performance", dict(EXTRAPOLATION="linear"), "EXTRAPOLATION='linear' is not one of hold, loglog-fit"),
    ("08_design_space", dict(PROFILE="huge"), "PROFILE='huge' is not one of"),
    ("08_design_space", dict(KV_LEN_SIM=-5), "KV_LEN_SIM=-5 must be >= 0"),
    ("08_design_space", dict(KV_LEN_SIM="abc"), "KV_LEN_SIM='abc' is not an integer"),
    ("08_design_space", dict(KV_LEN_SIM=2.5), "KV_LEN_SIM=2.5 is not an integer"),
    ("08_design_space", dict(SHADOW_KV="300,abc"), "SHADOW_KV='300,abc' has 'abc', which is not a whole number"),
    ("08_design_space", dict(SHADOW_KV="300,-1"), "SHADOW_KV='300,-1' has -1, which is not >= 1"),
    ("08_design_space", dict(SHADOW_KV=0), "SHADOW_KV=0 must be >= 1"),
    ("08_design_space", dict(SHADOW_KV=True), "SHADOW_KV=True is not a string"),
    ("08_design_space", dict(LLM_PATH="/nonexistent"), "LLM_PATH='/nonexistent' does not exist"),
    ("08_design_space", dict(VISION_PATH="/tmp"), "VISION_PATH='/tmp' is used only by the full profile"),
    ("08_design_space", dict(CONNECTOR_PATH="/tmp"), "CONNECTOR_PATH='/tmp' is used only by the full profile"),
    ("08_design_space", dict(PROFILE="full"), "LLM_PATH='' is required by the full profile"),
]


@pytest.mark.parametrize("nb, params, named", CASES)
def test_notebook_parameter_checks_name_the_parameter(repo, nb, params, named):
    with pytest.raises(ParamError) as e:
        _run_checks(repo, nb, **params)
    assert named in str(e.value) and "\n" not in str(e.value), str(e.value)


@pytest.mark.parametrize("nb, params", [
    ("06_performance", {}), ("06_performance", dict(EXTRAPOLATION="loglog-fit")),
    ("08_design_space", {}), ("08_design_space", dict(KV_LEN_SIM=4096, SHADOW_KV="1000, 2000")),
    ("08_design_space", dict(SHADOW_KV=1000)),  # papermill's -p SHADOW_KV 1000 arrives as an int
])
def test_valid_notebook_parameters_pass(repo, nb, params):
    _run_checks(repo, nb, **params)


@pytest.mark.slow
@pytest.mark.parametrize("nb, params, named", [
    ("02_resv_algorithm", dict(VIDEO="/nonexistent.mp4"), "VIDEO='/nonexistent.mp4' does not exist"),
    ("03_accuracy", dict(N_SAMPLES="abc"), "N_SAMPLES='abc' is not an integer"),
    ("03_accuracy", dict(N_SAMPLES=-1), "N_SAMPLES=-1 must be >= 0"),
    ("03_accuracy", dict(FRESH="false"), "FRESH='false' is not a boolean"),
    ("06_performance", dict(EXTRAPOLATION="linear"), "EXTRAPOLATION='linear' is not one of"),
    ("08_design_space", dict(SHADOW_KV="300,abc"), "SHADOW_KV='300,abc' has 'abc'"),
])
def test_papermill_stops_at_the_parameter_check(repo, tmp_path, nb, params, named):
    papermill = pytest.importorskip("papermill")
    res = tmp_path / "results"
    with pytest.raises(papermill.PapermillExecutionError) as e:
        papermill.execute_notebook(str(repo / "notebooks" / f"{nb}.ipynb"), str(tmp_path / "out.ipynb"),
                                   parameters=dict(PROFILE="smoke", RESULTS_DIR=str(res), **params),
                                   kernel_name="python3", cwd=str(repo / "notebooks"), progress_bar=False)
    assert e.value.ename == "ParamError" and named in e.value.evalue
    assert not res.exists()  # refused before setup() made the results folder


def test_param_int_list():
    assert param_int_list("SHADOW_KV", "") == () and param_int_list("SHADOW_KV", " 1000 , 5000") == (1000, 5000)
    assert param_int_list("SHADOW_KV", 2000.0, minimum=1) == (2000,)
    for bad in ("1000,,2000", "1e3", "12.5", None, [1000]):
        with pytest.raises(ParamError, match="SHADOW_KV"):
            param_int_list("SHADOW_KV", bad, minimum=1)


@pytest.mark.parametrize("field, value, named", [
    ("n_hp", 0, "n_hp (N_hp, hash bits) must be an integer in [1, 64]"),
    ("n_hp", 65, "in [1, 64], got 65"),
    ("n_hp", True, "got True"),
    ("th_hp", -1, "th_hp (Th_hp, Hamming threshold) must be an integer >= 0"),
    ("th_r_wics", 7, "th_r_wics (Th_r-wics) must be a number in [0, 1], got 7"),
    ("th_r_wics", float("nan"), "got nan"),
    ("th_r_wics", "0.3", "got '0.3'"),
    ("granularity", "head", "granularity must be one of 'kv_head', 'q_head', 'layer'"),
    ("hash_mode", "both", "hash_mode must be one of"),
    ("code_rule", "median", "code_rule must be one of"),
    ("score", None, "score must be one of"),
    ("seed", -3, "seed must be an integer >= 0"),
])
def test_resv_config_checks_every_field(field, value, named):
    with pytest.raises(ValueError) as e:
        ReSVConfig(**{field: value})
    assert str(e.value).startswith("ReSVConfig: ") and named in str(e.value)
    with pytest.raises(ValueError, match=field):
        ReSVConfig().replace(**{field: value})  # a sweep's replace() is checked too


def test_resv_config_edges_stay_valid():
    import numpy as np

    from vrex_lib.resv.hashing import MAX_BITS

    assert MAX_HASH_BITS == MAX_BITS  # the packing limit the check names is the hashing's own
    for cfg in (ReSVConfig(n_hp=1, th_hp=0, th_r_wics=0.0), ReSVConfig(n_hp=64, th_hp=65, th_r_wics=1.0),
                ReSVConfig(n_hp=np.int64(16), th_r_wics=np.float32(0.5)), ReSVConfig(granularity="q_head")):
        assert cfg.n_hp >= 1


def test_an_old_option_name_is_refused_with_the_new_one():
    """`ratio` meant Th_r-wics for ReSV and the kept fraction of blocks for ReKV: each is refused by its new name."""
    from vrex_lib.retrieval import make_policy

    with pytest.raises(ValueError, match="ReSVConfig: 'ratio' is not an option; use th_r_wics"):
        ReSVConfig(ratio=0.5)
    with pytest.raises(ValueError, match="use th_r_wics"):
        ReSVConfig().replace(ratio=0.5)
    with pytest.raises(ValueError, match="'ratio' is not an option; use th_r_wics"):
        make_policy("resv", ratio=0.5)
    with pytest.raises(ValueError, match="'ratio' is not an option; use topk_frac"):
        make_policy("rekv", ratio=0.5)
    assert make_policy("resv", th_r_wics=0.5).cfg.th_r_wics == 0.5
    assert make_policy("rekv", topk_frac=0.25).topk_frac == 0.25
