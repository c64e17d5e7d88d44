"""Every ``PROFKIT_*`` variable in one table: flag, variable, parser, formatter, default.

Two groups of rows of one :class:`Setting` type, read by the CLI, the start-up hook
(:mod:`profkit.collect.startup`) and the runner alike:

* :data:`SETTINGS` — what a profiler is configured with (``profkit run``'s flags, one
  field each of the frozen :class:`Settings` dataclass, recorded in every saved profile);
* :data:`ACTIVATION` — what the start-up hook reads to decide *whether* and *how* to
  attach (``PROFKIT_ENABLE_PROFILING``, ``PROFKIT_PROFILER``, ``PROFKIT_BACKEND``, the
  collector's own ``PROFKIT_SAMPLE_INTERVAL`` in seconds); no ``run`` flag, read one
  variable at a time with :func:`read` so that a bad value of one never stops another
  profiler from attaching.

Everything else is derived from the table — reading the environment, the CLI flags'
help, validation messages, the list of known variables (typo hints), and
:meth:`Settings.serialize`, which hands a child process the parent's *exact* settings
through its environment (coverage.py's ``serialize()`` idea, but validated on the way
back in). One parser per kind of value (duration, interval, seconds, choice, bool,
prefixes, address, text); nothing ever writes a parsed value back into ``os.environ``.

Precedence, lowest first: defaults → ``PROFKIT_*`` environment → command-line flags.
A bad value is never guessed at: it raises :class:`~profkit.errors.SettingsError` naming
the variable (or flag), the value and what was expected, e.g.
``PROFKIT_BASETIME='abc': expected a duration like 100us, 2ms, 0.5s``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from profkit._record import record
from profkit._record import replace as _replace
from profkit.api.names import prefix_matches
from profkit.errors import SettingsError
from profkit.settings.parse import (
    MIN_INTERVAL_NS,
    Invalid,
    choice,
    format_address,
    format_duration,
    format_help,
    format_size,
    interval,
    optional_text,
    parse_address,
    parse_bool,
    parse_duration,
    parse_enable,
    parse_format,
    parse_prefixes,
    parse_seconds,
    parse_size,
    stripped,
)

TYPE_CHECKING = False  # typing's, without importing typing at run time (profkit run's start-up)
if TYPE_CHECKING:
    from typing import Any, Literal

    Mode = Literal["trace", "sample", "memory"]
    Unit = Literal["us", "ns"]
    SampleClock = Literal["wall", "cpu", "gil", "active"]  # SAMPLE_CLOCKS, in this order
    Native = Literal["auto", "on", "off"]
else:  # the aliases are for type checkers; run time has their values' type
    Mode = Unit = SampleClock = Native = str

#: What a sample's weight measures: the one table of sample modes (``run --sample-clock``,
#: ``attach``/``top --mode``). gil and active are read from outside the program, so only
#: the out-of-process sampler has them (:data:`IN_PROCESS_CLOCKS`).
SAMPLE_CLOCKS: tuple[SampleClock, ...] = ("wall", "cpu", "gil", "active")
SAMPLE_CLOCK_HELP = (
    "wall: every thread, wall time (default); cpu: threads' own CPU time; "
    "gil: only the thread holding the GIL; active: wall time of threads that are running"
)
#: The clocks the in-process sampler (which runs inside the program) can measure.
IN_PROCESS_CLOCKS: tuple[SampleClock, ...] = ("wall", "cpu")
#: ``PROFKIT_SAMPLER`` values that ask for the in-process sampler outright.
SAMPLER_IN_PROCESS = ("in-process", "inprocess", "off")


# -- the table -------------------------------------------------------------------------------
@record(frozen=True)
class Setting:
    """One row: dataclass field, environment variable, CLI flag, parser, formatter, default."""

    field: str
    env: str
    flag: str
    parse: Callable[[str], Any]
    format: Callable[[Any], str]
    default: Any
    #: ``--help``'s text; a function for text generated from another table (``--format``'s,
    #: from the format table: called only when help is shown)
    help: str | Callable[[], str]
    metavar: str = ""  #: how ``--help`` names the flag's value

    def help_text(self) -> str:
        """The help text (generated now if it is generated)."""
        return self.help if isinstance(self.help, str) else self.help()


def _str(value: Any) -> str:
    return str(value)


# fmt: off
_bool_text: Callable[[Any], str] = lambda v: "1" if v else "0"  # noqa: E731
_text_or_empty: Callable[[Any], str] = lambda v: v or ""  # noqa: E731

SETTINGS: tuple[Setting, ...] = (
    Setting("mode", "PROFKIT_MODE", "--mode", choice("trace", "sample", "memory"), str, "trace",
            "trace: every call (ELT call tree); sample: stack samples at --interval; "
            "memory: allocated bytes by stack (sampled every --alloc-sample bytes)",
            "{trace,sample,memory}"),
    Setting("prefixes", "PROFKIT_NAMESPACE_PREFIX", "--prefix", parse_prefixes, ",".join, (),
            "keep only functions whose module is under one of these comma-separated "
            "module paths (myapp,otherlib.core); others are skipped at capture time",
            "PREFIXES"),
    Setting("basetime_ns", "PROFKIT_BASETIME", "--basetime", parse_duration, format_duration, 0,
            "hide calls shorter than this (100us, 2ms; bare number = us); their time "
            "counts in the caller", "DURATION"),
    Setting("output", "PROFKIT_OUTPUT", "--output", optional_text, _text_or_empty, None,
            "profile file to write ({pid} is replaced by the process id)", "FILE"),
    Setting("format", "PROFKIT_FORMAT", "--format", parse_format, str, "",
            format_help,
            "FORMAT"),
    Setting("interval_ns", "PROFKIT_INTERVAL", "--interval", interval,
            format_duration, 1_000_000, "sampling interval in sample mode (default 1ms)",
            "DURATION"),
    Setting("sample_clock", "PROFKIT_SAMPLE_CLOCK", "--sample-clock", choice(*SAMPLE_CLOCKS),
            str, "wall", "what a sample's weight measures in sample mode; " + SAMPLE_CLOCK_HELP
            + " (gil, active: sampled from outside only)", "{" + ",".join(SAMPLE_CLOCKS) + "}"),
    Setting("udp", "PROFKIT_UDP", "--udp", parse_address, format_address, None,
            "send event lines live to a profkit monitor at HOST:PORT", "HOST:PORT"),
    Setting("stream", "PROFKIT_STREAM", "--stream", optional_text, _text_or_empty, None,
            "print event lines (Enter/Leave) live: 'stderr' or a file path", "stderr|FILE"),
    Setting("unit", "PROFKIT_UNIT", "--unit", choice("us", "ns"), str, "us",
            "unit of durations in event lines: us (3 decimals) or ns", "{us,ns}"),
    Setting("tree", "PROFKIT_TREE", "--tree", parse_bool, _bool_text, True,
            "print the call tree on stderr at the end"),
    Setting("subprocesses", "PROFKIT_SUBPROCESSES", "--subprocesses", parse_bool, _bool_text,
            True, "profile child Python processes too (each writes its own file)"),
    Setting("timeline", "PROFKIT_TIMELINE", "--timeline", parse_bool, _bool_text, False,
            "trace mode: also keep every shown call's start and end (up to 1,000,000) "
            "for timeline exports (Chrome trace, speedscope)"),
    Setting("c_calls", "PROFKIT_C_CALLS", "--c-calls", parse_bool, _bool_text, True,
            "trace mode: C functions and methods (TextIOWrapper.write, dict.get) as nodes of "
            "their own, their time out of the caller's self time"),
    Setting("compensate", "PROFKIT_COMPENSATE", "--compensate", parse_bool, _bool_text, True,
            "trace mode: take the profiler's own cost per call, measured when recording "
            "starts, out of the recorded times (the profile's metadata says by how much)"),
    Setting("native", "PROFKIT_NATIVE", "--native", choice("auto", "on", "off"), str, "auto",
            "the C parts of trace mode's hot path and of the out-of-process sampler: auto "
            "(used when built), on (required: an error if not built), off (pure Python)",
            "{auto,on,off}"),
    Setting("alloc_sample_bytes", "PROFKIT_ALLOC_SAMPLE", "--alloc-sample", parse_size,
            format_size, 512 * 1024,
            "memory mode: mean bytes between sampled allocations (default 512KiB; 1 samples "
            "every allocation); k/KiB, m/MiB are binary", "BYTES"),
)

#: Variables of the start-up hook (environment activation). No ``run`` flag (``flag`` is
#: empty): ``profkit run`` sets them for its children itself. Read with :func:`read`.
ACTIVATION: tuple[Setting, ...] = (
    Setting("enable", "PROFKIT_ENABLE_PROFILING", "", parse_enable, _bool_text, False,
            "1 (true/yes/on) attaches PROFKIT_PROFILER at interpreter start-up"),
    Setting("profiler", "PROFKIT_PROFILER", "", stripped, _str, "",
            "pkg.module:Class or a name in entry-point group profkit.profilers"),
    Setting("backend", "PROFKIT_BACKEND", "", stripped, _str, "",
            "the collector backend: auto (default), monitoring, evalframe (3.11), setprofile, sampler"),
    Setting("sample_interval_s", "PROFKIT_SAMPLE_INTERVAL", "", parse_seconds, repr, None,
            "the collector's sampling interval in seconds; wins over PROFKIT_INTERVAL"),
    Setting("debug", "PROFKIT_DEBUG", "", stripped, _str, "",
            "1: a profkit bug shows its traceback"),
)

#: Variables of one engine or tool each, read where they are used (with :func:`read`, or
#: plainly by code that must stay import-light); here so that every ``PROFKIT_*`` variable
#: is in one table (``--help``-less, typo hints know them).
ENGINES: tuple[Setting, ...] = (
    Setting("dotnet", "PROFKIT_DOTNET", "", stripped, _str, "",
            "the dotnet host for .NET targets (after --dotnet; docs/clr.md)"),
    Setting("sampler", "PROFKIT_SAMPLER", "", choice("auto", *SAMPLER_IN_PROCESS), _str, "auto",
            "run --mode sample: in-process (or off: no sampling from outside) uses the "
            "in-process sampler outright; auto (default) samples from outside when allowed"),
    Setting("sampler_layout", "PROFKIT_SAMPLER_LAYOUT", "", stripped, _str, "",
            "the out-of-process sampler: read the target with this measured CPython layout "
            "of its minor (3.12.1), without the live check (docs/sampler.md)"),
    Setting("clr_output", "PROFKIT_CLR_OUTPUT", "", stripped, _str, "",
            "set by profkit for its CLR profiler library: the result file"),
    Setting("clr_events", "PROFKIT_CLR_EVENTS", "", stripped, _str, "",
            "set by profkit for its CLR profiler library: the events to record"),
    Setting("clr_buffer", "PROFKIT_CLR_BUFFER", "", stripped, _str, "",
            "set by profkit for its CLR profiler library: the per-thread buffer size"),
    Setting("clr_hooks", "PROFKIT_CLR_HOOKS", "", stripped, _str, "",
            "set by profkit for its CLR profiler library: which ELT hooks"),
    Setting("clr_heap", "PROFKIT_CLR_HEAP", "", stripped, _str, "",
            "set by profkit heap run for its CLR profiler library: the heap census file"),
    Setting("clr_heap_at", "PROFKIT_CLR_HEAP_AT", "", stripped, _str, "",
            "set by profkit heap run --at for its CLR profiler library: the census's time "
            "after the runtime's start, in nanoseconds (a forced full GC then)"),
    Setting("clr_alloc_sample", "PROFKIT_CLR_ALLOC_SAMPLE", "", stripped, _str, "",
            "set by .NET memory mode for its CLR profiler library: the allocation sampling "
            "mean in bytes (--alloc-sample)"),
    Setting("clr_test_refuse", "PROFKIT_CLR_TEST_REFUSE", "", stripped, _str, "",
            "tests only: COR_PRF_MONITOR flags (a mask, 0x00800000) the CLR profiler library's "
            "SetEventMask is made to refuse, as a runtime lacking them does (docs/clr.md)"),
    Setting("dotnet_memory", "PROFKIT_DOTNET_MEMORY", "", stripped, _str, "",
            ".NET memory mode's engine: native (default: ObjectAllocated in the CLR profiler "
            "library) or events (EventPipe's GCAllocationTick); docs/clr.md"),
    Setting("calibration_cache", "PROFKIT_CALIBRATION_CACHE", "", stripped, _str, "",
            "trace mode: where the calibration's costs are kept between runs (default "
            "$XDG_CACHE_HOME/profkit/calibration); 0 measures them at every run"),
    Setting("require_native", "PROFKIT_REQUIRE_NATIVE", "", parse_enable, _bool_text, False,
            "build time (hatch_build.py), 1: a C part that fails to compile fails the install"),
    Setting("no_native", "PROFKIT_NO_NATIVE", "", parse_enable, _bool_text, False,
            "build time (hatch_build.py), 1: compile no C part"),
    Setting("werror", "PROFKIT_WERROR", "", parse_enable, _bool_text, False,
            "build time (hatch_build.py), 1: a C warning fails the build (on with "
            "PROFKIT_REQUIRE_NATIVE)"),
    Setting("sanitize", "PROFKIT_SANITIZE", "", parse_enable, _bool_text, False,
            "build time (hatch_build.py), 1: the C parts with AddressSanitizer and UBSan "
            "(scripts/sanitize.py)"),
    Setting("no_recvmmsg", "PROFKIT_NO_RECVMMSG", "", parse_enable, _bool_text, False,
            "the monitor, 1: receive one datagram a call, not recvmmsg batches (tests)"),
)
# fmt: on

_BY_FIELD = {s.field: s for s in SETTINGS}
_ANY_BY_FIELD = {s.field: s for s in (*SETTINGS, *ACTIVATION, *ENGINES)}


@record(frozen=True)
class Settings:
    """Validated, immutable settings (see :data:`SETTINGS` for meanings and variables)."""

    mode: Mode = "trace"
    prefixes: tuple[str, ...] = ()
    basetime_ns: int = 0
    output: str | None = None
    format: str = ""
    interval_ns: int = 1_000_000
    sample_clock: SampleClock = "wall"
    udp: tuple[str, int] | None = None
    stream: str | None = None
    unit: Unit = "us"
    tree: bool = True
    subprocesses: bool = True
    timeline: bool = False
    c_calls: bool = True
    compensate: bool = True
    native: Native = "auto"
    alloc_sample_bytes: int = 512 * 1024

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
        return _replace(self, **changes)

    def replace(self, **changes: Any) -> Settings:
        """A copy with already-parsed values (e.g. ``output=...`` decided by the runner)."""
        return _replace(self, **changes)

    def serialize(self) -> dict[str, str]:
        """Every setting as ``PROFKIT_*`` text; :meth:`from_env` reads back an equal object."""
        return {s.env: s.format(getattr(self, s.field)) for s in SETTINGS}

    def as_dict(self) -> dict[str, str]:
        """Settings by field name as text: what a saved profile's metadata records."""
        return {s.field: s.format(getattr(self, s.field)) for s in SETTINGS}


