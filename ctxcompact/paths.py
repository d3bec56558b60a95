"""The files one command touches must not destroy each other (README "Exit codes", "The state file").

The input, the output and the state are three different files: writing the output over the input, or the
state over either, would replace what the user asked us to read. Paths are compared after resolving links
and, where both exist, by device and inode (``./in.jsonl``, a symlink or a hard link to the input are the
input). No folder is created implicitly: a missing one is a usage error, before any work. A state or its
lock that is a symbolic link is refused: the state is rewritten by renaming over it, and writing through a
link someone else planted replaces a file the user never named.

``--state-dir`` (docs/concepts/state.md#the-state-folder) puts the states in one folder instead of beside
their inputs: :func:`state_path_in` names each after its input, with a digest of the input's real path so
that two inputs of the same name in different folders never share a state.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from .atomic import is_special_file
from .errors import StateError, UsageError

__all__ = ["SIDE_FILE_LIMIT", "check_paths", "check_state_path", "read_side_file", "state_path_in"]

SIDE_FILE_LIMIT = 4 * 1024 * 1024
"""The most ctxcompact reads of a file that is not the transcript (``--todos``, ``--probes``, the config):
4 MiB (README "Exit codes": a larger one is a usage error, exit 2)."""


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist yet: compare where they would be
        return os.path.realpath(a) == os.path.realpath(b)


def _folder_exists(path: Path, what: str) -> None:
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise UsageError(f"the folder of the {what} {path} does not exist; create it first "
                         "(ctxcompact creates no folders)")


def check_paths(*, input: Path | None, output: Path | None, state: Path | None) -> None:
    """UsageError (exit 2) unless the input, the output and the state are three different files and the
    folders of what is written exist."""
    # a FIFO or device (/dev/null, /dev/stdout) is written in place (atomic.write_lines): nothing to compare
    if output is not None and not is_special_file(output):
        if input is not None and _same(input, output):
            raise UsageError(f"the output {output} is the input {input}: ctxcompact never overwrites its "
                             "input; write to another file")
        _folder_exists(output, "output")
    if state is not None:
        if input is not None and _same(input, state):
            raise UsageError(f"the state {state} is the input {input}: give --state another file")
        if output is not None and _same(output, state):
            raise UsageError(f"the state {state} is the output {output}: give --state another file")
        _folder_exists(state, "state")


def check_state_path(state: Path) -> None:
    """StateError (exit 3) when the state or its lock is a symbolic link (see the module docstring)."""
    for path in (state, Path(os.fspath(state) + ".lock")):
        if path.is_symlink():
            real = os.path.realpath(path)
            raise StateError(f"{path} is a symbolic link (to {real}); ctxcompact does not write a state "
                             "through a link. If that file is really the state, name it: --state "
                             f"{os.path.realpath(state)}")


def state_path_in(folder: Path, input_path: Path, beside: Path) -> Path:
    """The state of ``input_path`` in ``folder`` (``--state-dir``), given ``beside``, the state's default
    path beside the input (``<input><suffix>``, state/store.py owns the suffix):
    ``<folder>/<input name>.<digest><suffix>``. The digest is of the input's real path (links resolved,
    made absolute), so ``a/log.jsonl`` and ``b/log.jsonl`` get two states and a link to a file shares the
    file's. Moving the input to another folder starts a new state."""
    name = input_path.name
    suffix = beside.name[len(name):] if beside.name.startswith(name) else beside.name
    digest = hashlib.blake2b(os.fsencode(os.path.realpath(input_path)), digest_size=6).hexdigest()
    return folder / f"{name}.{digest}{suffix}"


def read_side_file(path: str | os.PathLike[str], what: str, limit: int = SIDE_FILE_LIMIT) -> bytes:
    """The bytes of a small side file (``what`` names it in messages: ``--todos x.md``). Only a regular file
    of at most ``limit`` bytes: ``/dev/zero`` would be read without end and a FIFO would block forever, so
    both are a UsageError before any read. An ``OSError`` of opening the file propagates (the caller decides
    whether a missing file matters)."""
    # O_NONBLOCK: opening a FIFO with no writer would block in open() itself; it changes nothing for a file
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"{what}: not a regular file (a device, FIFO or folder cannot be read as one)")
        if st.st_size > limit:
            raise UsageError(f"{what}: {st.st_size:,} bytes, over the {limit:,}-byte limit of such a file")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:  # the file may grow while we read: never read past the limit
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise UsageError(f"{what}: over the {limit:,}-byte limit of such a file")
        return b"".join(chunks)
    finally:
        os.close(fd)
