"""The event mask: which notification categories a profiler receives.

After ``COR_PRF_MONITOR``: a profiler sets the mask in ``initialize`` with
:meth:`ProfilerInfo.set_event_mask`; bits in :data:`IMMUTABLE` can be set only there, because
turning them on later would need the process to have been prepared from the start (a
sampler thread, argument capture, native-call instrumentation). Mutable bits can be
flipped at any time, and the collector re-arms its hooks accordingly.
"""

from __future__ import annotations

from collections.abc import Iterator

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from enum import IntFlag as _Flags  # what type checkers (and readers) should take it for
else:

    class _FlagsType(type):
        """The class side of :class:`_Flags`: the members, iteration, ``Mask["NAME"]``."""

        def __new__(mcls, name: str, bases: tuple[type, ...], namespace: dict[str, object]):
            cls = super().__new__(mcls, name, bases, namespace)
            if not bases or bases == (int,):
                return cls
            cls._by_value = {}  # value -> member (the first name given a value keeps it)
            cls._member_map = {}  # name -> member, aliases included, in definition order
            for key, value in namespace.items():
                if not key.startswith("_") and type(value) is int:
                    member = cls._by_value.get(value)
                    if member is None:
                        member = cls._by_value[value] = int.__new__(cls, value)
                    cls._member_map[key] = member
                    type.__setattr__(cls, key, member)
            names = {}  # int(member) -> its first name
            for key, member in cls._member_map.items():
                names.setdefault(int(member), key)
            cls._names = names
            values = [int(m) for m in cls._by_value.values()]  # (ints: no member made here)
            cls._singles = [cls._by_value[v] for v in values if v and not v & (v - 1)]
            cls._singles_mask = sum(v for v in values if v and not v & (v - 1))
            flag_mask = 0
            for v in values:
                flag_mask |= v
            cls._flag_mask = flag_mask
            cls._all_bits = (1 << flag_mask.bit_length()) - 1
            return cls

        def __iter__(cls) -> Iterator[object]:
            return iter(cls._singles)

        def __len__(cls) -> int:
            return len(cls._singles)

        def __getitem__(cls, name: str) -> object:
            return cls._member_map[name]

        @property
        def __members__(cls) -> dict[str, object]:
            return dict(cls._member_map)

        def __repr__(cls) -> str:
            return f"<flag {cls.__name__!r}>"

    class _Flags(int, metaclass=_FlagsType):
        """What :class:`enum.IntFlag` (boundary KEEP) gives a mask — its members, their
        repr, name and value, ``|``/``&``/``^``/``~``, ``in``, iteration — without the
        :mod:`enum` module: importing it and building the class cost ~9 M instructions,
        7 % of an empty ``profkit run`` on 3.11 (issue #26). tests/api/test_event_mask.py
        holds it to an :class:`enum.IntFlag` with the same members, value by value."""

        __slots__ = ()

        def __new__(cls, value: object = 0) -> _Flags:
            if isinstance(value, cls):
                return value
            member = cls._by_value.get(value)
            if member is not None:
                return member
            if not isinstance(value, int):
                raise ValueError(f"{value!r} is not a valid {cls.__qualname__}")
            given = value
            if value < 0 and not ~cls._all_bits <= value:
                value += max(cls._all_bits + 1, 1 << value.bit_length())
            if value < 0:
                value += cls._all_bits + 1
            member = cls._by_value.get(value)
            if member is None:
                member = cls._by_value[value] = int.__new__(cls, value)
            cls._by_value[given] = member
            return member

        @property
        def value(self) -> int:
            return int(self)

        @property
        def name(self) -> str | None:
            value = int(self)
            cls = type(self)
            known = cls._names.get(value)
            if known is not None:
                return known
            singles = value & cls._singles_mask
            aliases = value & ~cls._singles_mask
            names = [cls._names[int(m)] for m in cls._singles if int(m) & singles]
            combined = singles
            if aliases:
                seen = {int(m) for m in cls._singles if int(m) & singles}
                for key, member in cls._member_map.items():
                    m = int(member)
                    if m and m not in seen and m & value == m and cls._names[m] == key:
                        names.append(key)
                        seen.add(m)
                        combined |= m
            if not combined:
                return None
            unknown = value ^ combined
            return "|".join(names) + (f"|{unknown}" if unknown else "")

        def __repr__(self) -> str:
            name = self.name
            cls = type(self).__name__
            return f"<{cls}: {int(self)}>" if name is None else f"<{cls}.{name}: {int(self)}>"

        __str__ = int.__repr__
        __format__ = int.__format__

        def __iter__(self) -> Iterator[_Flags]:
            value = int(self)
            return iter([m for m in type(self)._singles if int(m) & value])

        def __len__(self) -> int:
            return bin(int(self)).count("1")

        def __contains__(self, other: object) -> bool:
            if not isinstance(other, type(self)):
                raise TypeError(
                    f"unsupported operand type(s) for 'in': {type(other).__qualname__!r} "
                    f"and {type(self).__qualname__!r}"
                )
            return int(other) & int(self) == int(other)

        def __or__(self, other: object) -> _Flags:
            if not isinstance(other, int):
                return NotImplemented
            return type(self)(int(self) | int(other))

        def __and__(self, other: object) -> _Flags:
            if not isinstance(other, int):
                return NotImplemented
            return type(self)(int(self) & int(other))

        def __xor__(self, other: object) -> _Flags:
            if not isinstance(other, int):
                return NotImplemented
            return type(self)(int(self) ^ int(other))

        __ror__, __rand__, __rxor__ = __or__, __and__, __xor__

        def __invert__(self) -> _Flags:
            return type(self)(~int(self))

        def __reduce_ex__(self, protocol: object) -> tuple[type, tuple[int]]:
            return type(self), (int(self),)


