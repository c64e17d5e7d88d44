"""Evaluation (not a test): dnfile against the bad-input bar, beside profkit's R2R reader.

docs/perfmap.md says why profkit reads ECMA-335 metadata itself instead of using
``dnfile``; this script reproduces the evidence. On the same truncated and mutated copies
of a real framework image it runs, each in a forked child with a 2 GiB address-space
limit and a 60 s alarm:

* ``dnfile.dnPE(data=...)`` and a walk over its MethodDef names, counting outcomes:
  raised an exception (what we need: a catchable error), returned without complaint
  (a silently partial or wrong answer), hit the memory limit, or hung;
* profkit's ``read_r2r_image`` + ``build_r2rmap``, counting FormatErrors that name an
  offset, clean results, and anything else.

It also times both opening the unmodified image, and notes whether dnfile wrote to
stdout/stderr on it (library code must not print). Run:
``python bench/dnfile_eval.py [--image X.dll] [--cases N] [--seed S]``.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import os
import random
import resource
import signal
import sys
import time
import warnings


def _framework_image(name: str) -> str | None:
    try:
        from dotnetcore2 import runtime  # type: ignore[import-not-found]
    except ImportError:
        return None
    root = os.path.join(os.path.dirname(runtime.get_runtime_path()), "shared",
                        "Microsoft.NETCore.App")  # fmt: skip
    for version in sorted(os.listdir(root), reverse=True):
        path = os.path.join(root, version, name)
        if os.path.isfile(path):
            return path
    return None


def _dnfile(data: bytes) -> None:
    import dnfile  # type: ignore[import-not-found]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pe = dnfile.dnPE(data=data)
        table = pe.net.mdtables.MethodDef if pe.net and pe.net.mdtables else None
        for row in table or ():
            _ = row.Name


def _profkit(data: bytes) -> None:
    from profkit.errors import FormatError
    from profkit.formats.r2r import build_r2rmap, read_r2r_image

    try:
        build_r2rmap(read_r2r_image(data, path="x.dll"))
    except FormatError as exc:
        os._exit(3 if exc.offset is not None else 4)


def _in_child(fn, data: bytes) -> str:  # type: ignore[no-untyped-def]
    pid = os.fork()
    if pid == 0:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        signal.alarm(60)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            try:
                fn(data)
            except MemoryError:
                os._exit(5)
            except Exception:
                os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return "hung (killed by the alarm)" if os.WTERMSIG(status) == signal.SIGALRM else "crashed"
    return {0: "no error", 1: "raised", 3: "FormatError with offset", 4: "FormatError, no offset",
            5: "MemoryError"}.get(os.WEXITSTATUS(status), "other")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image", help="an R2R image (default: dotnetcore2's System.Linq.dll)")
    ap.add_argument("--cases", type=int, default=40, help="truncations and mutations, each")
    ap.add_argument("--seed", type=int, default=14)
    args = ap.parse_args()
    path = args.image or _framework_image("System.Linq.dll")
    if path is None:
        sys.exit("no image: pip install dotnetcore2, or give --image")
    try:
        import dnfile  # noqa: F401
    except ImportError:
        sys.exit("dnfile is not installed (pip install dnfile)")
    with open(path, "rb") as fh:
        data = fh.read()
    print(f"image: {path} ({len(data):,} bytes)")

    # opening the valid image: time, and anything printed from inside the library
    for name, fn in (("dnfile", _dnfile), ("profkit", _profkit)):
        r, w = os.pipe()
        saved = os.dup(1), os.dup(2)
        os.dup2(w, 1)
        os.dup2(w, 2)
        t0 = time.perf_counter()
        try:
            fn(data)
        finally:
            sys.stdout.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(w)
        elapsed = time.perf_counter() - t0
        printed = os.read(r, 1 << 16).decode(errors="replace").splitlines()
        os.close(r)
        note = f"printed {len(printed)} line(s), e.g. {printed[0]!r}" if printed else "silent"
        print(f"  {name:8s} valid image: {elapsed:.2f} s, {note}")

    rng = random.Random(args.seed)
    cases = [("truncated", data[:cut]) for cut in sorted(rng.sample(range(len(data)), args.cases))]
    for _ in range(args.cases):
        b = bytearray(data)
        for _ in range(8):
            b[rng.randrange(min(len(b), 0x4000))] = rng.randrange(256)
        cases.append(("mutated", bytes(b)))
    for name, fn in (("dnfile", _dnfile), ("profkit", _profkit)):
        outcomes: collections.Counter[tuple[str, str]] = collections.Counter()
        for kind, blob in cases:
            outcomes[(kind, _in_child(fn, blob))] += 1
        shown = ", ".join(f"{k} → {o}: {n}" for (k, o), n in sorted(outcomes.items()))
        print(f"  {name:8s} {shown}")


if __name__ == "__main__":
    main()
