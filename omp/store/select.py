"""Which store holds a project's mail and tasks: `OMP_STORE`, else `[store] url` in
`.omp/config.toml`, else the files under `.omp/state/` (the default, nothing to set up).

    OMP_STORE=redis://[user:password@]host:6379/0[?ns=<namespace>]   (rediss:// for TLS,
    unix:///path/redis.sock?db=0 for a local socket; `file` for the files, whatever the config)
    OMP_STORE_FILE=<path>      a file (mode 0600, yours) holding that URL: how a worker is given
                               a store with a password without it in its environment or screen

The namespace keeps several projects apart in one database: `ns` in the URL, else `[store]
namespace`, else one derived from the project's root path (the leader hands every worker,
remote ones included, the leader's, in the URL it starts them with).

A store URL is shown with its password masked (`shown`), never whole. A Redis store reached over
a non-loopback address without a password gets a warning (`warnings`): anyone who reaches that
port can read the team's mail and claim its tasks.

Choosing the files imports nothing beyond this module: the Redis backend (and redis-py, ~150 ms)
is imported only when a project selects it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from omp.errors import OmpError
from omp.store import fs, project_config
from omp.store.paths import StatePaths

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from omp.store.backend import Store
    from omp.store.layout import ProjectFiles

    Project = StatePaths | ProjectFiles

ENV = "OMP_STORE"
ENV_FILE = "OMP_STORE_FILE"
SCHEMES = ("redis", "rediss", "unix")
_LOOPBACK = ("localhost", "127.0.0.1", "::1", "ip6-localhost")


class Settings(NamedTuple):
    """`[store]` in `.omp/config.toml`."""

    url: str = ""
    namespace: str = ""
    wait_seconds: float = 30.0


def settings(paths: Project) -> Settings:
    return project_config.load_section(paths, "store", Settings, "store setting")


def configured_url(paths: Project) -> str:
    """The store URL this process should use; "" for the files."""
    url = os.environ.get(ENV, "")
    if not url and (path := os.environ.get(ENV_FILE)):
        url = _read_url_file(Path(path))
    if not url:
        url = settings(paths).url
    url = url.strip()
    return "" if url == "file" else url


def _read_url_file(path: Path) -> str:
    try:
        fd = fs.open_file(path, os.O_RDONLY)
    except FileNotFoundError:
        raise OmpError("invalid_store", f"{ENV_FILE}={path}: no such file") from None
    try:
        if os.fstat(fd).st_mode & 0o077:
            raise OmpError(
                "invalid_store",
                f"{ENV_FILE}={path} may be read by others: it may hold a password; "
                f"chmod 600 {path}",
            )
        return os.read(fd, 4096).decode("utf-8", "replace").strip()
    finally:
        os.close(fd)


def scheme_of(url: str) -> str:
    scheme, sep, _ = url.partition("://")
    if not sep or scheme not in SCHEMES:
        raise OmpError(
            "invalid_store",
            f"store URL {shown(url)!r} is not one omp knows: use redis://host:6379/0, "
            "rediss://... (TLS), unix:///path/redis.sock or file",
        )
    return scheme


def shown(url: str) -> str:
    """The URL with its password (and user) masked: what may appear in output and logs."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url if "@" not in url else "***"
    auth, at, host = rest.rpartition("@")
    return f"{scheme}://***@{host}" if at and auth else url


def warnings(url: str) -> list[str]:
    """What a person should hear about a store URL before a team uses it."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme == "unix" or parts.password:
        return []
    host = (parts.hostname or "").lower()
    if host in _LOOPBACK or host.startswith("127."):
        return []
    return [
        f"the store at {shown(url)} has no password and is not on this machine's loopback: "
        "anyone who reaches it can read the team's mail and claim its tasks (set requirepass "
        "and put the password in the URL, or reach it through an ssh tunnel)"
    ]


def namespace(paths: Project, url: str) -> str:
    from urllib.parse import parse_qsl, urlsplit

    for key, value in parse_qsl(urlsplit(url).query):
        if key == "ns" and value:
            return value
    ns = settings(paths).namespace
    if ns:
        return ns
    import hashlib

    # the real path: the leader and its workers name one project alike, however they got there
    root = os.path.realpath(paths.root)
    return "p" + hashlib.sha256(root.encode()).hexdigest()[:12]


def with_namespace(url: str, ns: str) -> str:
    """`url` naming `ns` explicitly: what a worker on another host is started with."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "ns"] + [("ns", ns)]
    return urlunsplit(parts._replace(query=urlencode(query)))


def open_store(root: Path, *, url: str | None = None) -> Store:
    """The project's store (see the module docstring); `url` overrides the selection."""
    paths = StatePaths(root)
    url = configured_url(paths) if url is None else url
    if not url or url == "file":
        from omp.store.filestore import FileStore

        return FileStore(root)
    scheme_of(url)
    try:
        from omp.store import redisstore
    except ImportError:
        raise OmpError(
            "invalid_store",
            f"the store at {shown(url)} needs redis-py: pip install 'omp[redis]'",
        ) from None
    ns = namespace(paths, url)
    target, _ = redisstore.split_url(url, ns)
    return redisstore.RedisStore(
        target, namespace=ns, shown=shown(url), wait=settings(paths).wait_seconds
    )


_OPEN: dict[tuple[str, str], Store] = {}


def current(paths: Project) -> Store | None:
    """The project's store when it is not the files (None: the files, the default), opened
    once per process. What mail/ and tasks/ ask before they touch a file."""
    if not project_config.store_selected(paths):
        return None
    url = configured_url(paths)
    if not url:
        return None
    key = (str(paths.root), url)
    store = _OPEN.get(key)
    if store is None:
        store = _OPEN[key] = open_store(Path(paths.root), url=url)
    return store
