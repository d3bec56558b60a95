"""``ctxcompact simulate`` (SPEC §11): the multi-turn stress matrix, driven through the real pipeline.

Each scenario plays a whole agent session the way an agent framework with before/after-model hooks runs it
(ADK's flow, which the original design audited):

* The session log is an append-only OpenAI Chat Completions JSONL file, like ADK's immutable session events.
  It is never replaced by the compacted output: that output is only what is *sent* for one model call, and
  the next call starts again from the whole log plus the state file (watermark and summary). A simulator
  that replaced its log with the compacted output is how the original design's production bug (compaction
  with no lasting effect) went unseen, so this one must not.
* Before every model call: :func:`ctxcompact.api.run` on the log's bytes with a real state file (the
  before-model hook). After it: :func:`ctxcompact.api.calibrate` with the prompt tokens the simulated
  provider reports (the after-model hook), or nothing when the provider reports no usage.
* A user turn is one model call when the model just answers; with parallel tool calls it is two (one
  assistant message with every call, then each result as its own ``tool`` message in call order, then the
  call that reads them); a sequential chain of N tools is N + 1 calls, one per step, so the pipeline can
  compact mid-chain and sees tool results only after the usage of the previous call (the timing gap).

The simulated provider bills ``ceil(heuristic × ratio)`` prompt tokens for a request, where the heuristic is
``ceil(chars / 4)`` per message of the request actually sent, counted here from the written JSON lines (not
from the pipeline's own counts). Overflow is a sent request whose billed tokens exceed the window. A request
the pipeline itself flags with exit 5 (the documented "does not fit" outcome) is not sent: the agent stops
there, as it must when its context cannot fit. A loop is a compaction with no new log content since the
previous one, or a compaction whose output is not smaller than its input.

Estimation uses the chars/4 heuristic (``Options.exact="none"``) with its default factor 2.0, as the original
design did; that keeps the whole matrix well under a minute.
"""

from __future__ import annotations

import fnmatch
import io
import math
import random
import tempfile
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from .errors import CtxCompactError, ExitCode, UsageError
from .options import Options
from .tokens.calibration import DEFAULT_HEURISTIC_FACTOR

K = 1_000
WINDOW_8K = 8_000  # the seeds' 8k window: buffer 1.6k (20 %), threshold 6.4k
WINDOW_200K = 200_000  # buffer 20k, threshold 180k

# --------------------------------------------------------------------------------------------------
# Scenarios


@dataclass(frozen=True, slots=True)
class Turn:
    """One user turn: the user's message, the tools the model calls and the size of its final answer."""

    user_chars: int = 300
    tools: tuple[int, ...] = ()  # result sizes in characters, one per call
    sequential: bool = False  # one call per model step instead of all calls in one message
    response_chars: int = 120
    json_results: bool = False  # tool results are JSON documents instead of text tables


Plan = Callable[[int, random.Random], Turn]


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    category: str  # stress, brutal, sequential, timing-gap
    window: int
    turns: int
    ratio: float  # real tokens per heuristic token (from turn ``late_from`` on when ``early_ratio`` is set)
    usage: bool  # whether the provider reports usage (from turn ``late_from`` on)
    plan: Plan
    system_chars: int = 400
    late_from: int = 0  # first turn (0-based) with usage; earlier turns report none
    early_ratio: float | None = None  # ratio of the turns before ``late_from``
    tools: str = "none"  # the seed table's description of the tool shape
    # Expectations the tests assert beyond the generic ones (no overflow, no loop, and at least
    # ceil(uncompacted / window) - 1 compactions): the seeds' stated counts, or what the name promises.
    min_compactions: int = 0
    max_compactions: int | None = None
    expect_does_not_fit: bool = False  # the system prompt alone is larger than the window (exit 5 expected)
    note: str = ""

    def ratio_at(self, turn: int) -> float:
        if self.early_ratio is not None and turn < self.late_from:
            return self.early_ratio
        return self.ratio

    def reports_usage(self, turn: int) -> bool:
        return self.usage and turn >= self.late_from

    @property
    def usage_label(self) -> str:
        if not self.usage:
            return "no"
        return f"from turn {self.late_from + 1}" if self.late_from else "yes"

    @property
    def limitation(self) -> str | None:
        """The documented limitation: no usage is ever reported and the real ratio is above the default
        factor, so nothing tells the pipeline how far chars/4 undercounts (use --default-factor)."""
        if self.usage:
            return None
        worst = max(self.ratio, self.early_ratio or 0.0)
        if worst > DEFAULT_HEURISTIC_FACTOR:
            return (f"no usage reported and the token ratio {worst:g} is above the default factor "
                    f"{DEFAULT_HEURISTIC_FACTOR:g}: the real ratio cannot be learnt (set --default-factor)")
        return None


