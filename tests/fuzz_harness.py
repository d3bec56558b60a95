"""Mutate real transcripts, run every ctxcompact command on each mutant in-process, report what broke.

A *mutant* is a seed log (``samples/*.jsonl``, ``tests/data/**/*.jsonl``) with one to three mutations
applied, chosen by a ``random.Random`` seeded from ``(campaign seed, mutant number)``: the same numbers give
the same bytes on every machine. Each mutant is run through ``ctxcompact.cli.main`` (the real entry point,
with its error handling) inside click's ``CliRunner`` isolation, once per command of :data:`COMMANDS`.

A *finding* is any of: output containing ``internal error`` or a Python traceback, an exit code outside
0-5 (docs/reference/exit-codes.md#bad-input), a change to the input file, ``estimate`` exiting 0 on an input
``run`` rejects, or a command that runs past the time limit (``timeout``, not a crash: the quadratic paths of
issue 19 class 4 show up this way).

Nothing here needs the network; everything is written under a temporary directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import re
import shutil
import signal
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "data" / "fuzz"
MANIFEST = CORPUS / "MANIFEST.json"

OK_EXIT = {0, 1, 2, 3, 4, 5, 10}  # docs/reference/exit-codes.md (10: estimate --check, run would compact)
_TRACEBACK = re.compile(r'Traceback \(most recent call last\):\s*\n\s+File "')

# --------------------------------------------------------------------------------------------------
# Seeds


def seed_files() -> list[Path]:
    """Every real log the mutants start from (the fuzz corpus and the attack files are not seeds)."""
    found = sorted((REPO / "samples").glob("*.jsonl"))
    seen = {hashlib.sha256(p.read_bytes()).digest() for p in found}
    for p in sorted((REPO / "tests" / "data").rglob("*.jsonl")):
        rel = p.relative_to(REPO / "tests" / "data").parts
        digest = hashlib.sha256(p.read_bytes()).digest()
        if rel[0] not in ("fuzz", "cli") and digest not in seen:  # cli cases repeat the samples
            seen.add(digest)
            found.append(p)
    return found


@dataclass(frozen=True)
class Limits:
    """Bounds of what a mutant may hold, so a campaign stays in minutes."""

    max_lines: int | None = 40  # seeds are cut to their first N lines (None: whole file)
    huge_max: int = 200_000  # characters of an inflated string
    deep_min: int = 200
    deep_max: int = 1100  # levels of nesting (orjson reads up to 1024)


PYTEST_LIMITS = Limits()
CAMPAIGN_LIMITS = Limits(max_lines=None, huge_max=2_000_000)


def load_seeds(limits: Limits) -> list[tuple[str, bytes]]:
    out = []
    for p in seed_files():
        data = p.read_bytes()
        if limits.max_lines is not None:
            data = b"".join(data.splitlines(keepends=True)[: limits.max_lines])
        out.append((str(p.relative_to(REPO)), data))
    return out


# --------------------------------------------------------------------------------------------------
# Mutations
#
# Line-level mutations work on bytes. JSON-level ones decode a random line with the stdlib (so they also
# work on lines orjson would refuse), change one value and write the line back; raw JSON fragments that
# Python cannot build (deep nesting, lone surrogate escapes) go in through placeholder strings.

Lines = list[bytes]
_ID_KEYS = {"id", "tool_call_id", "tool_use_id", "call_id", "uuid", "parentUuid", "invocationId",
            "invocation_id", "messageId", "requestId"}
_DETECT_KEYS = {"role", "type", "author", "parts", "content", "payload", "message"}
_UNICODE = ["\u202e", "\u200f", "\u0000", "\u2028", "\u2029", "\ufeff", "\u0301", "\U0001f600", "\ud7ff",
            "\x7f", "\x1b[31m", "\u00e9\u0301", "\uffff"]
_SURROGATES = ["\\ud800", "\\udfff", "\\udc00x", "\\ud83d"]


class _Frag:
    """Raw JSON fragments keyed by placeholder strings, substituted after serialization."""

    def __init__(self) -> None:
        self.items: dict[str, str] = {}

    def add(self, raw: str) -> str:
        key = f"__FUZZ_FRAGMENT_{len(self.items)}__"
        self.items[key] = raw
        return key

    def apply(self, text: str) -> str:
        for key, raw in self.items.items():
            text = text.replace(f'"{key}"', raw)
        return text


def _decode(line: bytes) -> Any:
    try:
        return json.loads(line.decode("utf-8", "surrogatepass"))
    except (ValueError, RecursionError):
        return None


def _encode(obj: Any, frag: _Frag) -> bytes:
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    return frag.apply(text).encode("utf-8", "surrogatepass")


def _slots(obj: Any) -> list[tuple[Any, Any, tuple[Any, ...]]]:
    """Every (container, key, path) in a decoded line, iteratively (lines may be deep)."""
    out: list[tuple[Any, Any, tuple[Any, ...]]] = []
    stack: list[tuple[Any, tuple[Any, ...]]] = [(obj, ())]
    while stack and len(out) < 5000:
        node, path = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for k, v in items:
            out.append((node, k, (*path, k)))
            if isinstance(v, (dict, list)) and len(path) < 60:
                stack.append((v, (*path, k)))
    return out


def _json_lines(lines: Lines) -> list[int]:
    return [i for i, ln in enumerate(lines) if ln.strip().startswith(b"{")]


def _pick_json(rng: random.Random, lines: Lines) -> tuple[int, Any] | None:
    idx = _json_lines(lines)
    rng.shuffle(idx)
    for i in idx[:8]:
        obj = _decode(lines[i])
        if isinstance(obj, dict):
            return i, obj
    return None


def _swap_value(rng: random.Random, value: Any) -> Any:
    choices: list[Any] = [None, [], {}, 0, -1, 1.5, 10**20, True, False, "", "x", [value], {"k": value}]
    if isinstance(value, str):
        choices += [len(value), {"text": value}, [value]]
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        choices += [str(value), [value]]
    elif isinstance(value, dict):
        choices += [list(value.values()), json.dumps(value)]
    elif isinstance(value, list):
        choices += [dict(enumerate(map(str, range(len(value))))), json.dumps(value), value[:1]]
    return rng.choice(choices)


def mut_type_swap(rng: random.Random, lines: Lines, limits: Limits) -> Lines | None:
    got = _pick_json(rng, lines)
    if got is None:
        return None
    i, obj = got
    slots = _slots(obj)
    if not slots:
        return None
    node, key, _ = rng.choice(slots)
    node[key] = _swap_value(rng, node[key])
    lines[i] = _encode(obj, _Frag())
    return lines


def mut_unhashable(rng: random.Random, lines: Lines, limits: Limits) -> Lines | None:
    """An array or object where format detection reads a string: role, type, content[*].type, parts[*]…"""
    got = _pick_json(rng, lines)
    if got is None:
        return None
    i, obj = got
    slots = [s for s in _slots(obj) if s[1] in _DETECT_KEYS or (len(s[2]) >= 2 and s[2][-2] == "parts")]
    if not slots:
        obj[rng.choice(sorted(_DETECT_KEYS))] = rng.choice([[], {}, ["user"]])
    else:
        node, key, _ = rng.choice(slots)
        node[key] = rng.choice([[], {}, [node[key]], {"v": node[key]}, ["user"], [[]]])
    lines[i] = _encode(obj, _Frag())
    return lines


def mut_deep(rng: random.Random, lines: Lines, limits: Limits) -> Lines | None:
    got = _pick_json(rng, lines)
    if got is None:
        return None
    i, obj = got
    frag = _Frag()
    depth = rng.randint(limits.deep_min, limits.deep_max)
    opener, closer = rng.choice([("[", "]"), ('{"a":', "}")])
    raw = opener * depth + "1" + closer * depth
    slots = _slots(obj)
    # prefer where parsers serialize nested values: tool inputs, arguments, responses, payloads
    preferred = [s for s in slots if s[1] in ("input", "args", "response", "arguments", "payload", "content")]
    node, key, _ = rng.choice(preferred or slots or [(obj, "x", ("x",))])
    node[key] = frag.add(raw)
    lines[i] = _encode(obj, frag)
    return lines


def mut_huge(rng: random.Random, lines: Lines, limits: Limits) -> Lines | None:
    got = _pick_json(rng, lines)
    if got is None:
        return None
    i, obj = got
    n = rng.randint(limits.huge_max // 10, limits.huge_max)
    piece = rng.choice(["a", "\n", "a.", "<system-reminder x", "é", " ", "\n\n\nFAILED x\n", "/a", "{"])
    text = (piece * (n // len(piece) + 1))[:n]
    strings = [s for s in _slots(obj) if isinstance(s[0][s[1]], str)]
    if strings:
        node, key, _ = rng.choice(strings)
        node[key] = node[key] + text if rng.random() < 0.5 else text
    else:
        obj["huge"] = text
    lines[i] = _encode(obj, _Frag())
    return lines


def mut_unicode(rng: random.Random, lines: Lines, limits: Limits) -> Lines | None:
    got = _pick_json(rng, lines)
    if got is None:
        return None
    i, obj = got
    frag = _Frag()
    strings = [s for s in _slots(obj) if isinstance(s[0][s[1]], str)]
    if rng.random() < 0.4:
        insert = frag.add('"' + rng.choice(_SURROGATES) + 'zz"')
        whole = True
    else:
        insert = "".join(rng.choice(_UNICODE) for _ in range(rng.randint(1, 4)))
        whole = False
    if strings:
        node, key, _ = rng.choice(strings)
        if whole:
            node[key] = insert
        else:
            s = node[key]
            at = rng.randint(0, len(s))
            node[key] = s[:at] + insert + s[at:]
    elif not whole:
        obj[insert] = insert
    else:
        obj["u"] = insert
    lines[i] = _encode(obj, frag)
    return lines


def mut_id_collision(rng: random.Random, lines: Lines, limits: Limits) -> Lines | None:
    decoded = [(i, _decode(ln)) for i, ln in enumerate(lines)]
    found = [(i, obj, node, key) for i, obj in decoded if isinstance(obj, dict)
             for node, key, _ in _slots(obj) if key in _ID_KEYS and isinstance(node[key], str)]
    if len(found) < 2:
        return None
    (i, obj, node, key), (_, _, node2, key2) = rng.sample(found, 2)
    node[key] = node2[key2]
    lines[i] = _encode(obj, _Frag())
    return lines


def mut_byte_flip(rng: random.Random, lines: Lines, limits: Limits) -> Lines | None:
    i = rng.randrange(len(lines))
    if not lines[i]:
        return None
    b = bytearray(lines[i])
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(len(b))
        b[at] = rng.choice([rng.randrange(256), 0xFF, 0xC3, 0x00, ord('"'), ord("\\"), ord("}"), ord("]")])
    lines[i] = bytes(b)
    return lines


def mut_truncate(rng: random.Random, lines: Lines, limits: Limits) -> Lines | None:
    data = b"\n".join(lines)
    if len(data) < 2:
        return None
    return data[: rng.randrange(1, len(data))].split(b"\n")


def mut_glue(rng: random.Random, lines: Lines, limits: Limits) -> Lines | None:
    if len(lines) < 2:
        return None
    i = rng.randrange(len(lines) - 1)
    return [*lines[:i], lines[i] + lines[i + 1], *lines[i + 2:]]


def mut_split(rng: random.Random, lines: Lines, limits: Limits) -> Lines | None:
    i = rng.randrange(len(lines))
    if len(lines[i]) < 2:
        return None
    at = rng.randrange(1, len(lines[i]))
    return [*lines[:i], lines[i][:at], lines[i][at:], *lines[i + 1:]]


def mut_duplicate(rng: random.Random, lines: Lines, limits: Limits) -> Lines | None:
    i = rng.randrange(len(lines))
    j = rng.randrange(len(lines) + 1)
    return [*lines[:j], lines[i], *lines[j:]]


def mut_delete(rng: random.Random, lines: Lines, limits: Limits) -> Lines | None:
    if len(lines) < 2:
        return None
    i = rng.randrange(len(lines))
    n = rng.choice([1, 1, 1, 2, 5])
    return lines[:i] + lines[i + n:]


def mut_swap(rng: random.Random, lines: Lines, limits: Limits) -> Lines | None:
    if len(lines) < 2:
        return None
    i, j = rng.sample(range(len(lines)), 2)
    lines[i], lines[j] = lines[j], lines[i]
    return lines


def mut_layout(rng: random.Random, lines: Lines, limits: Limits) -> Lines | None:
    """Blank lines, CRLF endings, a BOM (at the start or, wrongly, in the middle), whitespace-only lines."""
    kind = rng.choice(["blank", "crlf", "bom", "midbom", "spaces"])
    i = rng.randrange(len(lines))
    if kind == "blank":
        return [*lines[:i], b"", *lines[i:]]
    if kind == "crlf":
        return [ln + b"\r" for ln in lines]
    if kind == "bom":
        return [b"\xef\xbb\xbf" + lines[0], *lines[1:]]
    if kind == "midbom":
        lines[i] = b"\xef\xbb\xbf" + lines[i]
        return lines
    return [*lines[:i], b" \t \x0b", *lines[i:]]


MUTATORS: dict[str, Callable[[random.Random, Lines, Limits], Lines | None]] = {
    "byte-flip": mut_byte_flip,
    "truncate": mut_truncate,
    "glue": mut_glue,
    "split": mut_split,
    "duplicate": mut_duplicate,
    "delete": mut_delete,
    "swap-lines": mut_swap,
    "layout": mut_layout,
    "type-swap": mut_type_swap,
    "unhashable": mut_unhashable,
    "deep": mut_deep,
    "huge": mut_huge,
    "unicode": mut_unicode,
    "id-collision": mut_id_collision,
}
# JSON-level mutations find more (they keep lines parseable); weight them up.
_WEIGHTS = {"type-swap": 4, "unhashable": 3, "deep": 2, "id-collision": 2, "unicode": 2}


@dataclass
class Mutant:
    number: int
    seed_file: str
    mutations: list[str]
    data: bytes

    @property
    def name(self) -> str:
        return f"#{self.number} {self.seed_file} [{', '.join(self.mutations)}]"


def make_mutant(seeds: list[tuple[str, bytes]], campaign_seed: int, number: int, limits: Limits) -> Mutant:
    rng = random.Random(f"{campaign_seed}:{number}")
    name, data = rng.choice(seeds)
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
        final_newline = True
    else:
        final_newline = False
    names = list(MUTATORS)
    weights = [_WEIGHTS.get(n, 1) for n in names]
    applied: list[str] = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        for _attempt in range(6):
            kind = rng.choices(names, weights)[0]
            if not lines:
                lines = [b"{}"]
            out = MUTATORS[kind](rng, list(lines), limits)
            if out is not None:
                lines = out
                applied.append(kind)
                break
    body = b"\n".join(lines) + (b"\n" if final_newline and applied[-1:] != ["truncate"] else b"")
    return Mutant(number, name, applied, body)


# --------------------------------------------------------------------------------------------------
# Running the commands


WINDOW = "3000"
COMMANDS: dict[str, list[list[str]]] = {
    "validate": [["validate", "{in}"]],
    "clean": [["clean", "{in}", "-o", "{out}"]],
    # --lenient drops the lines that fail their schema and goes on: it takes mutants deeper
    "clean-lenient": [["clean", "{in}", "--lenient", "-o", "{out}"]],
    "estimate": [["estimate", "{in}"]],
    "run": [["run", "{in}", "--no-state", "--window", WINDOW, "-o", "{out}"]],
    # twice: the second run reads (and applies) the state the first one wrote
    "run-state": [["run", "{in}", "--state", "{state}", "--window", WINDOW, "-o", "{out}"]] * 2,
    "run-mask": [["run", "{in}", "--no-state", "--lenient", "--window", WINDOW, "--strategy", "mask",
                  "-o", "{out}"]],
    "run-sliding": [["run", "{in}", "--no-state", "--lenient", "--window", WINDOW,
                     "--strategy", "sliding-window", "--invocation-threshold", "2", "-o", "{out}"]],
}


class FuzzTimeout(BaseException):
    """Raised by the alarm: a BaseException, so the CLI's catch-all does not report it as its own."""


