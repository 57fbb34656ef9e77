# xlarank pipelines. `make help` lists the targets. Each step is a real file target, so
# make redoes only what is out of date: frames <- data + feature spec, models <- frames +
# booster spec, metrics <- models + frames.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
XLARANK := $(BIN)/xlarank
DATA ?= data/synth-demo
DEMO_DATA := data/synth-demo
# Outputs are keyed by the dataset's folder name, so `make evaluate DATA=~/data/tpugraphs`
# never mistakes the demo's frames and models for its own.
DATASET ?= $(notdir $(patsubst %/,%,$(DATA)))
FRAMES ?= features/frames/$(DATASET)
TRAINED ?= models/trained/$(DATASET)
REPORTS ?= reports/$(DATASET)
COLLECTIONS := tile-xla layout-xla-default layout-xla-random layout-nlp-default layout-nlp-random
SEED ?= 0
WORKERS ?= 1
# ENGINE=dask runs featurize and train on Dask: the cluster at SCHEDULER, else a local one.
ENGINE ?= local
SCHEDULER ?=
ENGINE_ARGS = --engine $(ENGINE) $(if $(SCHEDULER),--scheduler $(SCHEDULER))
FUZZ_EXAMPLES ?= 3000

.DEFAULT_GOAL := help
.SECONDEXPANSION:
.DELETE_ON_ERROR:
# Frames and models are products in their own right, not intermediates to delete.
.SECONDARY:
.PHONY: help install jax corpus dev demo dask-demo test test-fast lint fuzz bench bench-full features models ensembles evaluate report tune submission bench-publish clean clean-all

help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 18

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	@# A .venv made before xgboost-cpu: both packages write xgboost/, so the CUDA one goes first.
	@if [ "$$(uname)" = Linux ] && $(BIN)/pip show --quiet xgboost 2>/dev/null; then \
	    echo "replacing xgboost (CUDA build) with xgboost-cpu"; \
	    $(BIN)/pip uninstall --quiet --yes xgboost xgboost-cpu; fi
	$(BIN)/pip install --quiet -e .
	touch $@

$(VENV)/.dev-installed: $(VENV)/.installed
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

$(VENV)/.jax-installed: $(VENV)/.installed
	$(BIN)/pip install --quiet -e '.[gnn]'
	touch $@

install: $(VENV)/.installed ## create .venv and install xlarank

jax: $(VENV)/.jax-installed ## install the jax extra (xlarank[gnn]): xlarank measure, corpus, the gnn and gru families, the GNN systems

# Every program of corpus/programs.toml without a record is measured (the timing on CPU
# TIMING_CPU, compiling on every CPU), then corpus/manifest.json is written: a rerun goes
# on where a killed one stopped. Measure on a quiet machine: see docs/xla.md.
TIMING_CPU ?= $(shell $(PYTHON) -c "import os; print(max(os.sched_getaffinity(0)))")
corpus: $(VENV)/.jax-installed ## measure the corpus of real JAX programs on this machine (about an hour on 2 cores)
	$(XLARANK) corpus corpus/programs.toml --out-dir corpus --timing-cpu $(TIMING_CPU)

dev: $(VENV)/.dev-installed ## install xlarank with the test extras

test: lint ## lint, then run the whole test suite on 2 workers (a test module stays on one)
	$(BIN)/python -m pytest -q -n 2 --dist loadscope

test-fast: dev ## the suite without the slow, dask and gnn tests, on 2 workers (58 s on 2 quiet cores with the Numba cache warm)
	$(BIN)/python -m pytest -q -n 2 --dist loadscope -m "not slow and not dask and not gnn"

lint: dev ## ruff over src, tests and bench (settings in pyproject.toml)
	$(BIN)/ruff check src tests bench

fuzz: dev ## long fuzzing of reader, featurizer, model cards and folders, specs, outputs, frames, measured CSVs, tuning records (bytes and fields), saved systems: FUZZ_EXAMPLES per strategy
	HYPOTHESIS_PROFILE=fuzz FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest -q tests/test_fuzz.py \
	    --hypothesis-show-statistics -k "mutations or members or generated or cards or model_folders or spec_files or output_paths or frame_files or measured_files or tuning_records or saved_systems"

