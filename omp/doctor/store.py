"""`omp doctor`'s look at the project's store (docs/remote.md): the files, or a Redis server that
must answer, keep what it acknowledges (`appendonly yes`, `appendfsync always`) and not be open
to anyone on its network."""

from __future__ import annotations

from omp.doctor.check import Check
from omp.errors import OmpError
from omp.store import select
from omp.store.paths import StatePaths

WAIT = 3.0  # seconds the doctor waits for a store that does not answer


def check_store(project: StatePaths) -> list[Check]:
    url = select.configured_url(project)
    if not url:
        return [Check("store", "ok", "mail and tasks in the files under .omp/state (the default)")]
    shown = select.shown(url)
    try:
        store = select.open_store(project.root, url=url)
    except OmpError as err:
        return [Check("store", "fail", err.message, "pip install 'omp[redis]', or fix the URL")]
    try:
        if hasattr(store, "wait"):
            store.wait = WAIT
        store.has_team("doctor")  # one round trip
        warnings = [*select.warnings(url)]
        durability = getattr(store, "durability", None)
        if durability is not None:
            warnings += durability()
    except OmpError as err:
        fix = "start the server, or check OMP_STORE / [store] url and its password"
        return [Check("store", "fail", err.message, fix)]
    finally:
        store.close()
    out = [Check("store", "ok", f"mail and tasks in {shown}: it answers")]
    out += [Check("store", "warn", w, "see docs/remote.md") for w in warnings]
    return out
