"""Hypothesis strategies and small fixed profiles built directly with the model."""

from __future__ import annotations

from hypothesis import strategies as st

from profkit.calltree.model import CallNode, CallProfile, Frame, Span, ThreadTree

_ns = st.integers(min_value=0, max_value=(1 << 63) - 1)
_small = st.integers(min_value=0, max_value=10**9)
_names = st.text(min_size=1, max_size=12).filter(lambda s: s.strip() != "")
_json_scalars = st.none() | st.booleans() | st.integers(-(10**12), 10**12) | st.text(max_size=8)
_metadata = st.dictionaries(
    st.text(max_size=6),
    st.recursive(
        _json_scalars,
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
        ),
        max_leaves=6,
    ),
    max_size=4,
)


@st.composite
def profiles(draw: st.DrawFn, max_frames: int = 6) -> CallProfile:
    """A random, structurally valid :class:`CallProfile`."""
    frames = draw(
        st.lists(
            st.builds(Frame, _names, st.text(max_size=10), st.integers(0, 100000)),
            min_size=1,
            max_size=max_frames,
            unique=True,
        )
    )
    prof = CallProfile(draw(st.sampled_from(["trace", "sample"])), metadata=draw(_metadata))
    for f in frames:
        prof.frame_id(f)
    nthreads = draw(st.integers(1, 3))
    for t in range(nthreads):
        thread = ThreadTree(
            draw(st.integers(-5, 10**6)),
            draw(st.text(max_size=8)),
            native_id=draw(st.none() | st.integers(0, 2**40)),
            pid=draw(st.none() | st.integers(0, 2**22)),
        )
        thread.root.inclusive_ns = draw(_ns)
        paths = draw(
            st.lists(st.lists(st.integers(0, len(frames) - 1), min_size=1, max_size=8), max_size=8)
        )
        for path in paths:
            node = thread.root
            for index in path:
                node = node.child(index)
            node.calls = draw(_small)
            node.inclusive_ns = draw(_ns)
            node.exclusive_ns = draw(_ns)
            node.min_ns = draw(_small)
            node.max_ns = draw(_small)
        prof.threads.append(thread)
        del t
    prof.spans.extend(
        draw(
            st.lists(
                st.builds(
                    lambda th, fr, a, d, dep: Span(th, fr, a, a + d, dep),
                    st.integers(0, nthreads - 1),
                    st.integers(0, len(frames) - 1),
                    _small,
                    _small,
                    st.integers(0, 50),
                ),
                max_size=6,
            )
        )
    )
    return prof


def sample_profile() -> CallProfile:
    """A small fixed trace profile: main → work → (json.dumps, helper), main → json.dumps.

    Times are consistent (inclusive = exclusive + children) so flat/callers/exports
    can be checked by hand.
    """
    p = CallProfile("trace", metadata={"pid": 4242, "argv": ["app.py"]})
    main = p.frame_id(Frame("myapp.main", "/src/myapp/__init__.py", 10))
    work = p.frame_id(Frame("myapp.core.work", "/src/myapp/core.py", 20))
    dumps = p.frame_id(Frame("json.dumps", "/usr/lib/python3/json/__init__.py", 183))
    helper = p.frame_id(Frame("myapp.core.helper", "/src/myapp/core.py", 40))
    t = ThreadTree(1, "MainThread")
    p.threads.append(t)
    t.root.calls, t.root.inclusive_ns = 1, 10_000_000
    n_main = t.root.child(main)
    n_main.add_call(10_000_000, 1_000_000)
    n_work = n_main.child(work)
    n_work.add_call(5_000_000, 1_000_000)
    n_work.add_call(3_000_000, 1_000_000)
    n_d = n_work.child(dumps)
    n_d.add_call(4_000_000, 4_000_000)
    n_h = n_work.child(helper)
    n_h.add_call(2_000_000, 2_000_000)
    n_d2 = n_main.child(dumps)
    n_d2.add_call(1_000_000, 1_000_000)
    # timeline consistent with the tree
    p.spans.extend(
        [
            Span(0, main, 0, 10_000_000, 0),
            Span(0, work, 0, 5_000_000, 1),
            Span(0, dumps, 500_000, 3_500_000, 2),
            Span(0, helper, 3_500_000, 4_500_000, 2),
            Span(0, work, 5_000_000, 8_000_000, 1),
            Span(0, dumps, 5_500_000, 6_500_000, 2),
            Span(0, helper, 6_500_000, 7_500_000, 2),
            Span(0, dumps, 8_500_000, 9_500_000, 1),
        ]
    )
    t2 = ThreadTree(2, "worker")
    p.threads.append(t2)
    t2.root.calls, t2.root.inclusive_ns = 1, 2_000_000
    t2.root.child(helper).add_call(2_000_000, 2_000_000)
    p.spans.append(Span(1, helper, 1_000_000, 3_000_000, 0))
    return p


def deep_profile(depth: int = 3000) -> CallProfile:
    """A recursion deeper than Python's recursion limit."""
    p = CallProfile("trace")
    f = p.frame_id(Frame("myapp.rec", "r.py", 1))
    t = ThreadTree(1, "MainThread")
    p.threads.append(t)
    node: CallNode = t.root
    for i in range(depth):
        node = node.child(f)
        node.add_call(depth - i, 1)
    t.root.inclusive_ns = depth
    return p
