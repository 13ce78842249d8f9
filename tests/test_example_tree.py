"""`.omp-example/` is what the code writes today: a fresh demo run, normalized, matches it.

On a mismatch, regenerate and review the diff: `.venv/bin/python scripts/make_example.py`.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.helpers import REPO

pytestmark = [pytest.mark.tmux, pytest.mark.slow]  # a whole demo run
REGENERATE = ".venv/bin/python scripts/make_example.py"


def _script() -> ModuleType:
    path = REPO / "scripts" / "make_example.py"
    spec = importlib.util.spec_from_file_location("make_example", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["make_example"] = mod  # dataclass-free, but keep the import machinery happy
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def me() -> ModuleType:
    return _script()


def test_fresh_run_matches_committed_example(
    me: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    monkeypatch.delenv("TMUX", raising=False)
    out = tmp_path / "example"
    me.generate(out)
    problems = me.compare(me.EXAMPLE, out)
    assert not problems, "\n".join([*problems, f".omp-example/ drifted: run {REGENERATE}"])


def test_committed_example_has_the_documented_files(me: ModuleType) -> None:
    rels = set(me.files(me.EXAMPLE))
    team = "state/team/haiku"
    for rel in (
        "state/ralph.json",
        f"{team}/config.json",
        f"{team}/shutdown.json",
        f"{team}/tasks/1.json",
        f"{team}/mailbox/leader.jsonl",
        f"{team}/mailbox/worker-1.jsonl",
        f"{team}/mailbox/worker-2.jsonl",
        f"{team}/workers/worker-1/inbox.md",
        f"{team}/workers/worker-1/outbox.jsonl",
        f"{team}/workers/worker-1/result.md",
    ):
        assert rel in rels, rel
    readme = (me.EXAMPLE / "README.md").read_text()
    undocumented = [r for r in rels if Path(r).name not in readme]
    assert not undocumented, f"README.md does not mention {undocumented}"


def test_committed_example_hides_every_per_run_value(me: ModuleType) -> None:
    for rel, path in me.files(me.EXAMPLE).items():
        text = path.read_text()
        assert "/tmp/" not in text and "/home/" not in text, rel
        assert not me.ISO.search(text), f"{rel}: a real time"
        assert not me.ULID.search(text), f"{rel}: a real id"
        assert '"%' not in text, f"{rel}: a real pane id"


def test_mailboxes_show_a_teammate_exchange_with_receipts(me: ModuleType) -> None:
    box = me.EXAMPLE / "state/team/haiku/mailbox"

    def lines(name: str) -> list[dict[str, object]]:
        return [json.loads(x) for x in (box / name).read_text().splitlines()]

    question = [m for m in lines("worker-2.jsonl") if m["type"] == "message"]
    assert [(m["from"], m["body"]) for m in question] == [("worker-1", me.QUESTION)]
    reply = [m for m in lines("worker-1.jsonl") if m["type"] == "message"]
    assert reply[0]["ref_message_id"] == question[0]["id"]
    for name in ("leader.jsonl", "worker-1.jsonl", "worker-2.jsonl"):
        got = lines(name)
        ids = {m["id"] for m in got if m["type"] == "message"}
        receipts = {m["messageId"] for m in got if m["type"] == "delivery-receipt"}
        assert ids and ids == receipts, name


def test_compare_catches_drift(me: ModuleType, tmp_path: Path) -> None:
    """The comparison is able to fail: a changed value, a new key, a missing file."""
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(me.EXAMPLE, a)
    shutil.copytree(me.EXAMPLE, b)
    assert me.compare(a, b) == []
    cfg = b / "state/team/haiku/config.json"
    cfg.write_text(cfg.read_text().replace('"workerCount": 2', '"workerCount": 3'))
    assert me.compare(a, b) == ["state/team/haiku/config.json: content differs"]
    obj = json.loads(cfg.read_text())
    obj["extra"] = 1
    cfg.write_text(json.dumps(obj, indent=2))
    assert me.compare(a, b) == ["state/team/haiku/config.json: JSON structure differs (extra: new)"]
    (b / "state/ralph.json").unlink()
    assert "state/ralph.json: in the committed example, not produced by this code" in me.compare(
        a, b
    )
