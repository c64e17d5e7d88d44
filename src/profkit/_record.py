"""Record classes (``@dataclass(slots=True)`` alike) at a fraction of their creation cost.

Why not :mod:`dataclasses`: it writes every method of a class (``__init__``, ``__repr__``,
``__eq__``, ``__hash__``, ``__setattr__``, ``__delattr__``, ``__getstate__``...) as source
text and compiles each one when the class is created: 0.3-0.9 ms a class on 3.11, and
``profkit run`` created two dozen between its start and its exit (with ``dataclasses``
pulling in :mod:`inspect`, :mod:`ast` and :mod:`dis`). Here nothing is compiled: a
record's ``__init__`` is a precompiled template (:mod:`profkit._record_inits`) with its
fields renamed, so instances are built as fast as a dataclass's and the signature is a
real one; the other methods are shared functions reading the fields through one
:func:`operator.attrgetter`. (Only a class with a ``default_factory`` or a
``__post_init__`` compiles its ``__init__``.)

What a record offers is what the dataclasses it replaced offered: ``__init__`` with
defaults (``field(default_factory=dict)`` for a fresh one each; ``repr=False``,
``compare=False``), ``__slots__``, ``__repr__`` (``Name(field=value, ...)``), ``__eq__``
between instances of the same class, ``__match_args__``, and with ``frozen=True``
assignment refused and ``__hash__``; ``eq=False`` for identity instead; a class's own
``__eq__``, ``__repr__`` or ``__hash__`` is kept, its ``__post_init__`` called last. :func:`replace` and :func:`fields` are :mod:`dataclasses`' own.
Type checkers treat :func:`record` as :func:`dataclasses.dataclass` (``dataclass_transform``).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from types import FunctionType

from profkit import _record_inits as _inits

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if not TYPE_CHECKING:  # what typing's versions do at run time here: mark a function, no more

    def overload(function: object) -> object:
        return function

    def dataclass_transform(**options: object) -> object:
        return overload

else:
    from typing import Any, TypeVar, dataclass_transform, overload

    T = TypeVar("T")


#: Field names of a record class, in order.
FIELDS = "__record_fields__"
_MISSING: Any = type("_Missing", (), {"__repr__": lambda self: "<missing>"})()


class _Field:
    """What :func:`field` returns: read once, when the class is made."""

    __slots__ = ("compare", "default", "default_factory", "repr")

    def __init__(
        self, default: Any, default_factory: Callable[[], Any] | None, repr: bool, compare: bool
    ) -> None:
        self.default = default
        self.default_factory = default_factory
        self.repr = repr
        self.compare = compare


def field(
    *,
    default: Any = _MISSING,
    default_factory: Callable[[], Any] | None = None,
    repr: bool = True,
    compare: bool = True,
) -> Any:
    """A field's options, as :func:`dataclasses.field` (``default_factory``, ``repr``,
    ``compare``)."""
    return _Field(default, default_factory, repr, compare)


@overload
def record(cls: type[T], /) -> type[T]: ...


@overload
def record(*, frozen: bool = False, eq: bool = True) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(field_specifiers=(field,))
def record(cls: type[T] | None = None, /, *, frozen: bool = False, eq: bool = True) -> Any:
    """Make ``cls`` (annotated fields, optional class-level defaults) a record class."""

    def wrap(cls: type[T]) -> type[T]:
        return _make(cls, frozen, eq)

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


def _make(cls: type[T], frozen: bool, eq: bool = True) -> type[T]:
    # Not inspect.get_annotations: importing inspect is the cost this module avoids.
    annotations: dict[str, Any] = cls.__dict__.get("__annotations__", {})  # noqa: RUF063
    names = tuple(
        name
        for name, hint in annotations.items()
        if not (isinstance(hint, str) and hint.startswith(("ClassVar", "typing.ClassVar")))
    )
    own = cls.__dict__
    namespace = {k: v for k, v in own.items() if k not in ("__dict__", "__weakref__")}
    defaults: dict[str, Any] = {}
    factories: dict[str, Callable[[], Any]] = {}
    shown, compared = [], []
    for name in names:
        spec = namespace.pop(name, _MISSING)
        options = spec if isinstance(spec, _Field) else _Field(spec, None, True, True)
        if options.default_factory is not None:
            factories[name] = options.default_factory
        elif options.default is not _MISSING:
            defaults[name] = options.default
        elif defaults or factories:
            raise TypeError(f"non-default argument {name!r} follows default argument")
        if options.repr:
            shown.append(name)
        if options.compare:
            compared.append(name)
    namespace["__slots__"] = names
    namespace["__match_args__"] = names
    namespace[FIELDS] = names
    namespace["__record_shown__"] = tuple(shown)
    post_init = "__post_init__" in own
    namespace["__init__"] = _init(cls.__qualname__, names, defaults, factories, frozen, post_init)
    namespace["_values"] = staticmethod(_getter(tuple(compared)))
    namespace["_state"] = staticmethod(_getter(names))
    namespace.setdefault("__repr__", _repr)
    namespace.setdefault("__reduce__", _reduce)
    if not eq:  # identity: object's __eq__ and __hash__, as dataclass(eq=False)
        pass
    elif "__eq__" not in own:
        namespace["__eq__"] = _eq
    explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    if eq and not explicit_hash:
        # as dataclasses: frozen and compared by value -> hashable; mutable -> unhashable
        namespace["__hash__"] = _hash if frozen else None
    if frozen:
        namespace["__setattr__"] = _refuse_set
        namespace["__delattr__"] = _refuse_delete
    metaclass: type = type(cls)
    new_cls: type[T] = metaclass(cls.__name__, cls.__bases__, namespace)
    return new_cls


def _init(
    qualname: str,
    names: tuple[str, ...],
    defaults: dict[str, Any],
    factories: dict[str, Callable[[], Any]],
    frozen: bool,
    post_init: bool = False,
) -> Callable[..., None]:
    """``__init__(self, a, b=<default>, c=<fresh>)`` for the class.

    The code a dataclass's ``__init__`` has: plain attribute stores (``object.__setattr__``
    when frozen), defaults bound to the function. Without factories it is a precompiled
    template of :mod:`profkit._record_inits` with its placeholder fields renamed (no
    compiling at all); a class with a ``default_factory`` compiles its own, reading the
    factories from the function's globals (``_factory_<name>``).
    """
    if not factories and not post_init and len(names) <= _inits.MAX_FIELDS:
        return _from_template(
            qualname, names, tuple(defaults[n] for n in names if n in defaults), frozen
        )
    scope: dict[str, Any] = {"_MISSING": _MISSING, "_set": object.__setattr__}
    params, body = [], []
    for n in names:
        value = n
        if n in defaults:
            scope[f"_default_{n}"] = defaults[n]
            params.append(f"{n}=_default_{n}")
        elif n in factories:
            scope[f"_factory_{n}"] = factories[n]
            params.append(f"{n}=_MISSING")
            value = f"_factory_{n}() if {n} is _MISSING else {n}"
        else:
            params.append(n)
        body.append(f"_set(self, {n!r}, {value})" if frozen else f"self.{n} = {value}")
    head = ", ".join(["self", *params])
    if post_init:
        body.append("self.__post_init__()")
    lines = "".join(f"\n    {line}" for line in body) or "\n    pass"
    source = f"def __init__({head}) -> None:{lines}\n"
    exec(compile(source, f"<record {qualname}>", "exec"), scope)
    init: Callable[..., None] = scope["__init__"]
    init.__qualname__ = f"{qualname}.__init__"
    return init


def _from_template(
    qualname: str, names: tuple[str, ...], defaults: tuple[Any, ...], frozen: bool
) -> Callable[..., None]:
    """The template for ``len(names)`` fields, its ``f0, f1, ...`` renamed to ``names``:
    parameters (``co_varnames``) and either the attribute names it stores
    (``co_names``) or, when frozen, the name constants it passes to ``object.__setattr__``."""
    template = getattr(_inits, f"{'frozen' if frozen else 'plain'}{len(names)}")
    code = template.__code__
    renamed = {f"f{i}": name for i, name in enumerate(names)}
    changes: dict[str, Any] = {
        "co_varnames": ("self", *names),
        "co_name": "__init__",
        "co_qualname": f"{qualname}.__init__",
    }
    if frozen:
        changes["co_consts"] = tuple(
            renamed.get(c, c) if isinstance(c, str) else c for c in code.co_consts
        )
    else:
        changes["co_names"] = tuple(renamed.get(n, n) for n in code.co_names)
    init: Callable[..., None] = FunctionType(
        code.replace(**changes), template.__globals__, "__init__", defaults or None
    )
    init.__qualname__ = f"{qualname}.__init__"
    return init


def _getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    if not names:
        return lambda self: ()
    if len(names) == 1:
        one = operator.attrgetter(names[0])
        return lambda self: (one(self),)
    return operator.attrgetter(*names)


def _repr(self: Any) -> str:
    names: tuple[str, ...] = type(self).__record_shown__
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
    return type(self), self._state(self)


def _refuse_set(self: Any, name: str, value: Any) -> None:
    raise AttributeError(f"cannot assign to field {name!r}")


def _refuse_delete(self: Any, name: str) -> None:
    raise AttributeError(f"cannot delete field {name!r}")
