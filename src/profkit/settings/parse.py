"""One parser per kind of value in the settings table (:mod:`profkit.settings`).

Each turns text from a ``PROFKIT_*`` variable or a ``profkit run`` flag into a value, or
raises :class:`Invalid` saying what was expected; the table code adds the variable's name
and the text. Formatters turn values back into text that parses to the same value.
"""

from __future__ import annotations

from collections.abc import Callable

from profkit.api.names import is_module_path, split_prefixes

# Durations and sizes are read by hand, not by a regular expression: compiling one cost
# each forked child of `profkit run` ~2 ms (re's cache is empty there when the parent never
# parsed a duration) and each start-up that parses one ~0.9 ms (issue 22, item 13). The
# grammar is the one the patterns in tests/test_settings_size.py state.
_ASCII_BLANKS = " \t\n\r\f\v"
_DURATION_UNITS = ("ns", "us", "µs", "ms", "s")  # two-letter ones before "s"
_UNIT_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
#: Longest duration accepted: a week (far beyond any useful base time or interval, and far
#: below what would overflow a float or the sampler's sleep).
_MAX_DURATION_NS = 7 * 86_400 * 1_000_000_000
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


class Invalid(ValueError):
    """A parser's complaint; the table code adds the variable name and the value."""


# -- parsers (text -> value) and formatters (value -> text) -------------------------------
def parse_duration(text: str) -> int:
    """``100us``, ``2ms``, ``0.5s``, ``250ns`` or a bare number of microseconds -> ns.

    profkit's one duration grammar, the .NET profiler's too (``clr/csrc/settings.c``;
    tests/clr/test_settings_grammar.py feeds both the same strings): ASCII digits with an
    optional fraction, no sign or exponent, ASCII blanks around; rounded half to even."""
    split = _number_and_unit(text.strip(_ASCII_BLANKS), _DURATION_UNITS, _ASCII_BLANKS)
    if split is None or not split[0].isascii():
        raise Invalid("expected a duration like 100us, 2ms, 0.5s")
    number, unit = split
    # A bare number is microseconds: the unit PROFILE_BASETIME users think in.
    ns = float(number) * _UNIT_NS[unit or "us"]
    if not ns <= _MAX_DURATION_NS:  # also inf: 400 digits overflow the float
        raise Invalid("expected a duration of at most a week (like 100us, 2ms, 0.5s)")
    return round(ns)


def format_duration(ns: int) -> str:
    """The shortest exact text :func:`parse_duration` reads back as ``ns``."""
    for unit in ("s", "ms", "us"):
        if ns and ns % _UNIT_NS[unit] == 0:
            return f"{ns // _UNIT_NS[unit]}{unit}"
    return f"{ns}ns"


def parse_prefixes(text: str) -> tuple[str, ...]:
    """``myapp,myapp.core`` -> module-path prefixes (empty text: no filter)."""
    parts = split_prefixes(text)
    for part in parts:
        if not is_module_path(part):
            raise Invalid(
                f"{part!r} is not a module path; expected comma-separated prefixes like myapp,myapp.core"
            )
    return parts


def parse_address(text: str) -> tuple[str, int] | None:
    """``HOST:PORT`` (``[::1]:2222`` for IPv6); empty text: off."""
    text = text.strip()
    if not text:
        return None
    host, sep, port_text = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise Invalid("expected HOST:PORT, e.g. 127.0.0.1:2222")
    return host, int(port_text)


def format_address(value: tuple[str, int] | None) -> str:
    if value is None:
        return ""
    host, port = value
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def parse_bool(text: str) -> bool:
    low = text.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise Invalid("expected 1 or 0 (true/false, yes/no, on/off)")


