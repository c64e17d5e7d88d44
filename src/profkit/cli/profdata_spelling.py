"""LLVM's one-dash option spelling for ``profkit profdata`` (``-output=FILE``, ``-sparse``).

Why: PGO build scripts call ``llvm-profdata merge -output=FILE ...``; LLVM's command-line
library takes ``-name`` and ``--name`` alike. argparse instead reads ``-output=FILE`` as
``-o`` with the attached value ``utput=FILE`` and writes a misnamed file with exit status 0.
So, before argparse sees them, the words after ``profdata SUBCOMMAND`` are translated:

* ``-NAME`` / ``-NAME=VALUE`` where ``--NAME`` is an option of that subcommand becomes
  ``--NAME`` / ``--NAME=VALUE`` (LLVM's meaning);
* a short option with its value attached (``-j2``, ``-o/tmp/x``) stays as argparse reads it
  when the value cannot be a misspelt option name (it does not start with a letter);
* any other one-dash word (``-outpt=x``, ``-oout.profdata``, ``-sample``) is refused with one
  line naming it, as llvm-profdata refuses unknown options: never silently misread.

Values of options (``--function -foo``, ``-o -``) and everything after ``--`` are left alone.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence

from profkit.errors import UsageError

_NUMBER = re.compile(r"-\d")


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps no public handle on its subparsers
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def translate(parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[str]:
    """``argv`` (the whole ``profkit`` command line) with LLVM's spellings made argparse's.

    ``parser`` is the top-level parser with ``profdata`` registered; a command line that is
    not ``profdata SUBCOMMAND ...`` comes back unchanged.
    """
    words = list(argv)
    try:
        at = words.index("profdata")
    except ValueError:
        return words
    profdata = _subparsers(parser).get("profdata")
    if profdata is None:
        return words
    rest = words[at + 1 :]
    sub_at = next((i for i, w in enumerate(rest) if not w.startswith("-")), None)
    if sub_at is None:
        return words
    sub = _subparsers(profdata).get(rest[sub_at])
    if sub is None:
        return words
    head = words[: at + 1 + sub_at + 1]
    return head + _translate_words(sub, rest[sub_at + 1 :])


def _translate_words(sub: argparse.ArgumentParser, words: list[str]) -> list[str]:
    known = sub._option_string_actions
    out: list[str] = []
    takes_value = False
    for i, word in enumerate(words):
        if takes_value:  # the value of the option before: never an option itself
            out.append(word)
            takes_value = False
            continue
        if word == "--":
            return out + words[i:]
        if not word.startswith("-") or word == "-" or _NUMBER.match(word):
            out.append(word)
            continue
        name, eq, _ = word.partition("=")
        if word.startswith("--"):
            out.append(word)
            action = known.get(name)
            takes_value = action is not None and action.nargs != 0 and not eq
            continue
        if len(name) == 2 and name in known:  # -o FILE, -o=FILE, -j 2: argparse's own reading
            out.append(word)
            takes_value = known[name].nargs != 0 and not eq
            continue
        long = "-" + name
        if long in known:
            out.append("-" + word)
            takes_value = known[long].nargs != 0 and not eq
            continue
        short = name[:2]
        if short in known and known[short].nargs != 0 and not name[2].isalpha():
            out.append(word)  # -j2, -o/tmp/x.profdata: a value that cannot be an option name
            continue
        raise UsageError(
            f"unknown option {word!r} for 'profdata {sub.prog.rsplit(' ', 1)[-1]}' "
            "(LLVM's spellings -NAME and --NAME are both accepted; see --help)"
        )
    return out


def add_kind_option(p: argparse.ArgumentParser) -> None:
    """``--instr``: llvm-profdata's default profile kind, the only one profkit reads; accepted
    so LLVM command lines (``merge -instr -output=F ...``) run unchanged."""
    p.add_argument(
        "--instr",
        action="store_true",
        help="instrumentation profiles (llvm-profdata's default; the only kind read)",
    )
