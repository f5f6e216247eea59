# The two commands of the README: `make run` (the default experiment) and `make test`.
# Both create a project-local virtualenv (.venv) and install what they need.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test lint clean-venv

$(STAMP): pyproject.toml
	bash scripts/bootstrap.sh $(VENV)
	touch $(STAMP)

run: $(STAMP)
	bash scripts/run-default.sh $(VENV)

test: $(STAMP)
	bash scripts/test.sh $(VENV)

lint: $(STAMP)
	bash scripts/test.sh $(VENV) --lint-only

clean-venv:
	rm -rf $(VENV)
