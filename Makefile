# Entry points for people and CI. `make test` and `make bench` run the setup themselves when it is missing;
# a stamp keeps a second run from spending any time on it.
SHELL := /bin/bash
VENV := .venv
# The checkout keeps its QEMU plugin in .rvtune/tools (an installed package uses the user cache directory);
# exported so the pytest runs below and `rvtune setup` in scripts/setup.sh use the same one.
export RVTUNE_TOOLS_DIR ?= $(CURDIR)/.rvtune/tools
TOOLS := $(RVTUNE_TOOLS_DIR)
SETUP_STAMP := .rvtune/setup.stamp
# Extra pytest arguments, e.g. `make test PYTEST_ARGS="-k icount -x"`.
PYTEST_ARGS ?=

.PHONY: help setup test bench lint doctor clean distclean

help:
	@echo "make bench    run the kernel suite on the default target (local QEMU)"
	@echo "make test     run the test suite"
	@echo "make setup    install what is missing (Debian packages, .venv, QEMU plugin via rvtune setup); idempotent"
	@echo "make doctor   check every tool and target"
	@echo "make lint     ruff check, import circles and private names (scripts/check_layout.py), then mypy"
	@echo "make clean    drop build caches (keeps .venv and tools); distclean drops those too"

# Setup reruns when its inputs change, and when what it made has gone (a deleted .venv or plugin).
ifneq ($(words $(wildcard $(VENV)/bin/python $(TOOLS)/libicount.so)),2)
.PHONY: $(SETUP_STAMP)
endif
$(SETUP_STAMP): scripts/setup.sh pyproject.toml pytest_rvtune/targets/qemu_plugin/icount.c
	scripts/setup.sh
	@touch $@

setup:
	scripts/setup.sh
	@touch $(SETUP_STAMP)

# Two xdist workers (the machine has 2 cores); whole files per worker so module-scoped fixtures
# (servers, compiled programs) start once. Then the acceptance gate: every config of every kernel, built
# for rv64gcv and run under QEMU on the small (ragged) case, must give the right answer.
test: $(SETUP_STAMP)
	$(VENV)/bin/pytest tests -n 2 --dist loadfile $(PYTEST_ARGS)
	$(VENV)/bin/pytest kernels --rvtune-case small -n 2 --benchmark-disable -q

# The kernel suite on the default target (local QEMU) with the small emulation-sized problem case.
# One xdist worker per core builds in parallel; the runs themselves take turns on the target.
bench: $(SETUP_STAMP)
	$(VENV)/bin/pytest kernels --rvtune-case emu -n auto $(PYTEST_ARGS)

lint: $(SETUP_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/python scripts/check_layout.py
	$(VENV)/bin/mypy

# No setup first: the doctor is how you find out what is missing (it names `make setup` as the fix).
doctor:
	@test -x $(VENV)/bin/rvtune || { echo "no $(VENV)/bin/rvtune: run \`make setup\` first"; exit 1; }
	$(VENV)/bin/rvtune doctor

clean:
	rm -rf .rvtune/cache build .pytest_cache .ruff_cache .mypy_cache
	find . -name __pycache__ -not -path './$(VENV)/*' -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) .rvtune
