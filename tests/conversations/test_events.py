"""Events on messages: validation, the plain line shape, correlation, the guardian's answers,
limits for answers, and the conversation records (revisioned, compare-and-swap, never repaired)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from omp.api import send as send_pipeline
from omp.conversations import events
from omp.conversations import record as conversations
from omp.errors import USAGE_CODES, OmpError
from omp.store.paths import StatePaths, TeamPaths
from tests.helpers import (
    MESSAGE_KEYS,
    NO_LIMITS_TOML,
    REPO,
    call_api,
    child_env,
    isolate,
    make_project,
    make_team,
    records,
    snapshot_tree,
)


@pytest.fixture(autouse=True)
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    root = make_project(tmp_path / "proj")
    make_team(root, "t", 3, task="build the parser", no_limits=True)
    monkeypatch.setenv("OMP_ROOT", str(root))
    return root


@pytest.fixture
def team(root: Path) -> TeamPaths:
    return StatePaths(root).team("t")


def api(capsys: pytest.CaptureFixture[str], sub: str, **fields: Any) -> Any:
    return call_api(capsys, sub, {"team_name": "t", **fields})


def send(capsys: pytest.CaptureFixture[str], frm: str, to: str, body: str, **fields: Any) -> Any:
    return api(capsys, "send-message", **{"from": frm, "to": to, "body": body, **fields})


def ok(run: Any) -> dict[str, Any]:
    assert run.rc == 0, run
    assert run.json["ok"] is True, run
    return run.json  # type: ignore[no-any-return]


def refused(run: Any, code: str) -> dict[str, Any]:
    assert run.json is not None and run.json.get("error") == code, run
    assert run.rc == (2 if code in USAGE_CODES else 1), run
    return run.json  # type: ignore[no-any-return]


def mail(team: TeamPaths, who: str) -> list[dict[str, Any]]:
    path = team.mailbox(who)
    return [r for r in records(path) if r.get("type") == "message"] if path.exists() else []


def state_tree(root: Path) -> Any:
    return snapshot_tree(root / ".omp")


def task_req(capsys: pytest.CaptureFixture[str], frm: str = "leader", to: str = "worker-1") -> str:
    out = ok(send(capsys, frm, to, "review the parser", event="task_req"))
    assert out["status"] == "acknowledged", out
    return str(out["taskId"])


# ---- the plain line and the extra fields ---------------------------------------------------


def test_a_plain_message_keeps_exactly_the_typescript_line_shape(
    capsys: pytest.CaptureFixture[str], team: TeamPaths
) -> None:
    ok(send(capsys, "leader", "worker-1", "hello"))
    # null event fields are "not given": still a plain line
    ok(send(capsys, "leader", "worker-1", "hello again", event=None, task_id=None, detail=None))
    lines = mail(team, "worker-1")
    assert [list(m) for m in lines] == [MESSAGE_KEYS, MESSAGE_KEYS]


def test_event_fields_appear_only_when_given(
    capsys: pytest.CaptureFixture[str], team: TeamPaths
) -> None:
    ok(send(capsys, "worker-2", "worker-1", "fyi", event="info_only", need_reply=False))
    ok(send(capsys, "worker-2", "worker-1", "all", event="broadcast", intent="agent_join"))
    a, b = mail(team, "worker-1")
    assert list(a) == [*MESSAGE_KEYS, "event", "need_reply"]
    assert (a["event"], a["need_reply"]) == ("info_only", False)
    assert list(b) == [*MESSAGE_KEYS, "event", "intent"]


def test_the_api_and_the_events_module_agree_on_the_event_fields() -> None:
    assert send_pipeline.EVENT_FIELDS == events.FIELDS


@pytest.mark.parametrize("bad", ["task_start", "TASK_REQ", "", 5, ["task_req"]])
def test_an_unknown_event_is_invalid_event_and_writes_nothing(
    capsys: pytest.CaptureFixture[str], root: Path, bad: Any
) -> None:
    before = state_tree(root)
    out = refused(send(capsys, "leader", "worker-1", "x", event=bad), "invalid_event")
    assert "task_req" in out["message"]
    assert state_tree(root) == before


@pytest.mark.parametrize("event", ["task_ack", "task_reject", "pong"])
def test_agents_may_not_send_what_omp_sends_for_them(
    capsys: pytest.CaptureFixture[str], root: Path, event: str
) -> None:
    tid = task_req(capsys)
    before = state_tree(root)
    refused(send(capsys, "worker-1", "leader", "x", event=event, task_id=tid), "reserved_event")
    assert state_tree(root) == before


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"event": "task_update"}, "task_id"),
        ({"event": "info_only", "task_id": "01ABC"}, "task_id"),
        ({"task_id": "01ABC"}, "task_id"),
        ({"event": "task_req", "task_id": "01ABC"}, "task_id"),
        ({"event": "task_req", "ref_message_id": "01ABC"}, "ref_message_id"),
        ({"event": "info_only", "ref_message_id": "../x"}, "ref_message_id"),
        ({"event": "info_only", "need_reply": "yes"}, "need_reply"),
        ({"event": "info_only", "intent": "two\nlines"}, "intent"),
        ({"event": "info_only", "intent": "x" * 65}, "intent"),
    ],
)
def test_misplaced_or_malformed_fields_are_invalid_input(
    capsys: pytest.CaptureFixture[str], root: Path, fields: dict[str, Any], field: str
) -> None:
    before = state_tree(root)
    out = refused(send(capsys, "leader", "worker-1", "x", **fields), "invalid_input")
    assert out["field"] == field
    assert state_tree(root) == before


def test_a_task_id_that_is_not_an_id_is_invalid_task_id(
    capsys: pytest.CaptureFixture[str],
) -> None:
    refused(
        send(capsys, "worker-1", "leader", "x", event="task_done", task_id="../../etc"),
        "invalid_task_id",
    )


def test_detail_must_name_an_existing_file_inside_the_project(
    capsys: pytest.CaptureFixture[str], root: Path, tmp_path: Path, team: TeamPaths
) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("secret")
    (root / "docs").mkdir()
    inside = root / "docs" / "spec.md"
    inside.write_text("the spec")
    (root / "docs" / "escape.md").symlink_to(outside)
    before = state_tree(root)
    for bad in [
        str(root / "missing.md"),
        str(outside),
        str(root / "docs"),
        str(root / "docs" / "escape.md"),
        "../outside.md",
        "",
        7,
    ]:
        out = refused(
            send(capsys, "leader", "worker-1", "see", event="info_only", detail=bad, cwd=str(root)),
            "invalid_detail",
        )
        assert out["field"] == "detail"
    assert state_tree(root) == before
    ok(send(capsys, "leader", "worker-1", "see", detail="docs/spec.md", cwd=str(root)))
    ok(send(capsys, "leader", "worker-1", "see", detail=str(inside)))
    a, b = mail(team, "worker-1")
    assert a["detail"] == b["detail"] == str(inside.resolve())


# ---- correlation ----------------------------------------------------------------------------


def test_a_task_req_is_its_own_task_id_and_is_acknowledged_for_the_worker(
    capsys: pytest.CaptureFixture[str], team: TeamPaths
) -> None:
    out = ok(send(capsys, "leader", "worker-1", "review it", event="task_req", intent="review"))
    tid = out["taskId"]
    assert out["messageId"] == tid and out["delivered"] is True
    (req,) = mail(team, "worker-1")
    assert (req["id"], req["task_id"], req["event"], req["intent"]) == (
        tid,
        tid,
        "task_req",
        "review",
    )
    assert "ref_message_id" not in req
    (ack,) = mail(team, "leader")
    assert (ack["from"], ack["event"], ack["task_id"], ack["ref_message_id"], ack["auto"]) == (
        "worker-1",
        "task_ack",
        tid,
        tid,
        True,
    )
    assert out["autoReplies"] == [{"messageId": ack["id"], "event": "task_ack", "to": "leader"}]
    conv = conversations.load(team, tid)
    assert conv is not None and conv.state == "active" and conv.revision == 2
    assert [e["event"] for e in conv.events] == ["task_req", "task_ack"]


def test_later_messages_carry_the_task_id_and_the_message_they_answer(
    capsys: pytest.CaptureFixture[str], team: TeamPaths
) -> None:
    tid = task_req(capsys)
    ok(send(capsys, "worker-1", "leader", "which module?", event="task_clarify", task_id=tid))
    clarify = mail(team, "leader")[-1]
    assert clarify["ref_message_id"] == tid  # defaults to the task_req
    ok(send(capsys, "leader", "worker-1", "oauth", event="task_clarify_res", task_id=tid))
    res = mail(team, "worker-1")[-1]
    assert res["ref_message_id"] == clarify["id"]  # defaults to the open clarify
    ok(
        send(
            capsys,
            "worker-1",
            "leader",
            "half done",
            event="task_update",
            task_id=tid,
            ref_message_id=res["id"],
        )
    )
    assert mail(team, "leader")[-1]["ref_message_id"] == res["id"]
    out = ok(send(capsys, "worker-1", "leader", "done", event="task_done", task_id=tid))
    assert out["taskState"] == "done"


def test_an_unknown_conversation_is_refused(capsys: pytest.CaptureFixture[str], root: Path) -> None:
    task_req(capsys)
    before = state_tree(root)
    out = refused(
        send(capsys, "worker-1", "leader", "x", event="task_update", task_id="01NOSUCHTASK"),
        "unknown_task",
    )
    assert out["task_id"] == "01NOSUCHTASK"
    assert state_tree(root) == before


@pytest.mark.parametrize(
    ("frm", "to", "event"),
    [
        ("worker-3", "leader", "task_update"),  # not a party at all
        ("worker-3", "worker-1", "task_cancel"),
        ("leader", "worker-1", "task_done"),  # the requester cannot finish the worker's task
        ("worker-1", "leader", "task_cancel"),  # nor the worker cancel it
        ("worker-1", "worker-2", "task_update"),  # the worker answers only its requester
    ],
)
def test_only_the_parties_send_their_own_events(
    capsys: pytest.CaptureFixture[str], root: Path, frm: str, to: str, event: str
) -> None:
    tid = task_req(capsys)
    before = state_tree(root)
    refused(send(capsys, frm, to, "x", event=event, task_id=tid), "not_task_party")
    assert state_tree(root) == before


def test_a_closed_conversation_takes_nothing_more(
    capsys: pytest.CaptureFixture[str], root: Path
) -> None:
    tid = task_req(capsys)
    ok(send(capsys, "worker-1", "leader", "done", event="task_done", task_id=tid))
    before = state_tree(root)
    out = refused(
        send(capsys, "worker-1", "leader", "more", event="task_update", task_id=tid), "task_closed"
    )
    assert out["state"] == "done"
    refused(
        send(capsys, "leader", "worker-1", "stop", event="task_cancel", task_id=tid), "task_closed"
    )
    assert state_tree(root) == before


def test_a_cancel_ack_needs_a_cancel(capsys: pytest.CaptureFixture[str], root: Path) -> None:
    tid = task_req(capsys)
    before = state_tree(root)
    refused(
        send(capsys, "worker-1", "leader", "ok", event="task_cancel_ack", task_id=tid),
        "invalid_transition",
    )
    assert state_tree(root) == before


def test_a_ref_outside_the_conversation_is_refused(
    capsys: pytest.CaptureFixture[str], root: Path
) -> None:
    tid = task_req(capsys)
    other = task_req(capsys, "leader", "worker-2")
    before = state_tree(root)
    refused(
        send(
            capsys,
            "worker-1",
            "leader",
            "x",
            event="task_update",
            task_id=tid,
            ref_message_id=other,
        ),
        "message_not_found",
    )
    assert state_tree(root) == before


def test_a_task_req_to_oneself_is_self_send(capsys: pytest.CaptureFixture[str]) -> None:
    refused(send(capsys, "worker-1", "worker-1", "x", event="task_req"), "self_send")


# ---- the guardian ---------------------------------------------------------------------------


def test_a_task_req_to_a_busy_worker_is_rejected_without_disturbing_it(
    capsys: pytest.CaptureFixture[str], team: TeamPaths
) -> None:
    first = task_req(capsys)
    box = team.mailbox("worker-1")
    before = (box.read_bytes(), os.stat(box).st_mtime_ns)
    out = ok(send(capsys, "worker-2", "worker-1", "migrate the db", event="task_req"))
    assert (out["status"], out["reason"], out["delivered"], out["nudged"]) == (
        "rejected",
        "busy",
        False,
        False,
    )
    assert (box.read_bytes(), os.stat(box).st_mtime_ns) == before
    (rej,) = mail(team, "worker-2")
    assert (rej["from"], rej["event"], rej["task_id"], rej["ref_message_id"], rej["auto"]) == (
        "worker-1",
        "task_reject",
        out["taskId"],
        out["taskId"],
        True,
    )
    assert first in rej["body"] and "busy" in rej["body"]
    conv = conversations.load(team, out["taskId"])
    assert conv is not None and conv.state == "rejected"
    # a rejected request is a closed conversation: nothing can be sent in it
    refused(
        send(capsys, "worker-1", "worker-2", "x", event="task_update", task_id=out["taskId"]),
        "task_closed",
    )


def test_a_claimed_task_makes_a_worker_busy(capsys: pytest.CaptureFixture[str]) -> None:
    ok(api(capsys, "claim-task", task_id="1", worker="worker-1"))
    out = ok(send(capsys, "leader", "worker-1", "also this", event="task_req"))
    assert (out["status"], out["reason"]) == ("rejected", "busy")


def test_a_ping_is_answered_from_presence_and_never_reaches_the_target(
    capsys: pytest.CaptureFixture[str], team: TeamPaths
) -> None:
    ok(api(capsys, "mailbox-read", worker="worker-1"))  # worker-1 shows a sign of life
    out = ok(send(capsys, "leader", "worker-1", "are you there?", event="ping"))
    assert out["delivered"] is False
    assert (out["pong"]["presence"], out["pong"]["status"]) == ("live", "available")
    assert mail(team, "worker-1") == []
    (pong,) = mail(team, "leader")
    assert (pong["from"], pong["event"], pong["ref_message_id"], pong["auto"]) == (
        "worker-1",
        "pong",
        out["messageId"],
        True,
    )
    assert pong["body"].startswith("worker-1: available; live (seen ")


# ---- limits: answers always fit --------------------------------------------------------------


def test_answers_to_an_open_request_fit_a_full_mailbox(
    capsys: pytest.CaptureFixture[str], root: Path, team: TeamPaths
) -> None:
    (root / ".omp" / "config.toml").write_text(
        NO_LIMITS_TOML.replace("mailbox_max_unread = 1000000", "mailbox_max_unread = 3")
    )
    tid = task_req(capsys)  # the automatic ack is the leader's first unread message
    ok(send(capsys, "worker-2", "leader", "one"))
    ok(send(capsys, "worker-3", "leader", "two"))
    refused(send(capsys, "worker-1", "leader", "chatter"), "mailbox_full")
    refused(send(capsys, "worker-2", "leader", "fyi", event="info_only"), "mailbox_full")
    ok(send(capsys, "worker-1", "leader", "progress", event="task_update", task_id=tid))
    ok(send(capsys, "worker-1", "leader", "re: your task", ref_message_id=tid))
    ok(send(capsys, "worker-1", "leader", "done", event="task_done", task_id=tid))
    # the request is no longer open: a reply naming it is ordinary mail again
    refused(send(capsys, "worker-1", "leader", "ps", ref_message_id=tid), "mailbox_full")


def test_a_task_req_refused_by_the_limits_leaves_no_conversation(
    capsys: pytest.CaptureFixture[str], root: Path, team: TeamPaths
) -> None:
    (root / ".omp" / "config.toml").write_text(
        NO_LIMITS_TOML.replace("mailbox_max_unread = 1000000", "mailbox_max_unread = 1")
    )
    ok(send(capsys, "worker-2", "worker-1", "hi"))
    before = state_tree(root)
    refused(send(capsys, "leader", "worker-1", "work", event="task_req"), "mailbox_full")
    assert state_tree(root) == before
    assert conversations.open_conversations(team) == []


# ---- conversation records ---------------------------------------------------------------------


def test_publication_is_a_compare_and_swap_on_the_revision(
    capsys: pytest.CaptureFixture[str], team: TeamPaths
) -> None:
    tid = task_req(capsys)
    conv = conversations.load(team, tid)
    assert conv is not None and conv.revision == 2
    path = conversations.record_path(team, tid)
    data = path.read_bytes()
    with conversations.locked(team), pytest.raises(OmpError) as exc:
        conv.state = "done"
        conversations.publish(team, conv, expected=1)
    assert exc.value.code == "stale_revision"
    assert path.read_bytes() == data
    with conversations.locked(team):
        conversations.publish(team, conv, expected=2)
    env = json.loads(path.read_text())
    assert (env["revision"], env["payload"]["state"]) == (3, "done")
    assert conversations.open_conversations(team) == []


def test_a_damaged_record_is_refused_and_left_as_it_is(
    capsys: pytest.CaptureFixture[str], team: TeamPaths
) -> None:
    tid = task_req(capsys)
    path = conversations.record_path(team, tid)
    env = json.loads(path.read_text())
    env["payload"]["worker"] = "worker-3"  # the hash no longer matches
    damaged = json.dumps(env).encode()
    path.write_bytes(damaged)
    refused(
        send(capsys, "worker-1", "leader", "x", event="task_update", task_id=tid), "corrupt_record"
    )
    assert path.read_bytes() == damaged


def test_a_lost_summary_is_rebuilt_from_the_records(
    capsys: pytest.CaptureFixture[str], team: TeamPaths
) -> None:
    tid = task_req(capsys)
    done = task_req(capsys, "leader", "worker-2")
    ok(send(capsys, "worker-2", "leader", "ok", event="task_done", task_id=done))
    conversations.summary_path(team).unlink()
    assert [c.task_id for c in conversations.open_conversations(team)] == [tid]
    out = ok(send(capsys, "worker-3", "worker-1", "more", event="task_req"))
    assert out["status"] == "rejected"  # still busy: the record says so
    assert set(conversations.open_summary(team)) == {tid}


# ---- start-up cost ------------------------------------------------------------------------------

_PROBE = """
import sys
from omp.cli.api import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
heavy = ("omp.conversations.events", "omp.conversations.record", "omp.monitor.sweep")
print(sorted(m for m in heavy if m in sys.modules))
"""


def test_a_plain_send_does_not_import_the_conversation_machinery(
    root: Path, tmp_path: Path
) -> None:
    env = child_env(tmp_path / "home", OMP_ROOT=str(root))

    def loaded(payload: dict[str, Any]) -> list[str]:
        argv = ["send-message", "--input", json.dumps(payload), "--json"]
        out = subprocess.run(
            [sys.executable, "-c", _PROBE, *argv],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
        assert json.loads(out[0])["ok"] is True, out
        return json.loads(out[1].replace("'", '"'))  # type: ignore[no-any-return]

    plain = {"team_name": "t", "from": "leader", "to": "worker-1", "body": "plain"}
    assert loaded(plain) == []
    assert loaded({**plain, "body": "labelled", "event": "info_only"}) == [
        "omp.conversations.events",
        "omp.conversations.record",
    ]


_COSTLY = _PROBE.replace(
    'heavy = ("omp.conversations.events", "omp.conversations.record", "omp.monitor.sweep")',
    # what no API call on a headless team needs; each costs ~10-100 ms of start-up
    'heavy = ("typer", "libtmux", "ulid", "dataclasses", "inspect", "tempfile")',
)


@pytest.mark.parametrize(
    ("sub", "payload"),
    [
        ("send-message", {"from": "leader", "to": "worker-1", "body": "plain"}),
        ("mailbox-list", {"worker": "worker-1"}),
        ("mailbox-read", {"worker": "worker-1"}),
    ],
)
def test_an_api_call_imports_nothing_costly(
    root: Path, tmp_path: Path, sub: str, payload: dict[str, Any]
) -> None:
    env = child_env(tmp_path / "home", OMP_ROOT=str(root))
    argv = [sub, "--input", json.dumps({"team_name": "t", **payload}), "--json"]
    out = subprocess.run(
        [sys.executable, "-c", _COSTLY, *argv],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert json.loads(out[0])["ok"] is True, out
    assert out[1] == "[]"
