"""`typing`'s `NamedTuple` and `Generic` for run time, without importing `typing`.

`import typing` costs ~3 ms a process, a tenth of what an `omp team api` call may cost above the
bare interpreter. The modules on that path (and on `omp team status` and the stop hook's) never
import it at run time. They read `typing` names only under a module-level `TYPE_CHECKING = False`
(mypy treats that name as true, Python as false), and take `NamedTuple`, `Generic` and `cast`
from here:

    TYPE_CHECKING = False
    if TYPE_CHECKING:
        from typing import NamedTuple
    else:
        from omp.typelite import NamedTuple

mypy checks against `typing`'s own; at run time `NamedTuple` builds the same class through
`collections.namedtuple` (already loaded by `re` and `json`), `Generic[...]` is a plain base and
`cast` returns its value.
`tests/test_typelite.py` compares both with `typing`'s.
"""

from __future__ import annotations

from collections import namedtuple


class _NamedTupleMeta(type):
    def __new__(mcs, name: str, bases: tuple[type, ...], ns: dict[str, object]) -> type:
        if ns.get("_omp_root"):
            return super().__new__(mcs, name, bases, ns)
        fields = list(ns.get("__annotations__", {}))  # type: ignore[call-overload]
        defaults = [ns[f] for f in fields if f in ns]
        if any(f in ns for f in fields[: len(fields) - len(defaults)]):
            raise TypeError(f"{name}: a field without a default follows one with a default")
        cls = namedtuple(name, fields, defaults=defaults, module=str(ns.get("__module__")))  # type: ignore[misc]
        for key, value in ns.items():
            if key in fields or key in ("__module__", "__qualname__", "_omp_root"):
                continue
            setattr(cls, key, value)
        cls.__qualname__ = str(ns.get("__qualname__", name))
        return cls


class NamedTuple(metaclass=_NamedTupleMeta):
    """Subclass it with annotated fields, as `typing.NamedTuple` (class syntax only)."""

    _omp_root = True


def cast(_type: object, value: object) -> object:
    """`typing.cast`: the value itself."""
    return value


class Generic:
    """`class Reply(Generic[R])`: subscripting gives the class back (mypy reads the rest)."""

    __slots__ = ()

    def __class_getitem__(cls, _params: object) -> type:
        return cls
