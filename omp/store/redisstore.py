"""The Redis backend of the store interface (`omp.store.backend`), through redis-py (the
`omp[redis]` extra; Valkey speaks the same protocol). Imported only when a project selects it.

Keys, all under `omp:<namespace>:` (several projects may share one database):

    teams                          set of team names (a write to a team not in it is refused)
    t:<team>:log:<log>             stream per log; field `j` holds the record's JSON line
    t:<team>:und:<recipient>       hash message id -> "<stream id> <JSON line>" (undelivered)
    t:<team>:ids:<recipient>       hash message id -> stream id (every message ever sent)
    t:<team>:doc:<coll>:<key>      string: the doc's JSON; t:<team>:idx:<coll> the set of keys
    t:<team>:hb                    hash worker -> heartbeat JSON
    lock:<name>                    hash owner, token (only grows), expires (server ms)
    op:<id>                        what one write answered, kept OP_TTL s (see below)

Every write is one atomic step: a Lua script (appends, mail, receipts, locks) or WATCH/MULTI
(`update`, whose `change` is Python). Acknowledged means the server applied it; with
`appendonly yes` and `appendfsync always` it is on disk before the answer leaves the server.

Retries: when the connection drops, the call waits for the server (up to `wait` seconds, then
`store_unavailable`) and sends the same write again under the same op id. The server keeps each
op's answer for OP_TTL seconds, so a write that landed before the connection died is answered
from there, never applied twice: no acknowledged message is lost and none is duplicated across a
server restart. redis-py's own retries are off (a retried MULTI would lose its WATCH).
"""

from __future__ import annotations

import json
import os
import time
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import redis
from redis.backoff import NoBackoff
from redis.exceptions import AuthenticationError, AuthorizationError, ResponseError, WatchError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

from omp import clock
from omp.errors import OmpError
from omp.store import backend
from omp.store.backend import Batch, Lease, MailView, Store, doc_key, lock_name, log_name
from omp.store.names import team_name, worker_name

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    from omp.store.backend import Change, Check, Doc, Note

    T = TypeVar("T")

OP_TTL = 600  # seconds an op's answer is kept: far longer than any retry of it waits
WAIT = 30.0  # seconds a call waits for a server that went away before `store_unavailable`
_DOWN = (RedisConnectionError, RedisTimeoutError)

# Every mutating script starts alike: an op answered before is answered again (a retry), a
# team that is not there gets nothing. KEYS[1] teams, KEYS[2] op; ARGV[1] team, ARGV[2] ttl.
_PROLOGUE = """
local done = redis.call('GET', KEYS[2])
if done then return cjson.decode(done) end
if ARGV[1] ~= '' and redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 then
  return redis.error_reply('OMP unknown_team')
end
"""
_FENCE = """
if ARGV[3] ~= '' then
  local h = redis.call('HMGET', KEYS[4], 'token', 'owner')
  if h[1] ~= ARGV[3] or not h[2] then
    return redis.error_reply('OMP stale_fence ' .. tostring(h[1]))
  end
end
"""
_DONE = "redis.call('SET', KEYS[2], cjson.encode(out), 'EX', ARGV[2])\nreturn out\n"

