# vrex -- reproduce V-Rex (HPCA 2026). `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON    ?= python3
VENV      ?= .venv
PY        := $(VENV)/bin/python
PROFILE   ?= default
RESULTS   ?= results
NOTEBOOK_DIR ?= notebooks
# Notebooks run in parallel where their inputs allow (each uses one torch thread; see the dependencies below).
JOBS      ?= 2
# Extra papermill arguments, e.g. PAPERMILL_ARGS='-p COIN_ROOT /data/coin -p CHECKPOINT_DIR /ckpt' for PROFILE=full.
PAPERMILL_ARGS ?=

# The profiles are the records of vrex_lib/profiles.py (standard library only, so this works before the venv exists);
# when it cannot be read, PROFILES is empty and check-profile says so.
PROFILES  := $(shell $(PYTHON) -c 'import importlib.util as u, sys; s = u.spec_from_file_location("vrex_profiles", "vrex_lib/profiles.py"); m = u.module_from_spec(s); sys.modules[s.name] = m; s.loader.exec_module(m); print(*m.PROFILES)' 2>/dev/null)
# Exact: one word, one of PROFILES ('default full' is not a profile).
PROFILE_OK := $(and $(filter 1,$(words $(PROFILE))),$(filter $(PROFILES),$(PROFILE)))
# A value quoted for the shell (RESULTS and PROFILE reach scripts as one argument, whatever they hold).
shq = '$(subst ','\'',$(1))'
comma := ,
empty :=
space := $(empty) $(empty)
# JupyterLab's port for `make lab` (bound to localhost only).
LAB_PORT  ?= 8888

NOTEBOOKS := $(sort $(wildcard $(NOTEBOOK_DIR)/[0-9][0-9]_*.ipynb))
EXECUTED  := $(patsubst $(NOTEBOOK_DIR)/%.ipynb,$(RESULTS)/executed/%.ipynb,$(NOTEBOOKS))
LIB_SRC   := $(shell find vrex_lib -name '*.py' 2>/dev/null)
# What the notebooks were last run with (PROFILE and PAPERMILL_ARGS): rewritten only when it changes, so a
# changed parameter reruns every notebook and an unchanged one reruns nothing (docs/DECISIONS.md D71).
PARAMS_STAMP := $(RESULTS)/.params
# Rules that must follow a profile change depend on this name (the stamp above records the profile too).
PROFILE_STAMP := $(PARAMS_STAMP)
RUN_LOCK  := $(RESULTS)/.lock
APT_TOOLS := iverilog verilator yosys ffmpeg g++

.PHONY: help setup data test test-all smoke reproduce _reproduce check-profile report lab clean bench cacti release FORCE

help: ## Show this help
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*?## "}{printf "  \033[1m%-10s\033[0m %s\n",$$1,$$2}'
	@echo "  Variables: PROFILE=$(subst $(space),|,$(PROFILES)) (now: $(PROFILE)), RESULTS=$(RESULTS), PAPERMILL_ARGS=..., LONG=1 (workload to 40K tokens)"
	@echo "  One notebook: make $(RESULTS)/executed/06_performance.ipynb (any NN_name; what it reads runs first)"

setup: $(VENV)/.ok data ## Install system tools (apt) and build .venv from environment.yml, then the COIN fixture

