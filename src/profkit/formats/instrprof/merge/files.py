"""Merging many profile files, serially or across worker processes (``merge -j N``).

The inputs are cut into ``jobs`` contiguous shares; each process reads and merges its
share — raw files of one binary through the :mod:`fastraw` path, everything else
through :class:`ProfileMerger` — and sends back only compact accumulators (summed
counter arrays per raw-file shape, merged records of the rest), never the decoded
inputs. The parent (which works on the first share itself) combines them the way
LLVM's ``mergeRecordsFromWriter`` combines its per-thread writers, so the counts equal
a serial merge. :func:`merge_share` is the one unit of work: the parent, the ``-j``
workers and the Dask leaves (:mod:`.on_dask`) all merge their inputs with it, and
:mod:`.request` is the entry point above them all.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from profkit.errors import ProfileFormatError, ProfkitError
from profkit.formats.instrprof.compat import InputVersion, input_version
from profkit.formats.instrprof.merge import workers
from profkit.formats.instrprof.merge.accumulator import (
    MAX_TRACE_LENGTH,
    TRACE_RESERVOIR_SIZE,
    KindMismatchError,
    MergeState,
    ProfileMerger,
)
from profkit.formats.instrprof.model import Profile, ProfileKind
from profkit.formats.instrprof.raw import RAW_MAGICS, parse_raw
from profkit.formats.instrprof.raw_sections import written_for_correlation
from profkit.formats.instrprof.reader import parse_profile, read_profile_bytes
from profkit.formats.instrprof.versions import NEWEST_REPRODUCED

if TYPE_CHECKING:
    # numpy (~80 ms of start-up) comes with the raw-file fast path: imported only when a
    # raw input arrives, so merging indexed or text files never loads it. Likewise
    # multiprocessing, only when worker processes are started.
    from concurrent.futures import Future

    from profkit.formats.instrprof.correlate import Correlation
    from profkit.formats.instrprof.merge.raw_arrays import ShapeAccumulator

Progress = Callable[[int], None]

#: Why a raw file written for correlation is refused (llvm-profdata would quietly write
#: an empty profile from it when no binary is given).
CORRELATED = (
    "written for correlation (-profile-correlate=binary|debug-info): it holds counters but "
    "no function records or names, which stay in the binary; merging it alone would give "
    "an empty profile. Merge it with llvm-profdata merge --binary-file=BIN or "
    "--debug-info=BIN (profkit does not read binaries yet)"
)


@dataclass(frozen=True)
class MergeInput:
    """One input file and its weight (``--weighted-input=W,FILE``)."""

    path: str
    weight: int = 1


@dataclass
class MergeOutcome:
    """The merged profile, plus what went wrong on the way (for ``--failure-mode``)."""

    profile: Profile
    merged: int
    failures: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: Format and version of every input merged: what their producers can read back.
    input_versions: set[InputVersion] = field(default_factory=set)


@dataclass
class _Segment:
    """Record-path inputs that follow each other with no new raw-file shape in between."""

    first_index: int
    merger: ProfileMerger
    inputs: int = 0


@dataclass
class ShareResult:
    """One share's partial merge: what a ``-j`` worker or a Dask leaf sends back."""

    shapes: list[tuple[int, ShapeAccumulator]]  # (first input index, accumulator)
    segments: list[tuple[int, MergeState, int]]  # (first input index, state, inputs)
    merged: int
    failures: list[tuple[int, str, str]]
    warnings: list[str]
    versions: set[InputVersion]


def merge_share(
    share: Sequence[tuple[int, MergeInput]],
    progress: Progress | None = None,
    traces: tuple[int, int] = (TRACE_RESERVOIR_SIZE, MAX_TRACE_LENGTH),
    binary: Correlation | None = None,
) -> ShareResult:
    """Read and merge one share of the inputs (runs in a worker or in the parent).

    Record-path inputs are merged in *segments* that never straddle the first file of
    a raw-file shape, so the parent can replay everything in input order: which record
    arrives first matters when two disagree (LLVM keeps the first one's shape).
    """
    shapes: dict[bytes, tuple[int, ShapeAccumulator]] = {}
    segments: list[_Segment] = []
    kinds = ProfileMerger()  # kind checks across the whole share
    failures: list[tuple[int, str, str]] = []
    warnings: list[str] = []
    versions: set[InputVersion] = set()
    merged = 0
    for done, (index, item) in enumerate(share, start=1):
        path, weight = item.path, item.weight

        def warn(message: str, path: str = path) -> None:
            warnings.append(message if message.startswith(path) else f"{path}: {message}")

        try:
            data = read_profile_bytes(path)
            if not data:
                continue  # an empty file is skipped, as llvm-profdata does
            version = input_version(data)
            correlated = written_for_correlation(data)
            if correlated and binary is None:
                raise ProfileFormatError("incompatible", CORRELATED, path=path, offset=0)
            if correlated or not _merge_fast(data, index, item, shapes, kinds, warn):
                if correlated:
                    from profkit.formats.instrprof.correlate import correlate

                    assert binary is not None
                    profile = correlate(data, path, binary.path, binary.mode, warn)
                else:
                    profile = parse_profile(data, path)
                kinds.merge_kind(profile.kind & ~ProfileKind.MEMPROF, path)
                newest_shape = max((i for i, _ in shapes.values()), default=-1)
                if not segments or segments[-1].first_index < newest_shape:
                    merger = ProfileMerger(
                        trace_reservoir_size=traces[0], max_trace_length=traces[1]
                    )
                    segments.append(_Segment(index, merger))
                segments[-1].merger.add(profile, weight, warn, source=path, take=True)
                segments[-1].inputs += 1
            merged += 1
            versions.add(version)
        except OSError as exc:
            failures.append((index, path, exc.strerror or str(exc)))
        except ProfkitError as exc:
            failures.append((index, path, str(exc)))
        finally:
            # (in a worker the parent reads the shared counter instead)
            if not workers.count_done() and progress is not None:
                progress(done)
    return ShareResult(
        list(shapes.values()),
        [(seg.first_index, seg.merger.state(), seg.inputs) for seg in segments],
        merged,
        failures,
        warnings,
        versions,
    )


