"""Run the tests that exercise profkit's C parts under AddressSanitizer and UBSan.

    python scripts/sanitize.py            # build, run the C tests, report findings
    python scripts/sanitize.py -- -k walker   # extra pytest arguments after --

Why a copy of ``src/``: an editable install builds each extension in place, next to its
source, and a sanitized module loads only into a process that has libasan first
(``LD_PRELOAD``). Rebuilding in place would break every other run of the suite; so the
Python extensions (hatch_build.EXTENSIONS: the sampler's walker, the ELT recorder, the
collector's dispatcher, the heap hooks, the monitor's close-line loop, the SIGTERM guard)
are compiled with hatch_build.SANITIZE_FLAGS into a temporary copy of ``src/`` that comes
first on ``PYTHONPATH``, for this process's pytest and every Python it starts.

The CoreCLR profiler (libprofkit_clr.so, hatch_build.CLR_SOURCES) is built the same way into
the copy and its tests run in a second pass: the .NET runtime loads it with libasan
preloaded, but CoreCLR takes SIGSEGV for its own null checks and stack overflows and an
unhandled .NET exception ends in SIGABRT, so ASan leaves those signals to the program
there (:data:`CLR_ASAN`); everything else it reports as usual.

``PYTHONMALLOC=malloc`` so that ASan sees Python's own allocations; leaks are not checked
(the interpreter keeps memory at exit by design). A finding anywhere (this process or a
child) is written to the log directory and fails the run even when the test that caused it
passed. Exit status: pytest's, or 1 for findings.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: The tests that drive C code (a few minutes under ASan on a loaded 2-core machine).
TESTS = (
    "tests/sampler/test_walker.py",
    "tests/sampler/test_walker_bounds.py",
    "tests/sampler/test_dumping.py",
    "tests/sampler/test_memory.py",
    "tests/collect/test_profhook.py",
    "tests/collect/test_profhook_hostile.py",
    "tests/collect/test_hook_twins.py",
    "tests/collect/test_terminate.py",
    "tests/profilers/elt/test_native.py",
    "tests/profilers/elt/test_native_lines.py",
    "tests/profilers/elt/test_native_stress.py",
    "tests/profilers/elt/test_flat_export.py",
    "tests/profilers/elt/test_children_order.py",
    "tests/profilers/elt/test_rowsums.py",
    "tests/heap/test_sampler.py",
    "tests/monitor/test_functions.py",
)

#: The CoreCLR profiler's tests that drive its C paths hardest (exceptions, death, Ctrl-C,
#: planted files, long names) and the allocation sampler's following of objects across
#: GCs: a few minutes under ASan.
CLR_TESTS = (
    "tests/clr/test_failures.py",
    "tests/clr/test_files.py",
    "tests/clr/test_messages.py",
    "tests/clr/test_alloc.py",
)
#: ASan options for the .NET runtime's processes (see the module docstring).
CLR_ASAN = "handle_segv=0:handle_abort=0:allow_user_segv_handler=1:detect_stack_use_after_return=0"


def _hatch_build() -> types.ModuleType:
    """hatch_build.py without hatchling (absent outside an isolated build): its
    extension list and flags are what this script needs, not the hook class."""
    names = ("hatchling", "hatchling.builders", "hatchling.builders.hooks")
    for name in (*names, "hatchling.builders.hooks.plugin"):
        sys.modules.setdefault(name, types.ModuleType(name))
    interface = types.ModuleType("hatchling.builders.hooks.plugin.interface")
    interface.BuildHookInterface = object  # type: ignore[attr-defined]
    sys.modules.setdefault(interface.__name__, interface)
    sys.path.insert(0, str(ROOT))
    import hatch_build

    return hatch_build


def build(copy: Path) -> None:
    """Compile every extension, sanitized, into the copy of src/ at ``copy``."""
    hb = _hatch_build()
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc") or ["cc"]
    include = sysconfig.get_paths()["include"]
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    for module, sources in hb.EXTENSIONS:
        target = copy / (module.replace(".", "/") + suffix)
        cmd = [*cc, "-O1", "-std=c11", *hb.warning_flags(), "-fPIC", "-shared"]
        cmd += [*hb.SANITIZE_FLAGS, f"-I{include}"]
        cmd += ["-o", str(target), *(str(ROOT / s) for s in sources)]
        subprocess.run(cmd, check=True)
        print(f"sanitize: built {module}", flush=True)
    if sys.platform.startswith("linux"):
        target = copy / "profkit" / "clr" / "libprofkit_clr.so"
        cmd = [*cc, "-O1", "-std=c11", *hb.warning_flags(), "-fPIC", "-shared"]
        cmd += ["-fvisibility=hidden", "-pthread"]
        cmd += [*hb.SANITIZE_FLAGS, "-o", str(target), *(str(ROOT / s) for s in hb.CLR_SOURCES)]
        subprocess.run(cmd, check=True)
        print("sanitize: built libprofkit_clr.so", flush=True)


def main(argv: list[str]) -> int:
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    libasan = subprocess.run(
        ["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True
    ).stdout.strip()
    if not libasan or not os.path.isabs(libasan) or not os.path.exists(libasan):
        print("sanitize: libasan.so not found (gcc -print-file-name=libasan.so)", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="profkit-asan-") as tmp:
        copy = Path(tmp) / "src"
        shutil.copytree(ROOT / "src", copy, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
        build(copy)
        logs = Path(tmp) / "logs"
        logs.mkdir()
        env = dict(os.environ)
        env.update(
            PYTHONPATH=os.pathsep.join(filter(None, [str(copy), env.get("PYTHONPATH")])),
            LD_PRELOAD=libasan,
            PYTHONMALLOC="malloc",
            ASAN_OPTIONS=f"detect_leaks=0:log_path={logs}/asan",
            UBSAN_OPTIONS=f"print_stacktrace=1:halt_on_error=1:log_path={logs}/ubsan",
            PROFKIT_NATIVE="on",  # a module that failed to load must fail, not fall back
        )
        check = "import profkit.sampler._walker as w; print(w.__file__)"
        where = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True)
        if not where.stdout.decode().startswith(str(copy)):
            print(f"sanitize: the sanitized build is not the one imported: {where}")
            return 1
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        # In one process (-n 0), not in xdist workers: a worker has execnet's I/O threads,
        # and ASan's allocator (unlike glibc's malloc) is not made safe across fork(). A
        # test that forks while such a thread holds the allocator's lock left a child
        # blocked for good in its first malloc (seen once, beside two busy loops: the
        # whole CI run then hangs). These tests fork; the pytest process has no other thread.
        status = subprocess.run([*cmd, "-n", "0", *TESTS, *extra], cwd=ROOT, env=env).returncode
        if (copy / "profkit" / "clr" / "libprofkit_clr.so").exists() and not extra:
            env["ASAN_OPTIONS"] = f"{env['ASAN_OPTIONS']}:{CLR_ASAN}"
            clr = subprocess.run([*cmd, "-n", "2", *CLR_TESTS], cwd=ROOT, env=env).returncode
            status = status or clr
        findings = sorted(logs.iterdir())
        for log in findings:
            print(f"=== {log.name} ===\n{log.read_text(errors='replace')[:20000]}")
        if findings:
            print(f"sanitize: {len(findings)} report(s) from AddressSanitizer/UBSan")
            return status or 1
        return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
