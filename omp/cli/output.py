"""One JSON emitter and one error handler for every command.

Human text leaves through `write_text`/`write_err`, which pass it through `omp.textsafe.visible`:
text a worker or peer wrote never controls the reader's terminal. JSON keeps it exact.

With `--json`, stdout is exactly one JSON object and nothing else; messages for people go to
stderr. A foreseeable failure (`OmpError`) prints its code and one line, never a traceback.
"""

from __future__ import annotations

import json
import sys

from omp.errors import EXIT_BROKEN_PIPE, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, OmpError
from omp.textsafe import inline, json_safe, visible

TYPE_CHECKING = False  # true for mypy: imports only annotations need stay off the run time
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any, NoReturn, TypeVar

    T = TypeVar("T")

Result = dict[str, "Any"]


def dumps(obj: Any) -> str:
    """JSON text, never NaN or Infinity (which no JSON parser must accept): ValueError then."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return json_safe(text)


def emit_json(obj: Mapping[str, Any]) -> None:
    try:
        text = dumps(obj)
    except ValueError:  # NaN or Infinity got this far (a bug, or a state file edited by hand)
        internal(ValueError("the answer holds NaN or Infinity, which JSON cannot carry"), True)
    try:
        data = (text + "\n").encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate read from a line another program wrote: escape it, stay valid JSON.
        data = (json.dumps(obj, separators=(",", ":")) + "\n").encode("ascii")
    write_bytes(data)


def write_text(text: str) -> None:
    """Every human-form output leaves here: through the one sanitiser (`omp.textsafe`)."""
    write_bytes(visible(text).encode("utf-8", "replace"))


def write_err(text: str) -> None:
    """A line for a person on stderr, through the same sanitiser."""
    sys.stderr.write(visible(text))
    sys.stderr.flush()


def write_bytes(data: bytes) -> None:
    sys.stdout.flush()
    out = getattr(sys.stdout, "buffer", None)
    if out is None:  # a captured stream in tests
        sys.stdout.write(data.decode("utf-8"))
    else:
        out.write(data)
        out.flush()


# Set by `omp.cli.main` when this process is the console script's own (never when omp runs
# inside another program, a test's for one): only then may `finish` end it at once.
OWN_PROCESS = False


def finish(code: int) -> NoReturn:
    """Exit with `code` once the reply is out. In omp's own process, skip the interpreter's
    teardown (freeing every module and object: ~2.4 ms of a ~16 ms `omp team api` call) with
    `os._exit`, after flushing stdout and stderr ourselves: omp writes its files with `os`
    calls, holds no buffered file open and registers no exit handler. Under coverage, or if a
    flush fails (a closed pipe), the normal exit runs as always."""
    if OWN_PROCESS and "coverage" not in sys.modules:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        else:
            import os

            os._exit(code)
    raise SystemExit(code)


def fail(err: OmpError, as_json: bool) -> NoReturn:
    if as_json:
        emit_json(err.to_json())
    else:
        write_err(human_error(err))
    raise SystemExit(err.exit_code)


def human_error(err: OmpError) -> str:
    """`omp: <message> [<code>]`, on one line; an error that ends with the commands to run
    (its `commands`, each on its own line after the text, as `uncommitted_changes` gives them)
    prints them as lines a person can copy. Each line goes through `inline`, so a value inside
    (a path, a name) never starts a line of its own."""
    commands = err.detail.get("commands")
    if isinstance(commands, list) and commands and all(isinstance(c, str) for c in commands):
        block = "".join("\n  " + c for c in commands)
        if err.message.endswith(block) and len(err.message) > len(block):
            head = err.message[: -len(block)]
            lines = [f"omp: {inline(head)} [{err.code}]", *("  " + inline(c) for c in commands)]
            return "\n".join(lines) + "\n"
    return f"omp: {inline(err.message)} [{err.code}]\n"


def internal(exc: BaseException, as_json: bool) -> NoReturn:
    """A bug: one line (one JSON object with `--json`) naming the crash log written for it
    (`omp.cli.crash`: versions, the command with secrets masked, the traceback) and where to
    report it; exit 3. The traceback is also shown on a terminal or with `OMP_DEBUG`."""
    from omp.cli import crash

    path, why = crash.write(exc)
    where = crash.report_to()
    to = f"report it at {where}" if where else "report it to omp's maintainers"
    if path is not None:
        note = f"a crash log is in {path}: {to} with that file attached (secrets masked)"
    else:
        note = f"no crash log could be written ({why}): {to} with OMP_DEBUG=1's traceback"
    shown = crash.mask(str(exc), crash.secret_values(_env()))  # its message may quote a secret
    msg = f"internal error: {type(exc).__name__}: {shown}"
    if as_json:
        emit_json(
            {
                "ok": False,
                "error": "internal",
                "message": f"{msg}; {note}",
                "crashLog": None if path is None else str(path),
                "reportTo": where,
            }
        )
    else:
        write_err(f"omp: {inline(msg)}\nomp: {inline(note)}\n")
    if sys.stderr.isatty() or _debug():
        import traceback

        traceback.print_exc(file=sys.stderr)
    raise SystemExit(EXIT_INTERNAL)


def _env() -> Mapping[str, str]:
    import os

    return os.environ


def _debug() -> bool:
    return _env().get("OMP_DEBUG", "") not in ("", "0")


def interrupted() -> NoReturn:
    """Ctrl-C, wherever it lands: one line, no traceback, exit 130."""
    sys.stderr.write("omp: interrupted\n")
    raise SystemExit(EXIT_INTERRUPTED)


def guarded(fn: Callable[[], T], as_json: bool) -> T:
    """The one error path of every command, typer's and the fast paths': `fn()`, or its
    failure as omp reports failures (`fail`, `interrupted`, `internal`)."""
    try:
        return fn()
    except OmpError as err:
        fail(err, as_json)
    except KeyboardInterrupt:
        interrupted()
    except SystemExit:
        raise
    except BrokenPipeError:
        closed_pipe()
    except Exception as exc:
        internal(exc, as_json)


def closed_pipe() -> NoReturn:
    """The reader went away (`omp team events T | head`): not a bug, nothing to say. Whatever
    is still buffered goes to /dev/null, so the interpreter's last flush cannot fail again."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    raise SystemExit(EXIT_BROKEN_PIPE)


def run(
    fn: Callable[[], Mapping[str, Any]],
    *,
    as_json: bool,
    human: Callable[[Any], str] | None = None,
    exit_code: Callable[[Any], int] | None = None,
) -> NoReturn:
    """Run one command body and print its one result; exit with the table's code. The body's
    result is its command's reply (a TypedDict of `omp.cli.replies`)."""
    result = guarded(fn, as_json)
    code = exit_code(result) if exit_code else EXIT_OK
    if as_json:
        emit_json(result)
    elif human is not None:
        text = human(result)
        if text:
            write_text(text if text.endswith("\n") else text + "\n")
    else:
        emit_json(result)
    raise SystemExit(code)


def invocation() -> str:
    """How to run omp again in a suggestion: the words that run this very omp, absolute (so a
    pasted hint works in any shell of the project, venv activated or not)."""
    from omp.invocation import omp_command

    return omp_command()


def progress(msg: str) -> None:
    """Launch progress, on stderr: with --json, stdout stays exactly one JSON object."""
    write_err(f"omp: {msg}\n")
