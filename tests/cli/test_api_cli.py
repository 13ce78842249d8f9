"""`omp team api`: JSON in, one JSON object out, exit codes, refusals that change nothing.

Most cases run the dispatcher in this process (`call_api`, `run_cli`: fast); the behaviour only
a real process shows (exit status, stderr, stdin, console encoding) runs `python -m omp`
(`run_api`, `run_omp`).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from pytest_mock import MockerFixture
from ulid import ULID

from omp.mail.mailbox import Mailbox, new_message
from tests.helpers import (
    ISO_MS,
    MESSAGE_KEYS,
    RECEIPT_KEYS,
    call_api,
    child_env,
    is_root,
    isolate,
    mailbox_file,
    make_foreign,
    make_project,
    make_team,
    raw_lines,
    receipt,
    records,
    run_api,
    run_cli,
    run_omp,
    snapshot_tree,
    tree_modes,
    ts_message,
    write_raw,
)

BAD_NAMES = ["../escape", "worker-1/../../etc", ".", "..", "a\\b", ""]
WORKERS = ["worker-1", "worker-2", "worker-3"]


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    return isolate(monkeypatch, tmp_path)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = make_project(tmp_path / "proj")
    make_team(root, "demo", 3)
    return root


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return child_env(tmp_path / "home")


def payload(root: Path, **fields: Any) -> dict[str, Any]:
    return {"team_name": "demo", "cwd": str(root), **fields}


def send(
    capsys: pytest.CaptureFixture[str], root: Path, frm: str, to: str, body: str
) -> dict[str, Any]:
    r = call_api(capsys, "send-message", payload(root, **{"from": frm, "to": to, "body": body}))
    assert r.rc == 0, r
    out: dict[str, Any] = r.json
    return out


def fill(root: Path, recipient: str, n: int, sender: str = "worker-1") -> list[dict[str, Any]]:
    """Put n messages in a mailbox through the library (no API limits)."""
    from omp.store.paths import StatePaths

    msgs = [new_message(sender, recipient, f"m{i:03d}") for i in range(n)]
    Mailbox(StatePaths(root).team("demo"), recipient).append_messages(msgs)
    return msgs


def assert_one_json_error(r: Any, code: str | None = None) -> None:
    assert r.json is not None and isinstance(r.json, dict), r
    assert r.stdout.count("\n") == 1, r.stdout  # exactly one line, one object
    assert r.json["ok"] is False and isinstance(r.json["error"], str)
    assert isinstance(r.json["message"], str) and r.json["message"]
    if code is not None:
        assert r.json["error"] == code, r.json
    assert "Traceback" not in r.stderr


# ---- send-message -----------------------------------------------------------------------------


def test_send_message_from_a_subdirectory_in_a_real_process(
    root: Path, env: dict[str, str]
) -> None:
    sub = root / "src" / "pkg"
    sub.mkdir(parents=True)
    msg = {"team_name": "demo", "from": "worker-1", "to": "worker-2", "body": "hello \u2713"}
    r = run_api("send-message", msg, cwd=sub, env=env)
    assert r.rc == 0, r
    assert r.stderr == ""
    assert r.stdout.count("\n") == 1
    assert set(r.json) == {"ok", "messageId", "nudged", "nudge", "nudgeReason"}
    assert r.json["ok"] is True and r.json["nudged"] is False
    assert (r.json["nudge"], r.json["nudgeReason"]) == (
        "no_pane",
        "worker-2 has no pane (a headless team)",
    )
    ULID.from_str(r.json["messageId"])
    lines = records(mailbox_file(root, "worker-2"))
    assert len(lines) == 1
    line = lines[0]
    assert list(line) == MESSAGE_KEYS
    assert line["id"] == r.json["messageId"]
    assert (line["from"], line["to"], line["body"]) == ("worker-1", "worker-2", "hello \u2713")
    assert ISO_MS.match(line["timestamp"])
    assert not (sub / ".omp").exists()


def test_input_cwd_and_omp_root_choose_the_project(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sub = root / "deep" / "er"
    sub.mkdir(parents=True)
    body = {"team_name": "demo", "from": "leader", "to": "worker-1"}
    r = call_api(capsys, "send-message", {**body, "body": "via cwd", "cwd": str(sub)})
    assert r.rc == 0, r
    monkeypatch.setenv("OMP_ROOT", str(root))
    r = call_api(capsys, "send-message", {**body, "body": "via OMP_ROOT"})
    assert r.rc == 0, r
    assert [m["body"] for m in records(mailbox_file(root, "worker-1"))] == [
        "via cwd",
        "via OMP_ROOT",
    ]
    elsewhere = make_project(tmp_path / "elsewhere")
    r = call_api(capsys, "send-message", {**body, "body": "x", "cwd": str(elsewhere)})
    assert r.rc == 0, "OMP_ROOT must win over the input cwd"
    assert not (elsewhere / ".omp").exists()


def test_leader_and_worker_can_message_each_other(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = send(capsys, root, "worker-3", "leader", "to lead")
    b = send(capsys, root, "leader", "worker-3", "to w3")
    assert records(mailbox_file(root, "leader"))[0]["id"] == a["messageId"]
    assert records(mailbox_file(root, "worker-3"))[0]["id"] == b["messageId"]


@pytest.mark.parametrize(
    ("fields", "code", "rc"),
    [
        ({"team_name": None}, "invalid_input", 2),
        ({"from": None}, "invalid_input", 2),
        ({"to": None}, "invalid_input", 2),
        ({"body": None}, "invalid_input", 2),
        ({"body": ""}, "invalid_input", 2),
        ({"body": 12}, "invalid_input", 2),
        ({"team_name": 7}, "invalid_input", 2),
        ({"cwd": "/definitely/not/here"}, "invalid_input", 2),
        ({"team_name": "nosuch"}, "unknown_team", 1),
        ({"to": "worker-9"}, "unknown_recipient", 1),
        ({"to": "Worker-1"}, "unknown_recipient", 1),
        ({"from": "worker-9"}, "unknown_sender", 1),
        ({"from": "../x"}, "unknown_sender", 1),
        ({"from": "worker-2"}, "self_send", 2),
    ],
)
def test_send_refusals_change_nothing(
    root: Path, capsys: pytest.CaptureFixture[str], fields: dict[str, Any], code: str, rc: int
) -> None:
    msg: dict[str, Any] = payload(root, **{"from": "worker-1", "to": "worker-2", "body": "b"})
    for k, v in fields.items():
        if v is None:
            msg.pop(k)
        else:
            msg[k] = v
    before = snapshot_tree(root)
    r = call_api(capsys, "send-message", msg)
    assert r.rc == rc, r
    assert_one_json_error(r, code)
    assert snapshot_tree(root) == before


def test_unknown_recipient_lists_candidates_and_creates_no_mailbox(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = call_api(
        capsys, "send-message", payload(root, **{"from": "worker-1", "to": "wroker-2", "body": "b"})
    )
    assert r.json["error"] == "unknown_recipient"
    assert r.json["candidates"] == [*WORKERS, "leader"]
    assert "worker-2" in r.json["message"]
    assert not mailbox_file(root, "wroker-2").exists()


def test_unknown_team_names_the_teams_that_exist(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = call_api(
        capsys,
        "send-message",
        payload(root, team_name="dmeo", **{"from": "a", "to": "b", "body": "c"}),
    )
    assert r.json["error"] == "unknown_team"
    assert r.json["teams"] == ["demo"]


def test_body_limit_is_32_kib_of_utf8(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = payload(root, **{"from": "worker-1", "to": "worker-2"})
    r = call_api(capsys, "send-message", {**base, "body": "a" * 32768})
    assert r.rc == 0, r
    before = snapshot_tree(root)
    for body, size in (("b" * 32769, 32769), ("\u20ac" * 10923, 32769)):  # 10,923 chars, 3 B each
        r = call_api(capsys, "send-message", {**base, "body": body})
        assert r.rc == 2
        assert_one_json_error(r, "body_too_large")
        assert r.json["size"] == size and r.json["limit"] == 32768
        text = r.json["message"]
        assert str(size) in text and "32768" in text
        assert "file" in text and "path" in text
    assert snapshot_tree(root) == before


# ---- names: refused before any file is touched -------------------------------------------------


@pytest.mark.parametrize("bad", BAD_NAMES)
@pytest.mark.parametrize(
    ("sub", "field"),
    [
        ("send-message", "to"),
        ("send-message", "team_name"),
        ("broadcast", "team_name"),
        ("mailbox-list", "worker"),
        ("mailbox-read", "worker"),
        ("mailbox-mark-delivered", "worker"),
        ("mailbox-list", "team_name"),
    ],
)
def test_bad_names_are_refused_with_nothing_created(
    root: Path, capsys: pytest.CaptureFixture[str], sub: str, field: str, bad: str
) -> None:
    fill(root, "worker-2", 1)
    msg = payload(
        root,
        **{
            "from": "worker-1",
            "to": "worker-2",
            "body": "b",
            "worker": "worker-2",
            "message_id": "x",
        },
    )
    msg[field] = bad
    before = snapshot_tree(root)
    r = call_api(capsys, sub, msg)
    assert r.rc == 2, r
    want = {
        "to": "invalid_recipient_name",
        "worker": "invalid_recipient_name",
        "team_name": "invalid_team_name",
    }[field]
    assert_one_json_error(r)
    assert r.json["error"] in ((want, "invalid_input") if bad == "" else (want,))
    assert snapshot_tree(root) == before
    assert not (root.parent / "escape").exists()


@pytest.mark.parametrize("bad", BAD_NAMES)
def test_a_bad_team_name_in_a_fresh_project_creates_no_state(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: str
) -> None:
    fresh = make_project(tmp_path / "fresh")
    for sub in ("send-message", "mailbox-read"):
        r = call_api(
            capsys,
            sub,
            {
                "team_name": bad,
                "from": "worker-1",
                "to": "leader",
                "body": "b",
                "worker": "leader",
                "cwd": str(fresh),
            },
        )
        assert r.rc == 2
    assert not (fresh / ".omp").exists()
    assert sorted(os.listdir(fresh)) == [".git"]


# ---- broadcast --------------------------------------------------------------------------------


def test_broadcast_from_a_worker_reaches_the_others_and_the_leader(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = call_api(capsys, "broadcast", payload(root, **{"from": "worker-1", "body": "all hands"}))
    assert r.rc == 0, r
    assert r.json["ok"] is True
    assert r.json["recipients"] == ["worker-2", "worker-3", "leader"]
    ids = r.json["messageIds"]
    assert len(ids) == 3 and len(set(ids)) == 3
    assert "errors" not in r.json
    for to, mid in zip(r.json["recipients"], ids, strict=True):
        lines = records(mailbox_file(root, to))
        assert [(m["id"], m["from"], m["to"], m["body"]) for m in lines] == [
            (mid, "worker-1", to, "all hands")
        ]
    assert not mailbox_file(root, "worker-1").exists()


def test_broadcast_from_the_leader_reaches_every_worker_only(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = call_api(capsys, "broadcast", payload(root, **{"from": "leader", "body": "status?"}))
    assert r.json["recipients"] == WORKERS
    assert not mailbox_file(root, "leader").exists()
    for w in WORKERS:
        assert [m["body"] for m in records(mailbox_file(root, w))] == ["status?"]


def test_broadcast_reports_a_failed_recipient_and_still_delivers_the_rest(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes(b"")
    os.symlink(outside, mailbox_file(root, "worker-3"))
    r = call_api(capsys, "broadcast", payload(root, **{"from": "worker-1", "body": "hi"}))
    assert r.rc == 0, r
    assert r.json["recipients"] == ["worker-2", "leader"]
    assert len(r.json["messageIds"]) == 2
    assert len(r.json["errors"]) == 1 and r.json["errors"][0].startswith("worker-3")
    assert "unsafe_path" in r.json["errors"][0]
    assert outside.read_bytes() == b""


def test_broadcast_refuses_an_unknown_sender(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = snapshot_tree(root)
    r = call_api(capsys, "broadcast", payload(root, **{"from": "worker-7", "body": "hi"}))
    assert r.rc == 1
    assert_one_json_error(r, "unknown_sender")
    assert snapshot_tree(root) == before


# ---- mailbox-list -----------------------------------------------------------------------------


def test_mailbox_list_oldest_first_with_receipts_merged(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = [send(capsys, root, f"worker-{i}", "leader", f"b{i}")["messageId"] for i in (1, 2, 3)]
    r = call_api(
        capsys, "mailbox-mark-delivered", payload(root, worker="leader", message_id=ids[1])
    )
    assert r.rc == 0 and r.json["ok"] is True
    r = call_api(capsys, "mailbox-list", payload(root, worker="leader"))
    assert r.rc == 0
    msgs = r.json["messages"]
    assert [m["id"] for m in msgs] == ids
    assert r.json["omitted"] == 0
    assert [("deliveredAt" in m) for m in msgs] == [False, True, False]
    assert ISO_MS.match(msgs[1]["deliveredAt"])
    r = call_api(capsys, "mailbox-list", payload(root, worker="leader", undelivered_only=True))
    assert [m["id"] for m in r.json["messages"]] == [ids[0], ids[2]]


def test_mailbox_list_limit_defaults_to_the_newest_50(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    msgs = fill(root, "worker-1", 60, sender="leader")
    r = call_api(capsys, "mailbox-list", payload(root, worker="worker-1"))
    assert [m["body"] for m in r.json["messages"]] == [m["body"] for m in msgs[10:]]
    assert r.json["omitted"] == 10
    r = call_api(capsys, "mailbox-list", payload(root, worker="worker-1", limit=5))
    assert [m["body"] for m in r.json["messages"]] == ["m055", "m056", "m057", "m058", "m059"]
    assert r.json["omitted"] == 55
    r = call_api(
        capsys, "mailbox-list", payload(root, worker="worker-1", limit=4, undelivered_only=True)
    )
    assert len(r.json["messages"]) == 4 and r.json["omitted"] == 56


@pytest.mark.parametrize(
    "bad", [{"limit": -1}, {"limit": "5"}, {"limit": True}, {"limit": 1.5}, {"undelivered_only": 1}]
)
def test_mailbox_list_rejects_bad_options(
    root: Path, capsys: pytest.CaptureFixture[str], bad: dict[str, Any]
) -> None:
    r = call_api(capsys, "mailbox-list", payload(root, worker="worker-1", **bad))
    assert r.rc == 2
    assert_one_json_error(r, "invalid_input")


def test_mailbox_list_is_byte_identical_read_only_in_a_real_process(
    root: Path, env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    first = send(capsys, root, "worker-1", "worker-2", "one")["messageId"]
    # lines another program appended: the index is stale, and listing must still not write it
    write_raw(
        mailbox_file(root, "worker-2"),
        ts_message("ext-1", "leader", "worker-2", "external"),
        receipt(first),
    )
    before = snapshot_tree(root)
    for only in (False, True):
        r = run_api(
            "mailbox-list",
            {"team_name": "demo", "worker": "worker-2", "undelivered_only": only},
            cwd=root,
            env=env,
        )
        assert r.rc == 0, r
        assert [m["body"] for m in r.json["messages"]] == (
            ["external"] if only else ["one", "external"]
        )
    r = call_api(capsys, "mailbox-list", payload(root, worker="worker-3"))  # no mailbox yet
    assert r.json["messages"] == [] and r.json["omitted"] == 0
    assert snapshot_tree(root) == before


def test_mailbox_list_of_an_unknown_worker(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = call_api(capsys, "mailbox-list", payload(root, worker="worker-8"))
    assert r.rc == 1
    assert_one_json_error(r, "unknown_recipient")
    assert r.json["candidates"] == [*WORKERS, "leader"]


# ---- mark-delivered / read --------------------------------------------------------------------


def test_mark_delivered_twice_writes_one_receipt(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mid = send(capsys, root, "worker-1", "worker-2", "x")["messageId"]
    box = mailbox_file(root, "worker-2")
    for _ in range(2):
        r = call_api(
            capsys, "mailbox-mark-delivered", payload(root, worker="worker-2", message_id=mid)
        )
        assert r.rc == 0 and r.json["ok"] is True
    lines = records(box)
    assert [list(x) for x in lines] == [MESSAGE_KEYS, RECEIPT_KEYS]
    assert lines[1]["messageId"] == mid and ISO_MS.match(lines[1]["deliveredAt"])


def test_mark_delivered_of_an_unknown_id_is_refused_and_writes_nothing(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    send(capsys, root, "worker-1", "worker-2", "x")
    before = snapshot_tree(root)
    for worker in ("worker-2", "worker-3"):  # an existing mailbox, and one never written
        r = call_api(
            capsys,
            "mailbox-mark-delivered",
            payload(root, worker=worker, message_id="01ARZ3NDEKTSV4RRFFQ69G5FAV"),
        )
        assert r.rc == 1
        assert_one_json_error(r, "message_not_found")
    r = call_api(capsys, "mailbox-mark-delivered", payload(root, worker="worker-2"))
    assert r.rc == 2 and r.json["error"] == "invalid_input"
    assert snapshot_tree(root) == before


def test_mailbox_read_returns_undelivered_once(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = [
        send(capsys, root, w, "worker-3", f"from {w}")["messageId"]
        for w in ("worker-1", "leader", "worker-2")
    ]
    call_api(capsys, "mailbox-mark-delivered", payload(root, worker="worker-3", message_id=ids[1]))
    r = call_api(capsys, "mailbox-read", payload(root, worker="worker-3"))
    assert r.rc == 0, r
    assert [m["id"] for m in r.json["messages"]] == [ids[0], ids[2]]
    assert [m["body"] for m in r.json["messages"]] == ["from worker-1", "from worker-2"]
    r = call_api(capsys, "mailbox-read", payload(root, worker="worker-3"))
    assert r.rc == 0 and r.json["messages"] == []
    lines = records(mailbox_file(root, "worker-3"))
    assert sorted(x["messageId"] for x in lines if x["type"] == "delivery-receipt") == sorted(ids)
    r = call_api(capsys, "mailbox-list", payload(root, worker="worker-3"))
    assert all("deliveredAt" in m for m in r.json["messages"])


def test_mailbox_read_of_an_empty_mailbox_creates_nothing(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = snapshot_tree(root)
    r = call_api(capsys, "mailbox-read", payload(root, worker="leader"))
    assert r.rc == 0 and r.json["messages"] == []
    assert snapshot_tree(root) == before


# ---- the human form ---------------------------------------------------------------------------


def test_human_form_is_one_short_line_per_message(
    root: Path, env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    r = run_api(
        "send-message",
        {"team_name": "demo", "from": "worker-1", "to": "leader", "body": "plain words"},
        cwd=root,
        env=env,
        as_json=False,
    )
    assert r.rc == 0, r
    assert re.fullmatch(
        r"sent [0-9A-Z]{26} \(not nudged: the leader is not nudged \(launch with "
        r"--nudge-leader\); it polls with wait\)\n",
        r.stdout,
    )
    send(capsys, root, "worker-2", "leader", "red \x1b[31mALERT\x1b[0m\x07 \x1b]0;title\x07done")
    send(capsys, root, "worker-3", "leader", "first line\nsecond line")
    r = run_api(
        "mailbox-list", {"team_name": "demo", "worker": "leader"}, cwd=root, env=env, as_json=False
    )
    assert r.rc == 0 and r.stderr == ""
    lines = [x for x in r.stdout.splitlines() if not x.startswith("(")]  # not the notes
    assert len(lines) == 3
    assert re.fullmatch(r"\d\d:\d\d:\d\d  worker-1 \*: plain words", lines[0])
    # what omp takes out stays visible, escaped (omp.textsafe.visible)
    assert lines[1].endswith(r"worker-2 *: red \x1b[31mALERT\x1b[0m\x07 \x1b]0;title\x07done")
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout
    assert "worker-3 *: first line" in lines[2] and "second line" not in lines[2]


def test_human_form_of_an_empty_mailbox_and_of_a_refusal(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = call_api(capsys, "mailbox-list", payload(root, worker="leader"), as_json=False)
    assert r.rc == 0 and r.stdout == "no messages\n"
    r = call_api(
        capsys,
        "send-message",
        payload(root, **{"from": "worker-1", "to": "nobody", "body": "x"}),
        as_json=False,
    )
    assert r.rc == 1 and r.stdout == ""
    assert r.stderr.startswith("omp: ") and "[unknown_recipient]" in r.stderr


# ---- usage, exit codes, no tracebacks (real processes) ----------------------------------------

USAGE_CASES = [
    pytest.param([], "usage", id="no-args"),
    pytest.param(["bogus"], "unknown_command", id="unknown-subcommand"),
    pytest.param(["send-message"], "usage", id="missing-input"),
    pytest.param(["send-message", "--input"], "usage", id="input-without-value"),
    pytest.param(["send-message", "--input", "{"], "invalid_json", id="invalid-json"),
    pytest.param(["send-message", "--input", "[1, 2]"], "invalid_json", id="non-object-json"),
    pytest.param(["send-message", "--input", "{}", "--frobnicate"], "usage", id="unknown-option"),
]


@pytest.mark.parametrize(("argv", "code"), USAGE_CASES)
def test_usage_errors_exit_2_without_a_traceback(
    root: Path, env: dict[str, str], argv: list[str], code: str
) -> None:
    r = run_cli("team", "api", *argv, cwd=root, env=env)
    assert r.rc == 2, r
    assert "Traceback" not in r.stderr
    assert r.stdout or r.stderr


@pytest.mark.parametrize(("argv", "code"), USAGE_CASES)
def test_usage_errors_under_json_are_one_json_object(
    root: Path, env: dict[str, str], argv: list[str], code: str
) -> None:
    # --json first: after a trailing --input it would be taken as the input's value
    r = run_cli("team", "api", "--json", *argv, cwd=root, env=env)
    assert r.rc == 2, r
    assert_one_json_error(r, code)


def test_help_exits_0(env: dict[str, str], root: Path) -> None:
    r = run_cli("team", "api", "--help", cwd=root, env=env)
    assert r.rc == 0
    for sub in (
        "send-message",
        "broadcast",
        "mailbox-list",
        "mailbox-read",
        "mailbox-mark-delivered",
        "claim-task",
        "transition-task-status",
    ):
        assert sub in r.stdout


def test_input_dash_reads_stdin(root: Path, env: dict[str, str]) -> None:
    body = 'from stdin: it\'s "quoted" and $HOME-safe'
    r = run_omp(
        "team",
        "api",
        "send-message",
        "--input",
        "-",
        "--json",
        input=json.dumps({"team_name": "demo", "from": "worker-1", "to": "worker-2", "body": body}),
        cwd=root,
        env=env,
    )
    assert r.rc == 0, r
    assert records(mailbox_file(root, "worker-2"))[0]["body"] == body


def test_refusals_in_a_real_process_are_one_json_object(root: Path, env: dict[str, str]) -> None:
    r = run_api(
        "send-message",
        {"team_name": "demo", "from": "worker-1", "to": "../escape", "body": "x"},
        cwd=root,
        env=env,
    )
    assert r.rc == 2
    assert_one_json_error(r, "invalid_recipient_name")
    assert r.stderr == ""


def test_an_internal_error_exits_3_with_one_json_object(
    root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from omp.api import operations as team_api

    def boom(inp: dict[str, Any]) -> Any:
        raise RuntimeError("kaboom")

    monkeypatch.setitem(team_api.OPERATIONS, "mailbox-list", boom)
    r = call_api(capsys, "mailbox-list", payload(root, worker="leader"))
    assert r.rc == 3
    assert_one_json_error(r, "internal")
    assert "kaboom" in r.json["message"]
    r = call_api(capsys, "mailbox-list", payload(root, worker="leader"), as_json=False)
    assert r.rc == 3 and r.stdout == "" and "kaboom" in r.stderr
    assert "Traceback" not in r.stderr


def test_a_lone_surrogate_in_the_input_is_refused_cleanly(root: Path, env: dict[str, str]) -> None:
    # valid JSON, but no UTF-8 file can hold it: refused as bad input, never an internal error
    before = snapshot_tree(root)
    raw = '{"team_name":"demo","from":"worker-1","to":"worker-2","body":"broken \\ud800 emoji"}'
    r = run_omp("team", "api", "send-message", "--input", raw, "--json", cwd=root, env=env)
    assert r.rc == 2, r
    assert_one_json_error(r, "invalid_input")
    r = run_omp("team", "api", "send-message", "--input", raw, cwd=root, env=env)
    assert r.rc == 2 and r.stdout == "" and "Traceback" not in r.stderr
    assert snapshot_tree(root) == before


def test_a_line_with_an_escaped_lone_surrogate_does_not_break_listing(
    root: Path, env: dict[str, str]
) -> None:
    box = mailbox_file(root, "worker-2")
    box.parent.mkdir(parents=True, exist_ok=True)
    write_raw(
        box,
        b'{"type":"message","id":"s1","from":"worker-1","to":"worker-2",'
        b'"body":"half \\ud83d emoji","timestamp":"2026-01-01T00:00:00.000Z"}\n',
    )
    r = run_api("mailbox-list", {"team_name": "demo", "worker": "worker-2"}, cwd=root, env=env)
    assert r.rc == 0, r
    assert "Traceback" not in r.stderr
    assert [m["id"] for m in r.json["messages"]] == ["s1"]
    assert r.json["messages"][0]["body"] == "half \ud83d emoji"  # escaped, still valid JSON
    r = run_api(
        "mailbox-read",
        {"team_name": "demo", "worker": "worker-2"},
        cwd=root,
        env=env,
        as_json=False,
    )
    assert r.rc == 0 and "Traceback" not in r.stderr
    assert "worker-1 *: half" in r.stdout and "emoji" in r.stdout


# ---- unsafe paths -----------------------------------------------------------------------------


def test_a_symlinked_mailbox_is_refused_and_the_outside_file_unchanged(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "victim.txt"
    outside.write_bytes(b"important data\n")
    before = snapshot_tree(outside)
    os.symlink(outside, mailbox_file(root, "worker-2"))
    r = call_api(
        capsys, "send-message", payload(root, **{"from": "worker-1", "to": "worker-2", "body": "x"})
    )
    assert r.rc == 1
    assert_one_json_error(r, "unsafe_path")
    for sub in ("mailbox-list", "mailbox-read"):
        r = call_api(capsys, sub, payload(root, worker="worker-2"))
        assert r.rc == 1 and r.json["error"] == "unsafe_path"
    assert snapshot_tree(outside) == before


@pytest.mark.parametrize("level", [".omp", "state", "team", "demo", "mailbox"])
def test_a_symlinked_state_directory_is_refused_and_its_target_untouched(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], level: str
) -> None:
    fill(root, "worker-2", 1)
    parts = {
        ".omp": ".omp",
        "state": ".omp/state",
        "team": ".omp/state/team",
        "demo": ".omp/state/team/demo",
        "mailbox": ".omp/state/team/demo/mailbox",
    }
    real = root / parts[level]
    moved = tmp_path / "moved"
    os.rename(real, moved)
    os.symlink(moved, real)
    before = snapshot_tree(moved)
    for sub, extra in (
        ("send-message", {"from": "worker-1", "to": "worker-2", "body": "x"}),
        ("mailbox-list", {"worker": "worker-2"}),
        ("mailbox-read", {"worker": "worker-2"}),
        ("broadcast", {"from": "leader", "body": "x"}),
    ):
        r = call_api(capsys, sub, payload(root, **extra))
        if sub == "broadcast" and level == "mailbox":
            # nothing was delivered: a refusal listing every recipient's failure
            assert r.rc == 1 and r.json["error"] == "broadcast_failed"
            assert r.json["recipients"] == []
            assert len(r.json["errors"]) == 3
            assert all("unsafe_path" in e for e in r.json["errors"])
            continue
        assert r.rc == 1, (sub, r)
        assert r.json["error"] == "unsafe_path", (sub, r.json)
    assert snapshot_tree(moved) == before


@pytest.mark.skipif(not is_root(), reason="chown to another user needs root")
@pytest.mark.parametrize("what", ["mailbox-file", "team-dir", "state-dir", "omp-dir"])
def test_a_foreign_owned_path_is_refused(
    root: Path, capsys: pytest.CaptureFixture[str], what: str
) -> None:
    fill(root, "worker-2", 1)
    target = {
        "mailbox-file": mailbox_file(root, "worker-2"),
        "team-dir": root / ".omp" / "state" / "team" / "demo",
        "state-dir": root / ".omp" / "state",
        "omp-dir": root / ".omp",
    }[what]
    make_foreign(target)
    before = snapshot_tree(root)
    r = call_api(
        capsys, "send-message", payload(root, **{"from": "worker-1", "to": "worker-2", "body": "x"})
    )
    assert r.rc == 1
    assert_one_json_error(r, "unsafe_path")
    assert "owned by uid" in r.json["message"]
    assert snapshot_tree(root) == before


def test_foreign_ownership_is_judged_by_the_effective_uid(
    root: Path, capsys: pytest.CaptureFixture[str], mocker: MockerFixture
) -> None:
    before = snapshot_tree(root)
    mocker.patch("os.geteuid", return_value=os.getuid() + 12345)
    r = call_api(
        capsys, "send-message", payload(root, **{"from": "worker-1", "to": "worker-2", "body": "x"})
    )
    assert r.rc == 1
    assert_one_json_error(r, "unsafe_path")
    mocker.stopall()
    assert snapshot_tree(root) == before


def test_everything_written_is_private(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mid = send(capsys, root, "worker-1", "worker-2", "x")["messageId"]
    call_api(capsys, "broadcast", payload(root, **{"from": "leader", "body": "y"}))
    call_api(capsys, "mailbox-mark-delivered", payload(root, worker="worker-2", message_id=mid))
    call_api(capsys, "mailbox-read", payload(root, worker="worker-1"))
    modes = tree_modes(root / ".omp")
    assert len(modes) > 8
    for rel, mode in modes.items():
        want = 0o700 if (root / ".omp" / rel).is_dir() else 0o600
        assert mode == want, (rel, oct(mode))


def test_the_message_line_is_never_rewritten(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mid = send(capsys, root, "worker-1", "worker-2", "keep me")["messageId"]
    box = mailbox_file(root, "worker-2")
    first = raw_lines(box)[0]
    call_api(capsys, "mailbox-mark-delivered", payload(root, worker="worker-2", message_id=mid))
    send(capsys, root, "leader", "worker-2", "later")
    call_api(capsys, "mailbox-read", payload(root, worker="worker-2"))
    assert raw_lines(box)[0] == first
    assert len(raw_lines(box)) == 4  # message, receipt, message, receipt
