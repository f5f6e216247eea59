#!/usr/bin/env bash
# Create the project virtualenv and install cosched with its test tools.
# As root, also the Debian packages the tests use: prometheus (promtool lints the
# exporters; the server is scraped in end-to-end runs).
set -euo pipefail
venv=${1:-.venv}
py=${PYTHON:-python3}
if [ "$(id -u)" = 0 ] && ! command -v promtool >/dev/null 2>&1; then
  echo "installing Debian packages: prometheus"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q -e '.[dev,remote]'