def _const(turn: Turn) -> Plan:
    return lambda _i, _rng: turn


def _every(n: int, offset: int, on: Turn, off: Turn) -> Plan:
    return lambda i, _rng: on if i % n == offset else off


def _sizes(lo: int, hi: int, count: int, rng: random.Random) -> tuple[int, ...]:
    return tuple(rng.randint(lo, hi) for _ in range(count))


def _first(on: Turn, off: Turn) -> Plan:
    return lambda i, _rng: on if i == 0 else off


def _mixed(lo: int, hi: int) -> Plan:
    """A mixed workload: a third of the turns plain text, the others 1-3 parallel tools of lo..hi chars."""

    def plan(_i: int, rng: random.Random) -> Turn:
        kind = rng.random()
        if kind < 0.33:
            return Turn(user_chars=rng.randint(100, 800))
        count = 1 if kind < 0.75 else rng.randint(2, 3)
        return Turn(user_chars=rng.randint(100, 800), tools=_sizes(lo, hi, count, rng))

    return plan


def _tool_turn(lo: int, hi: int, count: int = 1, user_chars: int = 300, **kw: Any) -> Plan:
    return lambda _i, rng: Turn(user_chars=user_chars, tools=_sizes(lo, hi, count, rng), **kw)


def _stress() -> list[Scenario]:
    s = "stress"
    w2, w8 = WINDOW_200K, WINDOW_8K
    return [
        Scenario("200k_NormalConversation", s, w2, 30, 2.0, True, _const(Turn(400)), max_compactions=0,
                 note="short messages never compact"),
        Scenario("200k_ToolHeavy", s, w2, 20, 2.0, True, _tool_turn(10 * K, 20 * K, 3),
                 tools="3/turn parallel (10k-20k)"),
        Scenario("200k_SingleGiantToolResponse", s, w2, 3, 2.0, True, _first(Turn(tools=(300 * K,)), Turn()),
                 tools="1×300k"),
        Scenario("200k_ToolBurst_10Parallel", s, w2, 3, 2.0, True, _const(Turn(tools=(5 * K,) * 10)),
                 tools="10 parallel (5k each)"),
        Scenario("200k_NoUsageMetadata", s, w2, 25, 2.5, False, _const(Turn(tools=(8 * K,))),
                 tools="1/turn (8k)"),
        Scenario("200k_LongRunning_50Turns", s, w2, 50, 2.2, True,
                 _every(3, 2, Turn(tools=(5 * K, 15 * K)), Turn(500)), tools="every 3rd (5k+15k)"),
        Scenario("200k_HighTokenRatio", s, w2, 15, 3.0, True, _const(Turn(tools=(10 * K,))),
                 tools="1/turn (10k)"),
        Scenario("200k_VeryHighTokenRatio_4x", s, w2, 10, 4.0, True, _const(Turn(tools=(20 * K,))),
                 tools="1/turn (20k)"),
        Scenario("200k_LargeSystemPrompt", s, w2, 20, 2.0, True, _const(Turn(tools=(5 * K,))),
                 system_chars=50 * K, tools="1/turn (5k), 50k system"),
        Scenario("200k_MassiveToolBurst", s, w2, 2, 2.0, True, _const(Turn(tools=(50 * K,) * 15)),
                 tools="15 parallel (50k each)"),
        Scenario("200k_RepeatedCompactions", s, w2, 60, 2.0, True,
                 _every(2, 1, Turn(tools=(30 * K, 10 * K)), Turn()), tools="every 2nd (30k+10k)",
                 min_compactions=3),
        Scenario("200k_LateUsageMetadata", s, w2, 25, 2.5, True, _tool_turn(5 * K, 10 * K),
                 late_from=5, early_ratio=2.0, tools="1/turn (5-10k)", note="5 turns without usage, then 20"),
        Scenario("200k_100Turns_MixedWorkload", s, w2, 100, 2.3, True, _mixed(1 * K, 50 * K),
                 tools="mixed (1k-50k)"),
        Scenario("8k_NormalConversation", s, w8, 20, 1.8, True, _const(Turn(800))),
        Scenario("8k_SmallToolCalls", s, w8, 15, 1.8, True, _const(Turn(tools=(1 * K,))),
                 tools="1/turn (1k)"),
        Scenario("8k_LargeToolResponse", s, w8, 3, 1.8, True, _first(Turn(tools=(20 * K,)), Turn()),
                 tools="1×20k"),
        Scenario("8k_NoUsageMetadata", s, w8, 25, 2.0, False, _const(Turn(tools=(1500,))),
                 tools="1/turn (1.5k)"),
        Scenario("8k_LongRunning_40Turns", s, w8, 40, 1.8, True, _const(Turn(500))),
        Scenario("8k_ToolBurst", s, w8, 3, 1.8, True,
                 lambda i, rng: (Turn(tools=(3 * K,) * 3), Turn(tools=_sizes(K, 2 * K, 2, rng)), Turn())[i],
                 tools="3 parallel (3k) + 2 (1-2k)"),
        Scenario("8k_HighTokenRatio", s, w8, 20, 3.0, True, _const(Turn(tools=(1 * K,))),
                 tools="1/turn (1k)"),
        Scenario("8k_LargeSystemPrompt", s, w8, 15, 1.8, True, _const(Turn(300)), system_chars=8 * K,
                 tools="none, 8k system"),
        Scenario("8k_OnlyToolResponses", s, w8, 10, 2.0, True,
                 _const(Turn(user_chars=20, tools=(5 * K,), response_chars=40)), tools="1/turn (5k)"),
        Scenario("8k_RapidFireShortMessages", s, w8, 80, 1.8, True, _const(Turn(60, response_chars=60))),
        Scenario("8k_RepeatedCompactions", s, w8, 40, 1.8, True, _const(Turn(tools=(2 * K,))),
                 tools="1/turn (2k)", min_compactions=6),
        Scenario("8k_AlternatingToolAndText", s, w8, 30, 2.0, True,
                 _every(2, 0, Turn(tools=(3 * K,)), Turn()), tools="every 2nd (3k)"),
        Scenario("CompactionNoInfiniteLoop", s, w8, 5, 2.5, True, _const(Turn(300)), system_chars=12 * K,
                 tools="none, 12k system", expect_does_not_fit=True,
                 note="12k-char system prompt: larger than the window in characters"),
    ]


