"""An inventory of every daemon kind for the `cosched remote` tests."""

from __future__ import annotations

from testbed import remote


def hosts() -> dict[str, remote.RemoteHost]:
    return {h.name: h for h in remote.parse_inventory(INVENTORY)}


INVENTORY = {
    "all": {
        "vars": {
            "ansible_user": "root",
            "ansible_ssh_private_key_file": "/k/id",
            "ansible_ssh_common_args": "-o UserKnownHostsFile=/k/known_hosts "
            "-o StrictHostKeyChecking=yes",
            "cosched_prefix": "/srv/cs",
            "service_manager": "none",
        },
        "children": {
            "controller": {"hosts": {"head": {"ansible_host": "10.0.0.254",
                                              "cosched_control_address": "10.212.0.254"}}},
            "monitor": {"hosts": {"head": None}},
            "agents": {
                "vars": {"cosched_run_dir": "{{ cosched_prefix }}/agents-run"},
                "hosts": {
                    "n0": {"ansible_host": "10.0.0.1", "cosched_control_address": "10.212.0.1"},
                    "n1": {"ansible_host": "10.0.0.2", "cosched_control_address": "10.212.0.2",
                           "ansible_port": 2222, "cosched_node_name": "node-one"},
                },
            },
        },
    }
}  # fmt: skip