@contextlib.contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    if seconds <= 0 or not hasattr(signal, "setitimer"):
        yield
        return

    def fire(signum: int, frame: Any) -> None:
        raise FuzzTimeout()

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def call_cli(argv: list[str], timeout: float = 0) -> tuple[int | None, str, str]:
    """Run ``ctxcompact.cli.main(argv)`` in-process: (exit code, stdout, stderr); code None on timeout."""
    from click.testing import CliRunner

    from ctxcompact.cli import main

    runner = CliRunner()
    code: int | None = 0
    with runner.isolation() as streams:
        out, err = streams[0], streams[1]
        try:
            with _alarm(timeout):
                main(argv)
        except SystemExit as exc:
            c = exc.code
            code = int(c) if isinstance(c, int) else (0 if c is None else 1)
        except FuzzTimeout:
            code = None
        stdout = out.getvalue().decode("utf-8", "replace")
        stderr = err.getvalue().decode("utf-8", "replace") if err is not None else ""
    return code, stdout, stderr


@dataclass
class Finding:
    command: str
    kind: str  # internal-error, traceback, exit-code, input-modified, estimate-disagrees, timeout
    exit_code: int | None
    message: str
    mutant: str = ""
    mutations: list[str] = field(default_factory=list)

    @property
    def signature(self) -> str:
        return signature(self.message) if self.kind in ("internal-error", "traceback") else self.kind

    def to_json(self) -> dict[str, Any]:
        return {"command": self.command, "kind": self.kind, "exit_code": self.exit_code,
                "message": self.message, "mutant": self.mutant, "mutations": self.mutations,
                "signature": self.signature}


