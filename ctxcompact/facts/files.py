"""Files a conversation's tools touched: path-like tool arguments, patch headers, the files a shell command
names (docs/concepts/summary.md#files)."""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from ..model import Record, ToolCall
from .calls import command_of, decode_args, per_call, quoted_spans, strings, writes_files
from .seen import Kind, Seen, scan

PATH_KEYS = ("path", "file_path", "filepath", "filename", "file", "paths", "files", "notebook_path",
              "target_file", "old_path", "new_path", "source_path", "destination", "target_path")


# The scheme is bounded (real ones are short): an unbounded one rescans a long `a.a.a…` run from every dot,
# quadratic time.
_URL = re.compile(r"\b[a-zA-Z][\w+.-]{0,63}://\S+")
_PATH_TOKEN = re.compile(r"(?<![\w@$])(?:~|\.{1,2})?/?(?:[\w@+-][\w.@+-]*/)*[\w@+-][\w.@+-]*(?:/)?")
_EXTENSIONS = {
    "py", "pyi", "js", "mjs", "cjs", "ts", "tsx", "jsx", "json", "jsonl", "md", "rst", "txt", "toml", "yaml",
    "yml", "cfg", "ini", "conf", "rs", "go", "java", "kt", "c", "h", "cc", "cpp", "hpp", "cs", "rb", "php",
    "sh", "bash", "zsh", "sql", "html", "htm", "css", "scss", "vue", "svelte", "lock", "env", "csv", "tsv",
    "xml", "ipynb", "swift", "proto", "gradle", "mk", "tf", "lua", "pl", "r", "scala", "dart", "ex", "exs",
    "erl", "hs", "ml", "zig", "nim", "log", "patch", "diff", "png", "jpg", "svg", "pdf", "db", "sqlite",
}
# Bare names that are files even without an extension ("README" or "LICENSE" are too often plain words).
_FILENAMES = {"Makefile", "Dockerfile", "Procfile", "Gemfile", "Rakefile", "Justfile", "Containerfile"}


# A quoted name with spaces ('LM Studio configuration.md'): one file, never split at its spaces.
_QUOTED = re.compile(r"""(?<![\w\\])(['"])([\w@+~./-][\w .@+~/-]{0,238}\.[A-Za-z0-9]{1,8})\1""")
# First segments of absolute paths without an extension that are files on a disk, not URL routes
# (/v1/chat/completions, /api/users): an extensionless absolute path needs one of these.
_ROOTS = {"home", "Users", "usr", "etc", "tmp", "var", "opt", "bin", "sbin", "lib", "lib64", "mnt", "srv",
          "root", "private", "Volumes", "workspace", "workspaces", "work", "nix", "snap", "media", "Library",
          "Applications", "System", "data", "app", "code", "src", "repo", "repos", "project", "projects"}
# Not files of the work: devices and kernel views (/dev/null, /proc/…), code such as console.log(…).
_NOT_FILES = re.compile(r"^/(?:dev|proc|sys)(?:/|$)")
_CODE_OBJECTS = {"console", "process", "window", "document", "module", "exports", "JSON", "Math", "Object",
                 "self", "this", "res", "req", "response", "request"}


def path_tokens(text: str) -> list[str]:
    """Path-like tokens in free text (commands, user messages): a file name with a known extension, or a
    path starting with ``/``, ``~/``, ``./``, ``../`` or containing a ``/`` and ending in such a file. A
    quoted name keeps its spaces; devices (``/dev/null``), URL routes (``/v1/chat/completions``: an
    extensionless absolute path outside the usual roots) and code (``console.log``, a name followed by
    ``(``) are not files."""
    text = _URL.sub(" ", text)
    out: list[str] = []
    seen: set[str] = set()
    for m in _QUOTED.finditer(text):
        name = m.group(2).strip()
        ext = name.rsplit(".", 1)[-1].lower()
        if " " in name and ext in _EXTENSIONS and name not in seen:
            seen.add(name)
            out.append(name)
    if out:
        text = _QUOTED.sub(lambda m: " " if m.group(2).strip() in seen else m.group(0), text)
    for m in _PATH_TOKEN.finditer(text):
        tok = m.group(0).rstrip(".,:;)")
        if len(tok) < 3 or len(tok) > 240 or _NOT_FILES.match(tok):
            continue
        base = tok.rstrip("/").rsplit("/", 1)[-1]
        ext = base.rsplit(".", 1)[-1].lower() if "." in base.strip(".") else ""
        rooted = tok.startswith(("/", "~/", "./", "../")) and tok.count("/") >= 2 and base != ""
        if rooted and not ext and tok.startswith("/") and tok.split("/")[1] not in _ROOTS:
            continue  # a URL route, not a file
        if not re.search(r"[A-Za-z]", base):
            continue
        if "/" not in tok and (text[m.end():m.end() + 1] == "(" or base.split(".")[0] in _CODE_OBJECTS):
            continue  # a call or a member of a well-known object: code
        if (ext in _EXTENSIONS or base in _FILENAMES or rooted) and tok not in seen:
            seen.add(tok)
            out.append(tok)
    return out