$(VENV)/.ok: environment.yml requirements.txt requirements-nodeps.txt pyproject.toml
	@missing=""; for t in $(APT_TOOLS); do command -v $$t >/dev/null || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ]; then \
	  echo "setup: installing system tools:$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	  elif command -v sudo >/dev/null; then sudo apt-get update -q && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	  else echo "setup: please install$$missing (apt-get install$$missing) and rerun"; exit 1; fi; fi
	$(PYTHON) scripts/env_to_requirements.py environment.yml | diff -q - requirements.txt >/dev/null || \
	  { echo "setup: requirements.txt is out of date with environment.yml: run '$(PYTHON) scripts/env_to_requirements.py > requirements.txt'"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -r requirements-nodeps.txt
	$(PY) -m pip install -q --no-deps -e .
	$(PY) -m vrex_lib.resv.warm
	@# CACTI's binary ships prebuilt in the zigzag-dse wheel; rebuild it with its own makefile where it does not run.
	$(PY) -m vrex_lib.estimate cacti check || $(PY) -m vrex_lib.estimate cacti rebuild
	touch $@

cacti: $(VENV)/.ok ## Rebuild the CACTI 7 binary of the zigzag-dse wheel with its makefile (needs g++)
	$(PY) -m vrex_lib.estimate cacti rebuild

data: $(VENV)/.ok data/coin_mini/COIN.json ## Build the real-footage COIN-format fixture (data/coin_mini)

data/coin_mini/COIN.json: data/make_coin_mini.py | $(VENV)/.ok
	$(PY) data/make_coin_mini.py

# Two workers sharing the tests one by one (`worksteal`: each starts on half of the suite, in file order, and an idle
# worker takes half of what the other has left), so neither waits while the other runs the heavy hardware files;
# a module fixture (the tiny model) is built once per worker that runs a test of its file (docs/DECISIONS.md D373).
# TEST_WORKERS=0 runs the suite in this process. `make test` leaves out the tests marked `long` (whole chains: the
# smoke profile's make reproduce, RTL runs and synthesis, the README's commands); `make test-all`, which CI runs,
# runs every test (docs/DECISIONS.md D366).
TEST_WORKERS ?= 2
TEST_DIST ?= worksteal
PYTEST = $(PY) -m pytest -q -ra --durations=20 -n $(TEST_WORKERS) --dist $(TEST_DIST)
test: $(VENV)/.ok data ## Run the unit tests (all but the `long` whole-chain tests), slowest 20 printed
	$(PYTEST) -m "not long"
	@echo "test: the tests marked 'long' (whole chains, minutes) were left out; make test-all runs every test"
	@$(PY) -m vrex_lib.envcheck  # the machine's calibration line, so the time above compares across machines (D364)

test-all: $(VENV)/.ok data ## Run every test: the unit tests + the whole chains (every notebook in the smoke profile, RTL, synthesis); what CI runs
	$(PYTEST)
	@$(PY) -m vrex_lib.envcheck

smoke: ## Execute every notebook in the smoke profile into results/smoke
	$(MAKE) reproduce PROFILE=smoke RESULTS=$(RESULTS)/smoke

# Checked in this order before anything is written: PROFILE and VREX_THREADS, the papermill parameters (names,
# types and choices), the results folder (created and marked, so `make clean` may empty it; docs/DECISIONS.md
# D170). Ctrl-C ends it with one line; the report stays marked stale (D328).
INTERRUPTED_NOTE = $(RESULTS)/REPORT.md stays marked stale; the finished notebooks are kept and \
  `make reproduce` continues from them
reproduce: check-profile | $(VENV)/.ok data ## Execute every notebook in order (PROFILE, default 'default') and write results/REPORT.md
	@VREX_CHECK_PROFILE=$(call shq,$(PROFILE)) $(PY) scripts/check_params.py $(NOTEBOOK_DIR) $(PAPERMILL_ARGS)
	@$(PYTHON) scripts/results_folder.py prepare $(call shq,$(RESULTS))
	@$(if $(DRY_RUN),,$(PYTHON) scripts/locked.py $(RUN_LOCK) "make reproduce (PROFILE=$(PROFILE), RESULTS=$(RESULTS))" \
	  --interrupted $(call shq,$(INTERRUPTED_NOTE)) --) $(MAKE) --no-print-directory -j$(JOBS) _reproduce

# The work of `reproduce`, run while holding $(RUN_LOCK): a second `make reproduce` on the same RESULTS is refused
# instead of interleaving with this one.
# Make walks this list, starting each target it can as a slot frees and passing over (until its next walk) those
# whose prerequisites are still running. By the times in benchmarks/TIMES.md, the workload measurement and 03 (which
# reads no other output) take the two slots first; 04 and then 05, which read no workload, fill 03's slot while the
# measurement runs, and 09, the longest of those reading the workload, follows the measurement (D368, D502).
NB_ORDER := 03 09 04 08 05 02 06 01 00
EXEC_ORDERED := $(foreach n,$(NB_ORDER),$(filter $(RESULTS)/executed/$(n)_%,$(EXECUTED)))
EXEC_ORDERED += $(filter-out $(EXEC_ORDERED),$(EXECUTED))
_reproduce: $(EXEC_ORDERED)
	$(PY) -m vrex_lib.report --results $(RESULTS) --notebooks $(NOTEBOOK_DIR)
	@-$(PY) benchmarks/times.py --results $(RESULTS) --json $(RESULTS)/times.json
	@echo "reproduce: done -- see $(RESULTS)/REPORT.md and $(RESULTS)/report.html"

# Validated before anything is written or deleted: a typo never discards the results of a valid profile, and a
# VREX_THREADS the notebooks cannot use fails here rather than inside every notebook.
PROFILE_ERR = make: PROFILE=$(PROFILE) is not a profile; use PROFILE=$(if $(PROFILES),$(subst $(space),$(comma) ,$(PROFILES)),<one of vrex_lib/profiles.py's, which $(PYTHON) could not read>) (nothing was changed)
check-profile:
	@$(if $(PROFILE_OK),:,printf '%s\n' $(call shq,$(PROFILE_ERR)) >&2; exit 2)
	@case "$${VREX_THREADS-}" in ""|[1-9]|[1-9][0-9]|[1-9][0-9][0-9]) ;; \
	  *) printf '%s\n' "make: VREX_THREADS=$$VREX_THREADS is not a torch thread count (a whole number 1-999); unset it or use VREX_THREADS=1 (nothing was changed)" >&2; \
	     exit 2;; esac
	@case $(call shq,$(JOBS)) in [1-9]|[1-9][0-9]) ;; \
	  *) printf '%s\n' "make: JOBS=$(JOBS) is not a number of notebooks to run at a time (a whole number 1-99); e.g. JOBS=2 (nothing was changed)" >&2; \
	     exit 2;; esac

