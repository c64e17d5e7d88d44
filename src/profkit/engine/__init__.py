"""The contract between ``profkit run`` and the engines that run a target under a profiler.

It sits *below* :mod:`profkit.runner`: an engine (the in-process one in ``runner/``, the
out-of-process sampler in ``sampler/``, the .NET ones in ``clr/`` and after) imports this
package and never ``runner``, which loads engines by name from its table
(:data:`profkit.runner.choice.CHOICES`). So there is no package cycle, and
``tests/test_architecture.py`` sees every import an engine makes.

=========================  ====================================================================
:mod:`~.contract`          :class:`Target`, :class:`Job`, :class:`Finished`, :class:`Outcome`,
                           the :class:`Engine` protocol (every hook declared, none probed) and
                           :class:`ChildEngine`, the base of engines whose target is a child
:mod:`~.child`             one way to run a target as a child process: start it, pass
                           SIGTERM on and let Ctrl-C reach it from the terminal, wait, and
                           map its status to an :class:`Outcome`
=========================  ====================================================================

Nothing is imported here (``from profkit.engine.contract import ...``): ``profkit run``
imports the contract at start-up, the child helper (``subprocess``) only when it is used.
"""
