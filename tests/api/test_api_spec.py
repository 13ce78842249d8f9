"""`omp team api` is declared once (omp.api.spec): the checks, and through omp.api.doc
`--help` and the table in docs/commands.md, all come from the declarations."""

from __future__ import annotations

from pathlib import Path

import pytest

from omp.api.doc import readme_table
from omp.api.operations import OPERATIONS, SUMMARIES, declared
from omp.api.spec import KINDS
from omp.errors import OmpError
from tests.helpers import REPO, isolate, make_project, make_team


def test_every_operation_is_declared() -> None:
    assert [op.name for op in declared()] == list(OPERATIONS)
    assert set(SUMMARIES) == set(OPERATIONS)
    for op in declared():
        assert op.fields and op.fields[0].name in (
            "team_name",
            "undelivered_only",
            "limit",
            "message_id",
        )
        assert all(f.kind in KINDS for f in op.fields)


def test_the_readme_table_is_the_declarations() -> None:
    table = readme_table(declared())
    page = (REPO / "docs" / "commands.md").read_text(encoding="utf-8")
    assert table in page, f"docs/commands.md's `team api` table is stale; it should read:\n{table}"


def test_the_read_only_operations_are_declared_so() -> None:
    from tests.faults.test_api_properties import READ_ONLY

    assert {op.name for op in declared() if op.read_only} == READ_ONLY


def test_help_lists_each_summary(capsys: pytest.CaptureFixture[str]) -> None:
    from omp.cli.api import main

    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    for name, summary in SUMMARIES.items():
        assert f"{name}  " in out and f"  {summary}\n" in out


def test_fields_are_checked_in_the_declared_order() -> None:
    send = OPERATIONS["send-message"]
    with pytest.raises(OmpError) as err:
        send({})
    assert (err.value.code, err.value.detail.get("field")) == ("invalid_input", "team_name")
    with pytest.raises(OmpError) as err:
        send({"team_name": "t", "from": "leader", "to": "../x"})
    assert err.value.code == "invalid_recipient_name"  # `to` before the missing body
    with pytest.raises(OmpError) as err:
        OPERATIONS["mailbox-list"]({"limit": -1})
    assert err.value.code == "invalid_input" and "limit" in err.value.message


def test_a_task_calls_worker_is_checked_after_the_team_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # as before the declarations: a missing team is the error, not the worker's type
    isolate(monkeypatch, tmp_path)
    root = make_project(tmp_path / "proj")
    make_team(root, "t", 1)
    for sub in ("claim-task", "transition-task-status"):
        inp = {"team_name": "ghost", "cwd": str(root), "task_id": "1", "worker": 5}
        inp |= {"from": "pending", "to": "in_progress"}
        with pytest.raises(OmpError) as err:
            OPERATIONS[sub](inp)
        assert err.value.code == "unknown_team", sub
        with pytest.raises(OmpError) as err:
            OPERATIONS[sub]({**inp, "team_name": "t"})
        assert (err.value.code, err.value.detail.get("field")) == ("invalid_input", "worker")
