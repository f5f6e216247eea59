"""Text views of controller answers (gangster-style, Gorda & Brooks 1991 §3): exact expected
text."""

from __future__ import annotations

from typing import Any

from controller.slice import slice_matrix
from testbed.views import render_jobs, render_matrix, render_slice

JOBS: dict[str, Any] = {
    "1": {"user": "alice", "class": "interactive", "size": 2, "state": "running"},
    "2": {"user": "bob", "class": "production", "size": 2, "state": "running"},
    "3": {"user": "carol", "class": "standby", "size": 2, "state": "running"},
    "4": {"user": "dan", "class": "benchmark", "size": 4, "state": "frozen"},
}


def test_small_matrix_has_node_names_job_ids_and_running_marks() -> None:
    result = {
        "policy": "paired-gang",
        "quantum": 1.0,
        "nodes": ["n0", "n1", "n2", "n3"],
        "slots": [[1, 1, 2, 2], [3, 3, None, None], [4, 4, 4, 4]],
        "running": {"slot": 0, "partner": 1, "alternates": []},
        "jobs": JOBS,
    }
    assert render_matrix(result) == (
        "paired-gang  quantum 1 s  4 nodes  3 slots\n"
        "    n0 n1 n2 n3\n"
        ">0  1  1  2  2\n"
        "+1  3  3  .  .\n"
        " 2  4  4  4  4\n"
        "\n"
        "JOB  USER   CLASS        SIZE  STATE    RUNS\n"
        "  1  alice  interactive     2  running  slot\n"
        "  2  bob    production      2  running  slot\n"
        "  3  carol  standby         2  running  partner\n"
        "  4  dan    benchmark       4  frozen\n"
    )


def test_wide_machine_gets_one_letter_per_node_and_a_vertical_index() -> None:
    result = {
        "policy": "gang",
        "quantum": 0.5,
        "nodes": [f"n{i}" for i in range(40)],
        "slots": [[1] * 20 + [2] * 20, [3] * 10 + [None] * 30],
        "running": {"slot": 1, "partner": None, "alternates": {"n20": 2}},
        "jobs": {"1": JOBS["1"], "2": JOBS["2"], "3": JOBS["3"]},
    }
    assert render_matrix(result) == (
        "gang  quantum 0.5 s  40 nodes  2 slots\n"
        "    0         1         2         3\n"
        "    0123456789012345678901234567890123456789\n"
        "*0  aaaaaaaaaaaaaaaaaaaabbbbbbbbbbbbbbbbbbbb\n"
        ">1  cccccccccc..............................\n"
        "\n"
        "   JOB  USER   CLASS        SIZE  STATE    RUNS\n"
        "a    1  alice  interactive     2  running\n"
        "b    2  bob    production      2  running  alternate\n"
        "c    3  carol  standby         2  running  slot\n"
    )


def test_128_nodes_fit_on_a_terminal() -> None:
    result = {"policy": "gang", "nodes": [f"node{i}" for i in range(128)], "slots": [[7] * 128]}
    lines = render_matrix(result).splitlines()
    assert lines[0] == "gang  128 nodes  1 slot"
    assert lines[1].split() == [str(t) for t in range(13)]
    assert lines[2] == "    " + ("0123456789" * 13)[:128]
    assert lines[3] == " 0  " + "a" * 128
    assert lines[-1].split() == ["a", "7", "?", "?", "?", "?"]
    assert max(len(x) for x in lines) == 132


def test_1024_nodes_list_runs_of_nodes_per_row() -> None:
    n = 1024
    out = render_matrix(
        {
            "policy": "gang",
            "nodes": [f"n{i}" for i in range(n)],
            "slots": [[1] * n, [2] * 512 + [3] * 512, [None] * 1000 + [4] * 24],
            "jobs": {"1": {"size": n}, "2": {"size": 512}, "3": {"size": 512}, "4": {"size": 24}},
            "running": {"slot": 1},
        }
    )
    lines = out.splitlines()
    assert max(len(x) for x in lines) < 100
    assert " 0  n0-n1023:a" in lines
    assert ">1  n0-n511:b n512-n1023:c" in lines
    assert " 2  n0-n999:. n1000-n1023:d" in lines


def test_empty_matrix_says_so() -> None:
    result = {"policy": "gang", "quantum": 1, "nodes": ["n0"], "slots": [], "running": None}
    assert render_matrix(result) == "gang  quantum 1 s  1 node  0 slots\n(no jobs in the matrix)\n"


