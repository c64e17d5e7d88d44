"""One grammar for durations and prefixes: the same strings through ``settings/parse.py``
and the .NET profiler's ``clr/csrc/settings.c`` (issue #21, item 7).

The C side is reached through a small harness compiled here that includes settings.c (its
parsers are static) and prints what each argument parses to; no .NET runtime is needed.
A duration must give the same number of ns or be refused by both. A prefix list must split
the same; Python then also requires module paths, while .NET namespaces are matched as text.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from profkit.api.names import split_prefixes
from profkit.settings.parse import Invalid, parse_duration, parse_prefixes

CSRC = Path(__file__).resolve().parents[2] / "src" / "profkit" / "clr" / "csrc"

HARNESS = r"""
#include "settings.c"

/* per argument: the duration (ns or "-"), then each prefix; fields end with \0, inputs \1 */
int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        uint64_t ns;
        if (parse_duration(argv[i], &ns) == 0) printf("%llu", (unsigned long long)ns);
        else fputs("-", stdout);
        putchar(0);
        S.n_prefixes = 0;
        if (parse_prefixes(argv[i]) == 0)
            for (int k = 0; k < S.n_prefixes; k++) fputs(S.prefixes[k], stdout), putchar(0);
        else fputs("-", stdout), putchar(0);
        putchar(1);
    }
    return 0;
}
"""

#: (text, what Python's parse_duration gives or None for refused): the table both must follow.
DURATIONS = [
    ("100us", 100_000), ("2ms", 2_000_000), ("0.5s", 500_000_000), ("250ns", 250),
    ("100", 100_000), (" 100 us ", 100_000), ("\t5ms\n", 5_000_000), ("1.", 1_000),
    (".5", 500), ("12µs", 12_000), ("0", 0), ("604800s", 604_800_000_000_000),
    ("0.0005us", 0), ("0.0015us", 2), ("2.5ns", 2), ("3.5ns", 4),  # half to even
    ("1e3", None), ("1E3us", None), ("0x10", None), ("inf", None), ("nan", None),
    ("-0", None), ("-1ms", None), ("+5", None), ("", None), (" ", None), (".", None),
    ("5 m s", None), ("5MS", None), ("5 sec", None), ("604801s", None), ("9" * 400, None),
    ("1,5ms", None), ("١٠٠us", None), ("\u00a0100us", None), ("100us\u2003", None),
    ("0." + "0" * 400 + "1s", 0), ("5..0", None), ("5.0.0", None),
]  # fmt: skip
PREFIXES = [
    "myapp", "myapp, lib.core", " a ,, b ,", "\ta\n,\vb\f", ",", "", "a.b.c,d",
    "a b", "a,\u00a0b", "1abc", "a..b", "x" * 300,
]  # fmt: skip


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc") or ["cc"]
    if shutil.which(cc[0]) is None or not sys.platform.startswith("linux"):
        pytest.skip("needs the C compiler the .NET profiler is built with (Linux)")
    work = tmp_path_factory.mktemp("grammar")
    (work / "harness.c").write_text(HARNESS)
    exe = work / "harness"
    cmd = [*cc, "-std=c11", "-Wall", "-Wextra", "-pthread", f"-I{CSRC}", "-o", str(exe)]
    subprocess.run([*cmd, str(work / "harness.c")], check=True, capture_output=True, text=True)
    return exe


def _c_answers(exe: Path, texts: list[str]) -> list[tuple[int | None, tuple[str, ...] | None]]:
    out = subprocess.run([exe, *texts], capture_output=True, check=True).stdout.decode()
    answers = []
    for record in out.split("\1")[:-1]:
        duration, *prefixes = record.split("\0")[:-1]
        answers.append(
            (
                None if duration == "-" else int(duration),
                None if prefixes == ["-"] else tuple(prefixes),
            )
        )
    return answers


def _python_duration(text: str) -> int | None:
    try:
        return parse_duration(text)
    except Invalid:
        return None


def test_the_table_is_what_python_says() -> None:
    assert [(text, _python_duration(text)) for text, _ in DURATIONS] == DURATIONS


def test_durations_parse_the_same_in_c(harness: Path) -> None:
    texts = [text for text, _ in DURATIONS]
    got = [duration for duration, _ in _c_answers(harness, texts)]
    assert list(zip(texts, got, strict=True)) == DURATIONS


def test_prefix_lists_split_the_same_in_c(harness: Path) -> None:
    for text, (_, c_parts) in zip(PREFIXES, _c_answers(harness, PREFIXES), strict=True):
        assert c_parts == split_prefixes(text), text
        try:
            python_parts = parse_prefixes(text)
        except Invalid:
            continue  # not module paths: Python refuses, .NET matches them as text
        assert c_parts == python_parts, text