# The stamps (scripts/stamp.py) are rewritten only when what they record changed. Their recipes run even under
# `make -n` (the `+`) but then write nothing (--dry: the results folder stays byte-identical, docs/DECISIONS.md
# D441); a stamp that a run would change gets one more, plain, recipe line under -n (STAMP_CHANGED, read while
# parsing), so make counts it as remade and the dry run shows what would rerun.
DRY_RUN := $(findstring n,$(firstword -$(MAKEFLAGS)))
STAMP = $(PY) scripts/stamp.py $(1) $(call shq,$(2)) $(if $(DRY_RUN),--dry,)
STAMP_CHANGED = $(if $(DRY_RUN),$(shell $(PY) scripts/stamp.py $(1) x --check $(2) 2>/dev/null),)
PARAMS_TEXT = PROFILE=$(PROFILE) PAPERMILL_ARGS=$(PAPERMILL_ARGS)
PARAMS_FILES = --param-file WORKLOAD_FILE $(NOTEBOOK_DIR) -- $(call shq,$(PARAMS_TEXT))
$(PARAMS_STAMP): FORCE check-profile | $(VENV)/.ok data
	+@VREX_CHECK_PROFILE=$(call shq,$(PROFILE)) $(PY) scripts/check_params.py $(NOTEBOOK_DIR) $(PAPERMILL_ARGS)
	+@$(call STAMP,$@,reproduce: notebook parameters changed to '$(PARAMS_TEXT)' (or the -p WORKLOAD_FILE file): every notebook reruns) $(PARAMS_FILES)
ifneq ($(call STAMP_CHANGED,$(PARAMS_STAMP),$(PARAMS_FILES)),)
	@: the notebook parameters changed
endif

FORCE:

# What the COIN-reading notebooks (01, 03) read besides their parameters: the SHA-256 of COIN.json and of the listing
# of its videos folder (scripts/coin_stamp.py), rewritten only when it changes, like the stamp above (D71).
COIN_STAMP := $(RESULTS)/.coin
COIN_TEXT = $(PY) scripts/coin_stamp.py $(call shq,$(PROFILE)) $(PAPERMILL_ARGS)
$(COIN_STAMP): FORCE | $(PARAMS_STAMP)
	+@$(COIN_TEXT) | $(call STAMP,$@,reproduce: the COIN annotations or videos changed: the COIN notebooks rerun) --stdin --
ifneq ($(if $(DRY_RUN),$(shell $(COIN_TEXT) 2>/dev/null | $(PY) scripts/stamp.py $(COIN_STAMP) x --check --stdin --),),)
	@: the COIN annotations or videos changed
endif

# Papermill runs a notebook headless (static figures, no widgets or progress bars) and records what it writes
# in its manifest, which `make report` compares with the results (docs/DECISIONS.md D180, D182). The values are
# empty in the recipes of prerequisites ($* is empty there), which inherit target-specific variables.
$(RESULTS)/executed/%.ipynb: export VREX_HEADLESS = $(if $*,1,)
$(RESULTS)/executed/%.ipynb: export VREX_MANIFEST = $(if $*,$(abspath $(RESULTS))/executed/$*.manifest.json,)

# The one line every papermill kernel logs on start ("Kernel is running over TCP without encryption ..."): the kernel
# listens on 127.0.0.1 only; every other line of papermill's stderr is passed on (D463).
KERNEL_NOISE = grep -v --line-buffered 'Kernel is running over TCP without encryption'

