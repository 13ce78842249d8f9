"""The environment line every benchmark prints above its table."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _tmux() -> str:
    try:
        return subprocess.run(
            ["tmux", "-V"], capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        return "tmux: not found"


def machine_lines() -> list[str]:
    return [
        f"date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}",
        f"machine: {_cpu()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}",
        f"python: {sys.version.split()[0]} ({sys.executable}); {_tmux()}",
        f"load average: {', '.join(f'{x:.2f}' for x in os.getloadavg())}",
    ]
