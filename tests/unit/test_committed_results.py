"""Every committed result is traceable: its report is rebuilt byte for byte from its
results.json, the ledger is current, and the docs quote only numbers the results hold."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest

from testbed.experiment import ledger, pipeline, quotes

REPO = Path(__file__).resolve().parents[2]
RESULTS = sorted((REPO / "docs" / "results").rglob("results.json"))


def _png_software(data: bytes) -> str | None:
    """The PNG's Software text (matplotlib writes its version there)."""
    pos = 8
    while pos + 8 <= len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"tEXt" and body.startswith(b"Software\0"):
            return body.split(b"\0", 1)[1].decode("latin-1")
        if kind == b"zTXt" and body.startswith(b"Software\0"):
            return zlib.decompress(body.split(b"\0", 1)[1][1:]).decode("latin-1")
        pos += 12 + length
    return None


def _owned(folder: Path) -> list[Path]:
    """The report files of ``folder``: its .md and .png, and those of sub-folders that have
    no results.json of their own (a sweep's points)."""
    out = []
    for p in folder.rglob("*"):
        if p.suffix not in (".md", ".png"):
            continue
        owner = next(q for q in (p.parent, *p.parent.parents) if (q / "results.json").exists())
        if owner == folder:
            out.append(p)
    return out


@pytest.mark.parametrize(
    "path", RESULTS, ids=[str(p.parent.relative_to(REPO / "docs" / "results")) for p in RESULTS]
)
def test_every_committed_report_is_rebuilt_from_its_results(path: Path, tmp_path: Path) -> None:
    import matplotlib

    _, res, written = pipeline.report(path, tmp_path)
    rebuilt = {w.relative_to(tmp_path) for w in written}
    committed = {p.relative_to(path.parent) for p in _owned(path.parent)}
    assert rebuilt == committed, f"{path.parent}: rebuilt {rebuilt ^ committed} differently"
    ours = f"Matplotlib version{matplotlib.__version__}"
    for rel in sorted(rebuilt):
        new, old = (tmp_path / rel).read_bytes(), (path.parent / rel).read_bytes()
        if rel.suffix == ".md":
            assert new == old, f"{path.parent / rel} is not what its results.json gives"
        elif (_png_software(old) or "").startswith(ours):
            # the same matplotlib draws the same bytes; another version draws the same
            # data with other pixels (the Markdown above is checked either way)
            assert new == old, f"{path.parent / rel} is not what its results.json gives"
    assert res.made.command.startswith("cosched experiment run experiments/")


def test_the_ledger_is_current() -> None:
    text = ledger.generate()
    assert ledger.DEFAULT_OUT.read_text() == text, (
        "docs/reproduction.md is stale: run `cosched experiment ledger`"
    )


def test_the_ledger_lists_every_paper_and_says_why_a_result_was_not_attempted() -> None:
    text = ledger.DEFAULT_OUT.read_text()
    for paper in ledger.PAPERS:
        assert f"## {paper}" in text
    for rows in ledger.PAPERS.values():
        for row in rows:
            assert bool(row.not_attempted) != bool(row.claims), row
    assert text.count("| **not attempted**: ") == sum(
        1 for rows in ledger.PAPERS.values() for r in rows if r.not_attempted
    )


def test_docs_quote_only_numbers_that_committed_results_hold() -> None:
    unsourced = quotes.unsourced()
    assert not unsourced, "numbers in docs that no committed result holds:\n" + "\n".join(
        f"  {u}" for u in unsourced
    )


def test_no_committed_verdict_says_reproduced_without_several_seeds() -> None:
    """The rule at the top of the ledger, checked on what every study wrote: a
    *reproduced* rests on a difference beyond the seed-to-seed spread or a figure
    within its tolerance in every one of several seeds, never on one run."""
    grounds = ("beyond the seed-to-seed spread", "in every seed")
    for report in sorted((REPO / "docs").rglob("*.md")):
        for k, line in enumerate(report.read_text().splitlines(), 1):
            if "| **reproduced** (" not in line:
                continue
            why = line.split("| **reproduced** (", 1)[1]
            assert any(g in why for g in grounds), f"{report}:{k}: reproduced on one run"


def test_every_page_is_checked_but_those_named_with_a_reason() -> None:
    pages = {"README.md", *(p.relative_to(REPO).as_posix() for p in (REPO / "docs").glob("*.md"))}
    whole = {c for c in quotes.checked() if "#" not in c}
    left_out = {page for page, why in quotes.UNCHECKED if why}
    assert left_out <= pages, f"UNCHECKED names pages that do not exist: {left_out - pages}"
    assert whole | left_out == pages
    for page, number, _ in quotes.NOT_RESULTS:
        assert number in (REPO / page).read_text(), f"NOT_RESULTS: {page} no longer has {number}"


def test_the_check_finds_a_quoted_number_that_no_result_holds(tmp_path: Path) -> None:
    report = tmp_path / "docs" / "results" / "study" / "report.md"
    report.parent.mkdir(parents=True)
    report.write_text("| root | 2.4567 | 0.33 | +12.5% |\n")
    (tmp_path / "README.md").write_text("cosched\n")
    (tmp_path / "docs" / "page.md").write_text(
        "From [the study](results/study/report.md): root 2.46, 33 % of it,\n"
        "up 12.5 %, and `9.99` in code; but 7.77 s and 41 % come from nowhere.\n"
    )
    got = [str(q) for q in quotes.unsourced(tmp_path)]
    assert got == ["docs/page.md:2: 41 %", "docs/page.md:2: 7.77"]


def test_a_time_kept_in_seconds_is_quoted_in_ms(tmp_path: Path) -> None:
    (tmp_path / "experiments").mkdir()
    (tmp_path / "experiments" / "calibration.toml").write_text("context_switch_raw = -0.004832\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("cosched\n")
    (tmp_path / "docs" / "page.md").write_text("the derivation gave -4.8 ms, not 4.9 ms\n")
    assert [str(q) for q in quotes.unsourced(tmp_path)] == ["docs/page.md:1: 4.9"]