# KEYS[3] stream, KEYS[4] fence lock; ARGV[3] fence token or '', ARGV[4..] lines
APPEND = (
    _PROLOGUE
    + _FENCE
    + """
local out = {}
for i = 4, #ARGV do out[#out + 1] = redis.call('XADD', KEYS[3], '*', 'j', ARGV[i]) end
"""
    + _DONE
)
# KEYS[3] stream, KEYS[4] undelivered, KEYS[5] ids; ARGV[3..] (id, line) pairs
SEND = (
    _PROLOGUE
    + """
local out = {}
for i = 3, #ARGV, 2 do
  local sid = redis.call('XADD', KEYS[3], '*', 'j', ARGV[i + 1])
  redis.call('HSET', KEYS[5], ARGV[i], sid)
  redis.call('HSET', KEYS[4], ARGV[i], sid .. ' ' .. ARGV[i + 1])
  out[#out + 1] = sid
end
"""
    + _DONE
)
# KEYS as SEND; ARGV[3] deliveredAt, ARGV[4..] (id, receipt line) pairs. All ids are checked
# before anything is written.
MARK = (
    _PROLOGUE
    + """
for i = 4, #ARGV, 2 do
  if redis.call('HEXISTS', KEYS[5], ARGV[i]) == 0 then
    return redis.error_reply('OMP message_not_found ' .. ARGV[i])
  end
end
local out, seen = {}, {}
for i = 4, #ARGV, 2 do
  local id = ARGV[i]
  if seen[id] == nil then
    seen[id] = ''
    if redis.call('HDEL', KEYS[4], id) == 1 then
      redis.call('XADD', KEYS[3], '*', 'j', ARGV[i + 1])
      seen[id] = ARGV[3]
    end
  end
  out[#out + 1] = seen[id]
end
"""
    + _DONE
)
# KEYS[3] doc, KEYS[4] index; ARGV[3] key, ARGV[4] JSON
CREATE = (
    _PROLOGUE
    + """
local out = 0
if redis.call('SET', KEYS[3], ARGV[4], 'NX') then
  redis.call('SADD', KEYS[4], ARGV[3])
  out = 1
end
"""
    + _DONE
)
_NOW = "local t = redis.call('TIME')\nlocal now = t[1] * 1000 + math.floor(t[2] / 1000)\n"
# KEYS[3] lock; ARGV[3] owner, ARGV[4] ttl ms. Server time: hosts' clocks need not agree.
LOCK = (
    _PROLOGUE
    + _NOW
    + """
local h = redis.call('HMGET', KEYS[3], 'owner', 'expires')
local out = {0, '0'}
if not h[1] or tonumber(h[2]) <= now then
  local token = redis.call('HINCRBY', KEYS[3], 'token', 1)
  local expires = string.format('%d', now + tonumber(ARGV[4]))
  redis.call('HSET', KEYS[3], 'owner', ARGV[3], 'expires', expires)
  out = {token, expires}
end
"""
    + _DONE
)
# KEYS[3] lock; ARGV[3] token, ARGV[4] ttl ms (renew) or '' (unlock)
RENEW = (
    _PROLOGUE
    + _NOW
    + """
local h = redis.call('HMGET', KEYS[3], 'token', 'owner')
local out = 0
if h[1] == ARGV[3] and h[2] then
  if ARGV[4] == '' then
    redis.call('HDEL', KEYS[3], 'owner')
    redis.call('HSET', KEYS[3], 'expires', 0)
  else
    redis.call('HSET', KEYS[3], 'expires', string.format('%d', now + tonumber(ARGV[4])))
  end
  out = 1
end
"""
    + _DONE
)


