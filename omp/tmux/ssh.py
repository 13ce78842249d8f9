"""Reaching another host: `ssh` without a password, one multiplexed connection per host.

Every call to a host goes through one OpenSSH ControlMaster (`ControlPath` in a private
directory, `ControlPersist` keeping it after the first call), so a tmux command on the build box
costs a round trip and a fork of `ssh`, not a new handshake each time: the monitor scans remote
panes through it as it scans local ones (measured in `benchmarks/bench_remote.py`).

Options are always explicit (`BatchMode`: never a password prompt; a connect timeout; keepalives
that notice a dead link within seconds). A host's settings come from `[hosts.<name>]` in
`.omp/config.toml` (see `HostSettings`); anything else is left to the user's own ssh config, or
to the `ssh_config` file a host names. omp never writes into `~/.ssh`.

A command is sent as one string the remote shell parses: every argument is quoted (`shlex`).
Exit status 255 is ssh's own failure (no route, refused, key refused, the master gone):
`host_unreachable`, with ssh's words. Secrets (a store password) are never put on a command
line: `put_file` writes them through ssh's stdin into a 0600 file.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path
from typing import NamedTuple

from omp.errors import OmpError
from omp.store.names import is_valid_name
from omp.store.paths import StatePaths

SSH = "ssh"
UNREACHABLE = 255  # ssh's own exit status for a failure of ssh itself
CONNECT_TIMEOUT = 5
PERSIST = 600  # seconds the master connection outlives its last use


class HostSettings(NamedTuple):
    """`[hosts.<name>]`: how to reach a host and where omp's clones live there."""

    address: str = ""  # ssh destination (`user@host`, or a Host of the ssh config); default: name
    port: int = 0  # 0: ssh's own default (22, or what the ssh config says)
    identity_file: str = ""  # -i
    ssh_config: str = ""  # -F (a file of its own, never ~/.ssh/config rewritten)
    known_hosts: str = ""  # UserKnownHostsFile
    omp: str = "omp"  # the omp command there (a path when it is not on that host's PATH)
    dir: str = ".omp-remote"  # where clones and worktrees go, relative to the remote home
    workers: int = 0  # how many workers `[hosts]` alone places there


class Host:
    """One host by name, with its settings."""

    def __init__(self, name: str, settings: HostSettings | None = None) -> None:
        if not is_valid_name(name):
            raise OmpError("invalid_input", f"invalid host name {name!r}")
        self.name = name
        self.settings = settings or HostSettings()

    @property
    def destination(self) -> str:
        return self.settings.address or self.name

    def __repr__(self) -> str:
        return f"Host({self.name!r})"