def _brutal() -> list[Scenario]:
    b = "brutal"
    w2, w8 = WINDOW_200K, WINDOW_8K
    return [
        Scenario("8k_ToolResponseBiggerThanWindow", b, w8, 3, 2.0, True,
                 _first(Turn(tools=(40 * K,)), Turn()), tools="1×40k (5× window)"),
        Scenario("8k_EveryTurnExceedsWindow", b, w8, 15, 2.0, True, _const(Turn(2 * K, tools=(15 * K,))),
                 tools="2k msg + 15k tool every turn", min_compactions=15),
        Scenario("8k_NoUsageMetadata_HighRatio", b, w8, 20, 2.0, False, _const(Turn(500, tools=(1 * K,))),
                 tools="1/turn (1k)", note="pure heuristic at the default factor"),
        Scenario("8k_NoUsageMetadata_BeyondDefault", b, w8, 15, 3.0, False, _const(Turn(500, tools=(1 * K,))),
                 tools="1/turn (1k)", note="ratio above the default factor: the known limitation"),
        Scenario("8k_150Turns", b, w8, 150, 1.8, True, _every(3, 2, Turn(tools=(1 * K,)), Turn()),
                 tools="every 3rd (1k)"),
        Scenario("8k_SystemPromptLargerThanWindow", b, w8, 10, 2.0, True, _const(Turn()), system_chars=15 * K,
                 tools="none, 15k system", expect_does_not_fit=True),
        Scenario("8k_ToolChain_MultipleRoundtrips", b, w8, 10, 2.0, True, _const(Turn(tools=(2 * K,) * 5)),
                 tools="5 parallel/turn (10k total)"),
        Scenario("8k_AlternatingHugeAndTiny", b, w8, 30, 2.0, True,
                 _every(2, 1, Turn(2, tools=(10 * K,)), Turn(2)), tools="'ok' alternating with 10k tools"),
        Scenario("8k_CompactionEveryStep", b, w8, 30, 2.0, True, _const(Turn(1200, tools=(4 * K,))),
                 system_chars=4 * K, tools="1.2k msg + 4k tool, 4k system"),
        Scenario("8k_CorrectionFactorDrift", b, w8, 20, 1.5, True, _const(Turn(tools=(1 * K,))),
                 tools="1/turn (1k)"),
        Scenario("8k_EmptyToolResponses", b, w8, 25, 2.0, True, _tool_turn(3, 10, 3),
                 tools="3 tools, 3-10 char results"),
        Scenario("8k_VeryLargeModelResponses", b, w8, 20, 2.0, True, _const(Turn(response_chars=2 * K)),
                 tools="none, 2k-char replies"),
        Scenario("8k_JSON_Heavy_ToolResponses", b, w8, 15, 3.5, True,
                 _const(Turn(tools=(1 * K,), json_results=True)), tools="1/turn (1k JSON)"),
        Scenario("200k_ConsecutiveMassiveBursts", b, w2, 10, 2.5, True, _const(Turn(tools=(80 * K, 30 * K))),
                 tools="80k+30k every turn"),
        Scenario("200k_NoUsageMetadata_LongSession", b, w2, 80, 2.5, False, _const(Turn(tools=(8 * K,))),
                 tools="1/turn (8k)", note="no calibration over 80 turns"),
        Scenario("200k_TokenRatio_5x", b, w2, 10, 5.0, True, _const(Turn(tools=(20 * K,))),
                 tools="1/turn (20k)"),
        Scenario("200k_SingleTurnFillsWindow", b, w2, 2, 2.0, True,
                 _first(Turn(tools=(30 * K,) * 20), Turn()), tools="20 parallel × 30k = 600k"),
        Scenario("200k_200Turns", b, w2, 200, 2.2, True, _mixed(1 * K, 30 * K), tools="mixed (1k-30k)"),
    ]