# One executed copy per notebook; written to a temp file first so a failing run is never mistaken for done, its
# outputs stored without this machine's absolute paths (scripts/scrub_outputs.py, D329). An interrupt (Ctrl-C)
# removes the temp file and is no failure (D328). The library files a notebook depends on are those it imports
# (notebooks/deps.mk, below).
$(RESULTS)/executed/%.ipynb: $(NOTEBOOK_DIR)/%.ipynb $(PARAMS_STAMP)
	@mkdir -p $(@D)
	@echo "== $< (PROFILE=$(PROFILE))"
	@start=$$(date +%s); run=$(@D)/.$*.running.ipynb; trap 'rm -f "$$run"; exit 130' INT TERM; \
	scrub() { $(PY) scripts/scrub_outputs.py "$$run" $(abspath $(RESULTS)); }; \
	if $(PY) -m papermill $< "$$run" -k python3 --cwd $(NOTEBOOK_DIR) --log-level WARNING --no-progress-bar \
	     -p PROFILE $(PROFILE) -p RESULTS_DIR $(abspath $(RESULTS)) $(PAPERMILL_ARGS) 2> >($(KERNEL_NOISE) >&2); then \
	  scrub && mv "$$run" $@ && rm -f $(@D)/$*.FAILED.ipynb && echo "   $* done in $$(( $$(date +%s) - start )) s"; \
	else \
	  if [ -f "$$run" ] && { scrub; mv "$$run" $(@D)/$*.FAILED.ipynb; }; then \
	    echo "reproduce: notebook $< FAILED (PROFILE=$(PROFILE)); the failing cell is marked in $(@D)/$*.FAILED.ipynb" >&2; \
	  else echo "reproduce: papermill could not start $< (PROFILE=$(PROFILE)): see its message above" >&2; fi; \
	  exit 1; fi

# The retrieval workload at 1K-10K tokens (LONG=1: to 40K), measured once and reused while its inputs_key matches
# (docs/DECISIONS.md D42); the notebooks read it, so they run after it. PROFILE=full needs
# WORKLOAD_ARGS='--llm-path ... --vision-path ... --connector-path ...' (README: "Measuring the workload on a GPU").
# --replace: make owns this file, so a request of another configuration (e.g. LONG=1) replaces it (D200).
# Its arguments (WORKLOAD_ARGS, LONG) are stamped in $(WORKLOAD_STAMP): a change re-measures it, and so reruns the
# notebooks that read it (docs/DECISIONS.md D441).
WORKLOAD_FILE := $(RESULTS)/data/workload_$(PROFILE).json
WORKLOAD_ARGS ?=
WORKLOAD_STAMP := $(RESULTS)/.workload
WORKLOAD_TEXT = -- $(call shq,WORKLOAD_ARGS=$(WORKLOAD_ARGS) LONG=$(LONG))
$(WORKLOAD_STAMP): FORCE | $(PARAMS_STAMP)
	+@$(call STAMP,$@,reproduce: the workload arguments changed (WORKLOAD_ARGS=$(WORKLOAD_ARGS) LONG=$(LONG)): the workload is measured again) $(WORKLOAD_TEXT)
ifneq ($(call STAMP_CHANGED,$(WORKLOAD_STAMP),$(WORKLOAD_TEXT)),)
	@: the workload arguments changed
endif
$(WORKLOAD_FILE): $(WORKLOAD_STAMP) | $(PROFILE_STAMP)
	@mkdir -p $(@D)
	VREX_THREADS=$${VREX_THREADS:-1} $(PY) -m vrex_lib.workload measure --profile $(PROFILE) --out $@ --replace --no-progress $(if $(LONG),--long,) $(WORKLOAD_ARGS)
	@touch $@

# What each notebook reads from another's output, so `-j$(JOBS)` keeps the order that matters: 02/06/08/09 read the
# workload file (03 does not, so it runs beside the measurement), 05 reads 04's yosys summary
# (results/hdl/summary.json), 07 summarises every other notebook.
EXEC_DIR := $(RESULTS)/executed
# The vrex_lib files each notebook and the workload measurement import, directly or through other modules
# (generated by scripts/nb_deps.py; tests/test_make.py keeps it current): a change in perf/ reruns the notebooks
# that use the simulator, not the accuracy study (docs/DECISIONS.md D301). A notebook it does not list (another
# NOTEBOOK_DIR) depends on every library file.
-include notebooks/deps.mk
$(filter-out $(addprefix $(EXEC_DIR)/,$(addsuffix .ipynb,$(NB_DEPS_KNOWN))),$(EXECUTED)): $(LIB_SRC)
$(addprefix $(EXEC_DIR)/,$(addsuffix .ipynb,$(notdir $(basename $(wildcard $(NOTEBOOK_DIR)/0[268]_*.ipynb))))): $(WORKLOAD_FILE)
$(addprefix $(EXEC_DIR)/,$(addsuffix .ipynb,$(notdir $(basename $(wildcard $(NOTEBOOK_DIR)/05_*.ipynb))))): \
  $(addprefix $(EXEC_DIR)/,$(addsuffix .ipynb,$(notdir $(basename $(wildcard $(NOTEBOOK_DIR)/04_*.ipynb)))))
