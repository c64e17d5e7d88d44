"""Host discovery order, its one-line failure, and telling assemblies from other files."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from profkit.clr import host as host_mod
from profkit.clr.assembly import check_assembly, looks_like_assembly_name
from profkit.clr.host import find_host
from profkit.errors import UsageError
from tests.clr.conftest import profkit_cli


def _exe(path: Path) -> str:
    path.write_text("#!/bin/sh\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_explicit_then_environment_then_package_then_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    explicit = _exe(tmp_path / "explicit")
    from_env = _exe(tmp_path / "fromenv")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    on_path = _exe(bindir / "dotnet")
    packaged = _exe(tmp_path / "packaged")
    monkeypatch.setattr(host_mod, "dotnetcore2_host", lambda: packaged)
    env = {"PROFKIT_DOTNET": from_env, "PATH": str(bindir)}
    assert find_host(explicit, env).source == "--dotnet"
    assert find_host(None, env) == host_mod.Host(from_env, "PROFKIT_DOTNET")
    assert find_host(None, {"PATH": str(bindir)}) == host_mod.Host(packaged, "dotnetcore2")
    monkeypatch.setattr(host_mod, "dotnetcore2_host", lambda: None)
    assert find_host(None, {"PATH": str(bindir)}) == host_mod.Host(on_path, "PATH")


def test_nothing_found_names_every_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host_mod, "dotnetcore2_host", lambda: None)
    with pytest.raises(UsageError) as info:
        find_host(None, {"PATH": str(tmp_path)})
    message = str(info.value)
    assert "\n" not in message
    for place in ("--dotnet", "PROFKIT_DOTNET", "dotnetcore2", "PATH"):
        assert place in message


def test_explicit_host_that_is_not_executable_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not an executable"):
        find_host(str(tmp_path / "missing"), {})
    with pytest.raises(UsageError, match="PROFKIT_DOTNET"):
        find_host(None, {"PROFKIT_DOTNET": str(tmp_path)})


def test_cli_without_runtime_is_one_line_exit_2(tmp_path: Path, workload_or_stub: Path) -> None:
    env = dict(os.environ, PATH=str(tmp_path), PROFKIT_DOTNET=str(tmp_path / "nope"))
    proc = subprocess.run(
        [*profkit_cli(), "clr", "run", str(workload_or_stub)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "PROFKIT_DOTNET" in proc.stderr


def test_native_library_is_not_an_assembly(tmp_path: Path) -> None:
    from profkit.clr.environment import library_path

    try:
        native = library_path()
    except UsageError:
        pytest.skip("libprofkit_clr.so is not built")
    with pytest.raises(UsageError, match=r"not a \.NET assembly"):
        check_assembly(native)


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"MZ",
        b"hello world",
        b"MZ" + b"\0" * 58 + b"\xff\xff\xff\x7f",
        b"\x7fELF" + b"\0" * 100,
    ],
)
def test_other_files_are_clear_errors(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "app.dll"
    path.write_bytes(content)
    with pytest.raises(UsageError, match=r"app\.dll: not a \.NET assembly"):
        check_assembly(str(path))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="No such file"):
        check_assembly(str(tmp_path / "gone.dll"))


def test_cli_refuses_a_native_dll_with_exit_2(tmp_path: Path) -> None:
    fake = tmp_path / "native.dll"
    fake.write_bytes(b"\x7fELF" + b"\0" * 60)
    proc = subprocess.run([*profkit_cli(), "clr", "run", str(fake)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "native.dll: not a .NET assembly" in proc.stderr and proc.stderr.count("\n") == 1


def test_assembly_names() -> None:
    assert looks_like_assembly_name("App.DLL") and looks_like_assembly_name("x.exe")
    assert not looks_like_assembly_name("app.py")


def test_real_assembly_accepted(workload_or_stub: Path) -> None:
    check_assembly(str(workload_or_stub))
