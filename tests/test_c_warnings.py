"""Every C unit of profkit compiles clean under ``-Wall -Wextra`` (issue #21, item 7).

The build itself passes ``-Wall -Wextra`` and, in profkit's own builds
(``PROFKIT_REQUIRE_NATIVE=1``: scripts/test, CI), ``-Werror`` (hatch_build.warning_flags
says why not for users). That catches the compiler Python was built with, on the
interpreter the build ran for. This test adds the other compiler found on the machine
(gcc and clang answer different questions: clang warns about initialisers gcc accepts), and
checks an editable install made without ``-Werror``. gcc compiles at the build's -O2 (some of
its warnings, such as ``-Wmaybe-uninitialized``, need the optimiser); clang's warnings come
from its front end, so it only parses (about a third of the time on a busy machine).
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "profkit"
#: The CoreCLR profiler: a plain shared library, no Python headers.
CLR = SRC / "clr" / "csrc"
FLAGS = ("-std=c11", "-Wall", "-Wextra", "-Werror", "-fPIC")
#: What each kind of compiler does beyond the flags (see the module docstring).
PASS = {"gcc": ("-O2", "-c", "-o", "/dev/null"), "clang": ("-fsyntax-only",)}

pytestmark = pytest.mark.slow


def _compilers() -> list[tuple[str, list[str]]]:
    """Python's own C compiler, and gcc and clang where installed (each kind once)."""
    found: dict[str, list[str]] = {}
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc") or ["cc"]
    for cmd in (cc, ["gcc"], ["clang"], ["clang-14"]):
        path = shutil.which(cmd[0])
        if path is None:
            continue
        version = subprocess.run([*cmd, "--version"], capture_output=True, text=True).stdout
        kind = "clang" if "clang" in version else "gcc"
        found.setdefault(kind, cmd)
    return list(found.items())


def _compile(kind: str, cc: list[str], unit: Path) -> str:
    # -pthread only where the build uses it: with it glibc defines _POSIX_C_SOURCE, which a
    # Python unit including a system header before Python.h would then see redefined.
    if unit.is_relative_to(CLR):
        extra = ["-pthread", "-fvisibility=hidden"]
    else:
        extra = [f"-I{sysconfig.get_paths()['include']}"]
    proc = subprocess.run(
        [*cc, *FLAGS, *extra, *PASS[kind], str(unit)], capture_output=True, text=True
    )
    return (
        ""
        if proc.returncode == 0 and not proc.stderr
        else proc.stderr or f"status {proc.returncode}"
    )


COMPILERS = _compilers()


@pytest.mark.parametrize(("kind", "cc"), COMPILERS, ids=[kind for kind, _ in COMPILERS])
def test_every_c_unit_compiles_without_a_warning(kind: str, cc: list[str]) -> None:
    units = sorted(SRC.rglob("*.c"))
    assert len(units) >= 30  # the glob found the sources
    with ThreadPoolExecutor(2) as pool:
        texts = pool.map(lambda unit: _compile(kind, cc, unit), units)
        found = dict(zip(units, texts, strict=True))
    bad = {unit.relative_to(SRC).as_posix(): text for unit, text in found.items() if text}
    assert not bad, "\n".join(f"{unit}:\n{text}" for unit, text in bad.items())
