#!/usr/bin/env bash
# The test command: lint, format check, type check, then every test.
# Root-only tests (real cgroups, namespaces, links) run when we are root and skip otherwise.
set -euo pipefail
venv=${1:-.venv}
shift || true
bin="$venv/bin"
echo "== ruff check"; "$bin/ruff" check .
echo "== ruff format --check"; "$bin/ruff" format --check .
echo "== mypy"; "$bin/mypy"
if [ "${1:-}" = "--lint-only" ]; then exit 0; fi
if [ "${CI:-}" = "true" ] && [ "$(id -u)" = 0 ]; then
    # CI's machine may carry a cluster a killed session left; the tests need a bare host.
    echo "== cosched clean (CI)"; "$bin/cosched" clean || true
    # a killed run may have left the host cgroup-v2-only: give v1 back (no record: nothing to do)
    echo "== cosched host cgroups restore (CI)"; "$bin/cosched" host cgroups restore
fi
echo "== pytest"
"$bin/pytest" -q --timeout=600 tests
