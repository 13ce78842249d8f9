"""Fault: whatever an agent passes to `omp team api`, property-based (hypothesis).

For every subcommand (read from `omp.api.operations.OPERATIONS`: a new one is covered at once) the
input is a random mix of: valid values that reach deep into the code, random JSON of every type
(huge ints, NaN, nested objects, lists), strings with control characters and lone surrogates,
path-like names, missing and unknown fields, inputs that are not objects or not JSON at all.

Promise: never a traceback and never `internal`; exactly one JSON object on stdout (with
`--json`); exit 0 only when accepted, else 1 or 2 with an `error` code (2 exactly for the usage
codes); nothing written when refused, and nothing ever written by a read-only subcommand.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from omp.api.operations import OPERATIONS, SUMMARIES
from omp.conversations.events import EVENTS
from omp.errors import USAGE_CODES
from omp.tasks import tasks
from omp.tasks.tasks import STATUSES
from tests.helpers import call_api, isolate, make_project, make_team, snapshot_tree

EXAMPLES = 60
READ_ONLY = {"mailbox-list", "list-tasks", "roster"}
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def fields_of(sub: str) -> dict[str, bool]:
    """The input fields a subcommand documents (`{team_name, worker?, ...}`): name -> required."""
    m = re.match(r"\{([^}]*)\}", SUMMARIES.get(sub, ""))
    found = [f.strip() for f in m.group(1).split(",")] if m else []
    out = {f.rstrip("?"): not f.endswith("?") for f in found if f}
    out["cwd"] = False
    return out


def test_every_subcommand_documents_its_fields() -> None:
    assert set(SUMMARIES) == set(OPERATIONS)
    for sub in OPERATIONS:
        assert "team_name" in fields_of(sub), sub


# ---- strategies ------------------------------------------------------------------------------

NASTY_TEXT = st.text(st.characters(exclude_categories=()), max_size=24)
PATHISH = st.sampled_from(
    [
        "",
        ".",
        "..",
        "../demo",
        "/etc/passwd",
        "a/b",
        "worker-1/../leader",
        "worker-1\n",
        "\x00",
        "~",
        " leader",
        "LEADER",
        "worker-1 ",
        "-rf",
        "%1",
        "$(id)",
        "demo;rm",
        "x" * 300,
    ]
)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | NASTY_TEXT
    | PATHISH
)
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
MEMBERS = st.sampled_from(["leader", "worker-1", "worker-2"] * 3 + ["worker-3"])
ABSENT = object()
TASK_IDS = [str(n) for n in range(1, 9)]


def good_values(
    sub: str, field: str, root: Path, mids: list[str], tokens: list[str]
) -> st.SearchStrategy[Any]:
    """Values that pass the field's own checks (so the call gets further)."""
    if sub == "transition-task-status" and field in ("from", "to"):
        likely = ["pending", "in_progress"] if field == "from" else ["in_progress", "completed"]
        return st.sampled_from(likely * 3 + list(STATUSES))
    return {
        "team_name": st.sampled_from(["demo"] * 6 + ["ghost"]),
        "from": MEMBERS,
        "to": MEMBERS,
        "worker": MEMBERS,
        "body": st.text(min_size=1, max_size=40) | st.just("/approve everything\x1b[2J"),
        "task_id": st.sampled_from([*TASK_IDS, "99", *mids[:1]]),
        "message_id": st.sampled_from([*mids, "nope"]),
        "ref_message_id": st.sampled_from([*mids, "nope"]),
        "limit": st.integers(min_value=-1, max_value=1001),
        "undelivered_only": st.booleans(),
        "claim_token": st.sampled_from(tokens) | st.text(max_size=12),
        "result": st.text(max_size=20),
        "event": st.sampled_from(EVENTS),
        "intent": st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=64),
        "need_reply": st.booleans(),
        "detail": st.sampled_from([str(root / "notes.md"), "notes.md", "/etc/hostname", "../x"]),
        # Never a path outside this project that exists: a refusal there proves nothing, and a
        # real project up the tree must never be touched.
        "cwd": st.sampled_from([str(root), str(root / "sub"), ".", "sub", "missing", "/nope"]),
    }.get(field, st.text(max_size=10))


def field_value(
    sub: str, field: str, required: bool, root: Path, mids: list[str], tokens: list[str]
) -> Any:
    """A field's value, or ABSENT: mostly valid (a required field) or mostly absent (optional)."""
    kinds = {
        "good": good_values(sub, field, root, mids, tokens),
        "junk": JSON | PATHISH,
        "absent": st.just(ABSENT),
    }
    if field == "cwd":
        weights = ["absent"] * 2 + ["good"]
    elif required:
        weights = ["good"] * 10 + ["junk", "absent"]
    else:
        weights = ["absent"] * 12 + ["good"] * 2 + ["junk"]
    # sampled_from draws the weights evenly; `a | a | b` would not make `a` twice as likely.
    return st.sampled_from(weights).flatmap(kinds.__getitem__)


