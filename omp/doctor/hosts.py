"""`omp doctor`'s look at the hosts workers may run on (`[hosts.<name>]` in .omp/config.toml,
docs/remote.md): each answers over ssh without a password and has tmux, git and omp (the same
version as here, or a warning); hosts to place workers on need a store every host reaches."""

from __future__ import annotations

from omp.doctor.check import Check
from omp.errors import OmpError
from omp.store import project_config
from omp.store.paths import StatePaths


def check_hosts(project: StatePaths, here: str) -> list[Check]:
    """One check per configured host (none when no host is configured)."""
    from omp.team.hosts import probe
    from omp.tmux import ssh

    try:
        hosts = ssh.load_hosts(project)
    except OmpError as err:
        return [Check("hosts", "fail", err.message, "fix the [hosts.<name>] tables")]
    out: list[Check] = []
    for name, host in hosts.items():
        try:
            there = probe(host)
        except OmpError as err:
            out.append(Check(f"host {name}", "fail", err.message, _fix(err.code, name)))
            continue
        if there.split()[-1:] != here.split()[-1:]:
            out.append(
                Check(
                    f"host {name}",
                    "warn",
                    f"{host.destination} runs {there or 'an omp that prints no version'}; this "
                    f"host runs {here}",
                    f"install the same omp on {name}: a team's hosts read one another's records",
                )
            )
        else:
            out.append(Check(f"host {name}", "ok", f"{host.destination} answers; {there}"))
    placing = any(h.settings.workers > 0 for h in hosts.values())
    if placing and not project_config.store_selected(project):
        out.append(
            Check(
                "hosts",
                "fail",
                "[hosts.*] place workers on other hosts, but the team's mail and tasks are in "
                "the files here, which those hosts cannot reach",
                "set OMP_STORE or [store] url (docs/remote.md)",
            )
        )
    return out


def _fix(code: str, name: str) -> str:
    if code == "host_unreachable":
        return f"check `ssh {name} true` works without a password (BatchMode), or [hosts.{name}]"
    if code == "tmux_not_found":
        return f"install tmux on {name}"
    return f"install git and omp on {name}, or name its omp with [hosts.{name}] omp"
