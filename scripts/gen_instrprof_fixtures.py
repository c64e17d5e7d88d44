#!/usr/bin/env python3
"""Generate the LLVM instrumentation-profile fixtures under tests/fixtures/instrprof/.

Why a script: the bar is "real files from real tools", so every .profraw/.profdata/.proftext and
every saved `llvm-profdata` output is produced here by Debian's clang-NN / llvm-profdata-NN from
the small sources in tests/fixtures/instrprof/src/, and MANIFEST.json records the command line,
tool version and sha256 of each file.  Re-running it on the same toolchains reproduces the same
bytes: programs run with ASLR off (``setarch -R``) so the addresses stored in raw profiles are
stable, sources are compiled by relative name so file-local function names are stable
(``sample.c:square`` / ``sample.c;square``), binaries carry no build ID unless the variant is
about build IDs, and nothing records a time stamp or an absolute path.

Usage: scripts/gen_instrprof_fixtures.py [--versions 14,22 --out DIR] [--keep-build DIR]
(a subset of versions, or --no-rust, only into another --out DIR: the committed tree is
always regenerated as a whole).
A variant a toolchain cannot build or run is listed under "skipped" in the manifest with the
tool's first error line, never silently dropped.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "tests" / "fixtures" / "instrprof"
ALL_VERSIONS = (14, 16, 19, 22)
SCRATCH_TMP = ""  # set by main(): TMPDIR for every tool run
STEP_TIMEOUT = 120  # seconds for one compile, program run or tool call
OPT = "-O2"
NO_BUILD_ID = "-Wl,--build-id=none"
BUILD_ID = "-Wl,--build-id"

# `llvm-profdata show` option sets saved beside each profile: suffix -> options.
SHOWS: dict[str, tuple[str, ...]] = {
    "show": (),
    "show-all-counts": ("--all-functions", "--counts"),
    "detailed-summary": ("--detailed-summary",),
    "topn3": ("--topn=3",),
    "covered": ("--covered",),
    "ic-targets": ("--all-functions", "--ic-targets"),
    "memop-sizes": ("--all-functions", "--memop-sizes"),
    "binary-ids": ("--binary-ids",),
    "show-vtables": ("--all-functions", "--show-vtables"),
    "showcs": ("--all-functions", "--counts", "--showcs"),
    "temporal-traces": ("--temporal-profile-traces",),
    "profile-version": ("--profile-version",),
}
# Options an older llvm-profdata does not know are not asked of it.
SHOW_MIN_VERSION = {"profile-version": 16}
BASE_SHOWS = ("show", "show-all-counts", "detailed-summary", "topn3", "covered")
VALUE_SHOWS = ("ic-targets", "memop-sizes")


@dataclass(frozen=True)
class Variant:
    """One way of building and running a sample program; yields one raw profile."""

    name: str
    flags: tuple[str, ...]
    source: str = "sample.c"  # or names.c, vtable.cpp, or "dso" (dso_main.c + dso_lib.c)
    min_version: int = 0
    run_args: tuple[str, ...] = ()
    link: tuple[str, ...] = (NO_BUILD_ID,)
    shows: tuple[str, ...] = ()  # extra SHOWS keys besides BASE_SHOWS
    cs_stage1: bool = False  # build with -fprofile-use of an IR stage-1 profile
    # Options by LLVM version range, e.g. the debug-info-correlation flag was renamed in 17.
    flags_by_version: tuple[tuple[int, tuple[str, ...]], ...] = ()
    correlate: bool = False  # raw file has no data/names: merge needs --debug-info=<binary>
    file_prefix: str = ""  # LLVM_PROFILE_FILE pattern prefix, e.g. "%c" (continuous mode)
    note: str = ""


FE = ("-fprofile-instr-generate",)
IR = ("-fprofile-generate",)


def _mllvm(*opts: str) -> tuple[str, ...]:
    out: list[str] = []
    for opt in opts:
        out += ["-mllvm", opt]
    return tuple(out)


VARIANTS: tuple[Variant, ...] = (
    Variant("fe", FE, note="front-end instrumentation"),
    Variant("fecov", (*FE, "-fcoverage-mapping"), note="front end + coverage mapping"),
    Variant(
        "fe_valueprof",
        (*FE, *_mllvm("-enable-value-profiling")),
        shows=VALUE_SHOWS,
        note="front end with indirect-call value profiling",
    ),
    Variant(
        "fe_mcdc",
        (*FE, "-fcoverage-mapping", "-fcoverage-mcdc"),
        min_version=18,
        note="MC/DC bitmap bytes",
    ),
    Variant(
        "fe_mcdc_big",
        (*FE, "-fcoverage-mapping", "-fcoverage-mcdc"),
        source="mcdc_big.c",
        min_version=18,
        note="MC/DC bitmap of 375 bytes in one record (> 255: the text "
        "form is written by llvm-profdata but it cannot read it back)",
    ),
    Variant(
        "fe_singlebyte",
        (*FE, *_mllvm("-enable-single-byte-coverage")),
        note="front end, 1-byte coverage counters",
    ),
    Variant("ir", IR, shows=VALUE_SHOWS, note="IR PGO; has indirect-call and mem-op value sites"),
    Variant(
        "ir_alt",
        IR,
        run_args=("25",),
        shows=VALUE_SHOWS,
        note="same binary as ir, run with 25 rounds (different counts, same hashes)",
    ),
    Variant(
        "ir_nocompress",
        (*IR, *_mllvm("-enable-name-compression=false")),
        shows=VALUE_SHOWS,
        note="IR PGO, uncompressed names section",
    ),
    Variant(
        "names_ir",
        IR,
        source="names.c",
        note="IR PGO, long names: the names section is zlib-compressed",
    ),
    Variant(
        "names_ir_nocompress",
        (*IR, *_mllvm("-enable-name-compression=false")),
        source="names.c",
        note="as names_ir with name compression off",
    ),
    Variant("names_fe", FE, source="names.c", note="front end, compressed names section"),
    Variant(
        "ir_entry",
        (*IR, *_mllvm("-pgo-instrument-entry")),
        shows=VALUE_SHOWS,
        note="IR PGO, entry block always instrumented (entry_first)",
    ),
    Variant(
        "ir_funcentry",
        (*IR, *_mllvm("-pgo-function-entry-coverage")),
        note="function-entry-only coverage (1-byte counters)",
    ),
    Variant(
        "ir_funcentry_unpadded",
        (*IR, *_mllvm("-pgo-function-entry-coverage", "-enable-name-compression=false")),
        source="entry_cov.c",
        note="function-entry coverage, 3 counter bytes: clang 16 writes no padding after the "
        "counters, so the names section ends the file unaligned (llvm-profdata-16 reads it)",
    ),
    Variant(
        "ir_blockcov",
        (*IR, *_mllvm("-pgo-block-coverage")),
        note="IR block coverage (1-byte counters)",
    ),
    Variant(
        "ir_temporal",
        (*IR, *_mllvm("-pgo-temporal-instrumentation")),
        shows=("temporal-traces",),
        note="temporal profiling (timestamp counter)",
    ),
    Variant(
        "ir_loopentries",
        (*IR, *_mllvm("-pgo-instrument-loop-entries")),
        min_version=20,
        shows=VALUE_SHOWS,
        note="IR PGO, loop entries always instrumented",
    ),
    Variant(
        "ir_cs",
        ("-fcs-profile-generate",),
        cs_stage1=True,
        shows=("showcs",),
        note="context-sensitive IR: -fprofile-use=<ir stage 1> -fcs-profile-generate",
    ),
    Variant(
        "ir_dbgcorrelate",
        (*IR, "-g", *_mllvm("-disable-vp=true")),
        flags_by_version=(
            (14, _mllvm("-debug-info-correlate")),
            (17, _mllvm("-profile-correlate=debug-info")),
        ),
        correlate=True,
        note="debug-info correlation: raw file without data/names (binary not kept: "
        "~90 KB; merge used --debug-info=prog)",
    ),
    Variant(
        "fe_continuous",
        (*FE, *_mllvm("-runtime-counter-relocation")),
        file_prefix="%c",
        note="continuous mode (%c, counters mmapped into the file while running)",
    ),
    Variant(
        "ir_continuous",
        (*IR, *_mllvm("-runtime-counter-relocation", "-disable-vp=true")),
        file_prefix="%c",
        note="continuous mode, IR PGO without value profiling (with it, "
        "the runtime writes no value data and llvm-profdata reports the file truncated)",
    ),
    Variant(
        "binary_ids",
        IR,
        link=(BUILD_ID,),
        shows=("binary-ids",),
        note="IR PGO with a GNU build ID in the binary",
    ),
    Variant("cxx_fe", FE, source="vtable.cpp", note="C++ front end, mangled names"),
    Variant(
        "cxx_ir",
        IR,
        source="vtable.cpp",
        shows=VALUE_SHOWS,
        note="C++ virtual calls, mangled names",
    ),
    Variant(
        "vtable",
        (*IR, *_mllvm("-enable-vtable-value-profiling")),
        source="vtable.cpp",
        min_version=19,
        shows=(*VALUE_SHOWS, "show-vtables"),
        note="vtable value profiling (value kind 2, vtable names)",
    ),
    Variant(
        "dso_concat",
        IR,
        source="dso",
        link=(BUILD_ID,),
        shows=(*VALUE_SHOWS, "binary-ids"),
        note="executable + instrumented shared library: two profiles in one raw file",
    ),
    Variant("m32_fe", ("-m32", *FE), note="32-bit front end"),
    Variant("m32_ir", ("-m32", *IR), shows=VALUE_SHOWS, note="32-bit IR PGO"),
)


# Fixture kinds the spec asks for that this host cannot make (recorded in `skipped`).
NOT_PRODUCIBLE = (
    ("big_endian", "no big-endian target with a profile runtime on this x86-64 host"),
    (
        "raw_v5_v7_v9_v11",
        "raw versions 5, 7, 9 and 11 need LLVM 9-12, 13, 18 and 23 toolchains, "
        "not installable here",
    ),
)


@dataclass
class Manifest:
    """Everything MANIFEST.json records; entries are appended as files are produced."""

    out: Path
    files: list[dict[str, object]] = field(default_factory=list)
    skipped: list[dict[str, object]] = field(default_factory=list)

    def add(self, path: Path, inputs: Sequence[str] = (), **info: object) -> None:
        """Record one produced file.

        ``inputs`` are file names relative to the file's own directory (where its command
        ran); they are stored relative to the fixture root, with the command's working
        directory as ``cwd``, so a test can find them without parsing command lines.
        """
        data = path.read_bytes()
        rel = path.relative_to(self.out).as_posix()
        entry: dict[str, object] = {"path": rel, **info}
        if "command" in info or "commands" in info:
            entry["cwd"] = path.parent.relative_to(self.out).as_posix()
        if inputs:
            entry["inputs"] = [
                os.path.normpath(path.parent.relative_to(self.out) / i) for i in inputs
            ]
        entry.update(size=len(data), sha256=hashlib.sha256(data).hexdigest())
        self.files.append(entry)

    def skip(self, **info: object) -> None:
        self.skipped.append(info)


class StepFailed(Exception):
    """A compile/run/tool step failed; carries the first useful stderr line."""


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return "(no message)"


def run(
    cmd: Sequence[str], cwd: Path, env: dict[str, str] | None = None, stdout_to: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run one step; raise StepFailed with the tool's first stderr line on failure."""
    # A minimal environment (no stray LLVM_PROFILE_FILE etc.); rustup needs its homes.
    full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}
    for name in ("HOME", "RUSTUP_HOME", "CARGO_HOME", "RUSTUP_TOOLCHAIN"):
        if name in os.environ:
            full_env[name] = os.environ[name]
    if SCRATCH_TMP:  # compiler crash reproducers etc. land in the scratch dir, not /tmp
        full_env["TMPDIR"] = SCRATCH_TMP
    if env:
        full_env.update(env)
    try:
        proc = subprocess.run(
            list(cmd),
            cwd=cwd,
            env=full_env,
            capture_output=True,
            text=True,
            errors="backslashreplace",
            check=False,
            timeout=STEP_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        # Seen: clang-14's continuous-mode IR program never exits.
        raise StepFailed(f"{' '.join(cmd)}: still running after {STEP_TIMEOUT} s") from None
    if proc.returncode != 0:
        raise StepFailed(
            f"{' '.join(cmd)}: rc {proc.returncode}: {_first_line(proc.stderr or proc.stdout)}"
        )
    if stdout_to is not None:
        stdout_to.write_text(proc.stdout)
    return proc


def tool_versions(version: int) -> dict[str, str]:
    """Describe the toolchain exactly: clang's banner and the Debian package versions."""
    info = {
        "clang": _first_line(
            subprocess.run([f"clang-{version}", "--version"], capture_output=True, text=True).stdout
        )
    }
    for pkg in (f"llvm-{version}", f"libclang-rt-{version}-dev"):
        proc = subprocess.run(
            ["dpkg-query", "-W", "-f", "${Version}", pkg], capture_output=True, text=True
        )
        info[pkg] = proc.stdout.strip() if proc.returncode == 0 else "unknown"
    return info


def setarch_prefix() -> list[str]:
    """`setarch <arch> -R`: run with ASLR off so raw-profile addresses are reproducible."""
    return ["setarch", platform.machine(), "-R"]


def build_and_run(
    v: Variant, version: int, src_dir: Path, work: Path, out_raw: Path, ir_stage1: Path | None
) -> list[list[str]]:
    """Compile and run one variant; return the command lines (relative paths) used."""
    work.mkdir(parents=True)
    cc = f"clang++-{version}" if v.source.endswith(".cpp") else f"clang-{version}"
    cmds: list[list[str]] = []
    if v.source == "dso":
        for name in ("dso_main.c", "dso_lib.c"):
            shutil.copy(src_dir / name, work / name)
        cmds.append(
            [cc, *v.flags, OPT, "-fPIC", "-shared", "dso_lib.c", "-o", "libdso.so", *v.link]
        )
        cmds.append(
            [
                cc,
                *v.flags,
                OPT,
                "dso_main.c",
                "-o",
                "prog",
                "-L.",
                "-ldso",
                "-Wl,-rpath,$ORIGIN",
                *v.link,
            ]
        )
    else:
        shutil.copy(src_dir / v.source, work / v.source)
        flags = list(v.flags)
        for since, extra in v.flags_by_version:
            if version >= since:
                chosen = extra
        if v.flags_by_version:
            flags += chosen
        if v.cs_stage1:
            assert ir_stage1 is not None
            shutil.copy(ir_stage1, work / "stage1.profdata")
            flags = ["-fprofile-use=stage1.profdata", *flags]
        cmds.append([cc, *flags, OPT, v.source, "-o", "prog", *v.link])
    for cmd in cmds:
        run(cmd, work)
    raw_name = f"{v.name}.profraw"
    run_cmd = ["./prog", *v.run_args]
    pattern = v.file_prefix + raw_name
    run([*setarch_prefix(), *run_cmd], work, env={"LLVM_PROFILE_FILE": pattern})
    cmds.append([f"LLVM_PROFILE_FILE={pattern}", *setarch_prefix(), *run_cmd])
    produced = work / raw_name
    if not produced.exists():
        raise StepFailed("program ran but wrote no raw profile")
    shutil.copy(produced, out_raw)
    return cmds


def save_shows(
    manifest: Manifest, tool: str, version: int, variant: str, profile: Path, keys: Sequence[str]
) -> None:
    """Save `llvm-profdata show` outputs for one profile as <profile-name>.<key>.txt."""
    for key in keys:
        if version < SHOW_MIN_VERSION.get(key, 0):
            continue
        cmd = [tool, "show", *SHOWS[key], profile.name]
        target = profile.with_name(f"{profile.name}.{key}.txt")
        try:
            proc = run(cmd, profile.parent, stdout_to=target)
            again = run(cmd, profile.parent)
        except StepFailed as exc:
            manifest.skip(llvm=version, variant=variant, output=target.name, reason=str(exc))
            continue
        if again.stdout != proc.stdout:
            # Seen: llvm-profdata-22 show --topn on a two-profile raw file prints a dangling
            # name (garbage bytes). An output that changes between runs is no oracle.
            target.unlink()
            manifest.skip(
                llvm=version,
                variant=variant,
                output=target.name,
                reason=f"{' '.join(cmd)}: output differs between two runs",
            )
            continue
        extra = {"stderr": proc.stderr.strip()} if proc.stderr.strip() else {}
        manifest.add(
            target,
            llvm=version,
            variant=variant,
            kind="show",
            show=key,
            options=list(SHOWS[key]),
            command=cmd,
            inputs=[profile.name],
            **extra,
        )


def convert(
    manifest: Manifest,
    tool: str,
    version: int,
    variant: str,
    out_dir: Path,
    inputs: Sequence[str],
    stem: str,
    shows: Sequence[str],
    extra_opts: Sequence[str] = (),
    debug_info: Path | None = None,
) -> None:
    """merge inputs -> <stem>.profdata and <stem>.proftext, then save the show outputs.

    ``debug_info`` is the scratch binary for a debug-info-correlated raw file; the manifest
    records it as ``--debug-info=prog`` (the binary is not kept).
    """
    targets = ((f"{stem}.profdata", ()), (f"{stem}.proftext", ("--text",)))
    for name, opts in targets:
        cmd = [tool, "merge", *extra_opts, *opts, "-o", name, *inputs]
        if debug_info is not None:
            proc = run([*cmd[:2], f"--debug-info={debug_info}", *cmd[2:]], out_dir)
            cmd = [*cmd[:2], "--debug-info=prog", *cmd[2:]]
        else:
            proc = run(cmd, out_dir)
        extra = {"stderr": proc.stderr.strip()} if proc.stderr.strip() else {}
        kind = "profdata" if name.endswith(".profdata") else "proftext"
        manifest.add(
            out_dir / name,
            llvm=version,
            variant=variant,
            kind=kind,
            command=cmd,
            inputs=[i.split("=", 1)[-1].rsplit(",", 1)[-1] for i in inputs],
            **extra,
        )
    save_shows(
        manifest,
        tool,
        version,
        variant,
        out_dir / f"{stem}.profdata",
        (*BASE_SHOWS, *shows, "profile-version"),
    )


def gen_version(
    version: int, src_dir: Path, out: Path, build_root: Path, manifest: Manifest
) -> None:
    """All variants for one LLVM version into <out>/clang<version>/."""
    tool = f"llvm-profdata-{version}"
    vdir = out / f"clang{version}"
    vdir.mkdir(parents=True, exist_ok=True)
    done: set[str] = set()
    for v in VARIANTS:
        if version < v.min_version:
            manifest.skip(
                llvm=version, variant=v.name, reason=f"needs LLVM {v.min_version} or newer"
            )
            continue
        stage1 = vdir / "ir.profdata" if v.cs_stage1 else None
        if stage1 is not None and not stage1.exists():
            manifest.skip(llvm=version, variant=v.name, reason="no ir stage-1 profile")
            continue
        raw = vdir / f"{v.name}.profraw"
        try:
            cmds = build_and_run(
                v, version, src_dir, build_root / f"clang{version}" / v.name, raw, stage1
            )
        except StepFailed as exc:
            manifest.skip(llvm=version, variant=v.name, reason=str(exc))
            continue
        source = ["dso_main.c", "dso_lib.c"] if v.source == "dso" else [v.source]
        if v.cs_stage1:
            cmds.insert(0, [tool, "merge", "-o", "stage1.profdata", "ir.profraw"])
        manifest.add(
            raw,
            llvm=version,
            variant=v.name,
            kind="profraw",
            commands=cmds,
            inputs=[f"../src/{s}" for s in source],
            note=v.note,
        )
        save_shows(manifest, tool, version, v.name, raw, (*BASE_SHOWS, *v.shows, "profile-version"))
        try:
            binary = build_root / f"clang{version}" / v.name / "prog" if v.correlate else None
            # A correlated raw file alone holds no records: its conversions are named
            # <variant>.correlated.* so nobody pairs them with the raw file's own content.
            stem = f"{v.name}.correlated" if v.correlate else v.name
            convert(
                manifest, tool, version, v.name, vdir, [raw.name], stem, v.shows, debug_info=binary
            )
        except StepFailed as exc:
            manifest.skip(llvm=version, variant=v.name, output=f"{stem}.profdata", reason=str(exc))
            continue
        done.add(v.name)
    derived(version, tool, vdir, done, manifest)


def derived(version: int, tool: str, vdir: Path, done: set[str], manifest: Manifest) -> None:
    """Multi-input merges and overlaps built from this version's raw files."""
    jobs: list[tuple[str, set[str], list[str], tuple[str, ...], tuple[str, ...]]] = [
        ("ir_plus_cs", {"ir", "ir_cs"}, ["ir.profraw", "ir_cs.profraw"], ("showcs",), ()),
        (
            "weighted",
            {"ir", "ir_alt"},
            ["--weighted-input=3,ir.profraw", "ir_alt.profraw"],
            VALUE_SHOWS,
            (),
        ),
        ("sparse", {"ir"}, ["ir.profraw"], (), ("--sparse",)),
        ("fe_merged", {"fe", "fecov"}, ["fe.profraw", "fecov.profraw"], (), ()),
        (
            "temporal_merged",
            {"ir_temporal"},
            ["ir_temporal.profraw", "ir_temporal.profraw", "ir_alt.profraw"],
            ("temporal-traces",),
            (),
        ),
    ]
    for stem, needs, inputs, shows, opts in jobs:
        if not needs <= done:
            manifest.skip(llvm=version, variant=stem, reason=f"needs {sorted(needs - done)}")
            continue
        try:
            convert(manifest, tool, version, stem, vdir, inputs, stem, shows, opts)
        except StepFailed as exc:
            manifest.skip(llvm=version, variant=stem, reason=str(exc))
    overlaps = [
        ("fe-fecov", ["fe.profdata", "fecov.profdata"], ()),
        ("ir-ir_alt", ["ir.profdata", "ir_alt.profdata"], ()),
        (
            "ir-ir_alt.function",
            ["ir.profdata", "ir_alt.profdata"],
            ("--function=classify", "--value-cutoff=1"),
        ),
        ("ir-ir_entry", ["ir.profdata", "ir_entry.profdata"], ()),
    ]
    for stem, inputs, opts in overlaps:
        if not all((vdir / i).exists() for i in inputs):
            manifest.skip(llvm=version, variant=f"overlap.{stem}", reason="inputs missing")
            continue
        cmd = [tool, "overlap", *opts, *inputs]
        target = vdir / f"overlap.{stem}.txt"
        try:
            run(cmd, vdir, stdout_to=target)
        except StepFailed as exc:
            manifest.skip(llvm=version, variant=f"overlap.{stem}", reason=str(exc))
            continue
        manifest.add(
            target,
            llvm=version,
            variant=f"overlap.{stem}",
            kind="overlap",
            command=cmd,
            inputs=inputs,
        )


RUST_VARIANTS = (
    (
        "rust_cov",
        ("-Cinstrument-coverage", "-Copt-level=0"),
        "rustc -Cinstrument-coverage (front-end style counters, v0-mangled names)",
    ),
    ("rust_pgo", ("-Cprofile-generate=.", "-Copt-level=2"), "rustc -Cprofile-generate (IR PGO)"),
)


def rust_llvm_version() -> tuple[int, str] | None:
    """(LLVM major, `rustc -vV` summary) of the installed rustc, or None without rustc."""
    if shutil.which("rustc") is None:
        return None
    info = subprocess.run(["rustc", "-vV"], capture_output=True, text=True).stdout
    fields = dict(line.split(": ", 1) for line in info.splitlines() if ": " in line)
    if "LLVM version" not in fields:
        return None
    summary = f"{_first_line(info)}; LLVM {fields['LLVM version']}"
    return int(fields["LLVM version"].split(".")[0]), summary


def gen_rust(src_dir: Path, out: Path, build_root: Path, manifest: Manifest) -> str | None:
    """Rust fixtures into <out>/rust/, read with the llvm-profdata of rustc's LLVM."""
    found = rust_llvm_version()
    if found is None:
        manifest.skip(variant="rust", reason="rustc not installed")
        return None
    version, summary = found
    tool = f"llvm-profdata-{version}"
    if shutil.which(tool) is None:
        manifest.skip(variant="rust", reason=f"rustc uses LLVM {version}; {tool} not installed")
        return summary
    rdir = out / "rust"
    rdir.mkdir(parents=True, exist_ok=True)
    for name, flags, note in RUST_VARIANTS:
        work = build_root / "rust" / name
        work.mkdir(parents=True)
        shutil.copy(src_dir / "sample.rs", work / "sample.rs")
        raw_name = f"{name}.profraw"
        # rustc's coverage hashes cover the absolute source path: remap the scratch dir.
        compile_cmd = ["rustc", *flags, "--remap-path-prefix=$PWD=.", "sample.rs", "-o", "prog"]
        run_cmd = [*setarch_prefix(), "./prog"]
        try:
            run([c.replace("$PWD", str(work)) for c in compile_cmd], work)
            run(run_cmd, work, env={"LLVM_PROFILE_FILE": raw_name})
            shutil.copy(work / raw_name, rdir / raw_name)
        except (StepFailed, FileNotFoundError) as exc:
            manifest.skip(llvm=version, variant=name, reason=str(exc))
            continue
        manifest.add(
            rdir / raw_name,
            llvm=version,
            variant=name,
            kind="profraw",
            commands=[compile_cmd, [f"LLVM_PROFILE_FILE={raw_name}", *run_cmd]],
            inputs=["../src/sample.rs"],
            toolchain=summary,
            note=note,
        )
        save_shows(manifest, tool, version, name, rdir / raw_name, (*BASE_SHOWS, "profile-version"))
        try:
            convert(manifest, tool, version, name, rdir, [raw_name], name, ())
        except StepFailed as exc:
            manifest.skip(llvm=version, variant=name, output="profdata", reason=str(exc))
    return summary


def gen_cross(versions: Sequence[int], out: Path, manifest: Manifest) -> None:
    """Indexed files written by every llvm-profdata from the *same* text profiles.

    A writer that claims "byte-identical to llvm-profdata-NN" is checked against
    cross/<src>.by<NN>.profdata, all made from one .proftext (written by the oldest and the
    newest toolchain), so only the indexed version / writer differs between them.
    """
    cross = out / "cross"
    cross.mkdir(parents=True, exist_ok=True)
    sources = []
    for src_version in (min(versions), max(versions)):
        sources += sorted((out / f"clang{src_version}").glob("*.proftext"))
    for text in sources:
        src_tag = f"{text.parent.name.replace('clang', 'c')}_{text.stem}"
        rel = f"../{text.parent.name}/{text.name}"
        for version in versions:
            tool = f"llvm-profdata-{version}"
            name = f"{src_tag}.by{version}.profdata"
            cmd = [tool, "merge", "-o", name, rel]
            try:
                run(cmd, cross)
            except StepFailed as exc:
                manifest.skip(llvm=version, variant=f"cross.{src_tag}", reason=str(exc))
                continue
            manifest.add(
                cross / name,
                llvm=version,
                variant=f"cross.{src_tag}",
                kind="profdata",
                command=cmd,
                inputs=[rel],
            )


def dump_manifest(doc: Mapping[str, object]) -> str:
    """JSON with one line per file/skip entry: small, and diffs stay readable."""
    lines = ["{"]
    items = list(doc.items())
    for i, (key, value) in enumerate(items):
        comma = "," if i < len(items) - 1 else ""
        if isinstance(value, list) and value:
            lines.append(f" {json.dumps(key)}: [")
            lines += [
                f"  {json.dumps(v)}{',' if j < len(value) - 1 else ''}" for j, v in enumerate(value)
            ]
            lines.append(f" ]{comma}")
        else:
            lines.append(f" {json.dumps(key)}: {json.dumps(value)}{comma}")
    return "\n".join([*lines, "}"]) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Regenerate the fixture tree; returns 0 (skipped variants are data, not errors)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--versions",
        default=",".join(map(str, ALL_VERSIONS)),
        help="comma-separated LLVM versions (default: all installed of 14,16,19,22)",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--no-rust", action="store_true", help="skip the rustc fixtures")
    parser.add_argument("--keep-build", type=Path, help="build here and keep it (debugging)")
    parser.add_argument(
        "--check",
        action="store_true",
        help="regenerate into a scratch dir and report files whose bytes differ "
        "from the committed manifest (exit 1 if any)",
    )
    args = parser.parse_args(argv)
    wanted = [int(x) for x in args.versions.split(",") if x]
    versions = [
        v for v in wanted if shutil.which(f"clang-{v}") and shutil.which(f"llvm-profdata-{v}")
    ]
    missing = sorted(set(wanted) - set(versions))
    out: Path = args.out.resolve()
    committed = out == DEFAULT_OUT.resolve()
    if (committed or args.check) and (set(wanted) != set(ALL_VERSIONS) or args.no_rust):
        parser.error(
            "a partial run would drop the other fixtures from the committed tree "
            "(it is rewritten as a whole); use --out DIR"
        )
    if committed or args.check:
        # Build the whole tree in a staging dir; the committed tree is replaced only after
        # a complete run (a crash half-way must not leave it half-deleted).
        out = Path(tempfile.mkdtemp(prefix="profkit-fixtures-stage-"))
    src_dir = out / "src"
    if out != DEFAULT_OUT.resolve():  # a scratch tree gets its own copy of the sources
        shutil.copytree(DEFAULT_OUT / "src", src_dir, dirs_exist_ok=True)
    for old in out.iterdir():  # regenerate from scratch: stale outputs must not survive
        if old.is_dir() and (old.name.startswith("clang") or old.name in ("cross", "rust")):
            shutil.rmtree(old)
    manifest = Manifest(out)
    if args.keep_build:
        build_root = args.keep_build.resolve()
        build_root.mkdir(parents=True, exist_ok=True)
    else:
        build_root = Path(tempfile.mkdtemp(prefix="profkit-fixtures-"))
    global SCRATCH_TMP
    SCRATCH_TMP = str(build_root / "tmp")
    os.makedirs(SCRATCH_TMP, exist_ok=True)
    try:
        for version in versions:
            print(f"clang-{version} ...", file=sys.stderr)
            gen_version(version, src_dir, out, build_root, manifest)
        if versions:
            gen_cross(versions, out, manifest)
        rust = None if args.no_rust else gen_rust(src_dir, out, build_root, manifest)
    finally:
        if not args.keep_build:
            shutil.rmtree(build_root, ignore_errors=True)
    for path in sorted(src_dir.iterdir()):
        manifest.add(path, kind="source")
    for reason in NOT_PRODUCIBLE:
        manifest.skip(variant=reason[0], reason=reason[1])
    doc = {
        "generator": "scripts/gen_instrprof_fixtures.py",
        "host": {"machine": platform.machine(), "system": platform.system()},
        "tools": {str(v): tool_versions(v) for v in versions},
        "rustc": rust,
        "missing_versions": missing,
        "files": sorted(manifest.files, key=lambda e: str(e["path"])),
        "skipped": manifest.skipped,
    }
    (out / "MANIFEST.json").write_text(dump_manifest(doc))
    print(f"{len(manifest.files)} files, {len(manifest.skipped)} skipped", file=sys.stderr)
    try:
        if args.check:
            return compare_manifests(DEFAULT_OUT / "MANIFEST.json", out / "MANIFEST.json")
        if committed:
            install(out, DEFAULT_OUT)
    finally:
        if committed or args.check:
            shutil.rmtree(out, ignore_errors=True)
    return 0


def _generated(tree: Path) -> list[Path]:
    """The generated parts of a fixture tree (everything but src/ and README.md)."""
    return [
        p
        for p in tree.iterdir()
        if p.name == "MANIFEST.json"
        or (p.is_dir() and (p.name.startswith("clang") or p.name in ("cross", "rust")))
    ]


def install(stage: Path, target: Path) -> None:
    """Replace the generated parts of ``target`` by those of a completed ``stage``."""
    for old in _generated(target):
        if old.is_dir():
            shutil.rmtree(old)
        else:
            old.unlink()
    for new in _generated(stage):
        shutil.move(str(new), str(target / new.name))


def compare_manifests(committed: Path, fresh: Path) -> int:
    """Print files that are new, gone or changed between two manifests; 1 if any."""

    def shas(path: Path) -> dict[str, str]:
        return {e["path"]: e["sha256"] for e in json.loads(path.read_text())["files"]}

    old, new = shas(committed), shas(fresh)
    diffs = (
        [f"new:     {p}" for p in sorted(new.keys() - old.keys())]
        + [f"gone:    {p}" for p in sorted(old.keys() - new.keys())]
        + [f"changed: {p}" for p in sorted(old.keys() & new.keys()) if old[p] != new[p]]
    )
    for line in diffs:
        print(line)
    print(f"{len(diffs)} differences from the committed fixtures", file=sys.stderr)
    return 1 if diffs else 0


if __name__ == "__main__":
    raise SystemExit(main())
