"""Where a yield-cut generator's callers start in a second walk (``callers_at``): the rule
``splice_callers`` in _walker.c and the Python walk share."""

from __future__ import annotations

from profkit.sampler.pywalk import Walk, callers_at

GEN = 0x9000_0000  # a generator's frame: outside every data-stack chunk
CHUNK, TOP = 0x1000, 0x1400  # the cut walk's chunk and data-stack top


def _walk(*addrs: int) -> Walk:
    return Walk([a for addr in addrs for a in (addr + 1, addr + 2)], list(addrs))


def test_the_generator_running_again_gives_the_frames_after_it():
    again = _walk(0x1500, GEN, 0x1300, 0x1100)  # gen called something; then its callers
    assert callers_at(again, GEN, CHUNK, TOP) == 2


def test_a_suspended_generator_gives_the_innermost_frame_that_existed_then():
    # the consumer (0x1300, below the old top) has since called 0x1450 (pushed later)
    again = _walk(0x1450, 0x1300, 0x1100)
    assert callers_at(again, GEN, CHUNK, TOP) == 1


def test_no_caller_found_is_the_length():
    assert callers_at(_walk(GEN), GEN, CHUNK, TOP) == 1  # cut again at the generator
    assert callers_at(_walk(0x1450, 0x8000_0000), GEN, CHUNK, TOP) == 2
    assert callers_at(Walk(), GEN, CHUNK, TOP) == 0