# A here-document's body is content (a patch, a script, a file written), not the command's arguments: from
# its opener ``<< word`` (``<<-``, quoted words) to the first later line that is the word alone. One regex
# (opener, then ``.*?`` up to the terminator) rescans the rest of the command from every opener that is never
# closed: quadratic. The openers are found once, the terminator lines are indexed once, each opener looks its
# terminator up.
_HEREDOC_OPENER = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")
_HEREDOC_WORD_LINE = re.compile(r"^[^\S\n]*(\w+)[^\S\n]*$", re.M)


def strip_heredocs(cmd: str) -> str:
    """``cmd`` with each here-document (its opener's line through its terminator line) replaced by a space;
    an opener that is never closed is left as it is."""
    if "<<" not in cmd:
        return cmd
    # word → where the lines that are that word alone start, and where they end
    starts: dict[str, list[int]] = {}
    ends: dict[str, list[int]] = {}
    for line in _HEREDOC_WORD_LINE.finditer(cmd):
        starts.setdefault(line.group(1), []).append(line.start())
        ends.setdefault(line.group(1), []).append(line.end())
    out: list[str] = []
    done = pos = 0
    while True:
        m = _HEREDOC_OPENER.search(cmd, pos)
        if m is None:
            break
        eol = cmd.find("\n", m.end())
        at = starts.get(m.group(2), [])
        k = bisect.bisect_left(at, eol + 1) if eol >= 0 else len(at)
        if k == len(at):  # never closed: not a here-document here
            pos = m.start() + 1
            continue
        out.append(cmd[done:m.start()])
        out.append(" ")
        done = pos = ends[m.group(2)][k]
    out.append(cmd[done:])
    return "".join(out)


def _is_text(quoted: str) -> bool:
    """A quoted argument that is text (a commit message, ``python -c`` code, an echo's words), not a name:
    it has spaces, and is not one file name with spaces (``'LM Studio notes.md'``: only its last word has
    a dot or a slash)."""
    inner = quoted[1:-1]
    words = inner.split()
    if len(words) <= 1 and inner.strip() == inner:
        return False
    return not (_QUOTED.fullmatch(quoted) and not any("." in w or "/" in w for w in words[:-1]))


def _without_quoted_text(cmd: str) -> str:
    """``cmd`` with its quoted text arguments blanked (:func:`_is_text`): the names inside them are not
    files the command touches."""
    parts: list[str] = []
    pos = 0
    for start, end in quoted_spans(cmd):
        if _is_text(cmd[start:end]):
            parts += [cmd[pos:start], " "]
            pos = end
    parts.append(cmd[pos:])
    return "".join(parts)


def is_file_name(path: str) -> bool:
    """A path that names a file, not a folder: a known extension or file name, no trailing ``/``."""
    if path.endswith("/"):
        return False
    base = path.rsplit("/", 1)[-1]
    ext = base.rsplit(".", 1)[-1].lower() if "." in base.strip(".") else ""
    return ext in _EXTENSIONS or base in _FILENAMES


def command_paths(cmd: str) -> list[str]:
    """Files a shell command names (docs/concepts/summary.md#files): the files a patch in it adds, updates
    or deletes, and the path-like tokens of the command itself that name a file (a known extension or
    file name), leaving out a here-document's body, quoted text (a commit message, inline code, an echo's
    words) and folders (``ls src/``, ``grep -r x /home/me/app``)."""
    out = list(dict.fromkeys(_PATCH_FILE.findall(cmd)))
    seen = set(out)
    for p in path_tokens(_without_quoted_text(strip_heredocs(cmd))):
        if p not in seen and is_file_name(p):
            seen.add(p)
            out.append(p)
    return out


_PATCH_FILE = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (.+?)\s*$", re.M)


_SEARCH_WORDS = ("grep", "glob", "search", "find", "list")


@lru_cache(maxsize=512)
def _searches(name: str) -> bool:
    """A tool that searches or lists folders (Grep, Glob, LS, list_dir, find_files…), not one that reads a
    file."""
    n = name.lower()
    return (n == "ls" or any(w in n for w in _SEARCH_WORDS)) and "read" not in n and "view" not in n


def paths_of_call(call: ToolCall) -> list[str]:
    """Files a tool call touches: its path-like arguments, files named in a patch, and path-like tokens of
    its command (:func:`command_paths`). The folder a search or listing tool (Grep, Glob, LS…) looked in is
    no file: its path argument counts only when it names a file (:func:`is_file_name`)."""
    return list(per_call("paths", call, _paths_of_call))