def signature(message: str) -> str:
    """A crash message without what varies between inputs (numbers, paths, quoted values)."""
    text = re.sub(r"'[^']*'", "'…'", message)
    text = re.sub(r"/\S+", "PATH", text)
    text = re.sub(r"\d+", "N", text)
    return text[:140]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _first_internal(stderr: str) -> str:
    for line in stderr.splitlines():
        if "internal error" in line:
            text = line.split("internal error:", 1)[-1].strip()
            return text.replace(" (set CTXCOMPACT_DEBUG=1 for details)", "")
    return ""


def run_commands(data: bytes, workdir: Path, commands: list[str] | None = None,
                 timeout: float = 20.0) -> list[Finding]:
    """Every finding of every command (or those named) on one input, in a fresh folder under ``workdir``."""
    findings: list[Finding] = []
    codes: dict[str, int | None] = {}
    for name in commands or list(COMMANDS):
        case = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=workdir))
        try:
            src = case / "in.jsonl"
            src.write_bytes(data)
            before = _digest(src)
            for template in COMMANDS[name]:
                argv = [a.format(**{"in": str(src), "out": str(case / "out.jsonl"),
                                    "state": str(case / "state.json")}) for a in template]
                code, out, err = call_cli(argv, timeout)
                codes[name] = code
                finding = _judge(name, code, out, err)
                if finding is None and _digest(src) != before:
                    finding = Finding(name, "input-modified", code, "the input file was changed")
                if finding is not None:
                    findings.append(finding)
                    break
        finally:
            shutil.rmtree(case, ignore_errors=True)
    # `estimate` exiting 0 promises that `run` will not fail on validity
    # (docs/reference/cli.md#ctxcompact-estimate-file)
    if codes.get("estimate") == 0 and codes.get("run") == 1:
        findings.append(Finding("estimate", "estimate-disagrees", 0,
                                "estimate exits 0, run rejects the input"))
    return findings


