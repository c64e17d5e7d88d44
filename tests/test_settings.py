"""Settings: one table, env + flags, clear errors, an exact round trip through the environment."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from profkit._record import fields as record_fields
from profkit.errors import SettingsError
from profkit.settings import (
    SETTINGS,
    Settings,
    misspelt_variables,
    parse_duration,
    prefix_matches,
)


def test_defaults() -> None:
    s = Settings.from_env({})
    assert s == Settings()
    assert (s.mode, s.prefixes, s.basetime_ns, s.udp, s.tree) == ("trace", (), 0, None, True)


def test_env_values_are_parsed() -> None:
    s = Settings.from_env(
        {
            "PROFKIT_NAMESPACE_PREFIX": "myapp, myapp.core ,,",
            "PROFKIT_BASETIME": "2ms",
            "PROFKIT_UDP": "127.0.0.1:2222",
            "PROFKIT_MODE": "SAMPLE",
            "PROFKIT_INTERVAL": "250us",
            "PROFKIT_UNIT": "ns",
            "PROFKIT_TREE": "no",
            "PROFKIT_OUTPUT": "out.{pid}.json",
            "UNRELATED": "x",
        }
    )
    assert s.prefixes == ("myapp", "myapp.core")
    assert s.basetime_ns == 2_000_000
    assert s.udp == ("127.0.0.1", 2222)
    assert s.mode == "sample"
    assert s.interval_ns == 250_000
    assert s.unit == "ns"
    assert s.tree is False
    assert s.output == "out.{pid}.json"


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("100us", 100_000),
        ("2ms", 2_000_000),
        ("0.5s", 500_000_000),
        ("250ns", 250),
        ("1000", 1_000_000),
        ("1.5 ms", 1_500_000),
        ("3µs", 3000),
        (".5us", 500),
    ],
)
def test_durations(text: str, ns: int) -> None:
    assert parse_duration(text) == ns


@pytest.mark.parametrize(
    ("env", "value", "message"),
    [
        (
            "PROFKIT_BASETIME",
            "abc",
            "PROFKIT_BASETIME='abc': expected a duration like 100us, 2ms, 0.5s",
        ),
        ("PROFKIT_BASETIME", "-1ms", "expected a duration"),
        ("PROFKIT_INTERVAL", "0ms", "expected an interval of at least 10us"),
        ("PROFKIT_INTERVAL", "1ns", "expected an interval of at least 10us"),
        ("PROFKIT_UDP", "localhost", "PROFKIT_UDP='localhost': expected HOST:PORT"),
        ("PROFKIT_UDP", "host:99999", "expected HOST:PORT"),
        ("PROFKIT_MODE", "fast", "expected one of trace, sample"),
        ("PROFKIT_NAMESPACE_PREFIX", "my-app", "'my-app' is not a module path"),
        ("PROFKIT_TREE", "maybe", "expected 1 or 0"),
        ("PROFKIT_UNIT", "ms", "expected one of us, ns"),
        ("PROFKIT_BASETIME", "9" * 400, "at most a week"),  # was OverflowError
        ("PROFKIT_INTERVAL", "8000000s", "at most a week"),
    ],
)
def test_bad_values_name_the_variable(env: str, value: str, message: str) -> None:
    with pytest.raises(SettingsError) as err:
        Settings.from_env({env: value})
    assert message in str(err.value)
    assert str(err.value).startswith(f"{env}=")


def test_flags_override_env_and_name_the_flag() -> None:
    base = Settings.from_env({"PROFKIT_BASETIME": "1ms", "PROFKIT_MODE": "sample"})
    s = base.with_flags({"basetime_ns": "5us", "mode": None})
    assert (s.basetime_ns, s.mode) == (5_000, "sample")
    with pytest.raises(SettingsError, match=r"^--basetime='x': expected a duration"):
        base.with_flags({"basetime_ns": "x"})


def test_ipv6_address() -> None:
    s = Settings.from_env({"PROFKIT_UDP": "[::1]:2222"})
    assert s.udp == ("::1", 2222)
    assert Settings.from_env(s.serialize()) == s


def test_table_matches_dataclass() -> None:
    fields = [s.field for s in SETTINGS]
    assert fields == list(record_fields(Settings))
    assert all(s.env.startswith("PROFKIT_") and s.flag.startswith("--") for s in SETTINGS)
    assert all(getattr(Settings(), s.field) == s.default for s in SETTINGS)


def test_prefix_matching_on_module_boundaries() -> None:
    assert prefix_matches("myapp", ("myapp",))
    assert prefix_matches("myapp.core.db", ("other", "myapp.core"))
    assert not prefix_matches("myapplication", ("myapp",))
    assert not prefix_matches("myapp", ("myapp.core",))
    assert not prefix_matches("x", ())


_names = st.from_regex(r"[a-z_][a-z0-9_]{0,6}(\.[a-z_][a-z0-9_]{0,6}){0,2}", fullmatch=True)


@settings(max_examples=60, deadline=None)
@given(
    mode=st.sampled_from(["trace", "sample"]),
    prefixes=st.lists(_names, max_size=3).map(tuple),
    basetime=st.integers(0, 10**12),
    interval=st.integers(10_000, 10**10),
    udp=st.none()
    | st.tuples(st.sampled_from(["127.0.0.1", "::1", "example.org"]), st.integers(1, 65535)),
    output=st.none() | st.sampled_from(["a.json", "out.{pid}.json.gz"]),
    tree=st.booleans(),
    unit=st.sampled_from(["us", "ns"]),
    fmt=st.sampled_from(["", "profile", "html", "speedscope", "pprof"]),
)
def test_serialize_round_trip(
    mode: str,
    prefixes: tuple[str, ...],
    basetime: int,
    interval: int,
    udp: tuple[str, int] | None,
    output: str | None,
    tree: bool,
    unit: str,
    fmt: str,
) -> None:
    s = Settings(
        mode=mode,
        prefixes=prefixes,
        basetime_ns=basetime,
        interval_ns=interval,  # type: ignore[arg-type]
        udp=udp,
        output=output,
        tree=tree,
        unit=unit,  # type: ignore[arg-type]
        format=fmt,
    )
    env = s.serialize()
    assert all(k.startswith("PROFKIT_") and isinstance(v, str) for k, v in env.items())
    assert Settings.from_env(env) == s


def test_misspelt_variables_are_named_with_a_suggestion() -> None:
    env = {
        "PROFKIT_BASETIM": "1ms",
        "PROFKIT_NAMESPACE_PREFIXES": "app",
        "PROFKIT_BASETIME": "1ms",
        "PROFKIT_SOMETHING_ELSE": "x",  # not close to anything: another tool's, left alone
        "PROFKIT_R": "1",  # close in ratio to PROFKIT_TREE, but not a typo of it
        "PROFKIT_SAMPLE_INTERVAL": "0.01",
    }
    assert misspelt_variables(env) == [
        ("PROFKIT_BASETIM", "PROFKIT_BASETIME"),
        ("PROFKIT_NAMESPACE_PREFIXES", "PROFKIT_NAMESPACE_PREFIX"),
    ]


def test_every_profkit_variable_is_in_the_table() -> None:
    """One table for every ``PROFKIT_*`` variable (issue #10 item 3): any name used in the
    sources (Python, C, the build hook, scripts) is a row, so typo hints know it too."""
    import re
    from pathlib import Path

    from profkit.settings import known_variables

    root = Path(__file__).parents[1]
    files = [*root.glob("src/**/*.py"), *root.glob("src/**/*.c"), root / "hatch_build.py"]
    used = set()
    for path in files:
        for name in re.findall(r"\bPROFKIT_[A-Z0-9_]*[A-Z0-9]\b", path.read_text(errors="replace")):
            # C macros, not variables: include guards, module tables, a capsule's name
            macros = ("PROFKIT_MODULES", "PROFKIT_MAIN", "PROFKIT_IDCALL_CAPSULE")
            if not name.endswith("_H") and name not in macros:
                used.add(name)
    used.discard("PROFKIT_BASETIM")  # the typo in misspelt_variables' own docstring
    missing = used - known_variables()
    assert not missing, f"add a row for {sorted(missing)} to profkit.settings (ENGINES if no flag)"
