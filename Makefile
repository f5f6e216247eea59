# The README's commands: `make run` (the default experiment), `make check` (lint, types
# and the fast tier, about a minute: run it after every change) and `make test`
# (everything, what CI runs). Each creates a project-local virtualenv (.venv) first.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The fast tier: tests marked `fast` (no root, no process, no socket, not slow; set
# by tests/conftest.py), on every core.
FAST := -q -m fast -n auto tests/unit tests/property tests/fuzz

.PHONY: run check test test-fast test-live test-v2only durations lint clean-venv

$(STAMP): pyproject.toml
	bash scripts/bootstrap.sh $(VENV)
	touch $(STAMP)

run: $(STAMP)
	bash scripts/run-default.sh $(VENV)

check: $(STAMP)
	bash scripts/test.sh $(VENV) --lint-only
	@echo "== pytest (fast tier)"
	$(VENV)/bin/pytest $(FAST)

test-fast: $(STAMP)
	$(VENV)/bin/pytest $(FAST)

# tests/live: the tests that start processes or sockets (loopback), without root; two
# workers (they mostly wait on their processes: scripts/test.sh).
test-live: $(STAMP)
	$(VENV)/bin/pytest -q -n 2 tests/live

test: $(STAMP)
	bash scripts/test.sh $(VENV)

# CI's second stage alone: the host made cgroup-v2-only for the `v2only` tests, then
# given back its v1 hierarchies (root; hold /work/host.lock or the like around it).
test-v2only: $(STAMP)
	bash scripts/test.sh $(VENV) --v2only-stage

# Where the live and root tiers' time goes (tests/support/tiers.py's SLOW list is
# set from it): every test but the fast tier, the 40 longest phases printed.
durations: $(STAMP)
	$(VENV)/bin/pytest -q --timeout=600 --durations=40 -m "not fast" tests

lint: $(STAMP)
	bash scripts/test.sh $(VENV) --lint-only

clean-venv:
	rm -rf $(VENV)
