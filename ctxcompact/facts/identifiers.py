"""Identifiers a continuing agent needs and cannot guess (docs/concepts/summary.md#identifiers): the names,
URLs, versions, ids and directories the tools showed and the conversation went on to use.

A tool's output holds thousands of names nobody asked to remember (a listing, a file's content), so a name
read there counts only when the assistant or the user also wrote it (in its text or in a tool call's
arguments): the environment variable it then patched in, the version it reported, the id of the item a
command created and the assistant referred to. URLs count wherever the tools or the assistant showed them (a
server's address, a created item's link), and so do the directories tool calls worked in (``workdir``).
A name the tools kept printing (in :data:`REPEATED` results or more: the setting every search turns up) counts
too before anyone wrote it. Ranked: names said in prose (the assistant's text, what the user typed) before
names only inside the code or arguments of its tool calls (a patch holds dozens of names), then the names
only the tools printed, the most printed first; listed oldest first, so a summary short of room drops the
oldest first.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..model import Record, Role
from .calls import all_strings, decode_args, strings
from .outcomes import output_text
from .seen import Kind, Seen, scan

# A URL, up to the characters that end one in prose or JSON; trailing punctuation is not part of it. The
# scheme is bounded (linear time on a long run of word characters).
_URL = re.compile(r"\b[a-zA-Z][\w+.-]{0,15}://[^\s<>\"'`)\]}]+")
# Name-like tokens: a scoped package, an UPPER_SNAKE name, a version, a camelCase or PascalCase name of two
# humps or more, an id of letters and digits joined by a dash (``spotter-0p7.2``), a hexadecimal id of 7 to 40
# characters with letters and digits (a commit, a task). Words of prose match none of them.
# The look-ahead after the look-behind changes no match: every name holds a capital, a digit or an ``@``, and
# only ``a-z`` and ``-`` come before the first of them (the alternatives below, one by one), so a run of word
# characters that fails it (most words of a tool's output) is not tried against the seven alternatives (the
# possessive ``*+`` reads the run once; half the time of the scan over a coding agent's outputs).
_NAME = re.compile(
    r"(?<![\w@/.$-])(?=[a-z-]*+[A-Z\d@])("
    r"@[a-z0-9][\w.-]*/[\w.-]*\w"
    r"|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+"
    r"|v?\d+\.\d+\.\d+(?:-[0-9A-Za-z.]+)?"
    r"|[a-z][a-z0-9]*(?:[A-Z][a-z0-9]+)+"
    r"|[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+"
    r"|[a-z][a-z0-9]*-(?=[a-z0-9]*\d)[a-z0-9]+(?:\.\d+)*"
    r"|(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}"
    r")(?![\w@$-])"
)
# An absolute or home path of two segments or more (a file or folder the tools named: an output file, a
# working directory).
# The first character is matched before the look-behind checks the one before it (the same matches): a pattern
# that opens with a character class lets the regex engine skip to the next ``~`` or ``/`` in C, 5x faster.
_PATH = re.compile(r"[~/](?<![\w.~/-][~/])[\w.@+-]*(?:/[\w.@+-]+)+")
# Every _NAME match holds (or its look-ahead reads) a capital, a digit or an ``@``: a text with none of them
# has no name (prose in lower case, most words of a tool's output), which C-fast scans say (_may_name).
_DIGITS_AT = "0123456789@"
# Keys of tool-call arguments that name the directory a call worked in.
_DIR_KEYS = ("workdir", "cwd", "working_directory", "directory", "dir")
# Searched in at most this much of each tool output (a listing or a dump holds thousands of names).
OUTPUT_CHARS = 20_000
MAX_NAME_CHARS = 120
MAX_URL_CHARS = 300
#: the most identifiers one run's records give: names said in prose first, then names used only in calls
MAX_PER_RUN = 60
MAX_CALL_ONLY = 20
#: a name in this many tool results or more is an identifier even before the conversation used it
REPEATED = 3
MAX_REPEATED = 10


def urls_in(text: str) -> list[str]:
    """The URLs in ``text``, in order, each once, without trailing punctuation."""
    out: list[str] = []
    if "://" not in text:  # every URL has it: most texts have none, and this scan is C-fast
        return out
    for m in _URL.finditer(text):
        url = m.group(0).rstrip(".,;:!?")
        if url not in out:
            out.append(url)
    return out


def names_in(text: str) -> set[str]:
    """The name-like tokens (see ``_NAME``) and absolute paths of ``text``, URLs left out (their parts are no
    names)."""
    # each scan runs only on a text that may match it (the checks are C-fast, the scans are not)
    if "://" in text:
        text = _URL.sub(" ", text)
    found = ({m.group(1) for m in _NAME.finditer(text) if 3 <= len(m.group(1)) <= MAX_NAME_CHARS}
             if _may_name(text) else set())
    if "/" in text:
        found.update(p.rstrip(".") for p in _PATH.findall(text)
                     if p.count("/") >= 2 and len(p) <= MAX_URL_CHARS)
    return found


def _may_name(text: str) -> bool:
    """Whether ``text`` holds a capital (it changes when lowercased), an ``@`` or a digit: ``[A-Z0-9@]``
    found, or a non-ASCII capital (the hint may say yes where no name is, never no where one is). A regex
    scan of that class reads a character at a time, 7x slower on a tool's output."""
    return text.lower() != text or any(map(text.__contains__, _DIGITS_AT))