def _sequential() -> list[Scenario]:
    q = "sequential"
    return [
        Scenario("8k_SequentialToolChain", q, WINDOW_8K, 8, 2.0, True,
                 _const(Turn(tools=(2 * K, 1500, 2500, 1 * K, 1500), sequential=True)),
                 tools="5 sequential (2k, 1.5k, 2.5k, 1k, 1.5k)"),
        Scenario("200k_SequentialToolChain_LargeResponses", q, WINDOW_200K, 5, 2.0, True,
                 _const(Turn(tools=(40 * K, 20 * K, 30 * K, 15 * K, 5 * K), sequential=True)),
                 tools="5 sequential (40k, 20k, 30k, 15k, 5k)"),
        Scenario("8k_SequentialChain_NoUsageMetadata", q, WINDOW_8K, 10, 2.0, False,
                 _const(Turn(tools=(1 * K, 800, 1200), sequential=True)),
                 tools="3 sequential (1k, 800, 1.2k)"),
    ]


def _timing_gap() -> list[Scenario]:
    # A tool result makes the first request of the second turn about 70k (then 50k) heuristic tokens, billed
    # at 2x and reported; then one more tool result lands between that call and the next (80k, then 400k
    # characters). The usage the next call sees is stale: only the calibrated estimate notices the growth.
    t = "timing-gap"
    return [
        Scenario("TimingGap_CalibratedHeuristicPreventsOverflow", t, WINDOW_200K, 2, 2.0, True,
                 lambda i, _rng: (Turn(tools=(279 * K,)), Turn(tools=(80 * K,)))[i],
                 tools="70k-token request, then +80k chars", min_compactions=1, max_compactions=1),
        Scenario("TimingGap_MassiveToolResponse", t, WINDOW_200K, 2, 2.0, True,
                 lambda i, _rng: (Turn(tools=(199 * K,)), Turn(tools=(400 * K,)))[i],
                 tools="50k-token request, then +400k chars", min_compactions=1, max_compactions=1),
    ]


SCENARIOS: tuple[Scenario, ...] = (*_stress(), *_brutal(), *_sequential(), *_timing_gap())


def select(patterns: Sequence[str] = ()) -> list[Scenario]:
    """The scenarios whose name or category matches any pattern (fnmatch, else substring, case-insensitive).

    No pattern selects all. A pattern that matches nothing is a usage error (a typo should not pass)."""
    if not patterns:
        return list(SCENARIOS)
    chosen: list[Scenario] = []
    for pattern in patterns:
        p = pattern.lower()
        hits = [s for s in SCENARIOS
                if any(fnmatch.fnmatchcase(k, p) or p in k for k in (s.name.lower(), s.category))]
        if not hits:
            raise UsageError(f"--only {pattern!r} matches no scenario (see `ctxcompact simulate --list`)")
        chosen.extend(h for h in hits if h not in chosen)
    return [s for s in SCENARIOS if s in chosen]


