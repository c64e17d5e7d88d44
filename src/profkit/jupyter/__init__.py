"""profkit in IPython and Jupyter: ``%load_ext profkit``, then ``%profkit`` / ``%%profkit``.

IPython is optional: nothing here imports it until the extension is loaded (by IPython,
which is then already imported). See :mod:`profkit.jupyter.magics` and ``docs/jupyter.md``.
"""

from __future__ import annotations

from typing import Any


def load_ipython_extension(ipython: Any) -> None:
    """Register the ``%profkit`` line and ``%%profkit`` cell magic on ``ipython``."""
    from profkit.jupyter.magics import register

    register(ipython)


__all__ = ["load_ipython_extension"]
