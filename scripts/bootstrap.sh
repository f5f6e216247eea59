#!/usr/bin/env bash
# Create the project virtualenv and install cosched with its test tools.
# Debian packages the root-only parts need are installed when we are root.
set -euo pipefail
venv=${1:-.venv}
py=${PYTHON:-python3}
if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q -e '.[dev,remote]'
