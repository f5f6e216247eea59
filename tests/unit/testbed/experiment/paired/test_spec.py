"""Live experiment specs: the shipped default loads; the cgroup choice is checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.experiment.fields import SpecError
from testbed.experiment.paired.spec import CONFIGS, fit_cpus
from testbed.experiment.paired.spec import read_experiment as load_experiment

REPO = Path(__file__).resolve().parents[5]


def test_default_spec_loads_with_its_cgroup_choice() -> None:
    spec = load_experiment(REPO / "experiments/paired-vs-gang.toml")
    assert spec.cgroup == "auto" and spec.nodes == 4


def test_bad_cgroup_choice_is_one_line(tmp_path: Path) -> None:
    text = (REPO / "experiments/paired-vs-gang.toml").read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace('cgroup = "auto"', 'cgroup = "v3"'))
    with pytest.raises(SpecError, match=r"\[cluster\]\.cgroup: one of auto, v1, v2") as err:
        load_experiment(bad)
    assert "\n" not in str(err.value)


# -- issue 11: the 2-node reference, sweeps (Figs. 8, 9), waits, prose Fig. 4 -------------


def _spec(tmp_path: Path, text: str, base: str = "paired-vs-gang.toml") -> Path:
    p = tmp_path / "spec.toml"
    p.write_text((REPO / "experiments" / base).read_text() + text)
    return p


def test_the_2node_spec_is_one_dedicated_core_per_node() -> None:
    spec = load_experiment(REPO / "experiments/paired-vs-gang-2node.toml")
    assert (spec.nodes, spec.cpus_per_node, spec.cpu_mechanism) == (2, 1.0, "cpuset")
    assert spec.sweep is None and spec.points(2)[0][2] == spec
    assert "paired-fig4-prose" in spec.configs


def test_the_prose_fig4_config_maps_to_the_policy_parameter() -> None:
    assert CONFIGS["paired-fig4-prose"] == ("paired-gang", {"matching": "fig4-prose"})
    assert CONFIGS["paired-fig4"] == ("paired-gang", {"matching": "fig4"})


def test_fig8_sweeps_nodes_with_cpus_that_fit_the_host() -> None:
    spec = load_experiment(REPO / "experiments/fig8-cluster-size.toml")
    assert spec.sweep is not None and spec.sweep.key == "nodes"
    points = spec.points(2)
    assert [(p.nodes, p.cpus_per_node, p.cpu_mechanism) for _, _, p in points] == [
        (2, 1.0, "cpuset"),
        (4, 0.5, "shared"),
    ]
    assert [label for label, _, _ in points] == ["nodes2", "nodes4"]
    # on a 16-core host every size of the paper gets a core per node
    assert fit_cpus(12, 16) == (1.0, "cpuset") and fit_cpus(12, 4) == (1 / 3, "shared")
    assert all(p.sweep is None for _, _, p in points)


def test_fig9_scales_only_the_compute_jobs_gcomp() -> None:
    spec = load_experiment(REPO / "experiments/fig9-granularity.toml")
    assert spec.sweep is not None and spec.sweep.values == (1.0, 0.8, 0.6, 0.4)
    pts = spec.points(2)
    base = spec.compute.gcomp
    assert [p.compute.gcomp for _, _, p in pts] == [
        base,
        round(base * 0.8),
        round(base * 0.6),
        round(base * 0.4),
    ]
    assert all(p.io == spec.io for _, _, p in pts)
    assert [label for label, _, _ in pts] == ["gcomp1", "gcomp0.8", "gcomp0.6", "gcomp0.4"]


def test_jobs_wait_applies_to_both_job_types_and_reaches_the_program() -> None:
    spec = load_experiment(REPO / "experiments/fig9-granularity.toml")
    assert spec.compute.wait == spec.io.wait == "block"
    argv = spec.compute.argv(15.0)
    assert argv[argv.index("--wait") + 1] == "block"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("\n[sweep]\nnodes = [2, 4]\ngcomp_scale = [1.0]\n", r"exactly one of nodes, gcomp_scale"),
        ("\n[sweep]\ncolour = [1]\n", r"\[sweep\]\.colour: unknown key"),
        ("\n[sweep]\nnodes = []\n", r"\[sweep\]\.nodes: expected a non-empty list"),
        ("\n[sweep]\nnodes = [2, 0]\n", r"\[sweep\]\.nodes: every value must be >= 1, got 0"),
        (
            "\n[sweep]\ngcomp_scale = [1.0, -0.5]\n",
            r"gcomp_scale: every value must be > 0, got -0.5",
        ),
        ("\n[sweep]\nnodes = [2, 2]\n", r"appears twice"),
    ],
)
def test_bad_sweeps_are_one_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(SpecError, match=message) as err:
        load_experiment(_spec(tmp_path, text))
    assert "\n" not in str(err.value)


def test_bad_wait_and_fit_with_a_mechanism_are_one_line(tmp_path: Path) -> None:
    text = (REPO / "experiments/paired-vs-gang.toml").read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace('wait = "block"', 'wait = "doze"'))
    with pytest.raises(SpecError, match=r"\[jobs\]\.wait: one of spin, block, spinblock"):
        load_experiment(bad)
    bad.write_text(text.replace("cpus_per_node = 0.5", 'cpus_per_node = "fit"'))
    with pytest.raises(SpecError, match=r'cpus_per_node = "fit" chooses it'):
        load_experiment(bad)
    bad.write_text(text.replace("cpus_per_node = 0.5", 'cpus_per_node = "half"'))
    with pytest.raises(SpecError, match=r"cpus_per_node: expected a number"):
        load_experiment(bad)
