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

mypy checks against `typing`'s own; at run time `NamedTuple` builds the class
`collections.namedtuple` builds (with the same fields, methods, defaults and errors, but methods
shared between classes and a `__new__` renamed rather than compiled per class), `Generic[...]`
is a plain base and `cast` returns its value. `tests/test_lean.py` compares them with `typing`'s.
"""

from __future__ import annotations

from types import FunctionType  # loaded anyway: `functools` imports it

try:
    from _collections import _tuplegetter  # type: ignore[import-not-found]  # namedtuple's fields
except ImportError:  # another Python: `collections.namedtuple` builds every class
    _tuplegetter = None

_tuple_new = tuple.__new__
# `__new__` of 1 to 12 fields, compiled with this module, renamed per class (`_named_tuple`)
_NEW = (
    lambda _cls, a: _tuple_new(_cls, (a,)),
    lambda _cls, a, b: _tuple_new(_cls, (a, b)),
    lambda _cls, a, b, c: _tuple_new(_cls, (a, b, c)),
    lambda _cls, a, b, c, d: _tuple_new(_cls, (a, b, c, d)),
    lambda _cls, a, b, c, d, e: _tuple_new(_cls, (a, b, c, d, e)),
    lambda _cls, a, b, c, d, e, f: _tuple_new(_cls, (a, b, c, d, e, f)),
    lambda _cls, a, b, c, d, e, f, g: _tuple_new(_cls, (a, b, c, d, e, f, g)),
    lambda _cls, a, b, c, d, e, f, g, h: _tuple_new(_cls, (a, b, c, d, e, f, g, h)),
    lambda _cls, a, b, c, d, e, f, g, h, i: _tuple_new(_cls, (a, b, c, d, e, f, g, h, i)),
    lambda _cls, a, b, c, d, e, f, g, h, i, j: _tuple_new(_cls, (a, b, c, d, e, f, g, h, i, j)),
    lambda _cls, a, b, c, d, e, f, g, h, i, j, k: _tuple_new(
        _cls, (a, b, c, d, e, f, g, h, i, j, k)
    ),
    lambda _cls, a, b, c, d, e, f, g, h, i, j, k, l: _tuple_new(  # noqa: E741
        _cls, (a, b, c, d, e, f, g, h, i, j, k, l)
    ),
)


# The methods `collections.namedtuple` gives each class, shared (it makes them anew per class)
def _make(cls: type[tuple[object, ...]], iterable: object) -> tuple[object, ...]:
    result = _tuple_new(cls, iterable)  # type: ignore[arg-type]
    n = len(cls._fields)  # type: ignore[attr-defined]
    if len(result) != n:
        raise TypeError(f"Expected {n} arguments, got {len(result)}")
    return result


def _replace(self: tuple[object, ...], /, **kwds: object) -> tuple[object, ...]:
    result: tuple[object, ...] = self._make(map(kwds.pop, self._fields, self))  # type: ignore[attr-defined]
    if kwds:
        raise ValueError(f"Got unexpected field names: {list(kwds)!r}")
    return result


def _repr(self: tuple[object, ...]) -> str:
    fields = ", ".join(f"{k}={v!r}" for k, v in zip(self._fields, self, strict=False))  # type: ignore[attr-defined]
    return f"{self.__class__.__name__}({fields})"


def _asdict(self: tuple[object, ...]) -> dict[str, object]:
    return dict(zip(self._fields, self, strict=False))  # type: ignore[attr-defined]


def _getnewargs(self: tuple[object, ...]) -> tuple[object, ...]:
    return tuple(self)


def _named_tuple(name: str, fields: list[str], defaults: list[object], module: str) -> type:
    """`collections.namedtuple(name, fields, defaults=defaults, module=module)`, without the
    `eval` of a new `__new__` it makes per class (~50 us a class, ten on a send): a precompiled
    one takes the field names instead."""
    if _tuplegetter is None or not 0 < len(fields) <= len(_NEW) or any(f[0] == "_" for f in fields):
        from collections import namedtuple  # which also raises its errors

        return namedtuple(name, fields, defaults=defaults, module=module)
    names = tuple(fields)
    code = _NEW[len(names) - 1].__code__.replace(
        co_varnames=("_cls", *names), co_name="__new__", co_qualname=f"{name}.__new__"
    )
    new = FunctionType(code, globals(), "__new__", tuple(defaults) or None)
    arg_list = ", ".join(names) + ("," if len(names) == 1 else "")
    new.__doc__ = f"Create new instance of {name}({arg_list})"
    ns: dict[str, object] = {
        "__doc__": f"{name}({arg_list})",
        "__slots__": (),
        "_fields": names,
        "_field_defaults": dict(zip(names[len(names) - len(defaults) :], defaults, strict=True)),
        "__new__": new,
        "_make": classmethod(_make),
        "_replace": _replace,
        "__repr__": _repr,
        "_asdict": _asdict,
        "__getnewargs__": _getnewargs,
        "__match_args__": names,
        "__module__": module,
    }
    for index, field in enumerate(names):
        ns[field] = _tuplegetter(index, f"Alias for field number {index}")
    return type(name, (tuple,), ns)


class _NamedTupleMeta(type):
    def __new__(mcs, name: str, bases: tuple[type, ...], ns: dict[str, object]) -> type:
        if ns.get("_omp_root"):
            return super().__new__(mcs, name, bases, ns)
        fields = list(ns.get("__annotations__", {}))  # type: ignore[call-overload]
        defaults = [ns[f] for f in fields if f in ns]
        if any(f in ns for f in fields[: len(fields) - len(defaults)]):
            raise TypeError(f"{name}: a field without a default follows one with a default")
        cls = _named_tuple(name, fields, defaults, str(ns.get("__module__")))
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