# --------------------------------------------------------------------------------------------------
# Content: cheap, deterministic text of any length, different per turn


_VOCABULARY = (
    "pod deployment namespace service ingress replica rollout config secret volume node cluster label "
    "selector probe restart image registry container port memory limit request cpu scale autoscaler "
    "the a of to and in is for on with that this check please why still failing after update logs show "
    "error timeout connection refused retry backoff healthy ready pending running crash loop terminated"
)
_WORDS = tuple(_VOCABULARY.split(" "))


class Corpus:
    """Three long strings (prose, a kubectl-like table, JSON) to slice content from, made once per seed."""

    SIZE = 64 * K

    def __init__(self, seed: int) -> None:
        rng = random.Random(seed)
        self.prose = self._fill(
            lambda: " ".join(rng.choice(_WORDS) for _ in range(rng.randint(6, 14))) + ". ")
        self.table = self._fill(
            lambda: f"web-{rng.randrange(16**6):06x}-{rng.randrange(16**5):05x}  {rng.randint(0, 3)}/3  "
            f"{rng.choice(('Running', 'Pending', 'CrashLoopBackOff', 'Completed'))}  "
            f"{rng.randint(0, 40)}  {rng.randint(1, 59)}m  "
            f"10.0.{rng.randint(0, 255)}.{rng.randint(0, 255)}\n")
        self.json = self._fill(
            lambda: orjson.dumps({"name": f"web-{rng.randrange(16**6):06x}", "ready": rng.random() < 0.8,
                                  "restarts": rng.randint(0, 40), "node": f"node-{rng.randint(1, 9)}",
                                  "labels": {"app": "web", "tier": rng.choice(("fe", "be"))}}).decode() + ",")

    def _fill(self, piece: Callable[[], str]) -> str:
        parts: list[str] = []
        n = 0
        while n < self.SIZE:
            parts.append(piece())
            n += len(parts[-1])
        text = "".join(parts)[: self.SIZE]
        return text + text  # doubled, so any slice of up to SIZE chars is one cheap slice

    def take(self, source: str, chars: int, rng: random.Random) -> str:
        if chars <= 0:
            return ""
        start = rng.randrange(self.SIZE)
        if chars <= self.SIZE:
            return source[start : start + chars]
        whole, rest = divmod(chars, self.SIZE)
        unit = source[start : start + self.SIZE]
        return unit * whole + unit[:rest]


# --------------------------------------------------------------------------------------------------
# The simulated provider


def request_heuristic(lines: bytes) -> int:
    """chars/4 (rounded up per message) of an OpenAI-format request: what the simulated provider bills,
    counted from the written lines themselves rather than from the pipeline's own counts."""
    total = 0
    for line in lines.splitlines():
        if not line.strip():
            continue
        obj = orjson.loads(line)
        chars = 0
        content = obj.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            chars += sum(len(p.get("text") or p.get("refusal") or "") for p in content if isinstance(p, dict))
        for call in obj.get("tool_calls") or ():
            fn = call.get("function") or {}
            chars += len(fn.get("name") or "") + len(fn.get("arguments") or "")
        total += (chars + 3) // 4
    return total


def billed_tokens(heuristic: int, ratio: float) -> int:
    return math.ceil(heuristic * ratio)


# --------------------------------------------------------------------------------------------------
# The session driver


@dataclass(slots=True)
class CallTrace:
    """One model call: what the pipeline decided and what the provider billed."""

    turn: int
    step: str
    log_bytes: int
    log_heuristic: int  # of the whole log: what would be sent if compaction had no lasting effect
    heuristic_in: int  # the pipeline's heuristic of the context before any compaction
    estimate: int  # the calibrated estimate the decision was made with
    factor: float
    threshold: int | None
    stale_real: int | None  # the last usage reported before this call
    compacted: bool
    exit_code: int
    sent_heuristic: int  # of the request sent (the provider's count)
    real: int  # billed tokens of that request
    sent: bool
    reported: bool


