"""A worker's checkout on another host is never looked for here: deleting or pruning its team
weighs and removes its branch in this repository only, whatever its recorded path names here
(a second user's home on a test machine, a same-named directory on a laptop)."""

from __future__ import annotations

from pathlib import Path

import pytest

from omp.cli.team_text import worktree_removals
from omp.record.placement import mirror_of
from omp.record.workspace import Worktree, worktree_of
from omp.team.worktrees import remove_safely
from tests.workspace.gitrepo import g, isolate_git, make_repo

pytestmark = pytest.mark.slow  # real git


def test_only_the_branch_of_a_remote_checkout_is_removed_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate_git(monkeypatch, tmp_path)
    repo = make_repo(tmp_path / "proj")
    base = g(repo, "rev-parse", "HEAD")
    g(repo, "branch", "omp/t/worker-2", base)  # fetched back, merged (nothing ahead)
    # what the recorded path names here: a checkout with uncommitted work that is not ours
    there = make_repo(tmp_path / "elsewhere")
    (there / "precious.txt").write_text("not the team's\n")
    wt = Worktree(str(there), "omp/t/worker-2", base, "build1")
    rows = remove_safely(repo, [("worker-2", wt)])
    assert [(r.removed, r.host, r.path) for r in rows] == [(True, "build1", f"build1:{there}")]
    assert (there / "precious.txt").read_text() == "not the team's\n"
    assert (there / ".git").exists()
    assert g(repo, "branch", "--list", "omp/t/worker-2") == ""
    text = worktree_removals([r._asdict() for r in rows])
    assert text and "branch omp/t/worker-2" in text[0] and "host's" in text[0], text


def test_the_host_reads_its_own_checkout_as_local() -> None:
    entry = {
        "name": "worker-2",
        "paneId": None,
        "remote": {"host": "build1", "root": "/r/p/root", "worktree": "/r/p/wt",
                   "branch": "omp/t/worker-2", "socket": "omp-p", "pane": "%3"},
        "workspace": Worktree("/r/p/wt", "omp/t/worker-2", "abc", "build1").to_json(),
    }  # fmt: skip
    leader = worktree_of(entry)
    assert leader is not None and leader.host == "build1"
    mirrored = mirror_of({"workers": [entry], "leaderPaneId": "%0", "tmuxIdentity": {}})
    on_host = worktree_of(mirrored["workers"][0])
    assert on_host is not None and on_host.host == "" and on_host.path == "/r/p/wt"
    assert mirrored["leaderPaneId"] is None and "tmuxIdentity" not in mirrored
    assert mirrored["verifyAt"] == "leader"