def test_job_table_shows_cpu_against_wall_and_utilization() -> None:
    records: list[dict[str, Any]] = [
        {
            "job_id": 12,
            "name": None,
            "user": "bob",
            "class": "standby",
            "size": 2,
            "state": "queued",
            "wall_s": None,
            "cpu_s": None,
            "exit_code": None,
        },
        {
            "job_id": 3,
            "name": "synthetic-io-bound-with-a-long-name",
            "user": "alice",
            "class": "production",
            "size": 4,
            "state": "done",
            "wall_s": 10.0,
            "cpu_s": 12.0,
            "exit_code": 0,
        },
    ]
    assert render_jobs(records) == (
        "ID  NAME                  USER   CLASS       SIZE  STATE   CPU_S  WALL_S  UTIL  EXIT\n"
        " 3  synthetic-io-bound-~  alice  production     4  done     12.0    10.0  0.30     0\n"
        "12  -                     bob    standby        2  queued      -       -     -     -\n"
    )
    assert render_jobs([]) == "no jobs\n"


def test_slice_points_at_the_hole_free_in_every_row() -> None:
    text = render_slice(slice_matrix(8, {1: 6, 2: 4}, size=2).to_dict())
    assert text == (
        "2 jobs packed space-wise into 2 rows on 8 nodes\n"
        "    0 1 2 3 4 5 6 7\n"
        " 0  1 1 1 1 1 1 . .\n"
        " 1  2 2 2 2 . . . .\n"
        "                ^ ^\n"
        "free in every row: 6-7 (2 nodes)\n"
        "a job of 2 nodes placed within 6-7 (2 nodes) would get 100% of the time\n"
    )


def test_slice_without_a_hole_explains_the_cost() -> None:
    text = render_slice(slice_matrix(4, {1: 2, 2: 2}).to_dict(), 3, nodes=["a", "b", "c", "d"])
    assert text == (
        "2 jobs packed space-wise into 1 row on 4 nodes\n"
        "    a b c d\n"
        " 0  1 1 2 2\n"
        "free in every row: none\n"
        "no run of 3 nodes is free in every row: a job of 3 nodes would share its nodes' time "
        "with other jobs\n"
    )


def test_slice_of_an_empty_machine_and_of_a_wide_one() -> None:
    assert render_slice({"packed": [], "free_runs": [[0, 3]], "size": None, "fits": True}) == (
        "0 jobs packed space-wise into 0 rows on 4 nodes\nfree in every row: 0-3 (4 nodes)\n"
    )
    lines = render_slice(slice_matrix(64, {5: 40, 6: 30}).to_dict()).splitlines()
    assert lines[3] == " 0  " + "a" * 40 + "." * 24
    assert lines[4] == " 1  " + "b" * 30 + "." * 34
    assert lines[5] == "    " + " " * 40 + "^" * 24
    assert lines[6:] == ["jobs: a=5, b=6", "free in every row: 40-63 (24 nodes)"]


def test_cdc_matrix_shows_the_mpl_and_rows_of_jobs_sharing_nodes() -> None:
    result = {
        "policy": "cc-b",
        "mpl": 3,
        "scheme": "cc-b",
        "quantum": 0.1,
        "nodes": ["n0", "n1", "n2"],
        "slots": [[1, 1, 2], [2, None, None]],
        "running": {"slot": None, "partner": None, "alternates": []},
        "jobs": {"1": JOBS["1"], "2": JOBS["2"]},
    }
    text = render_matrix(result)
    assert text.startswith(
        "cc-b  MPL 3  quantum 0.1 s  3 nodes  2 slots\n    n0 n1 n2\n 0  1  1  2\n 1  2  .  .\n"
    )


def test_policy_line() -> None:
    from testbed.views import render_policy

    assert render_policy({"policy": "gang"}) == "policy gang"
    status = {"policy": "sb", "mpl": 5, "scheme": "sb", "tick_ms": 10.0, "spin_us": 150.0,
              "boost": "weight", "local_policy": {"n0": "sb", "n1": "refused: old"}}  # fmt: skip
    assert render_policy(status) == (
        "policy sb: MPL 5, scheme sb (tick 10 ms, spin 150 us, boost weight); n1 refused: old"
    )


def test_cluster_status_names_what_the_controller_runs() -> None:
    from testbed.commands.cluster import controller_line

    assert controller_line(None).startswith("controller: none answering")
    line = controller_line({"policy": "dcs", "mpl": 2, "scheme": "dcs"})
    assert line == "controller: policy dcs: MPL 2, scheme dcs" and "\n" not in line
