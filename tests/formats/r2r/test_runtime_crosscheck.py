"""Our R2R maps against the runtime's own code map (issue #14 item 4).

profkit's CoreCLR profiler (``profkit.clr``) records every ReadyToRun method the runtime
actually used (``JITCachedFunctionSearchFinished`` + ``GetCodeInfo2``) with its start,
size, name and module. Every one of them must start at the module's base + an RVA our
map has, with the same size and the same method: the runtime names it
``Namespace.Type.Method`` (a generic method with its arity suffix: Sort + two
backquotes + 1), crossgen2
``[Ret ]Namespace.Type[Args]::Method(Params)``; the test compares owner and method.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from profkit.errors import UsageError
from profkit.formats.r2r import load_r2r_image

PROGRAM = Path(__file__).parent / "programs" / "R2RWork.cs"
RUNTIMECONFIG = (
    '{"runtimeOptions": {"framework": {"name": "Microsoft.NETCore.App", "version": "3.1.0"},'
    ' "configProperties": {"System.Globalization.Invariant": true}}}'
)


def owner_and_method(crossgen2_name: str) -> str:
    """``System.String System.String::Concat(…)`` → ``System.String.Concat`` (type
    instantiations ``[…]`` and the return type dropped)."""
    head = crossgen2_name.split("(", 1)[0]
    owner, _, method = head.rpartition("::")
    depth, kept = 0, []
    for ch in owner:
        depth += ch == "["
        if depth == 0:
            kept.append(ch)
        depth -= ch == "]"
    return "".join(kept).rsplit(" ", 1)[-1] + "." + method


def test_every_r2r_method_the_runtime_used_is_in_our_map(framework: Path, tmp_path: Path) -> None:
    if shutil.which("mcs") is None:
        pytest.skip("mono's mcs is not installed (apt-get install mono-mcs)")
    from profkit.clr import run_dotnet
    from profkit.clr.convert import r2r_rvas

    dll = tmp_path / "R2RWork.dll"
    subprocess.run(
        ["mcs", f"-out:{dll}", "-target:exe", "-optimize+", "-r:System.Core.dll", str(PROGRAM)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (tmp_path / "R2RWork.runtimeconfig.json").write_text(RUNTIMECONFIG)
    try:
        outcome = run_dotnet(str(dll), ["0.5"], events=("jit", "loads"), stdout=subprocess.DEVNULL)
    except UsageError as exc:  # no host, or the profiler library is not built
        pytest.skip(str(exc))
    assert outcome.result is not None
    used = r2r_rvas(outcome.result)
    assert len(used) >= 200, "the runtime reported too few R2R methods"
    assert {Path(p).name for p, *_ in used} >= {"System.Private.CoreLib.dll"}
    ours: dict[str, dict[int, tuple[int, str]]] = {}
    for path, rva, size, name in used:
        if path not in ours:
            ours[path] = {m.rva: (m.length, m.name) for m in load_r2r_image(path).methods()}
        assert rva in ours[path], f"{name}: RVA 0x{rva:x} of {path} starts no method of ours"
        length, our_name = ours[path][rva]
        assert length == size, (name, our_name, size, length)
        assert owner_and_method(our_name) == re.sub(r"``\d+$", "", name), (name, our_name)