def read(environ: Mapping[str, str], field: str) -> Any:
    """One variable of either group, parsed by its row; its default when unset.

    The start-up hook reads what it needs this way, one at a time: a bad
    ``PROFKIT_BASETIME`` is no reason to refuse a user's own profiler that never reads it.
    """
    setting = _ANY_BY_FIELD[field]
    text = environ.get(setting.env)
    return setting.default if text is None else _parse(setting, text, setting.env)


def sample_interval_s(environ: Mapping[str, str]) -> float:
    """Seconds between samples for ``attach``: the collector's ``PROFKIT_SAMPLE_INTERVAL``
    when set, else the user-facing ``PROFKIT_INTERVAL`` (a duration), else 1 ms."""
    seconds: float | None = read(environ, "sample_interval_s")
    if seconds is not None:
        return seconds
    return float(read(environ, "interval_ns")) / 1e9


#: The collector's own interval variable (seconds). ``PROFKIT_INTERVAL`` is the user-facing
#: one; both are rows of the table and :func:`sample_interval_s` says which wins.
COLLECTOR_INTERVAL_VAR = "PROFKIT_SAMPLE_INTERVAL"


def collector_interval_text(settings: Settings) -> str:
    """``settings.interval_ns`` as the collector's seconds text (``0.001``)."""
    return repr(settings.interval_ns / 1e9)


