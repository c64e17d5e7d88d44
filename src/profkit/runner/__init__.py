"""Running a program under a profiler, as its own interpreter would run it.

``profkit run`` is this package plus a thin argument parser (:mod:`profkit.cli.run`).
The pieces, each with one job:

==========================  ================================================================
:mod:`~.choice`             the table: ``(target kind, --mode) -> engine, profiler`` (the
                            engines' contract is :mod:`profkit.engine.contract`, below this
                            package: engines import it, never the runner)
:mod:`~.session`            one run for any target: choose, prepare, refuse overwriting an
                            input, run, save, report (through a ``say`` function)
:mod:`~.inprocess`          the engine for Python targets: attach, run, detach in-process
:mod:`~.python`             "run it like ``python``": argv, ``sys.path[0]``, ``__main__``,
                            threads, the program's own exceptions caught and returned
:mod:`~.outcome`            how a program ended, and which signal to die of
:mod:`~.signals`            SIGTERM during a run (and never in a forked child)
:mod:`~.output`             file names, saving, the end-of-run tree
:mod:`~.children`           child processes: their environment, their files
:mod:`~.activation`         environment activation of profkit's own profilers (the start-up
                            hook builds them from the settings and saves at exit)
==========================  ================================================================

**Adding a kind of target or profiler** (a .NET assembly, sampling a child from outside)
is one row in :data:`profkit.runner.choice.CHOICES` and one class satisfying
:class:`profkit.engine.contract.Engine`::

    class DotnetEngine(ChildEngine):                    # the target runs as a child
        def unavailable(self, job) -> str | None: ...   # no host found? say why
        def prepare(self, job) -> tuple[str, ...]: ...  # check the assembly; files it reads
        def run(self, job) -> Finished: ...             # run to the end; outcome + profile

    ProfilerChoice("trace", ("dotnet",), "profkit.clr.engine:DotnetEngine", profiler="")

(That is how ``profkit run app.dll`` and ``run --mode sample`` sampling a child from outside,
``profkit.sampler.engine:OutOfProcessEngine``, plugged in; both run their child through
:mod:`profkit.engine.child`.) An engine whose ``in_process`` is True runs the program in
this interpreter through ``begin(job) -> Running`` and ``end(ended) -> Finished`` (and
``stop_now``, ``hook_note``): :class:`~profkit.runner.session.Run` then hands the program's
code to its caller, and ``profkit run`` executes it in its own frame, so the program sees
as few of profkit's frames under it as possible.

A target is any object with ``kind`` and ``label`` (:class:`~profkit.runner.python.Program`
for Python); the CLI decides the kind (:func:`profkit.cli.run` today knows ``script``,
``module`` and ``code``). Everything after the engine returns — saving to ``-o``, the tree,
refusing to overwrite an input, child profiles, ending with the program's status or
signal — is shared by every engine. Rows are tried in order: an engine that is
``unavailable`` (with a reason) gives way to the next row for the same kind and mode, and
the reason is noted on stderr.

profkit's profilers (:mod:`profkit.profilers`) know nothing of this package: they are
built with settings handed to them and give their profile to whoever built them.
"""

# Nothing is imported here: the start-up hook imports ``profkit.runner.activation`` in every
# environment-activated process, and must not pay for ``runpy`` and the rest.
