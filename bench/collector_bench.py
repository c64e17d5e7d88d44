"""Collector overhead: profkit's backends against bare Python, cProfile, yappi, pyinstrument.

Not a test. Each (configuration, workload) runs in a fresh interpreter (so one run's
instrumentation cannot leak into the next), best of ``--repeat`` timed runs of the
workload with the profiler attached around all of them. Times are process CPU time
(``time.process_time``: it includes a sampler thread's work, and it is far less disturbed
than wall time by other jobs on a shared 2-core machine). Printed per interpreter:
``×bare`` (time / bare time) and ``ovh/cP`` (time added over bare, divided by the time
cProfile adds: the issue's "≤ 0.8× cProfile's overhead" is ``ovh/cP ≤ 0.8``).

    python bench/collector_bench.py                  # this interpreter
    python bench/collector_bench.py --all            # 3.11 + .venvs/py3.12 + .venvs/py3.13
    python bench/collector_bench.py --python X --workload oo --repeat 7
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# -- workloads (also imported by the child) ----------------------------------------------


def fib(n: int) -> int:
    return n if n < 2 else fib(n - 1) + fib(n - 2)


class Vec:
    __slots__ = ("x", "y")

    def __init__(self, x: float, y: float) -> None:
        self.x, self.y = x, y

    def add(self, other: Vec) -> Vec:
        return Vec(self.x + other.x, self.y + other.y)

    def scale(self, k: float) -> Vec:
        return Vec(self.x * k, self.y * k)

    def dot(self, other: Vec) -> float:
        return self.x * other.x + self.y * other.y

    @property
    def norm2(self) -> float:
        return self.dot(self)


class Body:
    def __init__(self, i: int) -> None:
        self.pos = Vec(i, -i)
        self.vel = Vec(1.0, 0.5)

    def step(self, dt: float) -> None:
        self.pos = self.pos.add(self.vel.scale(dt))

    def energy(self) -> float:
        return 0.5 * self.vel.norm2 + self.small_helper(self.pos.x)

    def small_helper(self, v: float) -> float:
        return abs(v) * 1e-3


def oo() -> float:
    bodies = [Body(i) for i in range(50)]
    total = 0.0
    for _ in range(120):
        for b in bodies:
            b.step(0.01)
            total += b.energy()
    return total


def numbers(n: int):  # type: ignore[no-untyped-def]
    for i in range(n):
        if i % 7 == 0:
            try:
                check(i)
            except ValueError:
                continue
        yield i


def check(i: int) -> None:
    if i % 2:
        raise ValueError(i)


def gen_exc() -> int:
    total = 0
    for _ in range(40):
        total += sum(numbers(700))
    return total


WORKLOADS = {"recursion": lambda: fib(22), "oo": oo, "generators": gen_exc}

# -- configurations ----------------------------------------------------------------------


def _profkit_profiler(kind: str):  # type: ignore[no-untyped-def]
    from profkit.api import EventMask, ProfilerCallback

    class EnterLeave(ProfilerCallback):
        def initialize(self, info):  # type: ignore[no-untyped-def]
            mask = EventMask.ENTER_LEAVE
            if kind in ("el+shadow", "filtered"):
                mask |= EventMask.ENABLE_SHADOW_STACK
            info.set_event_mask(mask)
            if kind == "filtered":
                # "namespace-filtered to code that is not hot": accept one cold module only
                info.set_function_filter(lambda fi: fi.module.startswith("cold_namespace"))

        def function_enter(self, function_id):  # type: ignore[no-untyped-def]
            pass

        def function_leave(self, function_id):  # type: ignore[no-untyped-def]
            pass

    class ShadowOnly(ProfilerCallback):
        def initialize(self, info):  # type: ignore[no-untyped-def]
            info.set_event_mask(EventMask.ENABLE_SHADOW_STACK)

    class Sampling(ProfilerCallback):
        def initialize(self, info):  # type: ignore[no-untyped-def]
            self.n = 0
            info.set_event_mask(EventMask.SAMPLING)

        def stack_sample(self, thread_id, function_ids, timestamp_ns, weight_ns):  # type: ignore[no-untyped-def]
            self.n += 1

    if kind == "shadow":
        return ShadowOnly()
    if kind == "sample-1kHz":
        return Sampling()
    return EnterLeave()


CONFIGS = [
    "bare",
    "profkit:el",
    "profkit:shadow",
    "profkit:el+shadow",
    "profkit:filtered",
    "profkit:sample-1kHz",
    "profkit-setprofile:el+shadow",
    "cProfile",
    "yappi-wall",
    "pyinstrument",
    "diag:monitoring-direct",
    "diag:native-trampoline",
    "diag:native-profhook",
    "diag:native-profhook-filtered",
]


def run_one(config: str, workload: str, repeat: int) -> float | None:
    """In the child: attach ``config``, time the workload ``repeat`` times, return the best."""
    body = WORKLOADS[workload]
    stop = None
    if config.startswith("profkit"):
        from profkit.collect import attach, detach

        name, _, kind = config.partition(":")
        backend = "setprofile" if name == "profkit-setprofile" else "auto"
        attach(_profkit_profiler(kind), backend, sample_interval=0.001)
        stop = detach
    elif config == "diag:monitoring-direct":
        # The floor a native trampoline would reach: the no-op profiler methods registered
        # as the sys.monitoring callbacks themselves, with no profkit frame in between.
        mon = getattr(sys, "monitoring", None)
        if mon is None:
            return None

        class Direct:
            def function_enter(self, code, offset):  # type: ignore[no-untyped-def]
                pass

            def function_leave(self, code, offset, value):  # type: ignore[no-untyped-def]
                pass

        d = Direct()
        mon.use_tool_id(4, "diag")
        mon.register_callback(4, mon.events.PY_START, d.function_enter)
        mon.register_callback(4, mon.events.PY_RETURN, d.function_leave)
        mon.set_events(4, mon.events.PY_START | mon.events.PY_RETURN)

        def stop_direct() -> None:
            mon.set_events(4, 0)
            mon.free_tool_id(4)

        stop = stop_direct
    elif config == "diag:native-trampoline":
        # profkit's monitoring backend with its PY_START/PY_RETURN closures swapped for the
        # C prototype in bench/native/trampoline.c: what the proposed native piece gives.
        if getattr(sys, "monitoring", None) is None:
            return None
        native = _build_native("trampoline")
        if native is None:
            return None
        from profkit.collect import attach, detach

        profiler = _profkit_profiler("el+shadow")
        attached = attach(profiler, "monitoring")
        mon = sys.monitoring
        main_tool = attached._session.backend.tools[1]  # type: ignore[union-attr]

        def on_error(exc: BaseException) -> None:
            attached._session.fail(exc, "function_enter")

        mon.register_callback(
            main_tool, mon.events.PY_START, native.Trampoline(profiler.function_enter, on_error)
        )
        mon.register_callback(
            main_tool, mon.events.PY_RETURN, native.Trampoline(profiler.function_leave, on_error)
        )
        stop = detach
    elif config.startswith("diag:native-profhook"):
        # 3.11: the C profile function prototype in bench/native/profhook.c, calling the
        # same no-op profiler's bound methods (all accepted, or all rejected).
        if getattr(sys, "monitoring", None) is not None:
            return None
        hook = _build_native("profhook")
        if hook is None:
            return None
        profiler = _profkit_profiler("el+shadow")
        accept_all = not config.endswith("filtered")
        hook.install(
            lambda code: accept_all, profiler.function_enter, profiler.function_leave, print
        )
        stop = hook.uninstall
    elif config == "cProfile":
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
        stop = prof.disable
    elif config == "yappi-wall":
        try:
            import yappi
        except ImportError:
            return None
        yappi.set_clock_type("wall")
        yappi.start()
        stop = yappi.stop
    elif config == "pyinstrument":
        try:
            import pyinstrument
        except ImportError:
            return None
        prof2 = pyinstrument.Profiler(interval=0.001)
        prof2.start()
        stop = prof2.stop
    best = float("inf")
    clock = time.process_time  # CPU time: far less noisy than wall on a busy machine
    for _ in range(repeat):
        t0 = clock()
        body()
        best = min(best, clock() - t0)
    if stop is not None:
        stop()
    return best


def _build_native(name: str):  # type: ignore[no-untyped-def]
    """Compile bench/native/<name>.c for this interpreter (cached), or None without a C
    compiler. Prototypes of the proposed native pieces; profkit itself ships none."""
    import importlib.util
    import shutil
    import sysconfig
    import tempfile

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    out_dir = Path(tempfile.gettempdir()) / "profkit-bench-native"
    out_dir.mkdir(exist_ok=True)
    target = out_dir / f"_{name}{suffix}"
    source = ROOT / "bench" / "native" / f"{name}.c"
    if not target.exists() or target.stat().st_mtime < source.stat().st_mtime:
        include = sysconfig.get_paths()["include"]
        built = subprocess.run(
            [
                cc,
                "-shared",
                "-fPIC",
                "-O2",
                "-Werror=implicit-function-declaration",
                f"-I{include}",
                str(source),
                "-o",
                str(target),
            ],
            capture_output=True,
        )
        if built.returncode != 0:
            return None
    spec = importlib.util.spec_from_file_location(f"_{name}", target)
    if spec is None or spec.loader is None:
        return None
    try:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except ImportError:
        return None
    return module


def measure(python: str, config: str, workload: str, repeat: int) -> float | None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    env.pop("PROFKIT_ENABLE_PROFILING", None)
    out = subprocess.run(
        [python, __file__, "--child", config, workload, str(repeat)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    value: float | None = json.loads(out.strip().splitlines()[-1])
    return value


def report(python: str, workloads: list[str], repeat: int) -> None:
    version = subprocess.run(
        [python, "-c", "import sys; print(sys.version.split()[0])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    print(f"\n== Python {version} ({python}); best of {repeat}")
    print(f"{'configuration':30s}" + "".join(f"{w:>22s}" for w in workloads))
    print(f"{'':30s}" + "".join(f"{'×bare  ovh/cP':>22s}" for _ in workloads))
    times = {(c, w): measure(python, c, w, repeat) for w in workloads for c in CONFIGS}
    for config in CONFIGS:
        cells = []
        for w in workloads:
            t, bare, cp = times[(config, w)], times[("bare", w)], times[("cProfile", w)]
            if t is None or bare is None or cp is None:
                cells.append(f"{'n/a':>22s}")
                continue
            ovh = (t - bare) / (cp - bare) if cp > bare else float("nan")
            cells.append(f"{t / bare:>12.2f}× {ovh:>7.2f}")
        print(f"{config:30s}" + "".join(cells))
    _targets(version, workloads, times)


def _targets(
    version: str, workloads: list[str], times: dict[tuple[str, str], float | None]
) -> None:
    """The issue's targets, checked on this run (worst workload counts)."""
    new = tuple(int(p) for p in version.split(".")[:2]) >= (3, 12)

    def worst(config: str, vs_cprofile: bool) -> float | None:
        values = []
        for w in workloads:
            t, bare, cp = times[(config, w)], times[("bare", w)], times[("cProfile", w)]
            if t is None or bare is None or cp is None or cp <= bare:
                return None
            values.append((t - bare) / (cp - bare) if vs_cprofile else t / bare)
        return max(values) if values else None

    rows = [
        (
            "enter/leave + shadow stack, overhead vs cProfile's",
            "profkit:el+shadow",
            True,
            0.8 if new else 1.0,
        ),
        ("namespace-filtered to cold code, × bare", "profkit:filtered", False, 1.05),
        ("sampling at 1 kHz, × bare", "profkit:sample-1kHz", False, 1.03),
    ]
    for label, config, vs_cp, limit in rows:
        value = worst(config, vs_cp)
        if value is None:
            continue
        verdict = "met" if value <= limit else "NOT met"
        print(f"  target {label} ≤ {limit}: worst {value:.2f} — {verdict}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=3, metavar=("CONFIG", "WORKLOAD", "REPEAT"))
    parser.add_argument("--python", action="append", default=[])
    parser.add_argument("--all", action="store_true", help="3.11 + .venvs/py3.12 + .venvs/py3.13")
    parser.add_argument("--workload", action="append", choices=sorted(WORKLOADS))
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    if args.child:
        config, workload, repeat = args.child
        print(json.dumps(run_one(config, workload, int(repeat))))
        return 0
    pythons = args.python or [sys.executable]
    if args.all:
        pythons = [sys.executable] + [
            str(p)
            for p in (ROOT / ".venvs/py3.12/bin/python", ROOT / ".venvs/py3.13/bin/python")
            if p.exists()
        ]
    for python in pythons:
        report(python, args.workload or list(WORKLOADS), args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