def known_variables() -> frozenset[str]:
    """Every ``PROFKIT_*`` variable profkit reads."""
    return frozenset(s.env for s in (*SETTINGS, *ACTIVATION, *ENGINES))


def misspelt_variables(environ: Mapping[str, str]) -> list[tuple[str, str]]:
    """``(variable, the setting it probably means)`` for likely typos such as
    ``PROFKIT_BASETIM``: a set variable that is not one of ours but close to one.

    Only near misses are reported, so variables other tools or later versions read are
    not flagged; a typo would otherwise be silently ignored.
    """
    known = known_variables()
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
    except Invalid as exc:
        raise SettingsError(f"{where}={text!r}: {exc}") from None


__all__ = [
    "ACTIVATION",
    "COLLECTOR_INTERVAL_VAR",
    "ENGINES",
    "MIN_INTERVAL_NS",
    "SAMPLER_IN_PROCESS",
    "SETTINGS",
    "Setting",
    "Settings",
    "collector_interval_text",
    "format_duration",
    "known_variables",
    "misspelt_variables",
    "parse_duration",
    "parse_enable",
    "parse_format",
    "parse_prefixes",
    "parse_seconds",
    "prefix_matches",  # the one matcher lives in profkit.api.names (profilers use it)
    "read",
    "sample_interval_s",
]
