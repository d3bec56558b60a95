"""A Claude Code log finished one record at a time (``Format.finish_stream``), for a reader that streams: what
:func:`.claude_code_tree.finish` does over the whole file, done as the lines come wherever the end of the file
cannot change it, and checked at the end (:meth:`StreamFinish.end`) where it could.

- The last ``compact_boundary`` is found before the read by a byte scan (:meth:`StreamFinish.scan`), so the
  messages before it are made inactive (``compacted``) as they come.
- Usage is de-duplicated by ``message.id`` + ``requestId`` as the lines come (a response's lines are next to
  each other; a key seen earlier but not last is left to the held route).
- The active branch: every message line is assumed on it. The rule itself
  (:func:`.claude_code_tree.off_branch`) is run, at the end and every :data:`WINDOW` chained lines, on the
  last chained lines (their uuid, parent, message id, calls and results): it must find none off the branch,
  and the branch must leave those lines where it left them before (the older lines then stay on it). Else
  the read raises :class:`~.base.Forked`: a fork, a rewind, a parent older than the lines kept.
- A fork: the file is read again from its start after :meth:`StreamFinish.follow` has found the branch
  over every line after the last boundary (each parsed as the held route parses it): the lines off it are
  made inactive as they come, and at the end the rule is run over every chained line read, which must find
  those lines (else the held route). They are carried over a resume point that read keeps, with their
  message ids and the calls their results answer: a resumed read makes them inactive again, and a line read
  after them that could bring one back on the branch (the same message id, a call one answers) raises
  Forked again. So only the call that reads the rewind first reads the whole file, the later calls stream.
- What this leaves to the held route: a subagent's line in the main session (CLI 1.0.x: its run is found over
  the whole file), a boundary after messages the read already handed on (a read resumed before it restarts
  from the file's start: :class:`~.base.Restart`). A boundary whose ``postTokens`` still stands at the end
  gives it to the last line written with it (:meth:`StreamFinish.late_usage`, the rule of
  :func:`.claude_code_tree.post_tokens`); a read resumed past that line restarts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from ..errors import LineError
from ..model import Record, Usage
from ..reader import iter_lines_at
from .base import Finish, Forked, NeedsWhole, Restart, marked_lines
from .claude_code_tree import (
    Link,
    in_main_session_sidechain,
    link_of,
    off_branch,
    post_figure,
    post_usage,
    set_inactive,
    written_with,
)

#: chained lines kept for the branch's check; checked and halved when twice this many
WINDOW = 256
_MARK = b"compact_boundary"


def _key(message_id: str, request_id: str) -> int:
    """A stable 64-bit key of a response (a set of them is what a resume point carries)."""
    return int.from_bytes(hashlib.blake2b(f"{message_id}\0{request_id}".encode(), digest_size=8).digest(),
                          "big", signed=True)


def _is_boundary(line: bytes) -> bool:
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        return False  # (not a record: the reader leaves the file to the held route)
    return (isinstance(obj, dict) and obj.get("type") == "system" and obj.get("subtype") == "compact_boundary"
            and not in_main_session_sidechain(obj))


class StreamFinish(Finish):
    """:func:`.claude_code_tree.finish` one record at a time (the module docstring). ``kept``: what
    :meth:`kept` gave (raises TypeError, ValueError or KeyError on anything else). ``parse``: the format's
    ``parse_line``, for :meth:`follow`."""

    def __init__(self, kept: Any = None, parse: Callable[[Any, int, int, bytes], Record] | None = None
                 ) -> None:
        self.parse = parse
        #: after follow: every chained line's link as read, for the rule at the end (None: not following)
        self.links: list[Link] | None = None
        self.boundary: int | None = None  # offset of the last boundary at or after where the read starts
        self.met = True
        if kept is None:
            self.members = 0  # message lines since the last boundary
            self.chained = 0  # chained lines since the last boundary
            self.exit: str | None = None  # where the branch leaves the lines kept (None: at a root)
            self.window: dict[str, tuple[Any, ...]] = {}
            self.anchors: dict[str, tuple[Any, ...]] = {}  # the last lines left: the messages, then exit
            self.seen: set[int] = set()
            self.last_key: int | None = None
            self.post = False  # a boundary's postTokens still stands (no billed usage after it yet)
            self._set_off({}, set())
        else:
            self.members, self.chained = int(kept["members"]), int(kept["chained"])
            self.exit = None if kept["exit"] is None else str(kept["exit"])
            self.window, self.anchors = (
                {str(u): (None if p is None else str(p), m, tuple(c), None if r is None else tuple(r),
                          bool(t)) for u, p, m, c, r, t in kept[part]} for part in ("window", "anchors"))
            self.seen = {int(k) for k in kept["seen"]}
            self.last_key = None if kept["last_key"] is None else int(kept["last_key"])
            self.post = bool(kept["post"])
            self._set_off({str(u): int(o) for u, o in kept["off"]}, {int(k) for k in kept["off_keys"]})
        self.resumed = kept is not None
        # the boundary's postTokens, its timestamp, and the offset of the last line written with it (the
        # boundary's own at first): the line the figure goes on if it still stands at the end (not carried
        # over a resume point: a read resumed with it standing at the end reads again from the start)
        self.figure, self.stamp = 0, None
        self.target: int | None = None
        self.before: tuple[Any, ...] = self._scalars()
        self.added: str | None = None  # the window's entry the last record added
        self.key_added: int | None = None

    def _scalars(self) -> tuple[Any, ...]:
        return (self.members, self.chained, self.exit, self.last_key, self.post)

    def scan(self, path: Path, at: int, limit: int | None) -> None:
        """Find the last ``compact_boundary`` line from offset ``at`` (to ``limit``), by its bytes: the lines
        before it are history only."""
        with open(path, "rb") as stream:
            self._scan(stream, at, limit)

    def _scan(self, stream: BinaryIO, at: int, limit: int | None, size: int = 1 << 20) -> None:
        for offset, line in marked_lines(stream, at, limit, _MARK, size):
            if _is_boundary(line):
                self.boundary, self.met, self.hides_all = offset, False, True

    def follow(self, path: Path, at: int, limit: int | None, known: Any = None) -> Any:
        """The message lines off the branch (:func:`.claude_code_tree.off_branch` over every chained line
        after the last boundary, parsed by ``parse``), by uuid with their offsets, and the keys of what could
        bring them back; or ``known``. The records read must give them again (:meth:`end`)."""
        if known is None:
            known = self._found(path, at, limit)
        self._set_off({str(u): int(o) for u, o in known[0]}, {int(k) for k in known[1]})
        self.links = []
        return known

    def _found(self, path: Path, at: int, limit: int | None) -> Any:
        """:meth:`follow` before the read: every line after the last boundary parsed, the rule run on them."""
        assert self.parse is not None
        links: list[Link] = []
        offsets: dict[str, int] = {}
        with open(path, "rb") as stream:
            stream.seek(at)
            for _n, offset, raw in iter_lines_at(stream, 1 if at == 0 else 2):
                offset += at
                if limit is not None and offset >= limit:
                    break
                if self.boundary is not None and offset <= self.boundary:
                    continue  # (before the last boundary: history only)
                try:
                    rec = self.parse(orjson.loads(raw), 0, 0, raw)
                except (orjson.JSONDecodeError, LineError, RecursionError):
                    continue  # (the read leaves the file to the held route)
                if "uuid" in rec.meta and rec.meta.get("inactive") is None:
                    links.append(link_of(rec))
                    offsets[rec.meta["uuid"]] = offset
        off = off_branch(links)
        keys = {k for line in links if line[0] in off for k in _keys(line, False)}
        return [[[u, offsets[u]] for u in sorted(off)], sorted(keys)]

    def __call__(self, rec: Record) -> None:
        if len(self.window) >= 2 * WINDOW:
            self._halve()  # (before the record: what kept() gives a read resuming at it)
        self.before, self.added, self.key_added = self._scalars(), None, None
        meta = rec.meta
        if isinstance(rec.data, dict) and in_main_session_sidechain(rec.data):
            raise NeedsWhole("a subagent's line in the main session (its run is found over the whole file)")
        if meta.get("compact_boundary"):
            if rec.offset == self.boundary:
                self.met = True
            elif self.boundary is not None and rec.offset < self.boundary:
                return  # an earlier boundary: history, as the lines before the last
            if self.members:
                why = "a compact_boundary after messages already read"
                raise (Restart(why) if self.resumed else NeedsWhole(why))
            self.chained, self.exit, self.window, self.anchors = 0, None, {}, {}
            post = post_figure(rec)
            self.seen, self.last_key, self.post = set(), None, post is not None
            self.figure, self.stamp, self.target = post or 0, rec.meta.get("timestamp"), rec.offset
            return  # (no line off the branch before it: each is a message, counted in ``members``)
        if self.boundary is not None and not self.met:  # before the last boundary: history only
            if rec.message is not None:
                set_inactive(rec, "compacted")
            return
        if "uuid" in meta and meta.get("inactive") is None:
            if self.links is not None:
                self.links.append(link_of(rec))
            at = self.off.get(meta["uuid"])
            if at is not None:  # off the branch (follow found it so, or the read that kept it)
                if at != rec.offset:
                    raise NeedsWhole("a uuid written twice")
                self.members += 1
                set_inactive(rec, "off_branch")
        if rec.usage is not None:
            key = (meta.get("message_id", ""), meta.get("request_id", ""))
            if key != ("", ""):
                k = _key(*key)
                if k == self.last_key:
                    rec.usage = None
                elif k in self.seen:
                    raise NeedsWhole("a response's usage seen before another's")
                else:
                    self.seen.add(k)
                    self.last_key = self.key_added = k
            if rec.usage is not None and rec.usage.prompt_tokens > 0:
                self.post, self.target = False, None  # billed usage after the boundary: postTokens not used
        if self.post and written_with(self.stamp, rec):
            self.target = rec.offset
        if "uuid" not in meta or meta.get("inactive") is not None:
            return
        link = link_of(rec)
        uuid, *entry = link
        if uuid in self.window:
            raise NeedsWhole("a uuid written twice")
        if self.links is None and self.off_keys and not self.off_keys.isdisjoint(_keys(link, True)):
            raise Forked("a line that may bring a line off the branch back on it")
        self.window[uuid] = tuple(entry)
        self.added = uuid
        self.chained += 1
        self.members += rec.message is not None

    def _branch(self) -> tuple[list[str], str | None]:
        """:func:`.claude_code_tree.off_branch` on the window's lines; raises NeedsWhole where it finds one
        off the branch or where the branch leaves the lines elsewhere than the older lines' branch. Returns
        the branch's lines from the last, as it walks them, and the parent it leaves them at.

        The messages the window left last stand before it, chained to where the branch left it: they are on
        the branch (the check before they were left says so), so a result in the window that answers a call
        among them, or a response begun among them, is on it too, as over the whole file."""
        window = self.window
        lines: list[Link] = []
        prev = None
        for uuid, entry in self.anchors.items():
            lines.append((uuid, prev, *entry[1:]))
            prev = uuid
        lines.extend((uuid, *entry) for uuid, entry in window.items())
        if off_branch(lines):
            raise Forked("a line off the active branch (a fork or a rewind)")
        walk: dict[str, None] = {}  # (in order: a dict, not a list, to test membership)
        cur = next(reversed(window)) if window else None
        while cur in window and cur not in walk:
            walk[cur] = None
            cur = window[cur][0]
        if cur != self.exit and (self.exit is not None or self.chained > len(window)):
            raise Forked("the active branch leaves the lines kept elsewhere (a fork or a rewind)")
        return list(walk), cur

    def _halve(self) -> None:
        """Check the window, then keep its newer half: the older lines are on the branch, which must leave the
        newer half where it leaves it now."""
        walk, left = self._branch()
        items = list(self.window.items())
        half = len(items) // 2
        self.window = dict(items[half:])
        older = next((u for u in walk if u not in self.window), None)  # its newest line in the older half
        if older is None and any(v[3] is not None for _u, v in items[:half]):
            raise Forked("messages kept on the branch only by its widening")
        self.exit = older if older is not None else left
        self.anchors = {u: v for u, v in items[:half] if v[3] is not None and u != older}
        if older is not None:
            self.anchors[older] = dict(items[:half])[older]

    def end(self) -> None:
        if not self.met:
            raise NeedsWhole("the last compact_boundary was not read")
        if self.post and self.target is None:  # (its boundary before the resume point)
            raise Restart("a compact_boundary's postTokens measures a line read before the resume point")
        self._branch()
        if self.links is not None and off_branch(self.links) != set(self.off):
            raise NeedsWhole("the active branch is not the one found before the read")

    def _set_off(self, off: dict[str, int], keys: set[int]) -> None:
        self.off = off  # the message lines off the branch, by uuid: their offsets
        self.off_keys = keys  # keys of their message ids, and of the calls their results answer
        self.off_kept = [[[u, o] for u, o in off.items()], sorted(keys)]  # (kept at every settled part)

    def followed(self) -> Any:
        return None if self.links is None and not self.off else self.off_kept

    def late_usage(self) -> Usage | None:
        return post_usage(self.figure) if self.post else None

    def kept(self) -> Any:
        members, chained, exit_, last_key, post = self.before
        window = [(u, *v) for u, v in self.window.items() if u != self.added]
        return {"members": members, "chained": chained, "exit": exit_, "window": window,
                "anchors": [(u, *v) for u, v in self.anchors.items()],
                "seen": [k for k in self.seen if k != self.key_added],
                "last_key": last_key, "post": post,
                "off": self.off_kept[0], "off_keys": self.off_kept[1]}


def _keys(line: Link, later: bool) -> set[int]:
    """What could bring a line off the branch back on it (:func:`.claude_code_tree.off_branch`'s widening):
    its message id and, of a line of tool results only, the calls they answer; of a line read later
    (``later``), its message id and its calls."""
    _uuid, _parent, mid, made, answers, only = line
    ids = made if later else answers if only and answers is not None else ()
    return {_key("m", c) for c in ([mid] if mid is not None else [])} | {_key("c", c) for c in ids}

