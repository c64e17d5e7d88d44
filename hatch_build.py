"""Hatch build hook: compile profkit's optional C hot paths.

* the extensions of :data:`EXTENSIONS` (module, sources): ELT trace mode's recorder, the
  ``sys.setprofile`` dispatcher, the out-of-process sampler's frame walker, the allocation
  hooks, the monitor's line loop and the SIGTERM deadline;
* ``libprofkit_clr.so``, the CoreCLR profiler (:func:`_build_clr_profiler`).

Why optional: profkit works everywhere in pure Python; the C modules only make tracing
cheaper (see bench/README.md). So a machine without a C compiler or Python headers
still installs profkit, with a warning, unless ``PROFKIT_REQUIRE_NATIVE=1`` is set (the
test script sets it, so CI cannot silently lose the fast path).

Editable installs build the extension in place, next to its source under ``src/``, where
the editable ``.pth`` finds the package; each interpreter gets its own ABI-tagged file
(``_native.cpython-312-x86_64-linux-gnu.so``), so one checkout serves 3.11–3.13. Wheels
get the extension force-included and a platform tag.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

#: (module, sources): each module is built on its own, so one failing leaves the other;
#: a module's sources (split by concern, sharing a header beside them) make one extension.
EXTENSIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "profkit.profilers.elt._native",
        tuple(
            f"src/profkit/profilers/elt/csrc/{unit}.c"
            for unit in (
                "module",
                "threads",
                "tree",
                "arena",
                "fids",
                "export",
                "lines",
                "timeline",
                "flat",
                "frames",
                "rowsjson",
                "compensate",
                "rowsums",
                "ccalls",
                "hooks",
                "forks",
            )
        ),
    ),
    (
        "profkit.collect._profhook",
        tuple(
            f"src/profkit/collect/csrc/{unit}.c"
            for unit in ("module", "dispatch", "codes", "natives")
        ),
    ),
    # 3.11's evalframe backend; on 3.12+ a stub that says why it is unavailable
    (
        "profkit.collect._evalframe",
        tuple(f"src/profkit/collect/csrc/{unit}.c" for unit in ("evalframe", "evalframe_type")),
    ),
    (
        "profkit.sampler._walker",
        ("src/profkit/sampler/_walker.c", "src/profkit/sampler/_walker_chain.c"),
    ),
    (
        "profkit.heap._heaphook",
        tuple(f"src/profkit/heap/csrc/{unit}.c" for unit in ("module", "hook", "table", "log")),
    ),
    ("profkit.monitor._closes", ("src/profkit/monitor/_closes.c",)),
    ("profkit.collect._termguard", ("src/profkit/collect/_termguard.c",)),
)


#: ``PROFKIT_SANITIZE=1``: the extensions with AddressSanitizer and UBSan (any UB aborts).
#: Such a module loads only into a process that has libasan first (LD_PRELOAD); see
#: scripts/sanitize.py, which builds them this way into a copy of ``src/`` and runs the tests
#: that exercise C against it (scripts/test runs it on the first interpreter).
SANITIZE_FLAGS = (
    "-fsanitize=address,undefined",
    "-fno-sanitize-recover=all",
    "-fno-omit-frame-pointer",
    "-g",
)


def _sanitize_flags() -> list[str]:
    return list(SANITIZE_FLAGS) if os.environ.get("PROFKIT_SANITIZE") == "1" else []


#: Every C unit (the extensions and libprofkit_clr.so) is clean under these with gcc 12 and
#: clang 14, on 3.11-3.13's headers, at -O0 to -O3 and sanitized (tests/test_c_hygiene.py).
WARNING_FLAGS = ("-Wall", "-Wextra")


def warning_flags() -> list[str]:
    """:data:`WARNING_FLAGS`, plus ``-Werror`` in profkit's own builds.

    Our builds are the ones under ``PROFKIT_REQUIRE_NATIVE=1`` (scripts/test, CI) or
    ``PROFKIT_WERROR=1``: there a new warning fails the install, so it is fixed when it is
    made. A user's ``pip install`` keeps warnings as warnings: a compiler we never ran (each
    release adds warnings to ``-Wall``) would otherwise turn a harmless new diagnostic into
    a failed build, and a failed build here means silently losing the C fast path.
    """
    ours = "1" in (os.environ.get("PROFKIT_REQUIRE_NATIVE"), os.environ.get("PROFKIT_WERROR"))
    return [*WARNING_FLAGS, "-Werror"] if ours else list(WARNING_FLAGS)


class NativeBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        if version == "editable":
            _compile_bytecode(Path(self.root) / "src" / "profkit")
        if os.environ.get("PROFKIT_NO_NATIVE") == "1":
            return
        root = Path(self.root)
        for module, sources in EXTENSIONS:
            self._build(root, module, [root / source for source in sources], version, build_data)
        _build_clr_profiler(root, version, build_data)

    def _build(
        self,
        root: Path,
        module: str,
        sources: list[Path],
        version: str,
        build_data: dict[str, Any],
    ) -> None:
        suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
        relative = module.replace(".", "/") + suffix
        try:
            with tempfile.TemporaryDirectory(prefix="profkit-build-") as tmp:
                built = _compile(module, sources, Path(tmp))
                if version == "editable":
                    # Copy beside and rename over: rewriting the loaded .so in place would
                    # crash (SIGBUS) any process that has it mapped, e.g. a running test.
                    target = root / "src" / relative
                    partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
                    shutil.copyfile(built, partial)
                    os.replace(partial, target)
                else:
                    kept = root / "build" / "native" / relative
                    kept.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(built, kept)
                    build_data["force_include"][str(kept)] = relative
                    build_data["pure_python"] = False
                    build_data["infer_tag"] = True
        except Exception as exc:
            if os.environ.get("PROFKIT_REQUIRE_NATIVE") == "1":
                raise
            print(
                f"profkit: warning: the C module {module} was not built ({exc}); "
                "pure Python is used instead",
                file=sys.stderr,
            )


def _compile_bytecode(package: Path) -> None:
    """An editable install's byte code, written at install as pip writes a wheel's.

    Why: where byte code is never written at run time (``PYTHONDONTWRITEBYTECODE=1``, a
    read-only checkout) every ``profkit run`` would otherwise compile its ~80 run-path
    modules from source, 3x the whole start-up of cProfile (bench/startup_bench.py
    ``--no-bytecode``). Timestamp-checked as usual: a source edited afterwards is compiled
    from source again until something writes its cache. Failing here only costs speed.
    """
    import compileall

    try:
        compileall.compile_dir(str(package), quiet=2, workers=1)
    except OSError as exc:
        print(f"profkit: warning: byte code not written ({exc})", file=sys.stderr)


def _compile(module: str, sources: list[Path], work: Path) -> Path:
    """Build one extension module from its sources with setuptools' compiler machinery;
    returns the file. A unit's header changes rebuild it too (``depends``)."""
    from setuptools import Distribution, Extension
    from setuptools.command.build_ext import build_ext

    headers = sorted({str(h) for s in sources for h in s.parent.glob("*.h")})
    ext = Extension(
        module,
        [str(source) for source in sources],
        depends=headers,
        extra_compile_args=["-O2", "-std=c11", *warning_flags()],
    )
    ext.extra_compile_args += _sanitize_flags()
    ext.extra_link_args += _sanitize_flags()
    dist = Distribution({"name": "profkit-native", "ext_modules": [ext]})
    cmd = build_ext(dist)
    cmd.build_lib = str(work / "lib")
    cmd.build_temp = str(work / "tmp")
    cmd.ensure_finalized()
    cmd.run()
    return Path(cmd.get_ext_fullpath(module))