# 09 reads the workload file too: the simulator's measured column beside its own retrieval-demand workload.
$(addprefix $(EXEC_DIR)/,$(addsuffix .ipynb,$(notdir $(basename $(wildcard $(NOTEBOOK_DIR)/09_*.ipynb))))): $(WORKLOAD_FILE)
$(addprefix $(EXEC_DIR)/,$(addsuffix .ipynb,$(notdir $(basename $(wildcard $(NOTEBOOK_DIR)/07_*.ipynb))))): \
  $(filter-out %/07_summary.ipynb,$(EXECUTED))
$(addprefix $(EXEC_DIR)/,$(addsuffix .ipynb,$(notdir $(basename $(wildcard $(NOTEBOOK_DIR)/0[13]_*.ipynb))))): $(COIN_STAMP)

report: ## Rebuild results/REPORT.md and report.html from results/ (exit 1 and a list if notebooks' outputs are missing)
	$(PY) -m vrex_lib.report --results $(RESULTS) --notebooks $(NOTEBOOK_DIR)

# Before anything is rebuilt, the previous REPORT.md / report.html say they are stale; the report step of
# `_reproduce` rewrites them, so a run that fails or is stopped leaves them marked (docs/DECISIONS.md D181).
.PHONY: _report_stale
$(EXECUTED) $(WORKLOAD_FILE): | _report_stale
_report_stale: | $(VENV)/.ok
	@$(PY) -m vrex_lib.report --results $(RESULTS) --mark-stale "a make run started rebuilding these results" \
	  >/dev/null

# The archive of the evaluated state (docs/DECISIONS.md D460): HEAD's source, the default profile's results, their
# SHA-256 sums and the machine's calibration line, into DIST; refused when the results are missing, stale or of
# another profile, or tracked files differ from HEAD.
DIST ?= dist
release: | $(VENV)/.ok ## Pack HEAD's source + the default profile's results with SHA256SUMS into DIST (default dist/)
	$(PY) scripts/release.py --results $(call shq,$(RESULTS)) --notebooks $(call shq,$(NOTEBOOK_DIR)) --out $(call shq,$(DIST))

bench: $(VENV)/.ok ## Run the benchmarks (ratios measured in one run)
	@$(PY) -m vrex_lib.envcheck
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# Jupyter refuses to start as root (containers, AE virtual machines) without --allow-root; the server listens
# on localhost only, so that flag exposes nothing.
LAB_ROOT := $(if $(filter 0,$(shell id -u 2>/dev/null)),--allow-root,)

# The notebooks read the COIN fixture, so it is built first (D76). Checkpoints go to .lab_checkpoints/, never into
# results/ (scripts/lab_config.py, D462).
lab: $(VENV)/.ok data ## Open JupyterLab on the repository (http://127.0.0.1:LAB_PORT, localhost only)
	@p=$(call shq,$(LAB_PORT)); case "$$p" in [1-9]|[1-9][0-9]|[1-9][0-9][0-9]|[1-9][0-9][0-9][0-9]|[1-9][0-9][0-9][0-9][0-9]) \
	  [ "$$p" -le 65535 ] && exit 0;; esac; \
	  printf '%s\n' "make: LAB_PORT=$(LAB_PORT) is not a port number (1-65535); e.g. LAB_PORT=8888" >&2; exit 2
	@echo "lab: JupyterLab at http://127.0.0.1:$(LAB_PORT)/lab (open the URL with the token printed below; Ctrl-C stops it)"
	$(VENV)/bin/jupyter lab --notebook-dir=. --ip=127.0.0.1 --port=$(LAB_PORT) --ServerApp.port_retries=0 \
	  --no-browser --config=scripts/lab_config.py $(LAB_ROOT)

clean: ## Empty RESULTS if it is a results folder (keeps README.md files and its marker) and remove caches
	@$(PYTHON) scripts/results_folder.py clean $(call shq,$(RESULTS))
	find . -name __pycache__ -type d -prune -exec rm -rf {} + ; rm -rf .pytest_cache
