"""The live top-N of the hottest functions, from ``Leave``/``Yield`` durations.

For each name: the summed durations (*total*, which counts a recursive function at every
level, as any sum of call durations does), the number of closes, the longest one, and
the *self* time — duration minus the durations of the calls closed one level deeper
since — which counts recursion once and is what the top-N is ranked by. Self time
needs the order of a sender's lines, so each sender keeps a small per-depth array
(:class:`DepthSums`); a lost datagram only skews the few calls it straddles (and self
time never goes below zero).

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

MAX_FUNCTIONS = 20_000
#: Longest name kept; a longer one is cut and ends in "…" (every cut name of one prefix
#: shares an entry, which is what a reader of a top-N list would see anyway).
MAX_NAME = 512
#: Deepest indentation level tracked for self time (deeper lines still count in totals).
MAX_DEPTH = 1024

#: ``    Leave: NAME, Duration: 12.250 us`` (also ``Yield``; units ns, us, µs, ms, s).
#: Matched against the body with a newline in front: the literal ``\n`` prefix lets the
#: regex engine skip ahead instead of trying every position, and the name part never
#: backtracks (a comma is taken only when ", Duration: " does not follow) — together
#: about twice as fast as ``^ *...(.+), Duration`` with MULTILINE.
CLOSE_LINE = re.compile(
    r"\n( *)(?:Leave|Yield): ([^\n,]*(?:,(?! Duration: )[^\n,]*)*), "
    r"Duration: ([0-9]{1,15}(?:\.[0-9]{1,9})?) (ns|us|µs|ms|s)(?![^\n])"
)
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


# entry layout: [self ns, total ns, closes, longest ns]
_SELF, _TOTAL, _COUNT, _LONGEST = range(4)


class DepthSums:
    """Per sender: durations of calls closed at each depth since their parent opened."""

    __slots__ = ("sums",)

    def __init__(self) -> None:
        self.sums = [0] * (MAX_DEPTH + 2)


class FunctionTable:
    """name → [self ns, total ns, closes, longest ns]; see the module docstring."""

    def __init__(self, limit: int = MAX_FUNCTIONS) -> None:
        self.limit = limit
        self.table: dict[str, list[int]] = {}
        self.forgotten = 0  #: names evicted so far

    def feed(self, body: str, depths: DepthSums | None = None) -> int:
        """Add every close line of a datagram body; return how many there were.

        The per-line path is one regex match, the duration, the depth sums and one dict
        lookup; names seen for the first time (cut to :data:`MAX_NAME`, checked for being
        a wait) take the slow path once.
        """
        table = self.table
        get = table.get
        scale = _SCALE
        sums = (depths or DepthSums()).sums
        found = CLOSE_LINE.findall("\n" + body)
        for indent, name, value, unit in found:
            ns = int(value) * scale[unit] if "." not in value else round(float(value) * scale[unit])
            depth = len(indent) >> 2
            if depth <= MAX_DEPTH:
                own = ns - sums[depth + 1]
                sums[depth + 1] = 0
                sums[depth] += ns
                if own < 0:
                    own = 0
            else:
                own = 0
            entry = get(name)
            if entry is None:
                entry = self._new_entry(name)
                if entry is None:
                    continue  # waiting: out of its caller's self time and of the ranking
            entry[_SELF] += own
            entry[_TOTAL] += ns
            entry[_COUNT] += 1
            if ns > entry[_LONGEST]:
                entry[_LONGEST] = ns
        return len(found)

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
        entry = self.table[name] = [0, 0, 0, 0]
        return entry

    def _shrink(self) -> None:
        keep = heapq.nlargest(self.limit // 2, self.table.items(), key=_rank)
        self.forgotten += len(self.table) - len(keep)
        self.table.clear()  # in place: feed() holds a reference to this dict
        self.table.update(keep)

    def top(self, n: int) -> list[tuple[str, int, int, int, int]]:
        """The ``n`` hottest functions by self time: (name, self, total, count, longest)."""
        best = heapq.nlargest(max(n, 0), self.table.items(), key=_rank)
        return [(name, e[_SELF], e[_TOTAL], e[_COUNT], e[_LONGEST]) for name, e in best]


def _rank(item: tuple[str, list[int]]) -> tuple[int, int]:
    return item[1][_SELF], item[1][_TOTAL]