def _paths_of_call(call: ToolCall) -> list[str]:
    found: dict[str, None] = {}  # ordered and deduplicated in O(1) per path (a list's ``in`` is O(n))
    args = decode_args(call)
    if isinstance(args, dict):
        searches = _searches(call.name)
        for key in PATH_KEYS:
            value = args.get(key)
            if value is None:
                continue
            for v in strings(value):
                v = v.strip()
                if v.strip("./") and len(v) <= 400 and "\n" not in v \
                        and not (searches and not is_file_name(v)):
                    found.setdefault(v)
        for key in ("patch", "input", "diff"):
            value = args.get(key)
            if value is None:  # (most calls carry no patch)
                continue
            for v in strings(value):
                found.update(dict.fromkeys(_PATCH_FILE.findall(v)))
    elif isinstance(args, str):
        found.update(dict.fromkeys(_PATCH_FILE.findall(args)))
    if not isinstance(args, dict) and call.arguments:
        found.update(dict.fromkeys(_PATCH_FILE.findall(call.arguments)))
    cmd = command_of(call)
    if cmd:
        found.update(dict.fromkeys(command_paths(cmd)))
    return [p for p in found if not _NOT_FILES.match(p)]


@dataclass(slots=True)
class FileTouch:
    path: str
    tools: list[str] = field(default_factory=list)  # tool names that touched it
    last_index: int = 0  # index in the records of the last touch (for ordering by recency)
    changed: bool = False  # a call that changes files touched it (calls.writes_files)
    change: str | None = None  # what the last change did (change_note), when a call changed it
    at: int = -1  # the input position (``Record.index``) of the last touch


CHANGE_CHARS = 160
_PATCH_SECTION = re.compile(r"^\*\*\* (Update|Add|Delete) File: (.+?)\s*$", re.M)


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def _patch_note(patch: str, path: str) -> str | None:
    """What a patch (``*** Update File:`` sections) did to ``path``: its first removed and added lines."""
    sections = list(_PATCH_SECTION.finditer(patch))
    for k, m in enumerate(sections):
        if m.group(2) != path:
            continue
        if m.group(1) == "Delete":
            return "deleted"
        body = patch[m.end():sections[k + 1].start() if k + 1 < len(sections) else len(patch)]
        lines = body.splitlines()
        minus = next((ln[1:].strip() for ln in lines if ln.startswith("-") and ln[1:].strip()), "")
        plus = next((ln[1:].strip() for ln in lines if ln.startswith("+") and ln[1:].strip()), "")
        if m.group(1) == "Add":
            return f'created: "{plus}"' if plus else "created"
        return f'"{minus}" → "{plus}"' if minus else (f'added "{plus}"' if plus else None)
    return None


def change_note(call: ToolCall, path: str) -> str | None:
    """What a call that changes files did to ``path``, in one line of at most :data:`CHANGE_CHARS`
    characters: the first line it wrote (a new file's heading), an edit's first old and new lines, a patch's
    first removed and added lines; None when the call says nothing readable about it."""
    args = decode_args(call)
    note: str | None = None
    if isinstance(args, dict):
        edits = args.get("edits")
        first = edits[0] if isinstance(edits, list) and edits and isinstance(edits[0], dict) else args
        old = first.get("old_string", first.get("old_str"))
        new = first.get("new_string", first.get("new_str"))
        content = args.get("content", args.get("file_text"))
        if isinstance(old, str) and isinstance(new, str):
            note = f'"{_first_line(old)}" → "{_first_line(new)}"'
        elif isinstance(content, str):
            note = f'wrote "{_first_line(content)}"'
        else:
            for key in ("patch", "input", "diff"):
                for v in strings(args.get(key)):
                    note = note or _patch_note(v, path)
    elif isinstance(args, str):
        note = _patch_note(args, path)
    if note is None and call.arguments and not isinstance(args, dict):
        note = _patch_note(call.arguments, path)
    if note is None:
        cmd = command_of(call)
        note = _patch_note(cmd, path) if cmd else None
    if not note:
        return None
    flat = " ".join(note.split())
    return flat if len(flat) <= CHANGE_CHARS else flat[:CHANGE_CHARS - 1].rstrip() + "…"


def files_touched(records: Sequence[Record]) -> list[FileTouch]:
    """Files tool calls touched (:func:`paths_of_call`), in order of first appearance. Names in what the
    user or the assistant wrote are not files anyone touched (``Next.js`` in a sentence)."""
    return scan(FileScan(), records)


class FileScan:
    """:func:`files_touched` read record by record."""

    def __init__(self) -> None:
        self.found: dict[str, FileTouch] = {}

    @staticmethod
    def reads(kind: Kind) -> bool:
        return kind.calls and kind.input

    def feed(self, rec: Seen) -> None:
        if not rec.calls or not rec.input:
            return
        found, at, i = self.found, rec.rec.index, rec.n
        for call in rec.calls:
            changes = None
            for p in paths_of_call(call):
                ft = found.setdefault(p, FileTouch(p))
                if call.name not in ft.tools:
                    ft.tools.append(call.name)
                ft.last_index, ft.at = i, at
                if changes is None:
                    changes = writes_files(call)
                ft.changed = ft.changed or changes
                if changes:
                    ft.change = change_note(call, p) or ft.change

    def result(self) -> list[FileTouch]:
        return list(self.found.values())
