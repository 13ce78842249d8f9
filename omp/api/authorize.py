"""Authorize: who is calling `omp team api`, and may it act as the name it gives?

A worker's pane carries its identity (OMP_TEAM, OMP_WORKER, OMP_LAUNCH_TOKEN): a call from it that
names someone else is refused (`sender_mismatch`), and so is one from a pane of an earlier launch
(`stale_generation`) or of a removed worker (`worker_removed`). A process with no worker identity
(the leader, a person, a script) is identified by the name it gives. The names themselves must be
members of the team (`unknown_sender`, `unknown_recipient`).
"""

from __future__ import annotations

from omp.errors import OmpError
from omp.identity import worker_identity
from omp.record.config import TeamConfig
from omp.store import names
from omp.store.names import LEADER


def fence(cfg: TeamConfig, claimed: str | None) -> str | None:
    """Authorize the caller: returns the worker it is, or the name it gives when it has no worker
    identity. The one check every operation runs before touching anything.

    Launch gives each worker's pane OMP_TEAM, OMP_WORKER and OMP_LAUNCH_TOKEN (also recorded as
    `launchToken` in config.json). A process carrying a worker identity acts only as itself: not
    as another worker, not as the leader, and not in any other team (`sender_mismatch`); a pane
    of an earlier launch cannot act at all (`stale_generation`). A process with none of them (the
    leader, a person, a test) is identified by the name it gives.
    """
    ident = worker_identity()
    if ident is None:
        return claimed
    env_worker, env_team, token = ident.worker or "?", ident.team, ident.token
    if env_team != cfg.name:
        raise OmpError(
            "sender_mismatch",
            f"this process is {env_worker} of team {env_team or '?'} ({', '.join(ident.carried)}); "
            f"it cannot act in team {cfg.name}",
            worker=env_worker,
            team=env_team,
        )
    if env_worker != LEADER and env_worker not in cfg.worker_names:
        if was_removed(cfg, env_worker, token):
            # `omp team remove-worker` took this name off the team: its process is fenced off
            raise OmpError(
                "worker_removed",
                f"{env_worker} was removed from team {cfg.name}; this pane can no longer act "
                "for it",
                team=cfg.name,
                worker=env_worker,
            )
        token = token or ""  # not a member under any launch: the check below refuses it
    # A worker added to a running team carries a token of its own (a new generation of its name)
    entry = cfg.worker(env_worker)
    expected = (entry or {}).get("launchToken") or cfg.raw.get("launchToken")
    # A missing token is judged like a wrong one: unsetting OMP_LAUNCH_TOKEN never widens what
    # a worker process may do. (A team `create` made has no token, and its workers carry none.)
    if expected != token:
        raise OmpError(
            "stale_generation",
            f"this pane belongs to an earlier launch of team {cfg.name} (its OMP_LAUNCH_TOKEN "
            + ("is missing" if token is None else "no longer matches the team's")
            + "); it cannot act for the current team",
            team=cfg.name,
        )
    if claimed is not None and claimed != env_worker:
        raise OmpError(
            "sender_mismatch",
            f"this pane is {env_worker} of team {cfg.name} (OMP_WORKER); it cannot act as "
            f"{claimed}",
            worker=env_worker,
            claimed=claimed,
        )
    return env_worker


def was_removed(cfg: TeamConfig, worker: str, token: str | None) -> bool:
    gone = cfg.raw.get("removedWorkers")
    for g in gone if isinstance(gone, list) else []:
        if (
            isinstance(g, dict)
            and g.get("name") == worker
            and (token is None or g.get("launchToken") in (None, token))
        ):
            return True
    return False


def recipient(cfg: TeamConfig, name: str, field_name: str = "to") -> str:
    names.recipient_name(name)
    if name not in cfg.recipients:
        raise OmpError(
            "unknown_recipient",
            f"{name!r} is not a member of team {cfg.name}; recipients: {', '.join(cfg.recipients)}",
            field=field_name,
            candidates=cfg.recipients,
        )
    return name


def sender(cfg: TeamConfig, name: str) -> str:
    if not names.is_valid_name(name) or name not in cfg.recipients:
        raise OmpError(
            "unknown_sender",
            f"sender {name!r} is neither a worker of team {cfg.name} nor {LEADER!r}",
            candidates=cfg.recipients,
        )
    return name