def identifiers(records: Sequence[Record]) -> list[tuple[int, str]]:
    """The identifiers of ``records`` as (input position of their last use, text), the most recently used
    last, at most :data:`MAX_PER_RUN` (the module docstring says which)."""
    return scan(IdentifierScan(), records)


class IdentifierScan:
    """:func:`identifiers` read record by record: what each name was seen doing is kept, not the records."""

    def __init__(self) -> None:
        self.shown: set[str] = set()  # names the tools printed
        self.printed: dict[str, int] = {}  # name -> how many tool results printed it
        self.printed_at: dict[str, int] = {}  # name -> position of the last result that printed it
        self.used: dict[str, int] = {}  # name -> position of its last use by the assistant or the user
        self.said: set[str] = set()  # names used in prose (the assistant's text, what the user typed)
        self.urls: dict[str, int] = {}

    @staticmethod
    def reads(kind: Kind) -> bool:
        return kind.input and (kind.role is Role.USER or kind.role is Role.ASSISTANT or kind.results)

    def feed(self, rec: Seen) -> None:
        if rec.msg is None or not rec.input:
            return
        printed, printed_at, urls, used = self.printed, self.printed_at, self.urls, self.used
        at = rec.rec.index
        for res in rec.results:
            if res.synthetic:
                continue
            out = output_text(res)[:OUTPUT_CHARS]
            names = names_in(out)
            self.shown |= names
            for name in names:
                printed[name] = printed.get(name, 0) + 1
                printed_at[name] = at
            for url in urls_in(out):
                urls[url] = at
        written: list[str] = []
        prose = ""
        if rec.role is Role.ASSISTANT:
            prose = rec.text
            for call in rec.calls:
                args = decode_args(call)
                written += all_strings(args)
                if isinstance(args, dict):
                    for key in _DIR_KEYS:
                        value = args.get(key)
                        if value is None:  # (most calls name no directory)
                            continue
                        for d in strings(value):
                            if d.startswith(("/", "~")) and len(d) <= MAX_URL_CHARS and "\n" not in d:
                                urls[d.rstrip("/")] = at
            for url in urls_in(prose):
                urls[url] = at
        elif rec.role is Role.USER:
            prose = rec.typed or ""
        if prose:  # (its names found once: said and used)
            names = names_in(prose)
            self.said |= names
            for name in names:
                used[name] = at
        for text in written:
            for name in names_in(text):
                used[name] = at

    def result(self) -> list[tuple[int, str]]:
        shown, said, used, printed = self.shown, self.said, self.used, self.printed
        found = {u: at for u, at in self.urls.items() if len(u) <= MAX_URL_CHARS}
        found.update((n, at) for n, at in used.items() if n in shown and n in said)
        # by position, then text: a set's order varies from run to run (hash seeds), the summary must not
        first = sorted(found.items(), key=lambda kv: (kv[1], kv[0]))[-MAX_PER_RUN:]
        room = max(MAX_CALL_ONLY, MAX_PER_RUN - len(first))
        calls_only = sorted(((n, at) for n, at in used.items()
                             if n in shown and n not in said and n not in found),
                            key=lambda kv: (kv[1], kv[0]))[-room:]
        taken = {n for n, _ in first} | {n for n, _ in calls_only}
        often = sorted((n for n, k in printed.items() if k >= REPEATED and n not in taken and n not in used),
                       key=lambda n: (-printed[n], n))[:MAX_REPEATED]
        ranked = sorted(first + calls_only + [(n, self.printed_at[n]) for n in often],
                        key=lambda kv: (kv[1], kv[0]))
        return [(at, text) for text, at in ranked]
