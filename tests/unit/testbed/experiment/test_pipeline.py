"""The experiment framework: the typed spec reader, the registry, the results envelope and its
migration, the verdict rules, and `cosched experiment list`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from testbed.cli import main
from testbed.experiment import claims, migrate, pipeline, registry, results
from testbed.experiment.claims import Difference, Verdict, judge, judge_value
from testbed.experiment.fields import SpecError, Table

REPO = Path(__file__).resolve().parents[4]


# ---- fields.Table: one typed reader --------------------------------------------------------


def _t(**data: Any) -> Table:
    return Table(Path("x.toml"), "exp", data)


def test_values_are_typed_with_defaults_and_bounds() -> None:
    t = _t(n=3, f=2, s="a", xs=[1, 2.5], flag=True)
    assert t.integer("n", minimum=1) == 3 and t.number("f") == 2.0
    assert t.text("s", choices=("a", "b")) == "a" and t.flag("flag") is True
    assert t.items("xs", (int, float), above=0) == [1, 2.5]
    assert t.integer("missing", 7) == 7 and t.items("none", str, ["z"]) == ["z"]


@pytest.mark.parametrize(
    ("data", "call", "words"),
    [
        ({}, lambda t: t.integer("n"), "x.toml: [exp].n: missing — add `n = ...`"),
        ({"n": True}, lambda t: t.integer("n"), "[exp].n: expected a whole number, got True"),
        ({"n": 1.5}, lambda t: t.integer("n"), "[exp].n: expected a whole number, got 1.5"),
        ({"f": "x"}, lambda t: t.number("f"), "[exp].f: expected a number, got 'x'"),
        ({"f": 0}, lambda t: t.number("f", above=0), "[exp].f: must be > 0, got 0"),
        ({"s": "c"}, lambda t: t.text("s", choices=("a", "b")), "[exp].s: one of a, b, got 'c'"),
        ({"xs": []}, lambda t: t.items("xs", int), "[exp].xs: expected a non-empty list"),
        ({"xs": [1, "a"]}, lambda t: t.items("xs", int), "expected a list of whole numbers"),
        ({"xs": [1, 1]}, lambda t: t.items("xs", int, unique=True), "a value appears twice"),
        ({"xs": ["q"]}, lambda t: t.items("xs", str, choices=("p",)), "unknown 'q' — valid: p"),
        ({"zz": 1}, lambda t: t.only({"a", "b"}), "[exp].zz: unknown key — valid keys: a, b"),
    ],
)
def test_every_mistake_is_one_line_naming_file_table_and_key(
    data: dict[str, Any], call: Any, words: str
) -> None:
    with pytest.raises(SpecError) as err:
        call(_t(**data))
    assert words in str(err.value) and "\n" not in str(err.value)
    assert err.value.exit_code == 2


def test_sub_tables_and_arrays_of_tables_say_where_they_are() -> None:
    doc = Table.document({"a": {"b": {"k": "v"}}, "runs": [{"x": 1}, {"x": "y"}]}, "s.toml")
    assert doc.table("a").table("b").text("k") == "v"
    with pytest.raises(SpecError, match=r"s.toml: \[runs #2\].x: expected a whole number"):
        [r.integer("x") for r in doc.tables("runs")]
    with pytest.raises(SpecError, match=r"the \[c\] table is missing"):
        doc.table("c", required=True)


# ---- the registry: specs declare their kind -------------------------------------------------


def test_every_kind_is_registered_with_its_specs_and_they_exist() -> None:
    for s in registry.studies():
        assert registry.KINDS[s.kind] and s.title and s.specs
        for spec in s.specs:
            assert (REPO / spec).is_file(), spec
            assert registry.load(REPO / spec)[0] is s


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[experiment]\nname = 'x'\n", "no `kind = ...` at the top: which study is it?"),
        ('kind = "gang"\n', "kind = 'gang' is not a study — kinds: paired-live"),
        ("[workload]\nsource = 'lublin'\n", "a workload for `cosched simulate --workload`"),
        ("[model]\ninterference = 0.1\n", "the execution model `cosched calibrate` measured"),
        ('kind = "dhc-sim"\n[dhc]\n[extra]\n', "extra: unknown key"),
    ],
)
def test_a_spec_without_a_study_is_one_line(tmp_path: Path, text: str, words: str) -> None:
    p = tmp_path / "s.toml"
    p.write_text(text)
    with pytest.raises(SpecError) as err:
        registry.load(p)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_list_shows_every_kind(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["experiment", "list"]) == 0
    out = capsys.readouterr().out
    for kind in registry.KINDS:
        assert kind in out
    assert "experiments/rajaei-live.toml" in out and "takes --quick" in out


# ---- results.json: the envelope ------------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "words"),
    [
        ({"runs": []}, "written before results.json had a kind (schema 1) — convert it once"),
        ({"kind": "nope", "schema": 1}, "unknown kind 'nope'"),
        ({"kind": "dhc-sim", "schema": 9, "made": {}, "data": {}}, "schema 9, this cosched"),
        ([1, 2], "not a results.json"),
    ],
)
def test_a_results_file_is_read_by_its_kind_never_by_its_shape(
    tmp_path: Path, doc: Any, words: str
) -> None:
    p = tmp_path / "results.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(results.ResultsError) as err:
        pipeline.read(p)
    assert words in str(err.value)


def test_migration_wraps_an_old_file_once_and_keeps_what_it_recorded(tmp_path: Path) -> None:
    old = {
        "meta": {
            "host": {"kernel": "6.1", "cores": 2, "commit": "abc1234"},
            "started": "2026-11-24 14:05:16",
            "spec": {"path": "experiments/x.toml"},
        },
        "live": [],
    }
    p = tmp_path / "results.json"
    p.write_text(json.dumps(old))
    migrate.migrate_file(p, "sim-vs-live")
    res = pipeline.read(p)
    assert res.kind == "sim-vs-live" and res.data == old
    assert res.made.command == "cosched experiment run experiments/x.toml"
    assert res.made.commit == "abc1234" and res.made.host == {"kernel": "6.1", "cores": 2}
    assert res.made.recorded is False and "before schema 1" in res.made.note
    with pytest.raises(results.ResultsError, match="already has a kind"):
        migrate.migrate_file(p, "sim-vs-live")


def test_paired_files_say_which_of_the_two_they_hold_after_migration(tmp_path: Path) -> None:
    p = tmp_path / "results.json"
    p.write_text(json.dumps({"name": "s", "key": "nodes", "points": []}))
    migrate.migrate_file(p, "paired-live", "cosched experiment run experiments/fig8.toml")
    assert set(pipeline.read(p).data) == {"sweep"}


# ---- the verdict rules ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "sign", "within", "verdict"),
    [
        ((5.0, 6.0, 4.0), 1, None, Verdict.REPRODUCED),  # same sign, mean 5 > spread 1
        ((5.0,), 1, None, Verdict.DIRECTION),  # one seed: no spread
        ((9.0, 0.5, 0.4), 1, None, Verdict.DIRECTION),  # mean 3.3 < spread 4.3
        ((3.0, -1.0, 4.0), 1, None, Verdict.DIRECTION),  # one seed the other way
        ((5.0, 6.0, 4.0), 1, False, Verdict.DIRECTION),  # outside the tolerance
        ((-2.0, -3.0), 1, None, Verdict.NOT_REPRODUCED),  # the opposite direction
        ((-2.0, -3.0), -1, True, Verdict.REPRODUCED),
        ((0.0, 0.0), 1, None, Verdict.NOT_REPRODUCED),  # no difference
    ],
)
def test_reproduced_needs_the_difference_beyond_the_seed_spread(
    values: tuple[float, ...], sign: int, within: bool | None, verdict: Verdict
) -> None:
    assert judge(Difference(values), sign, within)[0] == verdict


@pytest.mark.parametrize(
    ("within", "verdict"),
    [
        ((True, True, True, True), Verdict.REPRODUCED),  # within in the mean and every seed
        ((True,), Verdict.DIRECTION),  # one run: nothing to tell it from noise
        ((True, True), Verdict.DIRECTION),  # one seed, its own figure
        ((True, True, False, True), Verdict.DIRECTION),  # a seed outside: the spread crosses
        ((False, True, True), Verdict.NOT_REPRODUCED),  # the mean outside
    ],
)
def test_a_stated_figure_is_reproduced_only_within_in_every_one_of_several_seeds(
    within: tuple[bool, ...], verdict: Verdict
) -> None:
    got, why = judge_value(within, "±10 %")
    assert got == verdict
    assert "±10 %" in why


def test_a_claim_in_several_conditions_takes_the_worst_verdict() -> None:
    assert claims.worst([Verdict.REPRODUCED, Verdict.DIRECTION]) == Verdict.DIRECTION
    assert claims.worst([Verdict.DIRECTION, Verdict.NOT_REPRODUCED]) == Verdict.NOT_REPRODUCED
    assert claims.worst([]) == Verdict.NOT_ATTEMPTED
    assert Difference.of([3, 4], [1, 1]).values == (2, 3)