# ---------------------------------------------------------------- pipeline
# DATA is a dataset root holding npz/ (real TpuGraphs or `xlarank synth` output).
# Folder mtimes change when files are added or removed there.
data_dir = $(DATA)/npz/$(subst -,/,$(1))/$(2)
spec_of = $(word 1,$(subst /, ,$(1)))
coll_of = $(word 2,$(subst /, ,$(1)))
split_of = $(word 3,$(subst /, ,$(1)))

# features/frames/<spec>/<collection>/<split>.parquet
$(FRAMES)/%.parquet: features/$$(call spec_of,$$*).toml $$(call data_dir,$$(call coll_of,$$*),$$(call split_of,$$*)) | $(VENV)/.installed
	$(XLARANK) featurize $(DATA) --spec $< --collection $(call coll_of,$*) \
	    --split $(call split_of,$*) --workers $(WORKERS) $(ENGINE_ARGS) --out $@

# models/trained/xlarank/<collection>: the default ranker, models/<collection>.toml
$(TRAINED)/xlarank/%/card.json: models/%.toml $(FRAMES)/default/%/train.parquet $(FRAMES)/default/%/valid.parquet
	$(XLARANK) train $(FRAMES)/default/$*/train.parquet --spec $< \
	    --valid $(FRAMES)/default/$*/valid.parquet $(ENGINE_ARGS) --out $(@D)

# models/trained/baseline/<collection>: the config-aggregates peer (run name config-aggregates)
$(TRAINED)/baseline/%/card.json: models/baseline.toml $(FRAMES)/baseline/%/train.parquet
	$(XLARANK) train $(FRAMES)/baseline/$*/train.parquet --spec $< $(ENGINE_ARGS) --out $(@D)

# models/trained/ensemble/<collection>: boosters x seeds, models/ensembles/<collection>.toml
$(TRAINED)/ensemble/%/card.json: models/ensembles/%.toml $(FRAMES)/default/%/train.parquet $(FRAMES)/default/%/valid.parquet
	$(XLARANK) train $(FRAMES)/default/$*/train.parquet --spec $< \
	    --valid $(FRAMES)/default/$*/valid.parquet $(ENGINE_ARGS) --out $(@D)

$(REPORTS)/ensemble/%.csv: $(TRAINED)/ensemble/%/card.json $(FRAMES)/default/%/valid.parquet
	$(XLARANK) evaluate $(FRAMES)/default/$*/valid.parquet --model $(<D) --name ensemble --out $@

# reports/<dataset>/html/<collection>/index.html: plots of the default ranker on valid, beside the peers
$(REPORTS)/html/%/index.html: $(TRAINED)/xlarank/%/card.json $(FRAMES)/default/%/valid.parquet $(FRAMES)/default/%/train.parquet $(TRAINED)/baseline/%/card.json $(FRAMES)/baseline/%/valid.parquet
	$(XLARANK) report $(FRAMES)/default/$*/valid.parquet --model xlarank=$(<D) \
	    --model config-aggregates=$(TRAINED)/baseline/$* \
	    --frame-of config-aggregates=$(FRAMES)/baseline/$*/valid.parquet \
	    --train $(FRAMES)/default/$*/train.parquet --seed $(SEED) --out $(@D)

$(REPORTS)/xlarank/%.csv: $(TRAINED)/xlarank/%/card.json $(FRAMES)/default/%/valid.parquet
	$(XLARANK) evaluate $(FRAMES)/default/$*/valid.parquet --model $(<D) --name xlarank --out $@

$(REPORTS)/baseline/%.csv: $(TRAINED)/baseline/%/card.json $(FRAMES)/baseline/%/valid.parquet
	$(XLARANK) evaluate $(FRAMES)/baseline/$*/valid.parquet --model $(<D) --name config-aggregates --out $@

$(REPORTS)/random/%.csv: $(FRAMES)/default/%/valid.parquet
	$(XLARANK) evaluate $< --random --seed $(SEED) --name random --out $@

features: $(foreach c,$(COLLECTIONS),$(foreach s,train valid test,$(FRAMES)/default/$(c)/$(s).parquet)) ## featurize DATA into features/frames/<dataset>/default

models: $(foreach c,$(COLLECTIONS),$(TRAINED)/xlarank/$(c)/card.json) ## train the five collections' rankers

ensembles: $(foreach c,$(COLLECTIONS),$(REPORTS)/ensemble/$(c).csv) ## train and evaluate the five ensembles (models/ensembles/*.toml)
	$(XLARANK) compare $(REPORTS) --out $(REPORTS)/summary.csv