@dataclass(slots=True)
class ScenarioResult:
    scenario: Scenario
    compactions: int = 0
    max_real_tokens: int = 0
    overflow: bool = False
    overflows: int = 0
    loop: bool = False
    loop_reason: str | None = None
    exit_codes: set[int] = field(default_factory=set)
    final_tokens: int = 0
    calls: int = 0
    uncompacted_tokens: int = 0  # billed tokens of the whole log: what would be sent with no compaction
    error: str | None = None
    ended_early: str | None = None
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    trace: list[CallTrace] = field(default_factory=list)

    @property
    def limitation(self) -> str | None:
        return self.scenario.limitation

    @property
    def failures(self) -> list[str]:
        """Why this scenario fails the matrix (empty when it passes)."""
        out: list[str] = []
        if self.error:
            out.append(f"error: {self.error}")
        if self.limitation is None:
            if self.overflow:
                out.append(f"overflow: {self.max_real_tokens:,} tokens sent to a "
                           f"{self.scenario.window:,}-token window")
            if self.loop:
                out.append(f"loop: {self.loop_reason}")
        if ExitCode.DOES_NOT_FIT in self.exit_codes and not self.scenario.expect_does_not_fit:
            out.append(f"unexpected exit 5: {self.ended_early}")
        return out

    @property
    def status(self) -> str:
        if self.failures:
            return "FAIL"
        if self.limitation and (self.overflow or self.loop):
            return "limitation"
        return "ok"

    def timing_gap(self) -> dict[str, Any] | None:
        """The figures of the first compaction: the stale usage, the calibrated estimate and the threshold."""
        if self.scenario.category != "timing-gap":
            return None
        for c in self.trace:
            if c.compacted:
                return {"stale_real": c.stale_real, "heuristic": c.heuristic_in, "factor": round(c.factor, 4),
                        "calibrated": c.estimate, "threshold": c.threshold,
                        "uncompacted_real": billed_tokens(c.heuristic_in, self.scenario.ratio)}
        return {}

    def to_json(self) -> dict[str, Any]:
        s = self.scenario
        return {
            "name": s.name,
            "category": s.category,
            "window": s.window,
            "turns": s.turns,
            "ratio": s.ratio,
            "usage": s.usage_label,
            "tools": s.tools,
            "system_chars": s.system_chars,
            "calls": self.calls,
            "compactions": self.compactions,
            "max_real_tokens": self.max_real_tokens,
            "overflow": self.overflow,
            "overflows": self.overflows,
            "loop": self.loop,
            "loop_reason": self.loop_reason,
            "limitation": self.limitation,
            "exit_codes": sorted(self.exit_codes),
            "final_tokens": self.final_tokens,
            "uncompacted_tokens": self.uncompacted_tokens,
            "ended_early": self.ended_early,
            "error": self.error,
            "status": self.status,
            "failures": self.failures,
            "timing_gap": self.timing_gap(),
            "seconds": round(self.seconds, 3),
        }


class _Stop(Exception):
    """The session ends here (exit 5 or an error); the result says why."""


