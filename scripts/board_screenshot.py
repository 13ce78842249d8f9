"""Take docs/board.png: the board of a running demo backlog team, in Debian's chromium.

    .venv/bin/python scripts/board_screenshot.py [OUT.png]

A throwaway git repository (as `omp demo` makes one), a private tmux server, `omp team launch
3:demo --tasks` with `omp demo --backlog`'s six tasks (a worktree and branch each, merged by
hand), waited until the first four wait for their merge; two of them merged with `omp team merge
--task`, so the task waiting for one of them starts; then `omp team board`, its page opened in
chromium through Playwright (the system browser) and a screenshot while that task runs: the graph
shows tasks done, in progress, to merge and blocked. Everything is removed afterwards.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip


def omp(*args: str, cwd: Path, env: dict[str, str]) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "omp", *args], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=180,
    )  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"omp {' '.join(args)}: {proc.stderr}")
    return proc.stdout


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "docs" / "board.png").resolve()
    from playwright.sync_api import sync_playwright

    from omp.cli.demo import DEMO_BACKLOG, make_repo
    from omp.tmux import Tmux

    work = Path(tempfile.mkdtemp(prefix="omp-board-shot-")).resolve()
    sock = f"omp-board-shot-{secrets.token_hex(4)}"
    tmux = Tmux(socket_name=sock, config_file="/dev/null")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMP_") and k != "TMUX"}
    (work / "home").mkdir()
    env.update(HOME=str(work / "home"), SHELL="/bin/sh", OMP_TMUX_SOCKET=sock)
    for role in ("AUTHOR", "COMMITTER"):  # a merge commit's, with a HOME that has no git identity
        env.update({f"GIT_{role}_NAME": "omp-demo", f"GIT_{role}_EMAIL": "demo@omp.invalid"})
    board = None
    try:
        repo, _ = make_repo(work)
        tasks_file = work / "tasks.toml"
        tasks_file.write_text(DEMO_BACKLOG, encoding="utf-8")
        env["OMP_DEMO_WORK_SECONDS"] = "6"  # long enough to catch a task in progress
        omp("team", "launch", "3:demo", "--tasks", str(tasks_file), "--merge", "manual",
            "--name", "parser", cwd=repo, env=env)  # fmt: skip

        def states() -> dict[str, str]:
            got = json.loads(omp("team", "task", "list", "parser", "--json", cwd=repo, env=env))
            return {str(t["id"]): str(t["state"]) for t in got["tasks"]}

        for _ in range(600):
            if sum(s == "to_merge" for s in states().values()) >= 4:
                break
            time.sleep(0.3)
        for tid in ("3", "1"):  # 1's merge lets 4 start
            omp("team", "merge", "parser", "--task", tid, cwd=repo, env=env)
        board = subprocess.Popen(
            [sys.executable, "-m", "omp", "team", "board", "parser"], cwd=repo, env=env,
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert board.stdout is not None
        url = board.stdout.readline().strip()
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.goto(url)
            page.wait_for_function(
                "() => document.querySelectorAll('#screens figure').length == 3 && "
                "document.querySelector('[data-column=in_progress] [data-task=\"4\"]')",
                timeout=60000,
            )
            page.wait_for_timeout(1500)
            page.evaluate("() => { document.activeElement.blur(); window.scrollTo(0, 0); }")
            page.screenshot(path=str(out))
            browser.close()
        print(out)
    finally:
        if board is not None:
            board.terminate()
            board.wait(timeout=10)
        try:
            omp("team", "shutdown", "parser", cwd=work / "repo", env=env)
        except SystemExit:
            pass
        tmux.kill_server()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
