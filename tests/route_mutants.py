"""Mutants for comparing ``run``'s routes (bench/fuzz_routes.py; examples in tests/engine/test_routes.py):
issue 19's mutators (tests/fuzz_harness.py) plus the shapes that keep lines valid but move what links a
transcript's calls and results, so a mutant reaches cleaning, compaction and the streamed route's own
readings (Unstreamable, resume points) instead of stopping at the first bad line; and the option sets a
mutant is run with."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

import fuzz_harness as harness

LIMITS = harness.Limits(max_lines=60, huge_max=120_000)

# ------------------------------------------------------------------------------------------ more mutations
# (on top of harness.MUTATORS, which break lines; these keep lines valid and move what links them)

_RESULT_HINTS = (b'"tool_call_id"', b'"tool_result"', b'"function_response"', b'"functionResponse"',
                 b'"function_call_output"', b'"custom_tool_call_output"')
_CALL_HINTS = (b'"tool_calls"', b'"tool_use"', b'"function_call"', b'"functionCall"', b'"custom_tool_call"')


def _is(line: bytes, hints: tuple[bytes, ...]) -> bool:
    return any(h in line for h in hints)


def mut_drop_results(rng: random.Random, lines: list[bytes]) -> list[bytes] | None:
    idx = [i for i, ln in enumerate(lines) if _is(ln, _RESULT_HINTS)]
    if not idx:
        return None
    drop = set(rng.sample(idx, rng.randint(1, len(idx))))
    return [ln for i, ln in enumerate(lines) if i not in drop]


def mut_result_first(rng: random.Random, lines: list[bytes]) -> list[bytes] | None:
    results = [i for i, ln in enumerate(lines) if _is(ln, _RESULT_HINTS)]
    if not results:
        return None
    i = rng.choice(results)
    calls = [j for j in range(i) if _is(lines[j], _CALL_HINTS)]
    j = rng.choice(calls) if calls else rng.randrange(i + 1)
    line = lines.pop(i)
    lines.insert(j, line)
    return lines


def mut_result_later(rng: random.Random, lines: list[bytes]) -> list[bytes] | None:
    results = [i for i, ln in enumerate(lines) if _is(ln, _RESULT_HINTS)]
    if not results:
        return None
    i = rng.choice(results)
    line = lines.pop(i)
    lines.insert(rng.randint(i, len(lines)), line)
    return lines


def mut_recombine(rng: random.Random, lines: list[bytes], seeds: list[tuple[str, bytes]]) -> list[bytes]:
    """Lines of another seed (often of the same format) spliced in: a log that goes on in another."""
    _, other = rng.choice(seeds)
    more = other.splitlines()
    if not more:
        return lines
    a = rng.randrange(len(more))
    piece = more[a:a + rng.randint(1, 12)]
    at = rng.randint(0, len(lines))
    return [*lines[:at], *piece, *lines[at:]]


def mut_dup_block(rng: random.Random, lines: list[bytes]) -> list[bytes] | None:
    """A run of lines repeated (a resumed log, a retried turn: duplicate ids, duplicate results)."""
    if not lines:
        return None
    a = rng.randrange(len(lines))
    block = lines[a:a + rng.randint(1, 6)]
    at = rng.randint(a, len(lines))
    return [*lines[:at], *block, *lines[at:]]


def mut_sidechain(rng: random.Random, lines: list[bytes]) -> list[bytes] | None:
    """Claude Code subagent lines: some lines marked ``isSidechain`` (or the mark removed), an agent id."""
    idx = [i for i, ln in enumerate(lines) if b'"sessionId"' in ln or b'"uuid"' in ln]
    if not idx:
        return None
    for i in rng.sample(idx, rng.randint(1, min(4, len(idx)))):
        try:
            obj = json.loads(lines[i])
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        obj["isSidechain"] = not obj.get("isSidechain", False)
        if rng.random() < 0.5:
            obj["agentId"] = f"a{rng.randrange(100):02d}"
        lines[i] = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()
    return lines


def mut_blank_lines(rng: random.Random, lines: list[bytes]) -> list[bytes]:
    for _ in range(rng.randint(1, 5)):
        lines.insert(rng.randint(0, len(lines)), rng.choice([b"", b"   ", b"\r", b"\t"]))
    return lines


LOCAL = {"drop-results": mut_drop_results, "result-first": mut_result_first, "result-later": mut_result_later,
         "dup-block": mut_dup_block, "sidechain": mut_sidechain, "blank-lines": mut_blank_lines}


@dataclass
class Case:
    number: int
    seed_file: str
    mutations: list[str]
    data: bytes


#: what :func:`relinked` draws from: shapes that keep every line valid
VALID_KINDS = (*LOCAL, "recombine", "unicode", "huge", "id-collision", "duplicate", "delete")


def relinked(rng: random.Random, lines: list[bytes], seeds: list[tuple[str, bytes]],
             kinds: tuple[str, ...] = VALID_KINDS) -> tuple[list[bytes], list[str]]:
    """``lines`` after one to three of ``kinds``, and the names of those applied."""
    applied: list[str] = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        kind = rng.choice(kinds)
        if kind == "recombine":
            out: list[bytes] | None = mut_recombine(rng, list(lines), seeds)
        elif kind in LOCAL:
            out = LOCAL[kind](rng, list(lines))
        else:
            out = harness.MUTATORS[kind](rng, list(lines) or [b"{}"], LIMITS)
        if out is not None:
            lines, _ = out, applied.append(kind)
    return lines, applied


def make_case(seeds: list[tuple[str, bytes]], seed: int, number: int) -> Case:
    rng = random.Random(f"routes:{seed}:{number}")
    name, data = rng.choice(seeds)
    lines = data.splitlines()
    applied: list[str] = []
    roll = rng.random()
    if roll < 0.15:  # the seed as it is: the options alone
        pass
    elif roll < 0.75:  # shapes that keep lines valid: they reach compaction
        lines, applied = relinked(rng, lines, seeds)
    else:  # issue 19's mutators (lines broken too): errors must agree
        m = harness.make_mutant(seeds, seed, number, LIMITS)
        return Case(number, m.seed_file, m.mutations, m.data)
    return Case(number, name, applied, b"\n".join(lines) + (b"\n" if lines and rng.random() < 0.9 else b""))


# ------------------------------------------------------------------------------------------------ options

def options_for(rng: random.Random, data: bytes) -> list[dict[str, Any]]:
    size = max(1, len(data) // 4)
    windows = [1_000_000, max(1_500, size // 3), max(1_500, size // 8), 3_000, 8_000, 20_000]
    out = []
    for _ in range(3):
        kw: dict[str, Any] = {"window": rng.choice(windows)}
        kw["strategy"] = rng.choice(["threshold", "threshold", "mask", "sliding-window"])
        if kw["strategy"] == "threshold" and rng.random() < 0.35:
            kw["prune"] = True
        if kw["strategy"] == "sliding-window" and rng.random() < 0.6:
            kw["invocation_threshold"] = rng.choice([1, 2, 3])
            kw["overlap"] = rng.choice([0, 1, 2])
        if rng.random() < 0.2:
            kw["to"] = rng.choice(["openai", "anthropic", "genai"])
        if rng.random() < 0.25:
            kw["use_state"] = False
        if rng.random() < 0.25:
            kw["lenient"] = True
        if rng.random() < 0.2:
            kw["exact"] = "none"
        if rng.random() < 0.15:
            kw["threshold"] = rng.choice(["50%", "0", "1000"])
        if rng.random() < 0.1:
            kw["keep_trailing_results"] = True
        out.append(kw)
    return out
