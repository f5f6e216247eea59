#!/usr/bin/env bash
# Create the project virtualenv and install cosched with its test tools.
# As root, also the Debian packages the tests use: prometheus (promtool lints the
# exporters; the server is scraped in end-to-end runs) and Open MPI (openmpi-bin,
# libopenmpi-dev: mpirun for the apps over real MPI; mpi4py builds against it),
# openssh-server (the deploy test's nodes), vagrant (validates the Vagrantfile),
# systemd-container and debootstrap (the systemd nodes of `cluster up --systemd`:
# systemd-nspawn boots a Debian tree debootstrap builds from Debian's packages).
set -euo pipefail
venv=${1:-.venv}
py=${PYTHON:-python3}
if [ "$(id -u)" = 0 ]; then
  debs=()
  command -v promtool >/dev/null 2>&1 || debs+=(prometheus)
  command -v mpirun >/dev/null 2>&1 || debs+=(openmpi-bin)
  command -v mpicc >/dev/null 2>&1 || debs+=(libopenmpi-dev)
  # Deployment tests (issue 10): sshd inside each emulated node, and
  # `vagrant validate` on the Vagrantfile.
  [ -x /usr/sbin/sshd ] || debs+=(openssh-server)
  command -v vagrant >/dev/null 2>&1 || debs+=(vagrant)
  # Systemd nodes (issue 33): the deploy test's main path.
  command -v systemd-nspawn >/dev/null 2>&1 || debs+=(systemd-container)
  command -v debootstrap >/dev/null 2>&1 || debs+=(debootstrap)
  if [ ${#debs[@]} -gt 0 ]; then
    echo "installing Debian packages: ${debs[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${debs[@]}" >/dev/null
  fi
fi
if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q -e '.[dev,remote]'
