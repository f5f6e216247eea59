"""The Vagrantfile: ``vagrant validate --ignore-provider`` (Debian's vagrant), the
agent count from COSCHED_VAGRANT_AGENTS, and one Ansible run over all machines
with the playbook's groups (read by Ruby with a recording stand-in for Vagrant's
configuration objects: no VM, no provider)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
VAGRANT = shutil.which("vagrant")
RUBY = shutil.which("ruby")
needs_vagrant = pytest.mark.skipif(
    VAGRANT is None,
    reason="vagrant not installed (apt-get install vagrant)",
)


def validate(tmp: Path, **env: str) -> subprocess.CompletedProcess[str]:
    assert VAGRANT is not None
    return subprocess.run(
        [VAGRANT, "validate", "--ignore-provider"],
        capture_output=True,
        text=True,
        cwd=REPO,
        # VAGRANT_HOME: keep Vagrant's own files out of ~/.vagrant.d
        env=dict(os.environ, VAGRANT_HOME=str(tmp / "vagrant.d"), NO_COLOR="1", **env),
        timeout=120,
    )


@needs_vagrant
@pytest.mark.parametrize("agents", [2, 4])
def test_vagrant_validate_with_n_agents(tmp_path: Path, agents: int) -> None:
    out = validate(tmp_path, COSCHED_VAGRANT_AGENTS=str(agents))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Vagrantfile validated successfully." in out.stdout
    # validate names every machine it checks: N agents, then the head
    machines = re.findall(r"^==> (\S+): Ignoring provider config", out.stdout, re.M)
    assert machines == [f"n{i}" for i in range(agents)] + ["head"], out.stdout


@needs_vagrant
def test_a_bad_agent_count_is_one_clear_line(tmp_path: Path) -> None:
    out = validate(tmp_path, COSCHED_VAGRANT_AGENTS="lots")
    assert out.returncode != 0
    assert 'COSCHED_VAGRANT_AGENTS must be a whole number 1..64, got "lots"' in out.stderr
    assert "Traceback" not in out.stderr and ".rb:" not in out.stderr


# A stand-in for Vagrant's configuration objects: every call and assignment is
# recorded, so loading the Vagrantfile yields what it asks Vagrant to make.
RECORDER = r"""
require "json"
class Rec
  attr_reader :log
  def initialize; @log = {}; end
  def method_missing(name, *args, **kw, &blk)
    key = name.to_s
    if key.end_with?("=")
      @log[key.chomp("=")] = args[0]
      return args[0]
    end
    child = Rec.new
    (@log[key] ||= []) << { "args" => args, "kw" => kw, "rec" => child }
    blk&.call(child)
    child
  end
  def respond_to_missing?(*) = true
  def to_h
    @log.transform_values do |v|
      calls = v.is_a?(Array) && v.all? { |e| e.is_a?(Hash) && e.key?("rec") }
      next v unless calls
      v.map { |e| { "args" => e["args"].map(&:to_s), "kw" => e["kw"], "rec" => e["rec"].to_h } }
    end
  end
end
module Vagrant
  def self.configure(_version)
    $root = Rec.new
    yield $root
  end
end
load ARGV[0]
puts JSON.generate($root.to_h)
"""


def _merged(calls: list[dict[str, Any]]) -> dict[str, Any]:
    """One machine's ``node.vm.*`` calls (each a record of its own) as one record."""
    out: dict[str, Any] = {}
    for call in calls:
        for key, value in call["rec"].items():
            if isinstance(value, list) and isinstance(out.get(key), list):
                out[key] += value
            else:
                out[key] = value
    return out


@pytest.mark.skipif(RUBY is None, reason="ruby not installed (it comes with vagrant)")
def test_one_ansible_run_over_all_machines_with_the_playbooks_groups(tmp_path: Path) -> None:
    assert RUBY is not None
    (tmp_path / "rec.rb").write_text(RECORDER)
    out = subprocess.run([RUBY, str(tmp_path / "rec.rb"), str(REPO / "Vagrantfile")],
                         capture_output=True, text=True, cwd=REPO, timeout=60,
                         env=dict(os.environ, COSCHED_VAGRANT_AGENTS="3"))  # fmt: skip
    assert out.returncode == 0, out.stderr
    vm = json.loads(out.stdout)["vm"]
    defined: dict[str, dict[str, Any]] = {}
    for d in vm:
        for entry in d["rec"].get("define", []):
            defined[entry["args"][0]] = _merged(entry["rec"]["vm"])
    assert list(defined) == ["n0", "n1", "n2", "head"]

    agents_nets = [[n["kw"]["ip"] for n in defined[a]["network"]] for a in ["n0", "n1", "n2"]]
    assert agents_nets == [[f"192.168.56.{11 + i}", f"192.168.57.{11 + i}"] for i in range(3)]
    assert [n["kw"]["ip"] for n in defined["head"]["network"]] == ["192.168.56.254"]

    # the provisioner: on the head only (the last machine), limit all
    assert all("provision" not in defined[a] for a in ["n0", "n1", "n2"])
    (prov,) = defined["head"]["provision"]
    assert prov["args"] == ["ansible"]
    ansible = prov["rec"]
    assert ansible["limit"] == "all" and ansible["playbook"] == "ansible/site.yml"
    assert (REPO / ansible["playbook"]).is_file()
    # the same groups as the example inventory, which site.yml's plays name
    example = yaml.safe_load((REPO / "ansible/inventory/example/hosts.yml").read_text())
    assert set(ansible["groups"]) == set(example["all"]["children"])
    assert ansible["groups"]["agents"] == ["n0", "n1", "n2"]
    assert ansible["groups"]["controller"] == ["head"] == ansible["groups"]["monitor"]
    host_vars = ansible["host_vars"]
    assert host_vars["n1"]["cosched_control_address"] == "192.168.56.12"
    assert host_vars["head"]["cosched_control_address"] == "192.168.56.254"
    assert ansible["extra_vars"]["service_manager"] == "systemd"

    # both providers configured, and the box a current Debian (cgroup v2)
    providers = {p["args"][0] for d in vm for p in d["rec"].get("provider", [])}
    assert {"virtualbox", "libvirt"} <= providers
    boxes = [d["rec"]["box"] for d in vm if "box" in d["rec"]]
    assert boxes == ["debian/bookworm64"]
