#!/usr/bin/env python3
"""Generate ``src/profkit/sampler/_offsets.py``: CPython struct offsets per interpreter.

Why a generated table: the out-of-process sampler reads another interpreter's memory,
so it needs the byte offsets of a handful of fields in ``_PyRuntimeState``,
``PyInterpreterState``, ``PyThreadState``, ``_PyInterpreterFrame``, ``PyCodeObject`` and
the string/bytes objects. 3.13+ publishes them in ``_Py_DebugOffsets`` at the start of
``_PyRuntime`` (the sampler reads those from the target); 3.11 and 3.12 publish nothing,
and the structs are internal, so the offsets are measured here by compiling a tiny
``offsetof`` probe against each installed interpreter's own headers (pyenv installs the
internal ones under ``include/python3.X/internal/``).

Usage::

    python scripts/gen_python_offsets.py [PYTHON ...]

With no arguments it probes every CPython 3.11+ under ``$(pyenv root)/versions``; a
system interpreter with its headers installed is probed by naming it (3.11.2 came from
Debian 12's ``/usr/bin/python3`` with ``python3.11-dev``). Releases already in the table are
kept (a machine without them does not drop them). The table records the exact patch
release each layout was measured on; other patch releases of a minor are read with the
minor's layout (``SERIES`` in ``profkit.sampler.layout``, which says which patch releases
are known to share it; the others are checked on the live target first).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "src" / "profkit" / "sampler" / "_offsets.py"

# (name, C expression) common to every probed version; version-specific ones below.
COMMON = [
    ("runtime_interpreters_head", "offsetof(_PyRuntimeState, interpreters.head)"),
    ("interp_next", "offsetof(PyInterpreterState, next)"),
    ("interp_threads_head", "offsetof(PyInterpreterState, threads.head)"),
    ("tstate_next", "offsetof(PyThreadState, next)"),
    ("tstate_interp", "offsetof(PyThreadState, interp)"),
    ("tstate_thread_id", "offsetof(PyThreadState, thread_id)"),
    ("tstate_native_thread_id", "offsetof(PyThreadState, native_thread_id)"),
    ("tstate_datastack_chunk", "offsetof(PyThreadState, datastack_chunk)"),
    ("chunk_previous", "offsetof(_PyStackChunk, previous)"),
    ("chunk_size", "offsetof(_PyStackChunk, size)"),
    ("frame_previous", "offsetof(_PyInterpreterFrame, previous)"),
    ("frame_owner", "offsetof(_PyInterpreterFrame, owner)"),
    ("code_filename", "offsetof(PyCodeObject, co_filename)"),
    ("code_name", "offsetof(PyCodeObject, co_name)"),
    ("code_qualname", "offsetof(PyCodeObject, co_qualname)"),
    ("code_linetable", "offsetof(PyCodeObject, co_linetable)"),
    ("code_firstlineno", "offsetof(PyCodeObject, co_firstlineno)"),
    ("code_adaptive", "offsetof(PyCodeObject, co_code_adaptive)"),
    ("object_type", "offsetof(PyObject, ob_type)"),
    ("unicode_length", "offsetof(PyASCIIObject, length)"),
    ("unicode_state", "offsetof(PyASCIIObject, state)"),
    ("unicode_ascii_size", "sizeof(PyASCIIObject)"),
    ("unicode_compact_size", "sizeof(PyCompactUnicodeObject)"),
    ("bytes_size", "offsetof(PyVarObject, ob_size)"),
    ("bytes_data", "offsetof(PyBytesObject, ob_sval)"),
    # threading's names (threading._active[ident]._name): sys.modules, dicts, instances
    ("dict_keys", "offsetof(PyDictObject, ma_keys)"),
    ("dict_values", "offsetof(PyDictObject, ma_values)"),
    ("module_dict", "offsetof(PyModuleObject, md_dict)"),
    ("type_basicsize", "offsetof(PyTypeObject, tp_basicsize)"),
    ("heaptype_cached_keys", "offsetof(PyHeapTypeObject, ht_cached_keys)"),
]
PER_VERSION = {
    (3, 11): [
        ("interp_modules", "offsetof(PyInterpreterState, modules)"),
        ("tstate_cframe", "offsetof(PyThreadState, cframe)"),
        ("cframe_current_frame", "offsetof(_PyCFrame, current_frame)"),
        ("frame_code", "offsetof(_PyInterpreterFrame, f_code)"),
        ("frame_instr", "offsetof(_PyInterpreterFrame, prev_instr)"),
        ("runtime_gil_locked", "offsetof(_PyRuntimeState, ceval.gil.locked)"),
        ("runtime_gil_holder", "offsetof(_PyRuntimeState, ceval.gil.last_holder)"),
    ],
    (3, 12): [
        ("interp_modules", "offsetof(PyInterpreterState, imports.modules)"),
        ("tstate_cframe", "offsetof(PyThreadState, cframe)"),
        ("cframe_current_frame", "offsetof(_PyCFrame, current_frame)"),
        ("frame_code", "offsetof(_PyInterpreterFrame, f_code)"),
        ("frame_instr", "offsetof(_PyInterpreterFrame, prev_instr)"),
        ("interp_gil", "offsetof(PyInterpreterState, ceval.gil)"),
        ("gil_locked", "offsetof(struct _gil_runtime_state, locked)"),
        ("gil_holder", "offsetof(struct _gil_runtime_state, last_holder)"),
    ],
    (3, 13): [
        ("interp_modules", "offsetof(PyInterpreterState, imports.modules)"),
        ("tstate_current_frame", "offsetof(PyThreadState, current_frame)"),
        ("frame_code", "offsetof(_PyInterpreterFrame, f_executable)"),
        ("frame_instr", "offsetof(_PyInterpreterFrame, instr_ptr)"),
        ("interp_gil", "offsetof(PyInterpreterState, ceval.gil)"),
        ("gil_locked", "offsetof(struct _gil_runtime_state, locked)"),
        ("gil_holder", "offsetof(struct _gil_runtime_state, last_holder)"),
    ],
}

PROBE = r"""
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "internal/pycore_runtime.h"
#include "internal/pycore_interp.h"
#include "internal/pycore_frame.h"
#include "internal/pycore_code.h"
#include "internal/pycore_moduleobject.h"
%(extra)s

