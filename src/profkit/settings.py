"""The settings of ``profkit run`` and the ELT profiler: one table, one frozen dataclass.

Every setting is one row of :data:`SETTINGS`: the dataclass field, the ``PROFKIT_*``
environment variable, the ``profkit run`` flag, a parser from text, a formatter back to
text, and the default. Everything else is derived from that table — reading the
environment, the CLI flags' help, validation messages, and :meth:`Settings.serialize`,
which hands a child process the parent's *exact* settings through its environment
(coverage.py's ``serialize()`` idea, but validated on the way back in).

Precedence, lowest first: defaults → ``PROFKIT_*`` environment → command-line flags.
A bad value is never guessed at: it raises :class:`~profkit.errors.SettingsError` naming
the variable (or flag), the value and what was expected, e.g.
``PROFKIT_BASETIME='abc': expected a duration like 100us, 2ms, 0.5s``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from profkit.errors import SettingsError

Mode = Literal["trace", "sample"]
Unit = Literal["us", "ns"]
SampleClock = Literal["wall", "cpu"]
Native = Literal["auto", "on", "off"]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ns|us|µs|ms|s)?\s*$")
_UNIT_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_MODULE_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
#: Longest duration accepted: a week (far beyond any useful base time or interval, and far
#: below what would overflow a float or the sampler's sleep).
_MAX_DURATION_NS = 7 * 86_400 * 1_000_000_000
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


class _Invalid(ValueError):
    """A parser's complaint; the table code adds the variable name and the value."""


# -- parsers (text -> value) and formatters (value -> text) -------------------------------
def parse_duration(text: str) -> int:
    """``100us``, ``2ms``, ``0.5s``, ``250ns`` or a bare number of microseconds -> ns."""
    match = _DURATION.match(text)
    if not match:
        raise _Invalid("expected a duration like 100us, 2ms, 0.5s")
    number, unit = match.groups()
    # A bare number is microseconds: the unit PROFILE_BASETIME users think in.
    ns = float(number) * _UNIT_NS[unit or "us"]
    if not ns <= _MAX_DURATION_NS:  # also inf: 400 digits overflow the float
        raise _Invalid("expected a duration of at most a week (like 100us, 2ms, 0.5s)")
    return round(ns)


def format_duration(ns: int) -> str:
    """The shortest exact text :func:`parse_duration` reads back as ``ns``."""
    for unit in ("s", "ms", "us"):
        if ns and ns % _UNIT_NS[unit] == 0:
            return f"{ns // _UNIT_NS[unit]}{unit}"
    return f"{ns}ns"


