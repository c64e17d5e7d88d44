"""``llvm-profdata merge`` as one library call: a :class:`MergeRequest` in, a
:class:`MergeResult` out (issue #21 item 5).

Why here and not in the command: the pipeline — inputs and weights, which engine (this
process, ``-j`` worker processes, Dask), which LLVM release to imitate, which indexed
version to write, the failure mode, function filtering, zero dropping, writing — is the
merge's own logic; ``profkit profdata merge`` only turns flags into a request and prints
what it is told. Every engine merges its share of the inputs with the same
:func:`~.files.merge_share` (the ``-j`` workers and the Dask leaves alike).

The library never prints: what the command prints comes through two callbacks, called
at the moments it printed before (``on_merged`` once the inputs are merged, before the
failure mode is applied; ``on_filtered`` after ``--function``/``--no-function``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from profkit.errors import ProfkitError, UsageError
from profkit.formats.instrprof.merge.accumulator import (
    MAX_TRACE_LENGTH,
    TRACE_RESERVOIR_SIZE,
    drop_all_zero,
)
from profkit.formats.instrprof.merge.files import (
    MergeInput,
    MergeOutcome,
    default_jobs,
    merge_files,
)
from profkit.formats.instrprof.model import Profile
from profkit.formats.instrprof.versions import INDEXED_BY_RELEASE, merge_order_release

if TYPE_CHECKING:
    from profkit.formats.instrprof.compat import Choice
    from profkit.formats.instrprof.correlate import Correlation

FailureMode = Literal["any", "all", "warn"]


@dataclass(frozen=True)
class MergeRequest:
    """What to merge and how to write it (the options of ``llvm-profdata merge``)."""

    inputs: Sequence[MergeInput]
    #: Where the merged profile goes: a path (written atomically), or ``-`` for the
    #: bytes in :attr:`MergeResult.data` (the caller writes them to stdout).
    output: str
    text: bool = False
    #: Indexed version to write; ``None``: the newest every producer of the inputs reads
    #: (:func:`~profkit.formats.instrprof.compat.readable_version`), or with
    #: ``llvm_default`` llvm-profdata's own default (the newest).
    indexed_version: int | None = None
    llvm_default: bool = False
    #: Write exactly what ``llvm-profdata-N`` writes: text dialect, indexed version, and
    #: the iteration orders of its ``-j`` merge.
    llvm_version: int | None = None
    sparse: bool = False
    function: str | None = None  # keep only names matching this regex (search)
    no_function: str | None = None  # drop names matching this regex
    jobs: int = 0  # 0: LLVM's default, min(CPUs, (inputs + 1) / 2)
    failure_mode: FailureMode = "any"
    trace_reservoir_size: int = TRACE_RESERVOIR_SIZE
    max_trace_length: int = MAX_TRACE_LENGTH
    binary: Correlation | None = None  # the binary raw inputs written for correlation need
    dask: str | None = None  # "local" or a scheduler address: merge on dask.distributed

    def check(self) -> None:
        """Refuse a request that cannot run (:class:`UsageError`), before any input is read."""
        from profkit._atomic import ensure_not_an_input

        ensure_not_an_input(self.output, [i.path for i in self.inputs])
        if self.trace_reservoir_size < 1 or self.max_trace_length < 1:
            raise UsageError("temporal profile limits must be at least 1")
        if self.jobs < 0:
            raise UsageError("-j/--num-threads must be 0 (automatic) or more")


@dataclass
class MergeResult:
    """The merged (filtered) profile, what happened on the way, and what was written."""

    profile: Profile
    outcome: MergeOutcome
    #: The version the default chose and why (``None`` when the request named one).
    chosen: Choice | None
    #: The output's bytes for ``output="-"``; ``None`` once written to a file.
    data: bytes | None


def merge_inputs(
    request: MergeRequest,
    *,
    progress: Callable[[int], None] | None = None,
    on_merged: Callable[[MergeOutcome], None] | None = None,
    on_filtered: Callable[[int, int], None] | None = None,
) -> MergeResult:
    """Merge, choose the version, apply the failure mode, filter, write (see module doc)."""
    request.check()
    jobs = request.jobs or default_jobs(len(request.inputs))
    version = request.indexed_version
    if request.llvm_version is not None and version is None:
        version = INDEXED_BY_RELEASE[request.llvm_version]
    outcome = _run_engine(request, jobs, version, progress)
    chosen = None
    if version is None and not request.text and not request.llvm_default:
        from profkit.formats.instrprof.compat import readable_version

        chosen = readable_version(outcome.input_versions, outcome.profile)
        version = chosen.version
    if on_merged is not None:
        on_merged(outcome)
    _apply_failure_mode(request, outcome)
    profile = outcome.profile
    counts = filter_functions(profile, request.function, request.no_function)
    if counts is not None and on_filtered is not None:
        on_filtered(*counts)
    if request.text and request.sparse:
        drop_all_zero(profile)
    data = _write(request, profile, version)
    return MergeResult(profile, outcome, chosen, data)


def _run_engine(
    request: MergeRequest, jobs: int, version: int | None, progress: Callable[[int], None] | None
) -> MergeOutcome:
    """The inputs merged in this process and ``jobs - 1`` workers, or on Dask."""
    if request.dask is not None:
        from profkit.formats.instrprof.merge import on_dask

        connection = on_dask.connect(request.dask, jobs)
        try:
            return on_dask.merge_on_dask(
                request.inputs,
                connection.client,
                progress=progress,
                trace_reservoir_size=request.trace_reservoir_size,
                max_trace_length=request.max_trace_length,
                binary=request.binary,
            )
        finally:
            connection.close()
    release = request.llvm_version
    return merge_files(
        request.inputs,
        jobs=jobs,
        # --sparse is applied by the writers: LLVM ≤ 16 order names before dropping.
        sparse=False,
        progress=progress,
        trace_reservoir_size=request.trace_reservoir_size,
        max_trace_length=request.max_trace_length,
        llvm_contexts=jobs,  # as llvm-profdata -j N: N writers merged pairwise
        llvm_version=release if release is not None else merge_order_release(version),
        binary=request.binary,
    )


def _apply_failure_mode(request: MergeRequest, outcome: MergeOutcome) -> None:
    """Raise when ``failure_mode`` says the failed inputs fail the merge."""
    failed = len(outcome.failures)
    mode = request.failure_mode
    if failed and (mode == "any" or (mode == "all" and not outcome.merged)):
        raise ProfkitError(
            f"{failed} of {len(request.inputs)} input(s) could not be merged "
            f"(--failure-mode={mode}); first: {outcome.failures[0][0]}"
        )


def filter_functions(
    profile: Profile, keep: str | None, drop: str | None
) -> tuple[int, int] | None:
    """``--function`` / ``--no-function``: regex *search* on names, as LLVM's Regex::match.

    Returns (names removed, names before), or ``None`` when there was nothing to filter.
    """
    if keep is None and drop is None:
        return None
    try:
        keep_re = re.compile(keep) if keep is not None else None
        drop_re = re.compile(drop) if drop is not None else None
    except re.error as exc:
        raise UsageError(f"bad --function/--no-function regex: {exc}") from None
    names = {r.name for r in profile.records}
    profile.records = [
        r
        for r in profile.records
        if (keep_re is None or keep_re.search(r.name)) and not (drop_re and drop_re.search(r.name))
    ]
    kept = {r.name for r in profile.records}
    return len(names) - len(kept), len(names)


def _write(request: MergeRequest, profile: Profile, version: int | None) -> bytes | None:
    """The output's bytes for ``-``; else the file, written atomically (``None``)."""
    from profkit._atomic import write_errors
    from profkit.formats.instrprof.indexed_writer import build_indexed, write_indexed
    from profkit.formats.instrprof.text_writer import NEWEST_DIALECT, format_text, write_text

    dialect = request.llvm_version if request.llvm_version is not None else NEWEST_DIALECT
    if request.output == "-":  # like llvm-profdata: "-o -" writes to stdout
        if request.text:
            return format_text(profile, llvm_version=dialect).encode("utf-8", "surrogateescape")
        return build_indexed(profile, version, sparse=request.sparse)
    with write_errors(f"cannot write {request.output}: "):
        if request.text:
            write_text(profile, request.output, llvm_version=dialect)
        else:
            write_indexed(profile, request.output, version, sparse=request.sparse)
    return None