def _judge(name: str, code: int | None, out: str, err: str) -> Finding | None:
    if code is None:
        return Finding(name, "timeout", None, "ran past the time limit")
    if "internal error" in err or "internal error" in out:
        return Finding(name, "internal-error", code, _first_internal(err) or err.strip()[:300])
    if _TRACEBACK.search(err) or _TRACEBACK.search(out):
        return Finding(name, "traceback", code, err.strip().splitlines()[-1][:300] if err.strip() else "")
    if code not in OK_EXIT:
        return Finding(name, "exit-code", code, f"exit code {code}: {err.strip()[:200]}")
    return None


# --------------------------------------------------------------------------------------------------
# Minimizing and the corpus


def minimize(data: bytes, still_fails: Callable[[bytes], bool], budget: int = 60) -> bytes:
    """Drop lines while ``still_fails`` holds (chunks of halving size), within ``budget`` checks."""
    lines = data.split(b"\n")
    trailing = lines and lines[-1] == b""
    if trailing:
        lines.pop()

    def join(ls: list[bytes]) -> bytes:
        return b"\n".join(ls) + (b"\n" if trailing else b"")

    chunk = max(1, len(lines) // 2)
    checks = 0
    while chunk >= 1 and checks < budget:
        i = 0
        while i < len(lines) and checks < budget:
            trial = lines[:i] + lines[i + chunk:]
            checks += 1
            if trial and still_fails(join(trial)):
                lines = trial
            else:
                i += chunk
        if chunk == 1:
            break
        chunk //= 2
    return join(lines)


def load_manifest() -> dict[str, Any]:
    if MANIFEST.exists():
        loaded: dict[str, Any] = json.loads(MANIFEST.read_text())
        return loaded
    return {"entries": []}


def save_to_corpus(data: bytes, finding: Finding, seed: int, note: str = "") -> Path | None:
    """Add a crashing input to ``tests/data/fuzz`` (one per signature); None when its signature is known."""
    manifest = load_manifest()
    sig = finding.signature
    if any(e["signature"] == sig for e in manifest["entries"]):
        return None
    CORPUS.mkdir(parents=True, exist_ok=True)
    name = f"{finding.command}-{hashlib.sha1(data).hexdigest()[:10]}.jsonl"
    (CORPUS / name).write_bytes(data)
    manifest["entries"].append({
        "file": name, "command": finding.command, "kind": finding.kind, "signature": sig,
        "message": finding.message, "mutations": finding.mutations, "found_by": finding.mutant,
        "campaign_seed": seed, "note": note,
    })
    manifest["entries"].sort(key=lambda e: e["file"])
    MANIFEST.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    return CORPUS / name


# --------------------------------------------------------------------------------------------------
# A campaign


@dataclass
class Report:
    mutants: int = 0
    runs: int = 0
    seconds: float = 0.0
    findings: list[Finding] = field(default_factory=list)
    crashing: list[tuple[Mutant, Finding]] = field(default_factory=list)

    def by_command(self, kind: str = "internal-error") -> Counter[str]:
        return Counter(f.command for f in self.findings if f.kind == kind)

    def by_class(self, kind: str = "internal-error") -> Counter[str]:
        """Mutants with at least one finding of ``kind``, counted under each mutation they underwent."""
        seen: dict[str, set[str]] = {}
        for f in self.findings:
            if f.kind == kind:
                for m in set(f.mutations):
                    seen.setdefault(m, set()).add(f.mutant)
        return Counter({m: len(v) for m, v in seen.items()})

    def by_signature(self) -> Counter[str]:
        return Counter(f.signature for f in self.findings)

    def merge(self, other: Report) -> None:
        self.mutants += other.mutants
        self.runs += other.runs
        self.findings += other.findings
        self.crashing += other.crashing

    def summary(self) -> str:
        kinds = Counter(f.kind for f in self.findings)
        crashed = len({f.mutant for f in self.findings if f.kind in ("internal-error", "traceback")})
        lines = [f"mutants {self.mutants}, command runs {self.runs}, {self.seconds:.0f} s; "
                 f"mutants with an internal error: {crashed}",
                 "findings by kind: " + (", ".join(f"{k} {v}" for k, v in sorted(kinds.items())) or "none")]
        for kind in ("internal-error", "traceback", "exit-code", "input-modified", "estimate-disagrees",
                     "timeout"):
            per = self.by_command(kind)
            if per:
                lines.append(f"{kind} by command: " + ", ".join(f"{c} {n}" for c, n in sorted(per.items())))
        per_class = self.by_class()
        if per_class:
            lines.append("mutants with internal errors, by mutation class: "
                         + ", ".join(f"{c} {n}" for c, n in per_class.most_common()))
        for sig, n in self.by_signature().most_common(25):
            lines.append(f"  {n:5d}  {sig}")
        return "\n".join(lines)


def campaign(count: int, seed: int = 0, limits: Limits = PYTEST_LIMITS, start: int = 0,
             commands: list[str] | None = None, timeout: float = 20.0,
             progress: Callable[[int, Report], None] | None = None) -> Report:
    """Run mutants ``start … start+count-1`` of campaign ``seed`` through every command."""
    for var in [v for v in os.environ if v.startswith("CTXCOMPACT_")]:
        del os.environ[var]  # an option set in the environment would change what every run does
    seeds = load_seeds(limits)
    report = Report()
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ctxfuzz-") as tmp:
        for number in range(start, start + count):
            mutant = make_mutant(seeds, seed, number, limits)
            found = run_commands(mutant.data, Path(tmp), commands, timeout)
            report.mutants += 1
            report.runs += len(commands or COMMANDS)
            for f in found:
                f.mutant, f.mutations = mutant.name, list(mutant.mutations)
                report.findings.append(f)
                if f.kind in ("internal-error", "traceback", "exit-code", "input-modified",
                              "estimate-disagrees"):
                    report.crashing.append((mutant, f))
            if progress is not None:
                progress(number, report)
    report.seconds = time.monotonic() - t0
    return report


def minimize_finding(mutant: Mutant, finding: Finding, budget: int = 40) -> bytes:
    """The mutant cut down by line deletion while the same command still fails the same way."""
    with tempfile.TemporaryDirectory(prefix="ctxfuzz-min-") as tmp:

        def still(data: bytes) -> bool:
            return any(f.signature == finding.signature
                       for f in run_commands(data, Path(tmp), [finding.command], timeout=10))

        return minimize(mutant.data, still, budget)
