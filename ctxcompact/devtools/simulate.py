"""``ctxcompact simulate``: the multi-turn stress matrix (docs/measurements/simulation.md#what-it-plays),
driven through the real pipeline.

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

from .. import api
from ..errors import CtxCompactError, ExitCode
from ..options import Options
from ..tokens.heuristic import message_tokens
from .scenarios import SCENARIOS, K, Scenario, Turn, select

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
    for line in lines.split(b"\n"):  # JSONL: lines end at \n only
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

