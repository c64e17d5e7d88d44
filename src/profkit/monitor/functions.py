"""The live top-N of the hottest functions, from ``Leave``/``Yield`` durations.

For each name: the *total* (inclusive) time, the number of closes, the longest one, and
the *self* time — duration minus the durations of the calls closed one level deeper
since — which is what the top-N is ranked by. Both count a recursive function's time
once, as cProfile's ``cumtime`` does: a plain sum of call durations would count
``fib``'s time at every level of its recursion (46.9 s shown for a 28.3 s run, #25).
Both need the order of a sender's lines, so each sender keeps small per-depth arrays and
per-name records (:class:`DepthSums`, :mod:`profkit.monitor.inclusive`); a lost datagram
only skews the few calls it straddles (and self time never goes below zero).

Waiting is not work: functions that only block the thread — sleeps, ``select``, lock and
condition waits, joins, socket receives (:func:`is_idle_wait`) — are left out of the
ranking; their time is still taken out of their caller's self time, so an idle worker
loop neither tops the list itself nor makes its caller look hot.

Bounded: at most :data:`MAX_FUNCTIONS` names are tracked, each cut to :data:`MAX_NAME`
characters (64 KB names once grew the table to 1.3 GB). When the table is full, the
cooler half is forgotten (a standard heavy-hitters compromise): a function that is hot
now re-enters at once, and the hottest ones are never the ones dropped.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable
from itertools import islice

from profkit.monitor.inclusive import counted, new_last

try:  # the per-line loop in C (_closes.c); optional like profkit's other C paths
    from profkit.monitor._closes import feed as _c_feed
except ImportError:  # pragma: no cover - built at install where a compiler exists
    _c_feed = None  # type: ignore[assignment]
#: The C loop, or None for the Python one (the tests set it to None to check both).
_native: Callable[..., int | None] | None = _c_feed

MAX_FUNCTIONS = 20_000
#: Longest name kept; a longer one is cut and ends in "…" (every cut name of one prefix
#: shares an entry, which is what a reader of a top-N list would see anyway).
MAX_NAME = 512
#: Deepest indentation level tracked for self time (deeper lines still count in totals).
MAX_DEPTH = 1024

#: A close line is ``    Leave: NAME, Duration: 12.250 us`` (also ``Yield``; units ns, us,
#: µs, ms, s); this is its duration part.
_DURATION = re.compile(r"([0-9]{1,15}(?:\.[0-9]{1,9})?) (ns|us|µs|ms|s)")
#: Heads longer than this are parsed every time instead of remembered.
_MAX_REMEMBERED_HEAD = 4 * 64 + MAX_NAME
_NOT_A_CLOSE: tuple[int, list[int] | None] = (-1, None)
#: Distinct duration texts remembered (then forgotten all at once).
_MAX_DURATIONS = 1 << 16
_SCALE = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}

#: Functions whose time is waiting, by full name (Python functions as the ELT profiler
#: names them, C functions as its C-call nodes are named).
IDLE_WAITS = frozenset(
    {
        "time.sleep",
        "select.select",
        "poll.poll",
        "epoll.poll",
        "kqueue.control",
        "devpoll.poll",
        "lock.acquire",
        "RLock.acquire",
        "_thread.lock.acquire",
        "socket.accept",
        "socket.recv",
        "socket.recv_into",
        "socket.recvfrom",
        "socket.recvfrom_into",
        "socket.recvmsg",
        "builtins.input",
        "posix.waitpid",
        "posix.wait",
        "posix.read",
        "threading.Condition.wait",
        "threading.Condition.wait_for",
        "threading.Event.wait",
        "threading.Semaphore.acquire",
        "threading.Barrier.wait",
        "threading.Thread.join",
        "threading.Thread._wait_for_tstate_lock",
        "queue.Queue.get",
        "subprocess.Popen.wait",
        "subprocess.Popen._wait",
        "subprocess.Popen.communicate",
        "multiprocessing.connection.wait",
        "concurrent.futures._base.Future.result",
        "asyncio.base_events.BaseEventLoop.run_forever",
    }
)
#: Name endings that wait whatever the class (the selectors module's ``*Selector.select``).
_IDLE_SUFFIXES = ("Selector.select",)


def is_idle_wait(name: str) -> bool:
    """Whether ``name`` is a function whose time is spent blocked (see the module doc)."""
    return name in IDLE_WAITS or name.endswith(_IDLE_SUFFIXES)


# entry layout: [self ns, total ns, closes, longest ns, key] (feed() spells the indices
# out); the key, unique in its table for good, names the entry in a sender's records
_SELF, _TOTAL, _COUNT, _LONGEST, _KEY = range(5)


class DepthSums:
    """Per sender, what its lines' order tells: at each depth, the durations of calls
    closed since their parent opened (for self time), and the last close's sequence
    number with each name's records of what it added (for total time, ``inclusive``)."""

    __slots__ = ("generation", "last", "pending", "sums")

    def __init__(self) -> None:
        self.sums = [0] * (MAX_DEPTH + 2)
        self.last = new_last(MAX_DEPTH + 2)
        self.pending: dict[int, list[int]] = {}
        #: the table generation the records were made in (a shrink drops entries)
        self.generation = 0


