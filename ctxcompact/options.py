"""Everything a caller can choose, in one place. The CLI fills it from flags and CTXCOMPACT_* variables;
library callers build it directly (every field has the CLI's default)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .plugins import STRATEGIES, SUMMARIZERS


@dataclass(slots=True)
class Options:
    # input and output
    format: str = "auto"  # input format, or "auto" to detect it
    to: str | None = None  # output format (default: the input's)
    lenient: bool = False  # drop lines that fail their schema instead of failing
    # budget (README "Budget")
    window: int | None = None
    model: str | None = None
    threshold: str | None = None  # "N" tokens, "80%" of the window, "0" disables compaction
    config_path: Path | None = None  # user config with extra models
    # estimation (README "Token estimation and calibration")
    exact: str = "tiktoken"  # "tiktoken", "none", or "anthropic"
    encoding: str | None = None  # tiktoken encoding; default from --model, else o200k_base
    default_factor: float | None = None  # calibration factor when nothing was reported
    real_tokens: int | None = None  # prompt tokens the provider reported for the last request
    # state (README "The state file")
    state_path: Path | None = None  # default: <input>.ctxstate.json
    state_dir: Path | None = None  # states named after their input in this folder (paths.state_path_in)
    use_state: bool = True
    reset_state: bool = False
    lock_timeout: float = 10.0
    # cleaning (README "`ctxcompact clean`"): a transcript never ends on a tool result ("Understood." is
    # appended) unless this is set, for a before-model hook called right after tools ran (the model's next
    # turn answers them)
    keep_trailing_results: bool = False
    # compaction (README "`ctxcompact run`", "LLM summarizers")
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
    # masking (README "Strategies"): --strategy mask, or the first tier of threshold with --prune
    prune: bool = False
    keep_results: int = 3
    protect_tokens: int | None = None  # None: the strategy's documented default
    exclude_tools: tuple[str, ...] = ()
    min_savings: int | None = None  # None: the strategy's documented default
    clear_thinking: bool = False
    # sliding window (README "Strategies")
    invocation_threshold: int = 5
    overlap: int = 2
    safety_ratio: float = 0.7