def parse_prefixes(text: str) -> tuple[str, ...]:
    """``myapp,myapp.core`` -> module-path prefixes (empty text: no filter)."""
    parts = tuple(p.strip() for p in text.split(",") if p.strip())
    for part in parts:
        if not _MODULE_PATH.match(part):
            raise _Invalid(
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
        raise _Invalid("expected HOST:PORT, e.g. 127.0.0.1:2222")
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
    raise _Invalid("expected 1 or 0 (true/false, yes/no, on/off)")


def _choice(*choices: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.strip().lower()
        if value not in choices:
            raise _Invalid("expected one of " + ", ".join(choices))
        return value

    return parse


def _optional_text(text: str) -> str | None:
    return text or None


#: Shortest sampling interval: below it the sampler thread would only spin (it gets the GIL
#: every few ms from busy code anyway) and the program's idle time would burn a core.
MIN_INTERVAL_NS = 10_000


def _interval(text: str) -> int:
    value = parse_duration(text)
    if value < MIN_INTERVAL_NS:
        raise _Invalid("expected an interval of at least 10us, like 1ms, 250us")
    return value


# -- the table -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Setting:
    """One row: dataclass field, environment variable, CLI flag, parser, formatter, default."""

    field: str
    env: str
    flag: str
    parse: Callable[[str], Any]
    format: Callable[[Any], str]
    default: Any
    help: str
    metavar: str = ""  #: how ``--help`` names the flag's value


# fmt: off
_bool_text: Callable[[Any], str] = lambda v: "1" if v else "0"  # noqa: E731
_text_or_empty: Callable[[Any], str] = lambda v: v or ""  # noqa: E731

SETTINGS: tuple[Setting, ...] = (
    Setting("mode", "PROFKIT_MODE", "--mode", _choice("trace", "sample"), str, "trace",
            "trace: every call (ELT call tree); sample: stack samples at --interval",
            "{trace,sample}"),
    Setting("prefixes", "PROFKIT_NAMESPACE_PREFIX", "--prefix", parse_prefixes, ",".join, (),
            "keep only functions whose module is under one of these comma-separated "
            "module paths (myapp,otherlib.core); others are skipped at capture time",
            "PREFIXES"),
    Setting("basetime_ns", "PROFKIT_BASETIME", "--basetime", parse_duration, format_duration, 0,
            "hide calls shorter than this (100us, 2ms; bare number = us); their time "
            "counts in the caller", "DURATION"),
    Setting("output", "PROFKIT_OUTPUT", "--output", _optional_text, _text_or_empty, None,
            "profile file to write ({pid} is replaced by the process id)", "FILE"),
    Setting("interval_ns", "PROFKIT_INTERVAL", "--interval", _interval,
            format_duration, 1_000_000, "sampling interval in sample mode (default 1ms)",
            "DURATION"),
    Setting("sample_clock", "PROFKIT_SAMPLE_CLOCK", "--sample-clock", _choice("wall", "cpu"),
            str, "wall", "what a sample's weight measures in sample mode: wall or cpu time",
            "{wall,cpu}"),
    Setting("udp", "PROFKIT_UDP", "--udp", parse_address, format_address, None,
            "send event lines live to a profkit monitor at HOST:PORT", "HOST:PORT"),
    Setting("stream", "PROFKIT_STREAM", "--stream", _optional_text, _text_or_empty, None,
            "print event lines (Enter/Leave) live: 'stderr' or a file path", "stderr|FILE"),
    Setting("unit", "PROFKIT_UNIT", "--unit", _choice("us", "ns"), str, "us",
            "unit of durations in event lines: us (3 decimals) or ns", "{us,ns}"),
    Setting("tree", "PROFKIT_TREE", "--tree", parse_bool, _bool_text, True,
            "print the call tree on stderr at the end"),
    Setting("subprocesses", "PROFKIT_SUBPROCESSES", "--subprocesses", parse_bool, _bool_text,
            True, "profile child Python processes too (each writes its own file)"),
    Setting("timeline", "PROFKIT_TIMELINE", "--timeline", parse_bool, _bool_text, False,
            "trace mode: also keep every shown call's start and end (up to 1,000,000) "
            "for timeline exports (Chrome trace, speedscope)"),
    Setting("native", "PROFKIT_NATIVE", "--native", _choice("auto", "on", "off"), str, "auto",
            "trace mode's C hot path: auto (used when built), on (required: an error if it "
            "is not built), off (pure Python)",
            "{auto,on,off}"),
)
# fmt: on

_BY_FIELD = {s.field: s for s in SETTINGS}


@dataclass(frozen=True, slots=True)
class Settings:
    """Validated, immutable settings (see :data:`SETTINGS` for meanings and variables)."""

    mode: Mode = "trace"
    prefixes: tuple[str, ...] = ()
    basetime_ns: int = 0
    output: str | None = None
    interval_ns: int = 1_000_000
    sample_clock: SampleClock = "wall"
    udp: tuple[str, int] | None = None
    stream: str | None = None
    unit: Unit = "us"
    tree: bool = True
    subprocesses: bool = True
    timeline: bool = False
    native: Native = "auto"

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        """Defaults overridden by every ``PROFKIT_*`` variable present in ``environ``."""
        values: dict[str, Any] = {}
        for setting in SETTINGS:
            text = environ.get(setting.env)
            if text is not None:
                values[setting.field] = _parse(setting, text, setting.env)
        return cls(**values)

    def with_flags(self, flags: Mapping[str, str | None]) -> Settings:
        """A copy with command-line values (by field name, as text; ``None`` = not given)."""
        changes: dict[str, Any] = {}
        for name, text in flags.items():
            if text is None:
                continue
            setting = _BY_FIELD.get(name)
            if setting is None:
                raise SettingsError(f"unknown setting {name!r}")
            changes[name] = _parse(setting, text, setting.flag)
        return dataclasses.replace(self, **changes)

    def replace(self, **changes: Any) -> Settings:
        """A copy with already-parsed values (e.g. ``output=...`` decided by the runner)."""
        return dataclasses.replace(self, **changes)

    def serialize(self) -> dict[str, str]:
        """Every setting as ``PROFKIT_*`` text; :meth:`from_env` reads back an equal object."""
        return {s.env: s.format(getattr(self, s.field)) for s in SETTINGS}

    def as_dict(self) -> dict[str, str]:
        """Settings by field name as text: what a saved profile's metadata records."""
        return {s.field: s.format(getattr(self, s.field)) for s in SETTINGS}


#: The variable the collector's start-up hook reads the sampling interval from, in seconds
#: (``profkit.collect.startup``). ``PROFKIT_INTERVAL`` is the user-facing one; see
#: :func:`export_collector_interval`.
COLLECTOR_INTERVAL_VAR = "PROFKIT_SAMPLE_INTERVAL"


def collector_interval_text(settings: Settings) -> str:
    """``settings.interval_ns`` as the collector's seconds text (``0.001``)."""
    return repr(settings.interval_ns / 1e9)


def export_collector_interval(environ: Any, settings: Settings) -> None:
    """Make an environment-activated sampler honour ``PROFKIT_INTERVAL``.

    The start-up hook builds the profiler *first* and only then reads
    ``PROFKIT_SAMPLE_INTERVAL`` for ``attach``, so a profiler constructed from the
    environment writes the documented ``PROFKIT_INTERVAL`` through to it (children
    inherit the same value). Without ``PROFKIT_INTERVAL`` the environment is left alone.
    """
    if "PROFKIT_INTERVAL" in environ:
        environ[COLLECTOR_INTERVAL_VAR] = collector_interval_text(settings)


#: ``PROFKIT_*`` variables read elsewhere (the collector's start-up hook, debugging).
_OTHER_VARIABLES = frozenset(
    {
        "PROFKIT_ENABLE_PROFILING",
        "PROFKIT_PROFILER",
        "PROFKIT_BACKEND",
        COLLECTOR_INTERVAL_VAR,
        "PROFKIT_DEBUG",
    }
)


def misspelt_variables(environ: Mapping[str, str]) -> list[tuple[str, str]]:
    """``(variable, the setting it probably means)`` for likely typos such as
    ``PROFKIT_BASETIM``: a set variable that is not one of ours but close to one.

    Only near misses are reported, so variables other tools or later versions read are
    not flagged; a typo would otherwise be silently ignored.
    """
    known = {s.env for s in SETTINGS} | _OTHER_VARIABLES
    out: list[tuple[str, str]] = []
    for name in sorted(environ):
        if name.startswith("PROFKIT_") and name not in known:
            import difflib  # only for an unknown PROFKIT_ variable: most runs have none

            close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.85)
            if close and abs(len(close[0]) - len(name)) <= 2:
                out.append((name, close[0]))
    return out


def _parse(setting: Setting, text: str, where: str) -> Any:
    try:
        return setting.parse(text)
    except _Invalid as exc:
        raise SettingsError(f"{where}={text!r}: {exc}") from None


def prefix_matches(module: str, prefixes: tuple[str, ...]) -> bool:
    """True when ``module`` is one of ``prefixes`` or inside one (module-path boundaries).

    ``myapp`` matches ``myapp`` and ``myapp.core`` but not ``myapplication``.
    """
    for prefix in prefixes:
        if module == prefix or (module.startswith(prefix) and module[len(prefix)] == "."):
            return True
    return False
