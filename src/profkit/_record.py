"""Record classes (``@dataclass(slots=True)`` alike) at a fraction of their creation cost.

Why not :mod:`dataclasses`: it writes every method of a class (``__init__``, ``__repr__``,
``__eq__``, ``__hash__``, ``__setattr__``, ``__delattr__``, ``__getstate__``...) as source
text and compiles each one when the class is created: 0.3-0.9 ms a class on 3.11, and
``profkit run`` created a dozen before the program's first line and again on the way out
(with ``dataclasses`` pulling in :mod:`inspect`, :mod:`ast` and :mod:`dis`). Here only
``__init__`` is compiled (so instances are built as fast as a dataclass's, and the
signature is a real one); the other methods are shared functions reading the fields
through one :func:`operator.attrgetter`.

What a record offers is what the dataclasses it replaced offered: ``__init__`` with
defaults, ``__slots__``, ``__repr__`` (``Name(field=value, ...)``), ``__eq__`` between
instances of the same class, ``__match_args__``, and with ``frozen=True`` assignment
refused and ``__hash__``; :func:`replace` and :func:`fields` are :mod:`dataclasses`' own. Type checkers
treat :func:`record` as :func:`dataclasses.dataclass` (``dataclass_transform``). No
``field()``: a record needing a per-instance default (a fresh ``dict``) writes its own
``__init__``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, TypeVar, dataclass_transform, overload

T = TypeVar("T")

#: Field names of a record class, in order.
FIELDS = "__record_fields__"


@overload
def record(cls: type[T], /) -> type[T]: ...


@overload
def record(*, frozen: bool = False) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform()
def record(cls: type[T] | None = None, /, *, frozen: bool = False) -> Any:
    """Make ``cls`` (annotated fields, optional class-level defaults) a record class."""

    def wrap(cls: type[T]) -> type[T]:
        return _make(cls, frozen)

    return wrap if cls is None else wrap(cls)


def fields(cls: type) -> tuple[str, ...]:
    """The field names of a record class, in order (``dataclasses.fields`` alike)."""
    names: tuple[str, ...] = getattr(cls, FIELDS)
    return names


def replace(obj: T, **changes: Any) -> T:
    """A copy of the record ``obj`` with ``changes`` (field name -> value)."""
    names: tuple[str, ...] = getattr(type(obj), FIELDS)
    unknown = set(changes) - set(names)
    if unknown:
        raise TypeError(f"{type(obj).__qualname__} has no field {sorted(unknown)[0]!r}")
    values = {name: changes[name] if name in changes else getattr(obj, name) for name in names}
    return type(obj)(**values)


def _make(cls: type[T], frozen: bool) -> type[T]:
    # Not inspect.get_annotations: importing inspect is the cost this module avoids.
    annotations: dict[str, Any] = cls.__dict__.get("__annotations__", {})  # noqa: RUF063
    names = tuple(
        name
        for name, hint in annotations.items()
        if not (isinstance(hint, str) and hint.startswith(("ClassVar", "typing.ClassVar")))
    )
    namespace = {k: v for k, v in cls.__dict__.items() if k not in ("__dict__", "__weakref__")}
    defaults: dict[str, Any] = {}
    for name in names:
        if name in namespace:
            defaults[name] = namespace.pop(name)
        elif defaults:
            raise TypeError(f"non-default argument {name!r} follows default argument")
    namespace["__slots__"] = names
    namespace["__match_args__"] = names
    namespace[FIELDS] = names
    namespace["__init__"] = _init(cls.__qualname__, names, defaults)
    namespace["__repr__"] = _repr
    namespace["__eq__"] = _eq
    namespace["__reduce__"] = _reduce
    if frozen:
        namespace["__hash__"] = _hash
        namespace["__setattr__"] = _refuse_set
        namespace["__delattr__"] = _refuse_delete
    else:
        namespace["__hash__"] = None  # mutable and compared by value: unhashable
    namespace["_values"] = staticmethod(_values_getter(names))
    metaclass: type = type(cls)
    new_cls: type[T] = metaclass(cls.__name__, cls.__bases__, namespace)
    return new_cls


def _init(qualname: str, names: tuple[str, ...], defaults: dict[str, Any]) -> Callable[..., None]:
    """``__init__(self, a, b=<default>)``, compiled once for the class.

    Fields are set with ``object.__setattr__`` (as a frozen dataclass does), defaults are
    bound from the closure-free ``_defaults`` globals, so any object may be a default.
    """
    params = ", ".join(f"{n}=_defaults[{n!r}]" if n in defaults else n for n in names)
    body = "".join(f"\n    _set(self, {n!r}, {n})" for n in names) or "\n    pass"
    source = f"def __init__(self{', ' if params else ''}{params}) -> None:{body}\n"
    scope: dict[str, Any] = {"_defaults": defaults, "_set": object.__setattr__}
    exec(compile(source, f"<record {qualname}>", "exec"), scope)
    init: Callable[..., None] = scope["__init__"]
    init.__qualname__ = f"{qualname}.__init__"
    return init


def _values_getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    if not names:
        return lambda self: ()
    if len(names) == 1:
        getter = operator.attrgetter(names[0])
        return lambda self: (getter(self),)
    return operator.attrgetter(*names)


def _repr(self: Any) -> str:
    names: tuple[str, ...] = getattr(type(self), FIELDS)
    fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
    return f"{type(self).__qualname__}({fields})"


def _eq(self: Any, other: object) -> bool:
    if other.__class__ is not self.__class__:
        return NotImplemented
    result: bool = self._values(self) == other._values(other)  # type: ignore[attr-defined]
    return result


def _hash(self: Any) -> int:
    return hash(self._values(self))


def _reduce(self: Any) -> tuple[type, tuple[Any, ...]]:
    return type(self), self._values(self)


def _refuse_set(self: Any, name: str, value: Any) -> None:
    raise AttributeError(f"cannot assign to field {name!r}")


def _refuse_delete(self: Any, name: str) -> None:
    raise AttributeError(f"cannot delete field {name!r}")
