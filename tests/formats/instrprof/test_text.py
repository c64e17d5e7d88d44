"""Text profiles: reader rules, writer output, round trips, bad input, and llvm-profdata as oracle."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profkit.errors import ProfileFormatError, UsageError
from profkit.formats.instrprof.hashing import name_md5
from profkit.formats.instrprof.model import FunctionRecord, Profile, ProfileKind, ValueKind
from profkit.formats.instrprof.text import format_text, parse_text, parse_uint, write_text
from tests.formats.instrprof._writer_strategies import (
    llvm_profdata,
    normalized,
    profiles,
    run_llvm,
)

SAMPLE = b"""# IR level Instrumentation Flag
:ir
:entry_first
main
# Func Hash:
0x10
# Num Counters:
2
# Counter Values:
100
1
# Num Bitmap Bytes:
$2
0x1f
7
# Num Value Kinds:
2
0
1
2
main:66
** External Symbol **:34
1
1
1
513:50

sample.c;f
7
1
0
"""


def test_reads_every_part() -> None:
    p = parse_text(SAMPLE, "s.proftext")
    assert p.kind == ProfileKind.IR | ProfileKind.ENTRY_FIRST
    main, f = p.records
    assert (main.name, main.hash, main.counts, main.bitmap) == ("main", 16, [100, 1], b"\x1f\x07")
    assert main.value_sites[ValueKind.INDIRECT_CALL_TARGET] == [[(name_md5("main"), 66), (0, 34)]]
    assert main.value_sites[ValueKind.MEMOP_SIZE] == [[(513, 50)]]
    assert (f.name, f.hash, f.counts, f.value_sites) == ("sample.c;f", 7, [0], {})
    assert p.symtab[name_md5("sample.c;f")] == "sample.c;f"


def test_writer_output_shape() -> None:
    text = format_text(parse_text(SAMPLE))
    assert text.startswith(
        "# IR level Instrumentation Flag\n:ir\n# Always instrument the function entry block\n:entry_first\n"
    )
    assert (
        "# Num Bitmap Bytes:\n$2\n# Bitmap Byte Values:\n0x1f\n0x7\n\n# Num Value Kinds:\n2\n"
        in text
    )
    assert (
        "# ValueKind = IPVK_IndirectCallTarget:\n0\n# NumValueSites:\n1\n2\nmain:66\n** External Symbol **:34\n"
        in text
    )
    assert text.endswith(
        "sample.c;f\n# Func Hash:\n7\n# Num Counters:\n1\n# Counter Values:\n0\n\n"
    )


@pytest.mark.parametrize(
    ("flags", "dialect", "expected"),
    [
        (ProfileKind.IR | ProfileKind.SINGLE_BYTE_COVERAGE, 16, ":ir\n"),
        (
            ProfileKind.IR | ProfileKind.SINGLE_BYTE_COVERAGE,
            19,
            ":ir\n# Instrument block coverage\n:single_byte_coverage\n",
        ),
        (ProfileKind.IR | ProfileKind.INSTR_LOOP_ENTRIES, 19, ":ir\n"),
        (
            ProfileKind.IR | ProfileKind.INSTR_LOOP_ENTRIES,
            22,
            ":ir\n# Always instrument the loop entry blocks\n:instrument_loop_entries\n",
        ),
        (ProfileKind.IR | ProfileKind.CS_IR, 22, "# CSIR level Instrumentation Flag\n:csir\n"),
        (ProfileKind.FRONTEND, 22, ""),
    ],
)
def test_dialect_flags(flags: ProfileKind, dialect: int, expected: str) -> None:
    text = format_text(Profile(kind=flags), llvm_version=dialect)
    assert text.split("\n", 1)[-1] == expected or text == expected


def test_dialect_refuses_data_it_cannot_hold() -> None:
    p = Profile(kind=ProfileKind.NONE, records=[FunctionRecord("f", 1, [1], b"\x01")])
    with pytest.raises(UsageError, match="bitmap"):
        format_text(p, llvm_version=16)
    with pytest.raises(UsageError, match="dialect"):
        format_text(p, llvm_version=17)


def test_flags_case_insensitive_and_not_entry_first() -> None:
    p = parse_text(b":IR\n:Entry_First\n:not_entry_first\n:FE\n")
    assert p.kind == ProfileKind.IR | ProfileKind.FRONTEND


def test_temporal_block() -> None:
    p = parse_text(b":ir\n:temporal_prof_traces\n2\n5\n3\n main , f,,\n1\nf\nmain\n1\n1\n9\n")
    assert p.temporal_trace_stream_size == 5
    assert [t.weight for t in p.temporal_traces] == [3, 1]
    assert p.temporal_traces[0].function_refs == (name_md5("main"), name_md5("f"))
    text = format_text(p)
    assert ":temporal_prof_traces\n# Num Temporal Profile Traces:\n2\n" in text
    assert "# Weight:\n3\nmain,,\n# Weight:\n1\n,\n\nmain\n" in text  # unknown names print empty


def test_auto_radix_and_decimal_only_counters() -> None:
    assert parse_uint(b"0x1F", 0) == 31
    assert parse_uint(b"017", 0) == 15
    assert parse_uint(b"0b11", 0) == 3
    assert parse_uint(b"0o17", 0) == 15
    assert parse_uint(b"08", 0) is None
    assert parse_uint(b"1_0", 10) is None
    assert parse_uint(b" 1", 10) is None
    assert parse_uint(str(1 << 64).encode(), 10) is None
    with pytest.raises(ProfileFormatError, match="line 4"):
        parse_text(b"f\n1\n1\n0x5\n")


def test_name_that_is_a_number_reads_as_value_kinds_like_llvm() -> None:
    with pytest.raises(ProfileFormatError, match="value kinds is invalid"):
        parse_text(b"f\n1\n1\n5\n123\n1\n1\n1\n")


@pytest.mark.parametrize(
    ("data", "line", "kind"),
    [
        (b":bogus\n", 1, "malformed"),
        (b"f\n", 2, "truncated"),
        (b"f\nzz\n1\n1\n", 2, "malformed"),
        (b"f\n1\n0\n", 3, "malformed"),
        (b"f\n1\n99999999999999\n1\n", 4, "truncated"),
        (b"f\n1\n1\n1\n$x\n", 5, "malformed"),
        (b"f\n1\n1\n1\n$2\n0x100\n1\n", 6, "malformed"),
        (b"f\n1\n1\n1\n1\n7\n", 6, "malformed"),
        (b"f\n1\n1\n1\n1\n1\n1\n1\nabc:1\n", 9, "malformed"),
        (b"# c\n\nf\r\n1\r\n2\r\n5\r\n", 6, "truncated"),
    ],
)
def test_errors_name_the_line(data: bytes, line: int, kind: str) -> None:
    with pytest.raises(ProfileFormatError) as err:
        parse_text(data, "bad.proftext")
    assert err.value.line == line, str(err.value)
    assert err.value.kind == kind
    assert str(err.value).startswith(f"bad.proftext: line {line}: ")


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(profiles())
def test_round_trip(profile: Profile) -> None:
    back = parse_text(format_text(profile).encode())
    assert back.kind == profile.kind
    assert normalized(back) == normalized(profile)
    assert back.temporal_traces == profile.temporal_traces


def test_fuzz_truncated_and_mutated() -> None:
    rng = random.Random(7)
    base = format_text(parse_text(SAMPLE)).encode()
    inputs = [base[:i] for i in range(len(base))]
    for _ in range(400):
        data = bytearray(base)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.choice(b"0123456789x$:#\n\xff-")
        inputs.append(bytes(data))
    for data in inputs:
        try:
            parse_text(data, "f")
        except ProfileFormatError as err:
            assert err.line is not None


def test_huge_declared_counts_fail_fast() -> None:
    huge = str((1 << 64) - 1).encode()
    for data in (
        b"f\n1\n" + huge + b"\n1\n",
        b"f\n1\n1\n1\n$" + huge + b"\n",
        b"f\n1\n1\n1\n1\n0\n4294967295\n",
        b"f\n1\n1\n1\n1\n0\n1\n4294967295\n",
        b":temporal_prof_traces\n4294967295\n1\n",
    ):
        with pytest.raises(ProfileFormatError, match="truncated"):
            parse_text(data)


def test_write_text_is_atomic_file(tmp_path: Path) -> None:
    out = tmp_path / "o.proftext"
    write_text(parse_text(SAMPLE), out)
    assert out.read_bytes() == format_text(parse_text(SAMPLE)).encode()
    assert [p.name for p in tmp_path.iterdir()] == ["o.proftext"]


@pytest.mark.oracle
@pytest.mark.parametrize("llvm", [14, 16, 19, 22])
@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_llvm_merge_text_reproduces_our_text(
    llvm: int, data: st.DataObject, tmp_path: Path
) -> None:
    tool = llvm_profdata(llvm)
    new = llvm >= 19
    profile = data.draw(profiles(bitmaps=new, vtables=False, temporal=new, big_counts=False))
    ours = format_text(profile, llvm_version=llvm)
    src = tmp_path / "in.proftext"
    src.write_text(ours)
    result = run_llvm(tool, "merge", "--text", src, "-o", tmp_path / "out.proftext")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out.proftext").read_text() == ours


FIX = Path(__file__).resolve().parents[2] / "fixtures" / "instrprof"
_PROFTEXTS = sorted(FIX.glob("clang*/*.proftext"))


@pytest.mark.parametrize("path", _PROFTEXTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_text_round_trips_byte_identically(path: Path) -> None:
    """Every `llvm-profdata-NN merge --text` output reads and re-formats to the same bytes."""
    llvm = int(path.parent.name.removeprefix("clang"))
    data = path.read_bytes()
    assert format_text(parse_text(data, str(path)), llvm_version=llvm).encode() == data


def test_fuzz_fixture_text() -> None:
    rng = random.Random(11)
    for path in _PROFTEXTS[:: max(1, len(_PROFTEXTS) // 12)]:
        base = path.read_bytes()
        for _ in range(60):
            data = bytearray(base[: rng.randrange(len(base) + 1)])
            if data:
                data[rng.randrange(len(data))] = rng.randrange(256)
            try:
                parse_text(bytes(data), "f")
            except ProfileFormatError as err:
                assert err.line is not None