def payloads(sub: str, root: Path, mids: list[str], tokens: list[str]) -> st.SearchStrategy[str]:
    """The raw `--input` text: mostly objects of the subcommand's fields, sometimes anything."""
    values = {f: field_value(sub, f, req, root, mids, tokens) for f, req in fields_of(sub).items()}
    objects = st.fixed_dictionaries(values).map(
        lambda d: {k: v for k, v in d.items() if v is not ABSENT}
    )
    extra = st.dictionaries(st.text(max_size=8), JSON, max_size=2)
    with_extra = st.tuples(objects, extra).map(lambda t: {**t[1], **t[0]})
    kinds = {
        "object": objects.map(json.dumps),
        "extra": with_extra.map(json.dumps),
        "json": JSON.map(json.dumps),
        "text": st.text(max_size=30),
    }
    mixed = st.sampled_from(["object"] * 6 + ["extra"] * 2 + ["json", "text"]).flatmap(
        kinds.__getitem__
    )
    if sub == "transition-task-status":
        # A task moves only with the token its claim returned: keep one such call in the mix so
        # the accepted side is reached at all (random fields almost never pair task and token).
        valid = {
            "team_name": "demo",
            "task_id": "2",
            "worker": "worker-2",
            "from": "in_progress",
            "to": "completed",
            "claim_token": tokens[0],
            "result": "done",
        }
        return st.one_of(st.just(json.dumps(valid)), mixed)
    return mixed


# ---- the property --------------------------------------------------------------------------


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path)
    root = make_project(tmp_path / "proj")
    team = make_team(root, "demo", 2, task="fuzz me", no_limits=True)
    for tid in TASK_IDS[2:]:
        tasks.create(team, tid, f"extra task {tid}")
    (root / "sub").mkdir()
    (root / "notes.md").write_text("details\n")
    monkeypatch.chdir(root / "sub")  # a relative `cwd` resolves inside the project
    return root


@pytest.mark.parametrize("sub", sorted(OPERATIONS))
def test_any_input_gets_one_json_answer_and_a_refusal_writes_nothing(
    root: Path, capsys: pytest.CaptureFixture[str], sub: str
) -> None:
    mids = []
    for i, to in enumerate(["worker-1", "worker-2", "leader"]):
        sender = "leader" if to != "leader" else "worker-1"
        inp = {"team_name": "demo", "cwd": str(root), "from": sender, "to": to, "body": f"s{i}"}
        r = call_api(capsys, "send-message", inp)
        mids.append(r.json["messageId"])
    claim = {"team_name": "demo", "cwd": str(root), "task_id": "2", "worker": "worker-2"}
    tokens = [call_api(capsys, "claim-task", claim).json["claimToken"]]
    state = root / ".omp"
    outcomes: list[int] = []

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,  # the same examples on every run: CI failures reproduce
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        raw=payloads(sub, root, mids, tokens), as_json=st.sampled_from([True, True, True, False])
    )
    def check(raw: str, as_json: bool) -> None:
        before = snapshot_tree(state)
        argv = [sub, "--input", raw, *(["--json"] if as_json else [])]
        r = call_api(capsys, None, argv=argv)
        where = f"{sub} --input {raw!r}: rc {r.rc}, stdout {r.stdout!r}, stderr {r.stderr!r}"
        assert "Traceback" not in r.stderr, where
        assert r.rc in (0, 1, 2), where
        outcomes.append(r.rc)
        if as_json:
            assert isinstance(r.json, dict) and r.stdout.count("\n") == 1, where
            if r.rc == 0:
                assert r.json.get("ok") is True and "error" not in r.json, where
            else:
                err = r.json.get("error")
                assert r.json.get("ok") is False and isinstance(err, str) and err, where
                assert err != "internal", where
                assert r.rc == (2 if err in USAGE_CODES else 1), where
        else:
            if r.rc != 0:
                assert r.stdout == "" and re.fullmatch(r"omp: .*\[\w+\]\n", r.stderr), where
            assert not CONTROL.search(r.stdout.replace("\n", "")), where
        if r.rc != 0 or sub in READ_ONLY:
            assert snapshot_tree(state) == before, f"wrote on a refusal or a read: {where}"

    check()
    # The generator must keep reaching both sides: a renamed field or a stricter check that
    # refuses everything would otherwise turn this into a test of argument parsing only.
    assert 0 in outcomes and {1, 2} & set(outcomes), (sub, outcomes)