class Session:
    """One simulated session: the append-only log, the state file and the provider's bills."""

    def __init__(self, scenario: Scenario, seed: int, workdir: Path, corpus: Corpus) -> None:
        self.s = scenario
        self.rng = random.Random(seed * 1_000_003 + zlib.crc32(scenario.name.encode()))
        self.corpus = corpus
        self.log = bytearray()
        self.log_path = workdir / "session.jsonl"
        self.state_path = workdir / "session.jsonl.ctxstate.json"
        self.opts = Options(window=scenario.window, exact="none", format="openai", state_path=self.state_path)
        self.result = ScenarioResult(scenario)
        self.full_heuristic = 0  # of every message ever appended (the uncompacted context)
        self.last_reported: int | None = None
        self.last_compaction_log: int | None = None
        self.call_no = 0

    # the log ----------------------------------------------------------------------------------------

    def append(self, obj: dict[str, Any]) -> None:
        line = orjson.dumps(obj) + b"\n"
        self.log += line
        with self.log_path.open("ab") as fh:  # append-only, never rewritten
            fh.write(line)
        self.full_heuristic += request_heuristic(line)

    def text(self, chars: int, kind: str = "prose") -> str:
        source = {"prose": self.corpus.prose, "table": self.corpus.table, "json": self.corpus.json}[kind]
        return self.corpus.take(source, chars, self.rng)

    # the hooks --------------------------------------------------------------------------------------

    def model_call(self, turn: int, step: str) -> None:
        from . import api

        s, res = self.s, self.result
        self.call_no += 1
        out = io.BytesIO()
        try:
            run = api.run(bytes(self.log), self.opts, output=out, warn=res.warnings.append)
        except CtxCompactError as exc:
            res.exit_codes.add(int(exc.exit_code))
            res.error = f"turn {turn + 1} {step}: exit {int(exc.exit_code)}: {exc}"
            raise _Stop from None
        code = int(run.exit_code)
        res.exit_codes.add(code)
        res.calls += 1
        sent_heur = request_heuristic(out.getvalue())
        real = billed_tokens(sent_heur, s.ratio_at(turn))
        report = s.reports_usage(turn)
        trace = CallTrace(turn=turn, step=step, log_bytes=len(self.log), log_heuristic=self.full_heuristic,
                          heuristic_in=run.estimate.heuristic,
                          estimate=run.tokens_before, factor=run.estimate.calibrated.factor,
                          threshold=run.estimate.budget.threshold, stale_real=self.last_reported,
                          compacted=run.compacted, exit_code=code, sent_heuristic=sent_heur, real=real,
                          sent=code != ExitCode.DOES_NOT_FIT, reported=report)
        res.trace.append(trace)
        if run.compacted:
            res.compactions += 1
            self._check_loop(run, turn, step)
            self.last_compaction_log = len(self.log)
        if code == ExitCode.DOES_NOT_FIT:
            # The documented outcome: the pipeline says the context cannot fit, so the agent stops here
            # instead of sending a request the provider would reject.
            res.ended_early = f"turn {turn + 1} {step}: " + ("; ".join(run.warnings) or "does not fit")
            raise _Stop
        res.max_real_tokens = max(res.max_real_tokens, real)
        res.final_tokens = real
        if real > s.window:
            res.overflow = True
            res.overflows += 1
        if report:
            api.calibrate(self.state_path, real)
            self.last_reported = real
        elif run.compacted:
            self.last_reported = None

    def _check_loop(self, run: Any, turn: int, step: str) -> None:
        from .tokens.heuristic import message_tokens

        res = self.result
        where = f"turn {turn + 1} {step}"
        if self.last_compaction_log == len(self.log):
            res.loop = True
            res.loop_reason = res.loop_reason or f"{where}: compacted again with no new content"
        out_heur = sum(message_tokens(r.message) for r in run.transcript.records if r.message is not None)
        if out_heur >= run.estimate.heuristic:
            res.loop = True
            res.loop_reason = res.loop_reason or (
                f"{where}: compaction output ({out_heur:,} heuristic tokens) is not smaller than its "
                f"input ({run.estimate.heuristic:,})")

    # the session ------------------------------------------------------------------------------------

    def play(self) -> ScenarioResult:
        s = self.s
        started = time.perf_counter()
        self.append({"role": "system", "content": "You are an SRE assistant for a Kubernetes platform. "
                     + self.text(max(0, s.system_chars - 52))})
        try:
            for i in range(s.turns):
                self.play_turn(i, s.plan(i, self.rng))
        except _Stop:
            pass
        except Exception as exc:  # a bug in the pipeline: report it as this scenario's failure
            self.result.error = f"{type(exc).__name__}: {exc}"
        self.result.uncompacted_tokens = billed_tokens(self.full_heuristic, s.ratio)
        self.result.seconds = time.perf_counter() - started
        return self.result

    def play_turn(self, i: int, turn: Turn) -> None:
        self.append({"role": "user", "content": self.text(turn.user_chars) if turn.user_chars > 2 else "ok"})
        self.model_call(i, "user-msg")
        calls = [(f"call_{i}_{k}", size) for k, size in enumerate(turn.tools)]
        kind = "json" if turn.json_results else "table"
        if turn.sequential:
            for k, (cid, size) in enumerate(calls):
                self.append(self._assistant_calls(i, [(cid, size)], k))
                self.append(self._tool_result(cid, size, kind))
                self.model_call(i, f"tool-chain-{k}")
        elif calls:
            self.append(self._assistant_calls(i, calls, 0))
            for cid, size in calls:
                self.append(self._tool_result(cid, size, kind))
            self.model_call(i, "tool-results")
        self.append({"role": "assistant", "content": self.text(turn.response_chars)})

    def _assistant_calls(self, turn: int, calls: list[tuple[str, int]], first: int) -> dict[str, Any]:
        tool_calls = []
        for k, (cid, _size) in enumerate(calls, start=first):
            args = orjson.dumps({"namespace": f"team-{turn % 7}", "selector": f"app=web-{k}"}).decode()
            name = ("kubectl_get", "kubectl_logs", "kubectl_describe")[k % 3]
            tool_calls.append({"id": cid, "type": "function", "function": {"name": name, "arguments": args}})
        return {"role": "assistant", "content": None, "tool_calls": tool_calls}

    def _tool_result(self, cid: str, size: int, kind: str) -> dict[str, Any]:
        return {"role": "tool", "tool_call_id": cid, "content": self.text(size, kind)}


