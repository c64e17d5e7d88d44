"""The ``%profkit`` / ``%%profkit`` magics, run in IPython's own shell (no notebook server):
the cell runs as it would without the magic (value and exception unchanged) and its
functions are in the inline HTML view, in every in-process mode."""

from __future__ import annotations

import html
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("IPython")

from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from profkit.calltree import file
from profkit.jupyter.magics import split_line


@pytest.fixture(scope="module")
def shell() -> Iterator[InteractiveShell]:
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "profkit")
    yield ip


def run(shell: InteractiveShell, source: str) -> tuple[Any, str]:
    """Run a cell; (its result, the HTML it displayed, unescaped from the iframe)."""
    with capture_output() as captured:
        result = shell.run_cell(source, store_history=False)
    pages = [o.data["text/html"] for o in captured.outputs if "text/html" in o.data]
    return result, html.unescape("".join(pages))


CELL = """%%profkit {options}
def cell_leaf(n):
    return sum(i * i for i in range(n))

def cell_caller(k):
    return [cell_leaf(2000) for _ in range(k)]

len(cell_caller(30)) + 1
"""


def test_cell_value_passes_through_and_html_names_its_functions(shell: InteractiveShell) -> None:
    result, page = run(shell, CELL.format(options=""))
    assert result.error_in_exec is None and result.error_before_exec is None
    assert result.result == 31
    assert (
        page.startswith('<div class="profkit"><iframe srcdoc=')
        and "cell_leaf" in page
        and "cell_caller" in page
    )
    assert shell.user_ns["cell_leaf"](3) == 5  # defined in the notebook's namespace


def test_the_cells_exception_passes_through_unchanged(shell: InteractiveShell) -> None:
    source = "%%profkit\ndef cell_raiser():\n    raise KeyError('cell boom')\n\ncell_raiser()\n"
    result, page = run(shell, source)
    error = result.error_in_exec
    assert type(error) is KeyError and error.args == ("cell boom",)
    assert "cell_raiser" in page  # the profile of what ran is still shown


def test_line_magic_returns_the_statements_value(shell: InteractiveShell) -> None:
    shell.run_cell("def line_target(a, b):\n    return a + b\n", store_history=False)
    result, page = run(shell, '%profkit line_target("x  y", "z")')
    assert result.error_in_exec is None
    assert result.result == "x  yz"
    assert "line_target" in page


def test_sample_mode(shell: InteractiveShell) -> None:
    source = (
        "%%profkit --mode sample --interval 1ms\n"
        "import time\n"
        "def sampled_spin(seconds):\n"
        "    end = time.perf_counter() + seconds\n"
        "    n = 0\n"
        "    while time.perf_counter() < end:\n"
        "        time.sleep(0.001)  # the sampler thread gets the GIL however busy the machine\n"
        "        n += 1\n"
        "    return n > 0\n"
        "sampled_spin(0.5)\n"
    )
    result, page = run(shell, source)
    assert result.error_in_exec is None and result.result is True
    assert "sampled_spin" in page and '"mode":"sample"' in page


def test_memory_mode(shell: InteractiveShell) -> None:
    source = (
        "%%profkit -m memory --alloc-sample 1\n"
        "def allocating_cell():\n"
        "    return [bytearray(1000) for _ in range(200)]\n"
        "len(allocating_cell())\n"
    )
    result, page = run(shell, source)
    assert result.error_in_exec is None and result.result == 200
    assert "allocating_cell" in page and '"mode":"memory"' in page


def test_output_saves_the_profile(shell: InteractiveShell, tmp_path: Path) -> None:
    out = tmp_path / "cell.json"
    result, page = run(shell, CELL.format(options=f"-o {out} --no-html"))
    assert result.result == 31 and page == ""
    saved = file.load(str(out))
    assert any(f.name.endswith("cell_leaf") for f in saved.frames)


def test_bad_option_is_a_usage_error_and_the_cell_does_not_run(shell: InteractiveShell) -> None:
    shell.user_ns.pop("never_defined", None)
    result, _ = run(shell, "%%profkit --mode nosuch\nnever_defined = 1\n")
    assert type(result.error_in_exec).__name__ == "UsageError"
    assert "never_defined" not in shell.user_ns


def test_split_line_keeps_the_statement_as_written() -> None:
    assert split_line("-m sample -o out.json f('a  b')") == (
        ["-m", "sample", "-o", "out.json"],
        "f('a  b')",
    )
    assert split_line("--no-html x") == (["--no-html"], "x")
    assert split_line("") == ([], "")


def test_importing_profkit_does_not_import_ipython() -> None:
    code = "import profkit, sys; print('IPython' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
