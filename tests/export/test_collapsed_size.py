"""Collapsed output of big profiles (issue #25 item 15): the size is told before writing
(exactly), ``min_share`` folds small subtrees into their callers keeping every total,
and the file stays valid flamegraph.pl input."""

from __future__ import annotations

import io
import re
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from profkit.calltree.model import CallProfile
from profkit.export import collapsed
from tests.calltree.strategies import profiles, sample_profile

# flamegraph.pl's own reading of a line: the stack, one space, the count
LINE = re.compile(rb"^[^ ;\n]+(;[^ ;\n]+)* [0-9]+$")


def _write(profile: CallProfile, **kw: object) -> tuple[bytes, list[collapsed.Plan]]:
    plans: list[collapsed.Plan] = []
    out = io.BytesIO()
    collapsed.write_to(profile, out, before=plans.append, **kw)  # type: ignore[arg-type]
    return out.getvalue(), plans


def _counts(data: bytes) -> Counter[bytes]:
    found: Counter[bytes] = Counter()
    for line in data.splitlines():
        assert LINE.match(line), line
        stack, count = line.rsplit(b" ", 1)
        found[stack] += int(count)
    return found


@settings(max_examples=60, deadline=None)
@given(profiles(), st.sampled_from([0.0, 0.001, 0.05, 0.3, 1.0]))
def test_the_size_told_is_the_size_written(profile: CallProfile, share: float) -> None:
    data, plans = _write(profile, min_share=share)
    (plan,) = plans
    assert plan.size == len(data)
    assert plan.count == data.count(b"\n")
    # the size a share would give, asked of the unfolded plan, is what it writes
    whole, (first,) = _write(profile)
    assert first.size_at(share) == len(data)
    assert first.size_at(0.0) == len(whole)


@settings(max_examples=60, deadline=None)
@given(profiles(), st.sampled_from([0.001, 0.05, 0.3, 1.0]))
def test_folding_keeps_the_total_and_the_kept_stacks(profile: CallProfile, share: float) -> None:
    whole = _counts(collapsed.write(profile))
    folded = _counts(_write(profile, min_share=share)[0])
    assert sum(folded.values()) == sum(whole.values())
    assert len(folded) <= len(whole)
    for stack, count in folded.items():
        # a kept stack is one of the full output's (or their caller), with at least its time
        assert count >= whole.get(stack, 0)
        assert any(s == stack or s.startswith(stack + b";") for s in whole)


def test_without_a_share_the_output_is_unchanged() -> None:
    profile = sample_profile()
    assert _write(profile)[0] == collapsed.write(profile)
    assert _write(profile, min_share=0.0)[0] == collapsed.write(profile)


def test_small_subtrees_fold_into_their_caller() -> None:
    profile = sample_profile()
    whole = _counts(collapsed.write(profile))
    total = sum(whole.values())
    folded = _counts(_write(profile, min_share=0.5)[0])
    assert len(folded) < len(whole)
    for stack in folded:
        # a thread's top frames stay; deeper stacks have at least half the time under them
        below = sum(c for s, c in whole.items() if s == stack or s.startswith(stack + b";"))
        assert stack.count(b";") <= 1 or below * 2 >= total


def test_progress_is_told_the_bytes_written() -> None:
    seen: list[tuple[str, int, int]] = []
    out = io.BytesIO()
    collapsed.write_to(sample_profile(), out, progress=lambda *a: seen.append(a))
    writing = [s for s in seen if s[0] == "writing"]
    assert writing[-1] == ("writing", len(out.getvalue()), len(out.getvalue()))
    assert [d for _, d, _ in writing] == sorted(d for _, d, _ in writing)