class FunctionTable:
    """name → [self ns, total ns, closes, longest ns, key]; see the module docstring."""

    def __init__(self, limit: int = MAX_FUNCTIONS) -> None:
        self.limit = limit
        self.table: dict[str, list[int]] = {}
        self.forgotten = 0  #: names evicted so far
        self._next_key = 0
        #: bumped when entries are dropped: senders' records of them go too
        self._generation = 0
        #: close-line head -> (depth, entry): the per-line work done once per head
        self._heads: dict[str, tuple[int, list[int] | None]] = {}
        #: duration text -> ns (-1: malformed)
        self._durations: dict[str, int] = {}

    def feed(self, body: str, depths: DepthSums | None = None) -> int:
        """Add every close line of a datagram body; return how many there were.

        Why not a regular expression over the body: at ~380 lines a datagram the regex
        engine visited every character of every line (240 us a 16 KB datagram, most of
        the monitor's time). Instead the body is cut at ``", Duration: "`` (one C-level
        split): each piece after the first begins with a close line's duration and ends
        with the next close line's head, so Enter lines are never looked at in Python.
        A head (indent, Leave/Yield, name) and a duration text are each parsed once and
        remembered (:meth:`_head`, :meth:`_duration`): functions and durations repeat.
        Where the C loop was built (``_closes.c``, the same steps over an ASCII body, ~4x
        faster again) it does the work; this loop is the fallback and its reference.
        """
        depths = depths or DepthSums()
        sums, last, pending = depths.sums, depths.last, depths.pending
        if depths.generation != self._generation or len(pending) > 2 * self.limit:
            pending.clear()
            depths.generation = self._generation
        if _native is not None:
            lines = _native(body, self._heads, sums, self._head, self._duration, last, pending)
            if lines is not None:
                return int(lines)
        # The Python loop (no C compiler at install, or a body that is not ASCII).
        # The "\n" makes every piece that ends its line hold a newline, the last one too.
        pieces = (body + "\n").split(", Duration: ")
        if len(pieces) == 1:
            return 0
        heads = self._heads
        durations = self._durations
        max_depth = MAX_DEPTH
        closes = 0
        # the text after the last newline of the previous piece; "" with whole=False when
        # that piece had no newline (its line went on: two ", Duration: " on one line)
        head = pieces[0].rpartition("\n")[2]
        whole = True
        for piece in islice(pieces, 1, None):
            tail, nl, rest = piece.partition("\n")
            if nl and whole:
                ns = durations.get(tail)
                if ns is None:
                    ns = self._duration(tail)
                # the head only for a valid duration: no entry for a name never closed
                parsed = heads.get(head) if ns >= 0 else _NOT_A_CLOSE
                if parsed is None:
                    parsed = self._head(head)
                depth, entry = parsed
                if depth >= 0:
                    closes += 1
                    if depth <= max_depth:
                        own = ns - sums[depth + 1]
                        sums[depth + 1] = 0
                        sums[depth] += ns
                        if own < 0:
                            own = 0
                        since = last[depth]  # this close's sequence number (inclusive)
                        last[depth] = last[-1] = last[-1] + 1
                        if entry is None:
                            pass
                        elif (
                            (r := pending.get(entry[4]))
                            and r[-3] == depth
                            and r[-1] > last[depth - 1]
                        ):
                            r[-2] += ns  # counted()'s most common case, inline
                            entry[1] += ns
                        else:
                            entry[1] += counted(entry[4], depth, ns, since, last, pending)
                    else:  # too deep to track: its total counts every level
                        own = 0
                        if entry is not None:
                            entry[1] += ns
                    if entry is not None:  # None: waiting (out of the ranking)
                        entry[0] += own
                        entry[2] += 1
                        if ns > entry[3]:
                            entry[3] = ns
            head = rest.rpartition("\n")[2]
            whole = bool(nl)
        return closes

    def _head(self, head: str) -> tuple[int, list[int] | None]:
        """``(depth, entry)`` of a close line's head ``"    Leave: NAME"``; depth -1 when it
        is not one. Remembered unless long (a 64 KB name must not be kept twice)."""
        indent = len(head) - len(head.lstrip(" "))
        kind = head[indent : indent + 7]
        if kind not in ("Leave: ", "Yield: "):
            parsed: tuple[int, list[int] | None] = _NOT_A_CLOSE
        else:
            name = head[indent + 7 :]
            parsed = (indent >> 2, self.table.get(name) or self._new_entry(name))
        if len(head) <= _MAX_REMEMBERED_HEAD:
            if len(self._heads) >= self.limit * 2:
                self._heads.clear()
            self._heads[head] = parsed
        return parsed

    def _duration(self, text: str) -> int:
        """Nanoseconds of ``"12.250 us"`` (units ns, us, µs, ms, s); -1 when malformed."""
        match = _DURATION.fullmatch(text)
        if match is None:
            ns = -1
        else:
            value, unit = match.groups()
            scale = _SCALE[unit]
            ns = int(value) * scale if "." not in value else round(float(value) * scale)
        if len(self._durations) >= _MAX_DURATIONS:
            self._durations.clear()
        self._durations[text] = ns
        return ns

    def _new_entry(self, name: str) -> list[int] | None:
        """The entry for a name the table has not got: None for a wait (see the module
        doc), else a new zero entry (under the name cut to :data:`MAX_NAME`)."""
        if len(name) > MAX_NAME:
            name = name[: MAX_NAME - 1] + "…"
            found = self.table.get(name)
            if found is not None:
                return found
        if is_idle_wait(name):
            return None
        if len(self.table) >= self.limit:
            self._shrink()
        entry = self.table[name] = [0, 0, 0, 0, self._next_key]
        self._next_key += 1
        return entry

    def _shrink(self) -> None:
        keep = heapq.nlargest(self.limit // 2, self.table.items(), key=_rank)
        self.forgotten += len(self.table) - len(keep)
        self.table.clear()  # in place: feed() holds a reference to this dict
        self.table.update(keep)
        self._heads.clear()  # they may point at forgotten entries
        self._generation += 1

    def top(self, n: int) -> list[tuple[str, int, int, int, int]]:
        """The ``n`` hottest functions by self time: (name, self, total, count, longest)."""
        best = heapq.nlargest(max(n, 0), self.table.items(), key=_rank)
        return [(name, e[_SELF], e[_TOTAL], e[_COUNT], e[_LONGEST]) for name, e in best]


def _rank(item: tuple[str, list[int]]) -> tuple[int, int]:
    return item[1][_SELF], item[1][_TOTAL]