evaluate: $(foreach r,xlarank baseline random,$(foreach c,$(COLLECTIONS),$(REPORTS)/$(r)/$(c).csv)) ## valid metrics: ranker vs the config-aggregates peer vs random
	$(XLARANK) compare $(REPORTS) --out $(REPORTS)/summary.csv

report: $(foreach c,$(COLLECTIONS),$(REPORTS)/html/$(c)/index.html) ## HTML + PNG report per collection -> reports/<dataset>/html/<collection>/index.html

# Bounded random search for one collection's booster spec; writes models/tuned/<COLL>.toml
# (copy it over models/<COLL>.toml to adopt it). Tune on other data than you report on.
COLL ?= tile-xla
TRIALS ?= 20
tune: $(FRAMES)/default/$(COLL)/train.parquet $(FRAMES)/default/$(COLL)/valid.parquet ## search COLL's spec: TRIALS trials -> models/tuned/COLL.toml
	$(XLARANK) tune $^ --spec models/$(COLL).toml --trials $(TRIALS) --seed $(SEED) \
	    --out models/tuned/$(COLL).toml --log models/tuned/$(COLL).trials.csv

$(REPORTS)/submission.csv: $(foreach c,$(COLLECTIONS),$(TRAINED)/xlarank/$(c)/card.json)
	$(XLARANK) submit $(DATA) --models $(TRAINED)/xlarank --out $@

submission: $(REPORTS)/submission.csv ## competition CSV for the five test folders

# ---------------------------------------------------------------- benchmarks
# Every bench is declared once, in bench/benches.py (its command, what it measures, the
# data it reads); bench/run.py runs a target's benches in that order (`python bench/run.py
# --list` names them, `--only NAME` runs one) and bench/publish.py renders the page.
BENCH_GRAPH := data/bench/npz/layout/xla/random/test/bench_40k.npz

$(BENCH_GRAPH): | $(VENV)/.installed
	$(BIN)/python bench/featurize.py --make-graph $@

DEMO_TRAINED := models/trained/$(notdir $(DEMO_DATA))
DEMO_MODELS := $(foreach c,$(COLLECTIONS),$(DEMO_TRAINED)/xlarank/$(c)/card.json)
bench: $(BENCH_GRAPH) $(DEMO_DATA)/synth.json $(VENV)/.dev-installed ## featurize speed/memory, scoring latency, ablation, engines, quality, in-graph, published systems, real tile kernels, autotune replay -> bench/results/*.json
	$(MAKE) --no-print-directory $(DEMO_MODELS) DATA=$(DEMO_DATA)
	$(MAKE) --no-print-directory $(NOISY_DATA)/synth.json
	$(BIN)/python bench/run.py --target bench
	@echo "bench figures: bench/results/*.json. The page to update is docs/benchmarks.md:" \
	    "'make bench-publish' copies them to bench/published/ and rewrites it."

# docs/benchmarks.md is rendered from bench/published/*.json alone (each stamped with its
# date, commit, machine and command), so it never holds a figure no command produced.
bench-setup: ## time make demo and make test from a fresh clone of HEAD (about 20 min) -> bench/results/setup.json
	$(PYTHON) bench/run.py --target bench-setup

bench-publish: $(VENV)/.installed ## copy bench/results/*.json to bench/published/, rewrite docs/benchmarks.md from them
	$(BIN)/python bench/publish.py

# The whole dataset's size (the `real` synth preset: 13.3M configs, made once into
# data/synth-real, about an hour) end to end: featurize, train, evaluate, submit.
FULL_PRESET ?= real
bench-full: $(VENV)/.installed ## the real-sized synthetic dataset end to end: time and peak RSS per step -> bench/results/full.json
	$(BIN)/python bench/run.py --target bench-full --set preset=$(FULL_PRESET)