def _merge_fast(
    data: bytes,
    index: int,
    item: MergeInput,
    shapes: dict[bytes, tuple[int, ShapeAccumulator]],
    kinds: ProfileMerger,
    warn: Callable[[str], None],
) -> bool:
    if bytes(data[:8]) not in RAW_MAGICS:
        return False
    from profkit.formats.instrprof.merge.raw_arrays import ShapeAccumulator, _NotFast, probe

    shape = probe(data)
    if shape is None:
        return False
    kinds.merge_kind(shape.kind, item.path)
    try:
        found = shapes.get(shape.key)
        if found is not None and found[1].shape.parts != shape.parts:
            return False  # a fingerprint collision: take the record path
        if found is None:
            parse_raw(data, item.path)  # validate the one file we will decode at the end
            acc = ShapeAccumulator.start(shape, item.path, data, item.weight, warn)
            shapes[shape.key] = (index, acc)
        else:
            found[1].add_file(item.path, data, item.weight, warn)
    except _NotFast:
        return False
    return True


def merge_files(
    inputs: Sequence[MergeInput],
    *,
    jobs: int = 1,
    sparse: bool = False,
    progress: Progress | None = None,
    trace_reservoir_size: int = TRACE_RESERVOIR_SIZE,
    max_trace_length: int = MAX_TRACE_LENGTH,
    llvm_contexts: int = 1,
    llvm_version: int = NEWEST_REPRODUCED,
    binary: Correlation | None = None,
) -> MergeOutcome:
    """Merge ``inputs`` with ``jobs`` processes; failures are collected, not raised.

    With ``llvm_contexts`` = 1 (default) the result is that of a serial merge in input
    order, whatever ``jobs`` is. ``llvm_contexts`` = N > 1 reproduces ``llvm-profdata
    merge -j N`` (``llvm_version`` = the LLVM release whose hash maps to imitate): inputs
    are dealt round-robin to N writers that are merged pairwise, which decides which
    record wins when two disagree. ``progress(n)`` is called (in this process) with the
    number of inputs done so far. ``binary`` names the executable that raw files written
    for correlation need (``--binary-file`` or ``--debug-info``). Worker processes are forked (Linux) — so when the
    calling process runs other threads, the merge runs in this process instead.
    Incompatible profile kinds across shares raise :class:`KindMismatchError`.
    """
    indexed = list(enumerate(inputs))
    jobs = max(1, min(jobs, len(indexed)))
    if threading.active_count() > 1 and sys.platform.startswith("linux"):
        # Forking a process that runs other threads can deadlock the child, and a
        # spawned child would re-run the caller's __main__: merge in this process.
        jobs = 1
    traces = (trace_reservoir_size, max_trace_length)
    if llvm_contexts > 1:
        shares = [indexed[c::llvm_contexts] for c in range(llvm_contexts)]
    else:
        bounds = [len(indexed) * k // jobs for k in range(jobs + 1)]
        shares = [indexed[bounds[k] : bounds[k + 1]] for k in range(jobs)]
    if jobs == 1 or len(shares) != jobs:
        results = []
        base = 0
        for share in shares:
            report = (lambda done, base=base: progress(base + done)) if progress else None
            results.append(merge_share(share, report, traces, binary))
            base += len(share)
    else:
        results = _run_parallel(shares, progress, traces, binary)
    warnings: list[str] = []
    if llvm_contexts <= 1:
        final, merged, failures = replay(results, traces, warnings)
    else:
        writers = [replay([r], traces, warnings) for r in results]
        final = _tree_merge([w[0] for w in writers], llvm_version, warnings.append)
        merged = sum(w[1] for w in writers)
        failures = sorted((f for w in writers for f in w[2]), key=lambda f: f[0])
    return MergeOutcome(
        profile=final.result(sparse=sparse),
        merged=merged,
        failures=[(path, message) for _, path, message in failures],
        warnings=warnings,
        input_versions={v for r in results for v in r.versions},
    )


def _run_parallel(
    shares: list[list[tuple[int, MergeInput]]],
    progress: Progress | None,
    traces: tuple[int, int],
    binary: Correlation | None = None,
) -> list[ShareResult]:
    """One share per process; the parent takes the first."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, wait

    # Imported once here, before the fork, rather than by every worker: parallel merges
    # are of many files, usually raw ones (the fast path needs numpy).
    import profkit.formats.instrprof.merge.raw_arrays  # noqa: F401

    jobs = len(shares)
    method = "fork" if sys.platform.startswith("linux") else "spawn"
    ctx = multiprocessing.get_context(method)
    counter = ctx.Value("l", 0)
    pool = ProcessPoolExecutor(
        max_workers=jobs - 1,
        mp_context=ctx,
        initializer=workers.init_worker,
        initargs=(counter, os.getpid()),
    )
    try:
        futures: list[Future[ShareResult]] = [
            pool.submit(merge_share, s, None, traces, binary) for s in shares[1:]
        ]

        def own_progress(done: int) -> None:
            if progress is not None:
                progress(done + counter.value)

        first = merge_share(shares[0], own_progress if progress else None, traces, binary)
        pending = set(futures)
        while progress is not None and pending:
            _, pending = wait(pending, timeout=0.1)
            progress(len(shares[0]) + counter.value)
        results = [first] + [f.result() for f in futures]
    except BaseException:
        # Interrupted (Ctrl-C, a SIGTERM the caller turned into an exception) or failed:
        # the workers stop now instead of finishing their shares (shutdown would wait).
        workers.kill_workers(pool)
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    if progress is not None:
        progress(sum(map(len, shares)))
    return results


def replay(
    results: list[ShareResult], traces: tuple[int, int], warnings: list[str]
) -> tuple[ProfileMerger, int, list[tuple[int, str, str]]]:
    """Replay shares' shapes and record segments in input order into one writer.

    Returns the writer, the number of inputs merged and the failures (with input index).
    """
    final = ProfileMerger(trace_reservoir_size=traces[0], max_trace_length=traces[1])
    failures = [f for r in results for f in r.failures]

    def warn(message: str) -> None:
        warnings.append(message)

    shapes: dict[bytes, tuple[int, ShapeAccumulator]] = {}
    steps: list[tuple[int, int, Any]] = []  # (input index, tie-break, item)
    for result in results:
        warnings.extend(result.warnings)
        for index, acc in result.shapes:
            found = shapes.get(acc.shape.key)
            if found is None:
                shapes[acc.shape.key] = (index, acc)
            elif found[1].shape.parts == acc.shape.parts:
                found[1].combine(acc, warn)
            else:  # a fingerprint collision between shares: keep both
                shapes[acc.shape.key + index.to_bytes(8, "little")] = (index, acc)
        steps.extend((index, 1, (state, inputs)) for index, state, inputs in result.segments)
    steps.extend((index, 0, acc) for index, acc in shapes.values())
    merged = sum(r.merged for r in results)
    for index, kind, item in sorted(steps, key=lambda step: (step[0], step[1])):
        if kind == 0:  # a ShapeAccumulator (tie-break 0), else a record segment
            data = read_profile_bytes(item.first_path)
            try:
                final.add(item.materialize(data), 1, warn, source=item.first_path, take=True)
            except KindMismatchError as exc:  # shares disagree: drop this shape's files
                more = (
                    f" (with {item.files - 1} more input(s) of that binary)"
                    if item.files > 1
                    else ""
                )
                failures.append((index, item.first_path, f"{exc}{more}"))
                merged -= item.files
        else:
            state, inputs = item
            try:
                final.add_state(state, warn)
            except KindMismatchError as exc:
                failures.append((index, state.kind_source or "?", str(exc)))
                merged -= inputs
    failures.sort(key=lambda f: f[0])
    return final, merged, failures


def _tree_merge(
    writers: list[ProfileMerger], llvm_version: int, warn: Callable[[str], None]
) -> ProfileMerger:
    """llvm-profdata's pairwise merge of its per-thread writers (``mergeWriterContexts``)."""
    mid, end = len(writers) // 2, len(writers)
    while mid > 0:
        for i in range(mid):
            writers[i].add_writer(writers[i + mid], llvm_version, warn)
        if end & 1:
            writers[0].add_writer(writers[end - 1], llvm_version, warn)
        end, mid = mid, mid // 2
    return writers[0]


def default_jobs(num_inputs: int) -> int:
    """LLVM's default ``-j``: ``min(hardware threads, (inputs + 1) / 2)``."""
    try:
        cpus = len(os.sched_getaffinity(0))  # what LLVM's compute_thread_count() sees
    except AttributeError:  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, (num_inputs + 1) // 2))