def run_scenario(scenario: Scenario, seed: int = 0, corpus: Corpus | None = None) -> ScenarioResult:
    """Play one scenario in a fresh temporary directory (log file and state file)."""
    corpus = corpus or Corpus(seed)
    with tempfile.TemporaryDirectory(prefix="ctxcompact-sim-") as tmp:
        return Session(scenario, seed, Path(tmp), corpus).play()


def run_matrix(scenarios: Iterable[Scenario] | None = None, seed: int = 0,
               on_result: Callable[[ScenarioResult], None] | None = None) -> list[ScenarioResult]:
    corpus = Corpus(seed)
    results = []
    for scenario in SCENARIOS if scenarios is None else scenarios:
        result = run_scenario(scenario, seed, corpus)
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results


# --------------------------------------------------------------------------------------------------
# Rendering


def _k(n: int) -> str:
    if n % 1000 == 0 and n:
        return f"{n // 1000}k"
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


COLUMNS = ("scenario", "window", "turns", "ratio", "usage", "calls", "compactions", "max real", "% window",
           "overflow", "loop", "exit", "final", "status")


def table_rows(results: Sequence[ScenarioResult]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for r in results:
        s = r.scenario
        rows.append((s.name, _k(s.window), str(s.turns), f"{s.ratio:g}", s.usage_label, str(r.calls),
                     str(r.compactions), f"{r.max_real_tokens:,}",
                     f"{100 * r.max_real_tokens / s.window:.0f}%",
                     "YES" if r.overflow else "no", "YES" if r.loop else "no",
                     ",".join(str(c) for c in sorted(r.exit_codes)) or "-", f"{r.final_tokens:,}", r.status))
    return rows


def render_table(results: Sequence[ScenarioResult], markdown: bool = False) -> str:
    rows = table_rows(results)
    if markdown:
        lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
    else:
        widths = [max([len(c)] + [len(row[i]) for row in rows]) for i, c in enumerate(COLUMNS)]
        right = {1, 2, 3, 5, 6, 7, 8, 12}

        def fmt(row: Sequence[str]) -> str:
            cells = zip(row, widths, strict=True)
            text = "  ".join(v.rjust(w) if i in right else v.ljust(w) for i, (v, w) in enumerate(cells))
            return text.rstrip()

        lines = [fmt(COLUMNS), fmt(["-" * w for w in widths])] + [fmt(row) for row in rows]
    lines.append("")
    lines.append(summary_line(results))
    for r in results:
        for failure in r.failures:
            lines.append(f"FAIL {r.scenario.name}: {failure}")
        if r.limitation and (r.overflow or r.loop):
            lines.append(f"limitation {r.scenario.name}: {r.limitation}")
        if r.ended_early and not r.failures:
            lines.append(f"exit 5 {r.scenario.name} (documented: does not fit): {r.ended_early}")
    return "\n".join(lines)


def summary_line(results: Sequence[ScenarioResult]) -> str:
    failed = sum(1 for r in results if r.failures)
    limited = sum(1 for r in results if r.limitation and (r.overflow or r.loop))
    seconds = sum(r.seconds for r in results)
    return (f"{len(results)} scenarios, {sum(r.calls for r in results):,} model calls, "
            f"{sum(r.compactions for r in results):,} compactions in {seconds:.1f} s: "
            f"{failed} failed, {limited} hit the documented limitation")


def simulate_command(only: Sequence[str] = (), seed: int = 0, as_json: bool = False,
                     echo: Callable[[str], None] = print) -> int:
    """What ``ctxcompact simulate`` does: run the selection, print the table (or JSON), return the exit
    code: 1 when any scenario fails (overflow or loop outside the documented limitation, an error, or an
    unexpected exit 5), else 0."""
    results = run_matrix(select(only), seed)
    if as_json:
        echo(orjson.dumps([r.to_json() for r in results], option=orjson.OPT_INDENT_2).decode())
    else:
        echo(render_table(results))
    return 1 if any(r.failures for r in results) else 0


__all__ = [
    "SCENARIOS",
    "CallTrace",
    "Corpus",
    "Scenario",
    "ScenarioResult",
    "Session",
    "Turn",
    "billed_tokens",
    "render_table",
    "request_heuristic",
    "run_matrix",
    "run_scenario",
    "select",
    "simulate_command",
]