class EventMask(_Flags):
    """Notification categories (``COR_PRF_MONITOR_*`` analogues)."""

    NONE = 0
    #: function_enter / function_leave / function_yield / function_resume (``ENTERLEAVE``).
    ENTER_LEAVE = 1 << 0
    #: function_first_execution, where a function id is born (``JIT_COMPILATION``).
    FIRST_EXECUTION = 1 << 1
    #: python_to_native_transition / native_to_python_transition around C calls
    #: (``CODE_TRANSITIONS``). Immutable.
    CODE_TRANSITIONS = 1 << 2
    #: exception_thrown / exception_unwind_function_leave / exception_caught /
    #: exception_reraised (``EXCEPTIONS``).
    EXCEPTIONS = 1 << 3
    #: thread_created / thread_destroyed / thread_name_changed (``THREADS``).
    THREADS = 1 << 4
    #: module_load_started / module_load_finished (``MODULE_LOADS``).
    MODULE_LOADS = 1 << 5
    #: garbage_collection_started / garbage_collection_finished (``GC``).
    GC = 1 << 6
    #: function_arguments right after function_enter (``ENABLE_FUNCTION_ARGS``). Immutable.
    FUNCTION_ARGS = 1 << 7
    #: function_return_value right before function_leave (``ENABLE_FUNCTION_RETVAL``). Immutable.
    FUNCTION_RETVAL = 1 << 8
    #: allow ProfilerInfo.do_stack_snapshot (``ENABLE_STACK_SNAPSHOT``).
    ENABLE_STACK_SNAPSHOT = 1 << 9
    #: profkit keeps a per-thread shadow stack readable with ProfilerInfo.get_shadow_stack.
    ENABLE_SHADOW_STACK = 1 << 10
    #: a sampler thread delivers stack_sample notifications. Immutable.
    SAMPLING = 1 << 11
    #: object_allocated / object_freed for a byte-weighted sample of allocations
    #: (``OBJECT_ALLOCATED``; off by default for its cost, as the CLR's). Immutable.
    OBJECT_ALLOCATED = 1 << 12

    #: Bits that only ``initialize`` may set (``COR_PRF_MONITOR_IMMUTABLE``).
    IMMUTABLE = CODE_TRANSITIONS | FUNCTION_ARGS | FUNCTION_RETVAL | SAMPLING | OBJECT_ALLOCATED

    #: Everything a tracing profiler usually wants.
    ALL_TRACING = (
        ENTER_LEAVE
        | FIRST_EXECUTION
        | CODE_TRANSITIONS
        | EXCEPTIONS
        | THREADS
        | MODULE_LOADS
        | GC
        | ENABLE_STACK_SNAPSHOT
        | ENABLE_SHADOW_STACK
    )


IMMUTABLE = EventMask.IMMUTABLE
