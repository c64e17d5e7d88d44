"""The wheel a user builds: the C modules inside (platform-tagged), the start-up hook
at the top of site-packages, and no stale extension an editable install left in src/.

Builds with pip in an isolated environment (hatchling and setuptools from the index, as
any user's ``pip install .`` would): about 10-20 s, so once, on one interpreter.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        sys.version_info[:2] != (3, 12), reason="built once, on 3.12 (the build is the same)"
    ),
]


def test_wheel_holds_the_extension_and_the_startup_hook(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0 and "No matching distribution" in proc.stderr:
        pytest.skip("no package index reachable for the build requirements")
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = tmp_path.glob("profkit-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    extensions = {
        f"profkit/profilers/elt/_native{suffix}",
        f"profkit/collect/_profhook{suffix}",
        f"profkit/sampler/_walker{suffix}",
        f"profkit/heap/_heaphook{suffix}",
        f"profkit/monitor/_closes{suffix}",
        f"profkit/collect/_termguard{suffix}",
        f"profkit/collect/_evalframe{suffix}",  # on 3.12+ a stub that says it is not there
    }
    if sys.platform.startswith("linux"):  # the CoreCLR profiler, a plain shared library
        extensions.add("profkit/clr/libprofkit_clr.so")
    assert {n for n in names if n.endswith((".so", ".pyd"))} == extensions  # each exactly once
    assert len(names) == len(set(names))
    assert "profkit_startup.pth" in names
    assert "profkit/py.typed" in names  # profiler authors get profkit's types (PEP 561)
    assert "-py3-none-any" not in wheel.name  # a platform wheel: it carries C
    # the `profkit` command is a plain script (launcher/profkit), not an entry point whose
    # pip-written wrapper imports re: installers rewrite its `#!python` and keep it executable
    script = f"{wheel.name.split('-')[0]}-{wheel.name.split('-')[1]}.data/scripts/profkit"
    assert script in names
    info = zipfile.ZipFile(wheel).getinfo(script)
    assert zipfile.ZipFile(wheel).read(script).startswith(b"#!python\n")
    assert (info.external_attr >> 16) & 0o111, oct(info.external_attr >> 16)
    assert not any(
        n.endswith("entry_points.txt") and b"console_scripts" in zipfile.ZipFile(wheel).read(n)
        for n in names
    )