def control_dir() -> Path:
    """The private directory of the master sockets: short (a socket path must fit in 108
    bytes), per user, 0700, never followed when it is a symlink or someone else's."""
    tmp = os.environ.get("TMPDIR") or "/tmp"
    if len(tmp) > 40:  # + "/omp-ssh-<uid>/" + 40 hex digits (%C) must stay under 108 bytes
        tmp = "/tmp"
    base = Path(tmp) / f"omp-ssh-{os.geteuid()}"
    try:
        os.mkdir(base, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(base)
    if not os.path.isdir(base) or os.path.islink(base) or st.st_uid != os.geteuid():
        raise OmpError("unsafe_path", f"{base} is not a private directory of this user")
    if st.st_mode & 0o077:
        raise OmpError("unsafe_path", f"{base} may be used by others; chmod 700 {base}")
    return base


def ssh_options(host: Host, *, master: bool = True) -> list[str]:
    """Everything between `ssh` and the destination."""
    s = host.settings
    opts = [
        "-o", "BatchMode=yes",
        "-o", f"ConnectTimeout={CONNECT_TIMEOUT}",
        "-o", "ServerAliveInterval=5",
        "-o", "ServerAliveCountMax=2",
        "-o", "LogLevel=ERROR",
    ]  # fmt: skip
    if master:
        opts += [
            "-o", "ControlMaster=auto",
            "-o", f"ControlPath={control_dir()}/%C",
            "-o", f"ControlPersist={PERSIST}",
        ]  # fmt: skip
    if s.ssh_config:
        opts += ["-F", s.ssh_config]
    if s.identity_file:
        opts += ["-i", s.identity_file, "-o", "IdentitiesOnly=yes"]
    if s.known_hosts:
        opts += ["-o", f"UserKnownHostsFile={s.known_hosts}"]
    if s.port:
        opts += ["-p", str(s.port)]
    return opts


def argv(host: Host, command: list[str], *, master: bool = True) -> list[str]:
    """The local argv that runs `command` (one argument per item) on `host`."""
    return [SSH, *ssh_options(host, master=master), host.destination, "--", shlex.join(command)]


def git_ssh_command(host: Host) -> str:
    """GIT_SSH_COMMAND for git's own ssh calls to `host` (push, fetch): the same options, the
    same master. git appends the destination (with `-p` only when the URL names a port)."""
    return shlex.join([SSH, *ssh_options(host)])


class Result(NamedTuple):
    code: int
    out: str
    err: str


def run(
    host: Host,
    command: list[str],
    *,
    input: str | None = None,
    timeout: float = 30.0,
    check: bool = True,
    master: bool = True,
) -> Result:
    """Run `command` on `host`. `host_unreachable` when ssh itself fails (or times out);
    with `check`, `remote_failed` when the command exits non-zero."""
    try:
        cp = subprocess.run(
            argv(host, command, master=master),
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError:
        raise OmpError(
            "host_unreachable", f"{SSH} is not installed here (apt-get install openssh-client)"
        ) from None
    except subprocess.TimeoutExpired:
        raise unreachable(host, f"no answer within {timeout:g} s") from None
    if cp.returncode == UNREACHABLE:
        raise unreachable(host, cp.stderr.strip() or "ssh failed")
    if check and cp.returncode != 0:
        raise OmpError(
            "remote_failed",
            f"on {host.name}: {shlex.join(command)[:200]} exited {cp.returncode}: "
            f"{cp.stderr.strip()[-500:]}",
            host=host.name,
        )
    return Result(cp.returncode, cp.stdout, cp.stderr.strip())


def unreachable(host: Host, why: str) -> OmpError:
    return OmpError(
        "host_unreachable",
        f"host {host.name} ({host.destination}) cannot be reached over ssh: {why}",
        host=host.name,
    )


def alive(host: Host, timeout: float = 10.0) -> bool:
    """Does the host answer (through its master connection, started if needed)?"""
    try:
        return run(host, ["true"], timeout=timeout, check=False).code == 0
    except OmpError:
        return False


def master_running(host: Host) -> bool:
    cp = subprocess.run(
        [SSH, *ssh_options(host), "-O", "check", host.destination],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=10,
        check=False,
    )
    return cp.returncode == 0


def stop_master(host: Host) -> None:
    """End the host's master connection (shutdown); nothing if there is none."""
    subprocess.run(
        [SSH, *ssh_options(host), "-O", "exit", host.destination],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=10,
        check=False,
    )


def put_file(host: Host, path: str, data: str) -> None:
    """Write `data` to `path` on `host` (relative: to the remote home), mode 0600, through
    ssh's stdin: a secret never appears on a command line or in a pane."""
    # the temporary name is the remote shell's own ($$): two writers of one file never share it
    script = (
        'umask 077 && mkdir -p "$(dirname "$1")" && cat > "$1.$$.tmp" && mv -f "$1.$$.tmp" "$1"'
    )
    run(host, ["sh", "-c", script, "sh", path], input=data)


def load_hosts(paths: StatePaths) -> dict[str, Host]:
    """`[hosts.<name>]` tables of `.omp/config.toml`, checked: an unknown key or a value of the
    wrong type is `invalid_config` naming the file (a typo never falls back to a default)."""
    from omp.store import project_config

    where = paths.config_toml
    out: dict[str, Host] = {}
    defaults = HostSettings()._asdict()
    for name, body in project_config.load_table(paths, "hosts").items():
        if not isinstance(body, dict) or not is_valid_name(name):
            raise OmpError("invalid_config", f"{where}: [hosts.{name}] must be a table of a host")
        values: dict[str, str | int] = {}
        for key, value in body.items():
            if key not in defaults:
                raise OmpError(
                    "invalid_config",
                    f"{where}: unknown host setting {key!r} in [hosts.{name}]; known: "
                    + ", ".join(defaults),
                )
            want = type(defaults[key])
            ok = isinstance(value, want) and not isinstance(value, bool)
            if not ok or (want is int and value < 0):
                kind = "a number >= 0" if want is int else "a string"
                raise OmpError("invalid_config", f"{where}: [hosts.{name}] {key} must be {kind}")
            values[key] = value
        out[name] = Host(name, HostSettings(**values))  # type: ignore[arg-type]
    return out
