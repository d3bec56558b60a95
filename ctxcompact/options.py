"""Everything a caller can choose, in one place. The CLI fills it from flags and CTXCOMPACT_* variables;
library callers build it directly (every field has the CLI's default)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, cast

from .plugins import STRATEGIES, SUMMARIZERS, Option

#: how long a call waits for a state's lock before exit 3: ``Options.lock_timeout``, and every entry that
#: locks a state without one (``calibrate``, ``state reset``, a file ``Session``)
LOCK_TIMEOUT = 10.0


def declared_default(name: str) -> Any:
    """A built-in strategy option's default, from its one declaration (plugins.STRATEGIES)."""
    declared = STRATEGIES.option(name)
    assert declared is not None, name
    return declared.default


@dataclass(slots=True)
class Options:
    # input and output
    format: str = "auto"  # input format, or "auto" to detect it
    to: str | None = None  # output format (default: the input's)
    lenient: bool = False  # drop lines that fail their schema instead of failing
    # budget (docs/concepts/calibration.md#budget)
    window: int | None = None
    model: str | None = None
    threshold: str | None = None  # "N" tokens, "80%" of the window, "0" disables compaction
    config_path: Path | None = None  # user config with extra models
    # estimation (docs/concepts/calibration.md#calibration)
    exact: str = "tiktoken"  # "tiktoken", "none", or "anthropic"
    encoding: str | None = None  # tiktoken encoding; default from --model, else o200k_base
    default_factor: float | None = None  # calibration factor when nothing was reported
    real_tokens: int | None = None  # prompt tokens the provider reported for the last request
    # state (docs/concepts/state.md#the-state-file)
    state_path: Path | None = None  # default: <input>.ctxstate.json
    state_dir: Path | None = None  # states named after their input in this folder (paths.state_path_in)
    use_state: bool = True
    reset_state: bool = False
    lock_timeout: float = LOCK_TIMEOUT
    # cleaning (docs/reference/cli.md#ctxcompact-clean-file): a transcript never ends on a tool result
    # ("Understood." is appended) unless this is set, for a before-model hook called right after tools ran
    # (the model's next turn answers them)
    keep_trailing_results: bool = False
    # compaction (docs/concepts/summary.md#the-extractive-summary, docs/concepts/summary.md#llm-summarizers)
    strategy: str = STRATEGIES.default
    summarizer: str = SUMMARIZERS.default
    summary_model: str | None = None
    summary_window: int | None = None  # the summarizer's own window (None: table/config, then the server)
    base_url: str | None = None
    api_key: str | None = None  # never written anywhere; normally from the environment
    timeout: float = 60.0
    max_retries: int = 2
    instructions: str | None = None
    no_fallback: bool = False
    todos_file: Path | None = None
    # the continuation names the file and lines the summary replaced, for a reader who can open it (the MCP
    # server's recall, a file Session): docs/guides/frameworks.md#mcp-server
    cite_source: bool = False
    # each strategy's own options are declared once, with their defaults, in its registry entry
    # (plugins.STRATEGIES); the built-in ones are also fields here, typed, for library callers.
    # masking (docs/guides/strategies.md#the-four-strategies): --strategy mask, or the first tier of threshold
    # with --prune
    prune: bool = declared_default("prune")
    keep_results: int = declared_default("keep_results")
    protect_tokens: int | None = declared_default("protect_tokens")  # None: the strategy's documented default
    exclude_tools: tuple[str, ...] = declared_default("exclude_tools")
    min_savings: int | None = declared_default("min_savings")  # None: the strategy's documented default
    clear_thinking: bool = declared_default("clear_thinking")
    # sliding window (docs/guides/strategies.md#the-four-strategies)
    invocation_threshold: int = declared_default("invocation_threshold")
    overlap: int = declared_default("overlap")
    safety_ratio: float = declared_default("safety_ratio")
    # the options of strategies that are not fields here (registered at run time), by name
    strategy_options: dict[str, Any] = field(default_factory=dict)

    def option(self, name: str) -> Any:
        """The value of the strategy option ``name``: the field, else what ``strategy_options`` holds, else
        its declared default (KeyError for an option no strategy declares)."""
        if name in _FIELDS:
            return getattr(self, name)
        if name in self.strategy_options:
            return self.strategy_options[name]
        declared = STRATEGIES.option(name)
        if declared is None:
            raise KeyError(f"no strategy declares the option {name!r}")
        return copy.copy(declared.default)

_FIELDS = frozenset(f.name for f in fields(Options))

MAX_TOKENS = 1_000_000_000
"""The largest token figure ctxcompact takes from anyone (an option, a log's usage, a server's window): no
model has a window near a billion tokens, and every figure below it is exact in a float and fits the
state (docs/reference/safety.md)."""

MAX_RETRIES = 10
MAX_SECONDS = 86_400.0


def _declared_range(declared: Option) -> tuple[float, float]:
    assert declared.low is not None, declared.name
    return declared.low, declared.high if declared.high is not None else MAX_TOKENS


LIMITS: dict[str, tuple[float, float]] = {
    "window": (1, MAX_TOKENS),
    "summary_window": (1, MAX_TOKENS),
    "real_tokens": (0, MAX_TOKENS),
    "max_retries": (0, MAX_RETRIES),
    "default_factor": (1.0, 5.0),
    "timeout": (0.1, MAX_SECONDS),
    "lock_timeout": (0.0, MAX_SECONDS),
    # the built-in strategies' numbers, from their declarations
    **{o.name: _declared_range(o) for _, o in STRATEGIES.options(builtin_only=True) if o.kind == "number"},
}
"""The range of every numeric option (inclusive): the CLI's types and :func:`check_options` both read it (a
strategy registered at run time: :func:`limits`)."""


def limits(name: str) -> tuple[float, float]:
    """The inclusive range of the numeric option ``name``: :data:`LIMITS`, or a strategy's declaration."""
    if name in LIMITS:
        return LIMITS[name]
    declared = STRATEGIES.option(name)
    if declared is None or declared.kind != "number":
        raise KeyError(name)
    return _declared_range(declared)


def option_flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def range_problem(name: str, value: object) -> str | None:
    """Why ``value`` is not a sane ``name`` (``window``…), or None. NaN and infinities are never sane."""
    low, high = limits(name)
    integral = isinstance(low, int)
    wrong_type = isinstance(value, bool) or not isinstance(value, (int, float))
    if wrong_type or (integral and isinstance(value, float)):
        return f"{option_flag(name)} must be {'a whole number' if integral else 'a number'}, got {value!r}"
    number = cast(float, value)  # an int or a float, checked just above (an int compares exactly)
    if number != number or not low <= number <= high:  # number != number: NaN
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:20] + "…"
        return f"{option_flag(name)} must be between {low:,} and {high:,}, got {shown}"
    return None


def check_options(opts: Options) -> None:
    """UsageError (exit 2) naming the first numeric option out of its range (:data:`LIMITS`): the library's
    callers get the same rule as the command line."""
    from .errors import UsageError

    for name in opts.strategy_options:
        if name in _FIELDS:
            raise UsageError(f"{name} is an option of its own: Options({name}=...), not strategy_options")
        if STRATEGIES.option(name) is None:
            raise UsageError(f"no strategy declares the option {name!r} (strategy_options)")
    numbers = dict.fromkeys([*LIMITS, *(o.name for _, o in STRATEGIES.options() if o.kind == "number")])
    for name in numbers:
        value = opts.option(name)
        if value is None:
            continue
        problem = range_problem(name, value)
        if problem is not None:
            raise UsageError(problem)