#: The CoreCLR profiler: a plain shared library the .NET runtime dlopen()s (not a Python
#: extension, so no ABI tag: one file serves every interpreter). See docs/clr.md. Its
#: sources are split by concern and share ``csrc/profiler.h`` (which says what each owns).
CLR_SOURCES = tuple(
    f"src/profkit/clr/csrc/{unit}.c"
    for unit in (
        "com",
        "init",
        "settings",
        "clock",
        "metadata",
        "methods",
        "hooks",
        "shadow",
        "lines",
        "sinks",
        "writer",
        "records",
        "threads",
        "events",
        "output",
        "files",
        "census",
        "census_classes",
        "census_names",
        "census_roots",
        "alloc",
        "alloc_sites",
        "alloc_gc",
    )
)
CLR_PROFILER = "profkit/clr/libprofkit_clr.so"


def _build_clr_profiler(root: Path, version: str, build_data: dict[str, Any]) -> None:
    """Compile ``libprofkit_clr.so`` with the C compiler Python was built with.

    Linux only (its hooks follow the x64/arm64 SysV conventions the runtime's Linux
    stubs call); optional like the extensions, but required under
    ``PROFKIT_REQUIRE_NATIVE=1`` on Linux x86-64, where the CLR tests run.
    """
    import platform
    import shlex
    import subprocess

    if not sys.platform.startswith("linux"):
        return
    relative = CLR_PROFILER
    sources = [str(root / source) for source in CLR_SOURCES]
    try:
        cc = shlex.split(sysconfig.get_config_var("CC") or "cc") or ["cc"]
        with tempfile.TemporaryDirectory(prefix="profkit-build-") as tmp:
            built = Path(tmp) / "libprofkit_clr.so"
            subprocess.run(
                [*cc, "-O2", "-std=c11", *warning_flags(), "-fPIC", "-shared",
                 "-fvisibility=hidden", "-pthread", "-o", str(built), *sources, "-lm"],
                check=True, capture_output=True, text=True,
            )  # fmt: skip
            if version == "editable":
                target = root / "src" / relative
                partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
                shutil.copyfile(built, partial)
                os.replace(partial, target)  # a running dotnet keeps its mapped copy
            else:
                kept = root / "build" / "native" / relative
                kept.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(built, kept)
                build_data["force_include"][str(kept)] = relative
                build_data["pure_python"] = False
                build_data["infer_tag"] = True
    except Exception as exc:
        detail = getattr(exc, "stderr", "") or exc
        if os.environ.get("PROFKIT_REQUIRE_NATIVE") == "1" and platform.machine() == "x86_64":
            raise RuntimeError(f"libprofkit_clr.so was not built: {detail}") from exc
        print(
            f"profkit: warning: the CoreCLR profiler libprofkit_clr.so was not built ({detail}); "
            "profkit cannot profile .NET programs",
            file=sys.stderr,
        )