def choice(*choices: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.strip().lower()
        if value not in choices:
            raise Invalid("expected one of " + ", ".join(choices))
        return value

    return parse


def optional_text(text: str) -> str | None:
    return text or None


#: Shortest sampling interval: below it the sampler thread would only spin (it gets the GIL
#: every few ms from busy code anyway) and the program's idle time would burn a core.
MIN_INTERVAL_NS = 10_000


def interval(text: str) -> int:
    value = parse_duration(text)
    if value < MIN_INTERVAL_NS:
        raise Invalid("expected an interval of at least 10us, like 1ms, 250us")
    return value


def parse_seconds(text: str) -> float:
    """The collector's ``PROFKIT_SAMPLE_INTERVAL``: a positive number of seconds, at most a
    week (``nan``, ``inf`` and ``1e400`` are refused, not slept on)."""
    try:
        value = float(text)
    except ValueError:
        raise Invalid("expected a number of seconds like 0.001") from None
    if not 0 < value <= _MAX_DURATION_NS / 1e9:
        raise Invalid("expected a number of seconds above 0 and at most a week, like 0.001")
    return value


def parse_enable(text: str) -> bool:
    """``PROFKIT_ENABLE_PROFILING``: on for 1/true/yes/on; anything else is simply off (the
    variable is tested by every Python process's start-up line, so it never complains)."""
    return text.strip().lower() in _TRUE


def stripped(text: str) -> str:
    return text.strip()


#: Size units, any case; three letters before two before one (``kib`` before ``b``).
_SIZE_UNITS = tuple(
    sorted(("b", "k", "kb", "kib", "m", "mb", "mib", "g", "gb", "gib", "t", "tb", "tib"), key=len)[
        ::-1
    ]
)
_SIZE_UNIT = {"b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
#: Largest sampling mean accepted: beyond it nearly nothing is ever sampled.
_MAX_SIZE = 1024**4


def parse_size(text: str) -> int:
    """``--alloc-sample``: ``512KiB``, ``64k``, ``1MiB``, ``4096`` (bare: bytes) -> bytes.

    Units are binary (k = KiB), as allocators and ``ulimit`` count; at least 1 byte (every
    allocation sampled) and at most 1 TiB.
    """
    body = text.strip()
    split = _number_and_unit(body, _SIZE_UNITS, None, fold=True)
    if split is None:
        raise Invalid("expected a size in bytes like 512KiB, 64k, 1MiB or 4096")
    number, unit = split
    size = float(number) * _SIZE_UNIT[(unit or "b")[0].lower()]
    if not 1 <= size <= _MAX_SIZE:
        raise Invalid("expected a size of at least 1 byte and at most 1TiB, like 512KiB")
    return round(size)


def format_size(size: int) -> str:
    """The shortest exact text :func:`parse_size` reads back as ``size``."""
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if size % scale == 0:
            return f"{size // scale}{unit}"
    return str(size)


def parse_format(text: str) -> str:
    """``--format``: ``profile`` (profkit's own) or an export format; empty: from ``-o``."""
    value = text.strip().lower()
    if value in ("", "profile"):  # profkit's own needs no registry: every child of
        return value  # `profkit run` reads PROFKIT_FORMAT=profile (the import cost 85 ms a fork)
    from profkit.export.registry import all_names  # only when an export format is named

    choices = all_names()
    if value not in choices:
        raise Invalid("expected one of " + ", ".join(choices))
    return value


def format_help() -> str:
    """``--format``'s help, from the format table (:func:`profkit.export.registry.format_help`)."""
    from profkit.export.registry import format_help as from_table

    return from_table()


def _number_and_unit(
    body: str, units: tuple[str, ...], blanks: str | None, *, fold: bool = False
) -> tuple[str, str] | None:
    """``body`` (already stripped) as digits with an optional fraction (``5``, ``5.``,
    ``5.25``, ``.5``) then optional blanks and one of ``units``; None if it is not one.

    ``blanks`` None: Unicode blanks; ``fold``: units in any (ASCII) case. Decimal digits
    are what ``str.isdecimal`` says (the caller narrows them to ASCII where it must)."""
    unit = ""
    tail = body.lower() if fold else body
    for candidate in units:
        if tail.endswith(candidate) and (not fold or body[-len(candidate) :].isascii()):
            unit, body = candidate, body[: -len(candidate)].rstrip(blanks)
            break
    whole, dot, fraction = body.partition(".")
    if not (whole or fraction) or not all(p == "" or p.isdecimal() for p in (whole, fraction)):
        return None
    if not whole and not dot:
        return None
    return body, unit