static int bit_of(const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n * 8; i++) if (p[i / 8] & (1u << (i %% 8))) return (int)i;
    return -1;
}

int main(void) {
    PyASCIIObject o;
    printf("{\n");
%(lines)s
    memset(&o, 0, sizeof o); o.state.kind = 1;
    printf("\"unicode_kind_bit\": %%d,\n", bit_of((unsigned char *)&o.state, sizeof o.state));
    memset(&o, 0, sizeof o); o.state.compact = 1;
    printf("\"unicode_compact_bit\": %%d,\n", bit_of((unsigned char *)&o.state, sizeof o.state));
    memset(&o, 0, sizeof o); o.state.ascii = 1;
    printf("\"unicode_ascii_bit\": %%d,\n", bit_of((unsigned char *)&o.state, sizeof o.state));
    printf("\"hexversion\": %%lu\n}\n", (unsigned long)PY_VERSION_HEX);
    return 0;
}
"""


def probe(python: str) -> tuple[str, dict[str, int]]:
    """Compile and run the probe against ``python``'s headers; return (version, fields)."""
    info = json.loads(
        subprocess.check_output(
            [
                python,
                "-c",
                "import json, sys, sysconfig; print(json.dumps([sysconfig.get_path('include'),"
                " list(sys.version_info[:3]), sys.version_info.releaselevel]))",
            ],
            text=True,
        )
    )
    include, version, level = info
    if level != "final":
        raise SystemExit(f"{python}: {level} release; only final releases are tabled")
    minor = tuple(version[:2])
    fields = COMMON + PER_VERSION[minor]  # type: ignore[index]
    extra = '#include "internal/pycore_gil.h"' if minor >= (3, 12) else ""
    lines = "\n".join(
        f'    printf("\\"{name}\\": %zu,\\n", (size_t)({expr}));' for name, expr in fields
    )
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "probe.c"
        exe = Path(tmp) / "probe"
        src.write_text(PROBE % {"lines": lines, "extra": extra})
        subprocess.check_call(["cc", "-o", str(exe), str(src), f"-I{include}"])
        values = json.loads(subprocess.check_output([str(exe)], text=True))
    return ".".join(map(str, version)), values


def find_pythons() -> list[str]:
    """Every pyenv CPython 3.11+ (the versions the sampler supports)."""
    root = (
        os.environ.get("PYENV_ROOT")
        or subprocess.check_output(["pyenv", "root"], text=True).strip()
    )
    found = []
    for entry in sorted(Path(root, "versions").iterdir()):
        parts = entry.name.split(".")
        if (
            len(parts) == 3
            and all(p.isdigit() for p in parts)
            and (
                int(parts[0]),
                int(parts[1]),
            )
            >= (3, 11)
        ):
            python = entry / "bin" / f"python{parts[0]}.{parts[1]}"
            if python.exists():
                found.append(str(python))
    return found


def main(argv: list[str]) -> int:
    pythons = argv or find_pythons()
    table: dict[str, dict[str, int]] = {}
    if OUT.exists():  # keep what was measured elsewhere (exec: no import of profkit here)
        scope: dict[str, object] = {}
        exec(compile(OUT.read_text(), str(OUT), "exec"), scope)
        table.update(scope["LAYOUTS"])  # type: ignore[arg-type]
    for python in pythons:
        version, values = probe(python)
        table[version] = values
        print(f"{version}: {len(values)} fields from {python}", file=sys.stderr)
    body = json.dumps(table, indent=4, sort_keys=True)
    OUT.write_text(
        '"""CPython struct offsets per patch release, measured from each release\'s headers.\n\n'
        "GENERATED by scripts/gen_python_offsets.py; do not edit. Re-run it to add a release.\n"
        '"""\n\n'
        f"LAYOUTS: dict[str, dict[str, int]] = {body}\n"
    )
    subprocess.call([sys.executable, "-m", "ruff", "format", "-q", str(OUT)])
    print(f"wrote {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
