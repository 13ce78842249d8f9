"""Take docs/board.png: the board of a running demo team, in Debian's chromium.

    .venv/bin/python scripts/board_screenshot.py [OUT.png]

A throwaway git repository (as `omp demo` makes one), a private tmux server, `omp team launch
3:demo` with a worktree per worker, waited until done; then `omp team board`, its page opened in
chromium through Playwright (the system browser), a message sent from the page, and a screenshot.
Everything is removed afterwards.
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

    from omp.cli.demo import make_repo
    from omp.tmux import Tmux

    work = Path(tempfile.mkdtemp(prefix="omp-board-shot-")).resolve()
    sock = f"omp-board-shot-{secrets.token_hex(4)}"
    tmux = Tmux(socket_name=sock, config_file="/dev/null")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMP_") and k != "TMUX"}
    (work / "home").mkdir()
    env.update(HOME=str(work / "home"), SHELL="/bin/sh", OMP_TMUX_SOCKET=sock)
    board = None
    try:
        repo, _ = make_repo(work)
        omp("team", "launch", "3:demo", "write a haiku about tmux", "--name", "haiku",
            "--workspace", "worktree", cwd=repo, env=env)  # fmt: skip
        for _ in range(300):
            st = json.loads(omp("team", "status", "haiku", "--json", cwd=repo, env=env))
            if st["teams"][0]["allDone"]:
                break
            time.sleep(0.3)
        board = subprocess.Popen(
            [sys.executable, "-m", "omp", "team", "board", "haiku"], cwd=repo, env=env,
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
                "![...document.querySelectorAll('#workers td')].some(t => "
                "t.textContent.includes('reading'))",
                timeout=60000,
            )
            page.get_by_label("To", exact=True).select_option("worker-2")
            page.get_by_label("Message", exact=True).fill("Nice haiku. Can you add a title?")
            page.get_by_role("button", name="Send", exact=True).click()
            page.wait_for_function(
                "() => document.querySelector('#notice').textContent.includes('sent to')"
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
            omp("team", "shutdown", "haiku", cwd=work / "repo", env=env)
        except SystemExit:
            pass
        tmux.kill_server()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
