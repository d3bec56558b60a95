"""The scenarios of the stress matrix (docs/measurements/simulation.md#what-it-plays): the original design's
47 by name, plus the timing-gap cases. Played by :mod:`.simulate`."""

from __future__ import annotations

import fnmatch
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from ..tokens.calibration import DEFAULT_HEURISTIC_FACTOR

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