# The demo's sizes, measured as noisily as the real layout record (repeat tau 0.36; the
# demo's files draw 0.6-0.95): bench/ingraph.py's noisy rows.
NOISY_DATA := data/synth-demo-noisy
$(NOISY_DATA)/synth.json: $(wildcard src/xlarank/data/synth/*.py) | $(VENV)/.installed
	rm -rf $(NOISY_DATA)
	$(XLARANK) synth $(NOISY_DATA) --preset demo --seed $(SEED) --repeat-tau 0.3,0.45

# ---------------------------------------------------------------- demo
# Made again when the generator changes, so demo data always follows its cost model.
$(DEMO_DATA)/synth.json: $(wildcard src/xlarank/data/synth/*.py) | $(VENV)/.installed
	rm -rf $(DEMO_DATA)
	$(XLARANK) synth $(DEMO_DATA) --preset demo --seed $(SEED)

# The steps' own output (make's command lines, each command's result line, warnings) goes
# to DEMO_LOG, so what the demo prints is the table it promises; on a terminal each step
# is named as it starts (the log keeps the detail), and a failure shows the log's end.
# The previous run's log is kept as DEMO_LOG.prev. Commands off a terminal draw no
# progress bars and wrap no lines. The step names are read line by line by the shell:
# Debian's awk (mawk) reads a pipe in blocks and named 13 steps at once, 50 s late.
DEMO_REPORTS := reports/$(notdir $(DEMO_DATA))
DEMO_LOG ?= $(DEMO_REPORTS)/demo.log
demo: $(DEMO_DATA)/synth.json ## set up, then the whole pipeline on generated demo data: the table of results (steps logged to DEMO_LOG)
	@start=$$(date +%s); mkdir -p $(dir $(DEMO_LOG)); \
	if [ -f $(DEMO_LOG) ]; then mv -f $(DEMO_LOG) $(DEMO_LOG).prev; fi; \
	if [ -t 1 ]; then show=1; else show=0; fi; \
	{ $(MAKE) --no-print-directory -j2 evaluate report submission DATA=$(DEMO_DATA) 2>&1; \
	  echo $$? > $(DEMO_LOG).status; } | tee $(DEMO_LOG) | \
	  while IFS= read -r line; do \
	    case "$$line" in "$(XLARANK) "*) if [ $$show = 1 ]; then \
	      step=$${line#"$(XLARANK) "}; printf 'step: %s\n' "$${step% \\}"; fi ;; esac; \
	  done; \
	status=$$(cat $(DEMO_LOG).status 2>/dev/null || echo 1); rm -f $(DEMO_LOG).status; \
	if [ "$$status" = 0 ]; then \
	    $(XLARANK) compare $(DEMO_REPORTS) && \
	    echo "demo finished in $$(( $$(date +%s) - start ))s (synthetic data from 'xlarank synth', not TpuGraphs);" \
	        "plots: $(DEMO_REPORTS)/html/<collection>/index.html," \
	        "submission: $(DEMO_REPORTS)/submission.csv, every step's output: $(DEMO_LOG)"; \
	else tail -n 15 $(DEMO_LOG); \
	    echo "demo failed (exit $$status); every step's output: $(DEMO_LOG)"; exit $$status; fi

# A scheduler and two single-threaded workers on loopback, as a user's cluster would be;
# xlarank connects to it with --scheduler. Outputs go beside the local demo's.
DASK_PORT ?= 8786
dask-demo: $(DEMO_DATA)/synth.json $(VENV)/.dev-installed ## the demo pipeline on a Dask cluster (scheduler + 2 workers on loopback)
	@$(BIN)/dask scheduler --host 127.0.0.1 --port $(DASK_PORT) --dashboard-address 127.0.0.1:0 \
	    > .dask-scheduler.log 2>&1 & scheduler=$$!; \
	$(BIN)/dask worker tcp://127.0.0.1:$(DASK_PORT) --nworkers 2 --nthreads 1 --host 127.0.0.1 \
	    --no-dashboard > .dask-workers.log 2>&1 & workers=$$!; \
	sleep 5; start=$$(date +%s); \
	$(MAKE) --no-print-directory evaluate DATA=$(DEMO_DATA) ENGINE=dask \
	    SCHEDULER=tcp://127.0.0.1:$(DASK_PORT) FRAMES=features/frames-dask \
	    TRAINED=models/trained-dask REPORTS=reports-dask; status=$$?; \
	kill $$workers $$scheduler; wait; \
	echo "dask demo finished in $$(( $$(date +%s) - start ))s (synthetic data, not TpuGraphs)"; \
	exit $$status

clean: ## remove frames, trained models and reports (keeps .venv and data)
	rm -rf features/frames models/trained reports features/frames-dask models/trained-dask reports-dask

clean-all: clean ## also remove .venv and generated data
	rm -rf $(VENV) data