def split_url(url: str, default_ns: str) -> tuple[str, str]:
    """(the URL redis-py is given, the key namespace): `?ns=` is omp's, not redis-py's."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    ns = next((v for k, v in query if k == "ns"), "") or default_ns
    rest = urlencode([(k, v) for k, v in query if k != "ns"])
    return urlunsplit(parts._replace(query=rest)), ns


class RedisStore(Store):
    def __init__(self, url: str, *, namespace: str, shown: str = "", wait: float = WAIT) -> None:
        self.url = shown or url
        self.wait = wait
        self.ns = namespace
        # typed Any: with decode_responses every reply is str, which redis-py's stubs (bytes | str
        # everywhere) cannot say
        self.r: Any = redis.Redis.from_url(
            url,
            decode_responses=True,
            socket_connect_timeout=2,
            socket_timeout=10,
            retry=Retry(NoBackoff(), 0),
        )
        self._p = f"omp:{namespace}:"
        self._scripts = {
            name: self.r.register_script(src)
            for name, src in (
                ("append", APPEND),
                ("send", SEND),
                ("mark", MARK),
                ("create", CREATE),
                ("lock", LOCK),
                ("renew", RENEW),
            )
        }

    def close(self) -> None:
        self.r.close()

    # ---- plumbing ------------------------------------------------------------------------
    def _t(self, team: str) -> str:
        return f"{self._p}t:{team_name(team)}:"

    def _op(self) -> str:
        return f"{self._p}op:{os.urandom(12).hex()}"

    def _retry(self, call: Callable[[], T], team: str = "") -> T:
        """`call` until the server answers; a dropped connection is waited out (see the module
        docstring), a refusal of the script becomes the OmpError it names."""
        deadline = time.monotonic() + self.wait
        pause = 0.02
        while True:
            try:
                return call()
            except (AuthenticationError, AuthorizationError) as exc:  # before _DOWN: a subclass
                raise OmpError(
                    "store_error", f"the store at {self.url} refused omp's credentials: {exc}"
                ) from None
            except _DOWN as exc:
                if time.monotonic() >= deadline:
                    raise OmpError(
                        "store_unavailable",
                        f"the store at {self.url} did not answer for {self.wait:g} s ({exc})",
                        store=self.url,
                    ) from None
                time.sleep(pause)
                pause = min(pause * 2, 0.5)
            except ResponseError as exc:
                raise _refusal(exc, team) from None

    def _run(self, script: str, keys: list[str], args: list[Any]) -> Any:
        op = self._op()
        fn = self._scripts[script]
        team = str(args[0])
        return self._retry(lambda: fn(keys=[f"{self._p}teams", op, *keys], args=args), team)

    # ---- teams -------------------------------------------------------------------------
    def ensure_team(self, team: str) -> None:
        name = team_name(team)
        self._retry(lambda: self.r.sadd(f"{self._p}teams", name))

    def has_team(self, team: str) -> bool:
        name = team_name(team)
        return bool(self._retry(lambda: self.r.sismember(f"{self._p}teams", name)))

    def archive_run(self, team: str, label: str, recipients: list[str]) -> None:
        """Keys move to `a:<team>:<label>:...` (RENAME: the data stays, out of the team)."""
        t = self._t(team)
        archive = f"{self._p}a:{team_name(team)}:{label}:"
        keys = [f"{t}idx:tasks", f"{t}idx:conversations"]
        for coll in ("tasks", "conversations"):  # a run's conversations go with its tasks
            pattern = f"{t}doc:{coll}:*"
            keys += self._retry(lambda p=pattern: list(self.r.scan_iter(match=p, count=1000)))  # type: ignore[misc]
        for r in recipients:
            keys += [*self._box(team, r)]

        def move(key: str) -> None:
            if self.r.exists(key):
                self.r.rename(key, archive + key[len(t) :])

        for key in keys:
            self._retry(lambda k=key: move(k))  # type: ignore[misc]

    def drop_team(self, team: str) -> None:
        t = self._t(team)
        name = team_name(team)

        def drop() -> None:
            self.r.srem(f"{self._p}teams", name)  # first: a late writer is refused from now on
            for key in self.r.scan_iter(match=f"{t}*", count=1000):
                self.r.delete(key)

        self._retry(drop)

    # ---- logs ----------------------------------------------------------------------------
    def _stream(self, team: str, log: str) -> str:
        kind, who = log_name(log)
        return f"{self._t(team)}log:{kind}" + (f"/{who}" if who else "")

    def append(
        self, team: str, log: str, records: list[Doc], *, fence: Lease | None = None
    ) -> list[str]:
        stream = self._stream(team, log)
        if not records:
            return []
        lines = [_line(r) for r in records]
        lock = f"{self._p}lock:{lock_name(fence.name)}" if fence else stream
        token = str(fence.token) if fence else ""
        out = self._run("append", [stream, lock], [team, OP_TTL, token, *lines])
        return [str(x) for x in out]

    def read(self, team: str, log: str, cursor: str = "", *, limit: int = 0) -> Batch:
        stream = self._stream(team, log)
        start = "(" + _checked(cursor) if cursor else "-"
        records: list[Doc] = []
        cursors: list[str] = []
        bad = 0
        last = cursor
        while True:
            want = min(limit - len(records), 10_000) if limit else 10_000

            def page(first: str = start, n: int = want) -> list[tuple[str, dict[str, str]]]:
                got: list[tuple[str, dict[str, str]]] = self.r.xrange(stream, first, "+", count=n)
                return got

            got = self._retry(page)
            for sid, fields in got:
                last = sid
                try:
                    rec = json.loads(fields.get("j", ""))
                except ValueError:
                    rec = None
                if isinstance(rec, dict):
                    records.append(rec)
                    cursors.append(sid)
                else:
                    bad += 1
            if len(got) < want or (limit and len(records) >= limit):
                return Batch(records, last, bad, cursors=cursors)
            start = "(" + last

    # ---- mailboxes -------------------------------------------------------------------------
    def _box(self, team: str, recipient: str) -> list[str]:
        t = self._t(team)
        stream = self._stream(team, f"mailbox/{recipient}")
        return [stream, f"{t}und:{recipient}", f"{t}ids:{recipient}"]

    def send(
        self, team: str, recipient: str, messages: list[Doc], *, check: Check | None = None
    ) -> list[str]:
        keys = self._box(team, recipient)
        if not messages:
            return []
        args: list[Any] = [team, OP_TTL]
        for m in messages:
            if not isinstance(m.get("id"), str):
                raise OmpError("invalid_input", "every message needs a string id")
            args += [m["id"], _line(m)]
        if check is None:
            return [str(x) for x in self._run("send", keys, args)]
        return self._checked_send(team, keys, args, check)

    def _checked_send(self, team: str, keys: list[str], args: list[Any], check: Check) -> list[str]:
        """`send` with a check: WATCH the mailbox's stream (every send and receipt adds to it),
        show the check the mailbox, and send inside MULTI; another send in between voids the
        transaction and the check runs again on what is there then."""
        stream, und, ids = keys
        op = self._op()
        full = [f"{self._p}teams", op, *keys]
        script = self._scripts["send"]

        def attempt() -> list[str]:
            with self.r.pipeline() as p:
                while True:
                    try:
                        p.watch(stream, op)
                        done = p.get(op)
                        if done is not None:  # the last try landed; its answer was lost
                            p.unwatch()
                            return [str(x) for x in json.loads(done)]
                        unread = int(p.hlen(und))
                        check(
                            MailView(unread, _Recent(p, stream), lambda m: bool(p.hexists(ids, m)))
                        )
                        p.multi()
                        script(keys=full, args=args, client=p)
                        (out,) = p.execute()
                        return [str(x) for x in out]
                    except WatchError as exc:
                        if "ConnectionError" in str(exc):
                            raise RedisConnectionError(str(exc)) from None
                        continue

        return self._retry(attempt, team)

    def unread(self, team: str, recipient: str) -> int:
        und = self._box(team, recipient)[1]
        return int(self._retry(lambda: self.r.hlen(und)))

    def newest(self, team: str, recipient: str, limit: int) -> tuple[list[Doc], int]:
        stream, _, ids = self._box(team, recipient)

        def read() -> tuple[list[Doc], int]:
            total = int(self.r.hlen(ids))
            msgs: list[Doc] = []  # newest first
            delivered: dict[str, str] = {}
            end = "+"
            while limit > 0 and len(msgs) < limit:
                page = self.r.xrevrange(stream, end, "-", count=500)
                for _, fields in page:
                    rec = _obj(fields.get("j"))
                    if rec is None:
                        continue
                    if rec.get("type") == "delivery-receipt":
                        delivered.setdefault(str(rec.get("messageId")), str(rec.get("deliveredAt")))
                    elif rec.get("type") == "message" and len(msgs) < limit:
                        msgs.append(rec)
                if len(page) < 500:
                    break
                end = "(" + page[-1][0]
            # a receipt always follows its message: reading back to the oldest one shown saw
            # every receipt that concerns the ones shown
            out = [
                {**m, "deliveredAt": delivered[m["id"]]} if m.get("id") in delivered else m
                for m in reversed(msgs)
            ]
            return out, total

        return self._retry(read)

    def undelivered(self, team: str, recipient: str) -> list[Doc]:
        und = self._box(team, recipient)[1]
        held: dict[str, str] = self._retry(lambda: self.r.hgetall(und))
        rows = []
        for value in held.values():
            sid, _, line = value.partition(" ")
            rows.append((_sid_key(sid), json.loads(line)))
        rows.sort(key=lambda row: row[0])
        return [rec for _, rec in rows]

    def mark_delivered(self, team: str, recipient: str, ids: list[str]) -> dict[str, str | None]:
        keys = self._box(team, recipient)
        if not ids:
            return {}
        at = clock.iso()
        args: list[Any] = [team, OP_TTL, at]
        for m in ids:
            receipt = {"type": "delivery-receipt", "messageId": m, "deliveredAt": at}
            args += [m, _line(receipt)]
        try:
            out = self._run("mark", keys, args)
        except OmpError as exc:
            if exc.code != "message_not_found":
                raise
            mid = exc.detail.get("arg", "")
            raise OmpError(
                "message_not_found",
                f"no message {mid!r} in the mailbox of {recipient}",
                message_id=mid,
            ) from None
        return {m: (str(v) or None) for m, v in zip(ids, out, strict=True)}

    # ---- docs ----------------------------------------------------------------------------
    def _doc(self, team: str, collection: str, key: str) -> tuple[str, str]:
        t = self._t(team)
        key = doc_key(collection, key)
        return f"{t}doc:{collection}:{key}", f"{t}idx:{collection}"

    def doc(self, team: str, collection: str, key: str) -> Doc | None:
        dkey = self._doc(team, collection, key)[0]
        raw = self._retry(lambda: self.r.get(dkey))
        return _obj(raw)

    def docs(self, team: str, collection: str) -> list[Doc]:
        idx = self._doc(team, collection, "1" if collection == "tasks" else "config")[1]
        keys = sorted(self._retry(lambda: self.r.smembers(idx)))
        if collection == "tasks":
            keys.sort(key=backend.task_sort_key)
        if not keys:
            return []
        t = self._t(team)
        raws = self._retry(lambda: self.r.mget([f"{t}doc:{collection}:{k}" for k in keys]))
        return [obj for raw in raws if (obj := _obj(raw)) is not None]

    def delete(self, team: str, collection: str, key: str) -> bool:
        dkey, idx = self._doc(team, collection, key)

        def drop() -> bool:
            with self.r.pipeline() as p:  # MULTI: the doc and its place in the index together
                p.delete(dkey)
                p.srem(idx, key)
                gone, _ = p.execute()
            return bool(gone)

        return self._retry(drop)

    def create(self, team: str, collection: str, key: str, doc: Doc) -> bool:
        dkey, idx = self._doc(team, collection, key)
        return bool(self._run("create", [dkey, idx], [team, OP_TTL, key, _line(doc)]))

    def update(
        self,
        team: str,
        collection: str,
        key: str,
        change: Change,
        *,
        fence: Lease | None = None,
        note: Note | None = None,
    ) -> Doc | None:
        dkey, idx = self._doc(team, collection, key)
        events = self._stream(team, "events")
        lock = f"{self._p}lock:{lock_name(fence.name)}" if fence else ""
        teams = f"{self._p}teams"
        op = self._op()
        written: list[Doc] = []

        def attempt() -> Doc | None:
            with self.r.pipeline() as p:
                while True:
                    try:
                        p.watch(dkey, *([lock] if lock else []))
                        if written and p.exists(op):  # the last try landed; its answer was lost
                            return written[-1]
                        if not p.sismember(teams, team):
                            raise _refusal(ResponseError("OMP unknown_team"), team)
                        if fence is not None:
                            token, owner = p.hmget(lock, "token", "owner")
                            if token != str(fence.token) or owner is None:
                                raise backend.stale_fence(fence, int(token) if token else None)
                        raw = p.get(dkey)
                        before = _obj(raw)
                        after = change(_obj(raw))
                        if after is None:
                            return None
                        p.multi()
                        p.set(dkey, _line(after))
                        p.sadd(idx, key)
                        if note is not None:
                            at = clock.iso()
                            for ev in note(before, after):
                                p.xadd(events, {"j": _line({**ev, "at": ev.get("at") or at})})
                        p.set(op, "1", ex=OP_TTL)
                        written.append(after)
                        p.execute()
                        return after
                    except WatchError as exc:
                        if "ConnectionError" in str(exc):
                            # redis-py's word for a connection lost while watching: wait for
                            # the server (`_retry`), then see whether the last try landed
                            raise RedisConnectionError(str(exc)) from None
                        written.clear()  # someone wrote in between: start afresh
                        continue

        return self._retry(attempt, team)

    # ---- heartbeats ------------------------------------------------------------------------
    def beat(self, team: str, worker: str, record: Doc) -> None:
        hb = f"{self._t(team)}hb"
        name = worker_name(worker)
        self._retry(lambda: self.r.hset(hb, name, _line(record)))

    def heartbeats(self, team: str) -> dict[str, Doc]:
        hb = f"{self._t(team)}hb"
        held: dict[str, str] = self._retry(lambda: self.r.hgetall(hb))
        return {w: obj for w, raw in sorted(held.items()) if (obj := _obj(raw)) is not None}

    # ---- locks ---------------------------------------------------------------------------
    def _lock(self, name: str) -> str:
        return f"{self._p}lock:{lock_name(name)}"

    def lock(self, name: str, owner: str, ttl: float) -> Lease | None:
        key = self._lock(name)
        token, expires = self._run("lock", [key], ["", OP_TTL, owner, int(ttl * 1000)])
        if not int(token):
            return None
        return Lease(name, owner, int(token), int(expires) / 1000)

    def renew(self, lease: Lease, ttl: float) -> bool:
        key = self._lock(lease.name)
        ok = self._run("renew", [key], ["", OP_TTL, str(lease.token), int(ttl * 1000)])
        if ok:
            lease.expires = time.time() + ttl
        return bool(ok)

    def unlock(self, lease: Lease) -> bool:
        key = self._lock(lease.name)
        return bool(self._run("renew", [key], ["", OP_TTL, str(lease.token), ""]))

    def fence_ok(self, lease: Lease) -> bool:
        key = self._lock(lease.name)
        token, owner = self._retry(lambda: self.r.hmget(key, "token", "owner"))
        return token == str(lease.token) and owner is not None

    # ---- what a person should know ---------------------------------------------------------
    def durability(self) -> list[str]:
        """Warnings about the server's settings: without `appendonly yes` and `appendfsync
        always`, an acknowledged message can be lost when the server dies."""
        try:
            got = self._retry(lambda: self.r.config_get("append*"))
        except OmpError:
            raise
        except ResponseError:  # CONFIG is often disabled on managed servers: say nothing
            return []
        out = []
        if got.get("appendonly") != "yes":
            out.append(f"the store at {self.url} runs without appendonly: a restart loses mail")
        elif got.get("appendfsync") != "always":
            out.append(
                f"the store at {self.url} fsyncs its log '{got.get('appendfsync')}', not "
                "'always': a crash may lose the last second of acknowledged mail"
            )
        return out


class _Recent:
    """A send check's view of the newest messages of a mailbox stream, read back a page at a
    time (on the watching connection) only as far as it is asked."""

    PAGE = 200

    def __init__(self, p: Any, stream: str) -> None:
        self.p, self.stream = p, stream
        self.seen: list[tuple[float, Doc]] = []  # (stamp, message), newest first
        self.end = "+"
        self.done = False

    def __call__(self, since: float) -> list[Doc]:
        while not self.done and (not self.seen or self.seen[-1][0] >= since):
            page = self.p.xrevrange(self.stream, self.end, "-", count=self.PAGE)
            for _, fields in page:
                rec = _obj(fields.get("j"))
                if rec is not None and rec.get("type") == "message":
                    at = clock.parse_iso(str(rec.get("timestamp", "")))
                    self.seen.append((at if at is not None else 0.0, rec))
            self.done = len(page) < self.PAGE
            if page:
                self.end = "(" + page[-1][0]
        return [rec for at, rec in self.seen if at >= since]


def _refusal(exc: ResponseError, team: str = "") -> OmpError:
    """The OmpError a script's `OMP <code> <arg>` error names; any other server error is
    `store_error` with the server's words."""
    text = str(exc)
    at = text.find("OMP ")
    if at < 0:
        return OmpError("store_error", f"the store refused: {text}")
    code, _, arg = text[at + 4 :].partition(" ")
    arg = arg.split(" script:")[0].strip()
    if code == "unknown_team":
        return OmpError("unknown_team", f"no team {team} in the store", team=team)
    if code == "stale_fence":
        return OmpError("stale_fence", f"the lock changed hands (token now {arg}); nothing written")
    return OmpError(code, f"{code}: {arg}", arg=arg)


def _line(record: Doc) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def _obj(raw: str | None) -> Doc | None:
    if raw is None:
        return None
    obj = json.loads(raw)
    return obj if isinstance(obj, dict) else None


def _sid_key(sid: str) -> tuple[int, int]:
    ms, _, seq = sid.partition("-")
    return int(ms), int(seq or 0)


def _checked(cursor: str) -> str:
    ms, dash, seq = cursor.partition("-")
    if dash and ms.isdigit() and seq.isdigit() and ms.isascii() and seq.isascii():
        return cursor
    raise OmpError("invalid_cursor", f"cursor {cursor!r} is not a position in a Redis log")
