"""The token budget (docs/concepts/calibration.md#budget): context window, buffer, compaction threshold and
summary budget.

- Window: ``--window N``; else looked up from ``--model NAME`` in the table of known models
  (``ctxcompact/data/models.json``) merged with the user's config file; else :data:`DEFAULT_WINDOW`
  (200,000, the window of every current Claude model and o-series model, the most common target).
- Buffer: 20,000 when the window is 200,000 or more, else 20 % of the window (rounded down). It leaves room
  for the reply and the estimate's error.
- Threshold: window − buffer; ``--threshold N`` (tokens), ``--threshold 80%`` (share of the window), ``0``
  disables compaction.
- Summary budget: buffer × 0.5.

User config: ``$CTXCOMPACT_CONFIG``, else ``$XDG_CONFIG_HOME/ctxcompact/config.json`` (``~/.config`` when
unset), a JSON object whose ``"models"`` object maps a model name (or name prefix) to its window; its
entries add to and override the built-in table.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import orjson

from ctxcompact.errors import UsageError
from ctxcompact.options import MAX_TOKENS
from ctxcompact.paths import read_side_file

DEFAULT_WINDOW = 200_000
LARGE_WINDOW = 200_000
LARGE_WINDOW_BUFFER = 20_000
SMALL_WINDOW_BUFFER_SHARE = Fraction(1, 5)
SUMMARY_SHARE = Fraction(1, 2)
ONE_MILLION_SUFFIX = "[1m]"  # Claude Code's spelling of the 1M-context variants, e.g. "claude-sonnet-4-5[1m]"
ONE_MILLION = 1_000_000

_HOW_TO_ADD = (
    'add it to {path} as {{"models": {{"{name}": WINDOW}}}} (or point $CTXCOMPACT_CONFIG at such a file), '
    "or give --window N"
)


@dataclass(frozen=True, slots=True)
class Budget:
    """Token budget of one run. ``threshold`` is None when compaction is disabled (``--threshold 0``).

    ``window_source``: ``--window``, ``model:<table key>`` (built-in table), ``config:<table key>`` (user
    config), ``model:[1m]`` or ``default``. ``threshold_source``: ``default`` (window − buffer),
    ``--threshold`` (tokens), ``--threshold %`` (share of the window) or ``disabled``.
    """

    window: int
    buffer: int
    threshold: int | None
    summary_budget: int
    window_source: str
    threshold_source: str

    @property
    def disabled(self) -> bool:
        return self.threshold is None

    def would_compact(self, tokens: int) -> bool:
        """True when ``tokens`` reaches the threshold (never when compaction is disabled)."""
        return self.threshold is not None and self.threshold > 0 and tokens >= self.threshold


def buffer_for(window: int) -> int:
    """20,000 for windows of 200,000 or more; 20 % of the window (rounded down) below that."""
    if window >= LARGE_WINDOW:
        return LARGE_WINDOW_BUFFER
    return int(window * SMALL_WINDOW_BUFFER_SHARE)


def summary_budget_for(buffer: int) -> int:
    return int(buffer * SUMMARY_SHARE)


def default_config_path() -> Path:
    """``$CTXCOMPACT_CONFIG``, else ``$XDG_CONFIG_HOME/ctxcompact/config.json`` (``~/.config`` by default)."""
    env = os.environ.get("CTXCOMPACT_CONFIG")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "ctxcompact" / "config.json"


def builtin_models() -> dict[str, int]:
    """The built-in table of model windows (ctxcompact/data/models.json)."""
    # beside this module, as schemacheck reads the schemas (importlib.resources costs a run ~10 ms to import)
    data = orjson.loads((Path(__file__).resolve().parent / "data" / "models.json").read_bytes())
    return _check_models(data.get("models"), "the built-in model table")


def _check_models(models: Any, where: str) -> dict[str, int]:
    if not isinstance(models, dict):
        raise UsageError(f'{where}: "models" must be an object mapping model names to context windows')
    out: dict[str, int] = {}
    for name, window in models.items():
        if isinstance(window, bool) or not isinstance(window, int) or not 0 < window <= MAX_TOKENS:
            raise UsageError(
                f'{where}: "models"."{name}" must be a positive integer (tokens) up to {MAX_TOKENS:,}, '
                f"got {window!r}"
            )
        out[str(name).strip().lower()] = window
    return out


def load_user_models(config_path: str | Path | None = None) -> tuple[dict[str, int], Path]:
    """The ``models`` of the user config and its path. A missing file is fine unless it was named explicitly
    (argument or ``$CTXCOMPACT_CONFIG``); an unreadable or malformed one is a UsageError naming the file."""
    explicit = config_path is not None or bool(os.environ.get("CTXCOMPACT_CONFIG"))
    path = Path(config_path).expanduser() if config_path is not None else default_config_path()
    try:
        raw = read_side_file(path, f"config file {path}")
    except FileNotFoundError:
        if explicit:
            raise UsageError(f"config file {path} does not exist") from None
        return {}, path
    except OSError as exc:
        raise UsageError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"config file {path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"config file {path} must hold a JSON object")
    if "models" not in data:
        return {}, path
    return _check_models(data["models"], f"config file {path}"), path


def lookup_window(model: str, config_path: str | Path | None = None) -> tuple[int, str]:
    """(window, source) of ``model``: the exact name first, then the longest known name it starts with; user
    config entries win over built-in ones. A ``provider/`` prefix is ignored; ``[1m]`` means 1,000,000.
    Unknown → UsageError saying how to add it."""
    user, path = load_user_models(config_path)
    table = builtin_models()
    name = model.strip().lower()
    if not name:
        raise UsageError("--model is empty")
    candidates = [name]
    if "/" in name:  # "anthropic/claude-sonnet-4-5" (OpenRouter, LiteLLM)
        candidates.append(name.rsplit("/", 1)[1])
    for cand in candidates:
        for source, models in (("config", user), ("model", table)):
            if cand in models:
                return models[cand], f"{source}:{cand}"
    for cand in candidates:
        if cand.endswith(ONE_MILLION_SUFFIX):
            return ONE_MILLION, f"model:{ONE_MILLION_SUFFIX}"
    for cand in candidates:
        best: tuple[int, str, int] | None = None  # (prefix length, source, window)
        for source, models in (("config", user), ("model", table)):
            for key, window in models.items():
                # The user's entry wins a tie with the built-in one of the same length.
                if cand.startswith(key) and (best is None or len(key) > best[0]):
                    best = (len(key), f"{source}:{key}", window)
        if best is not None:
            return best[2], best[1]
    raise UsageError(f"unknown model {model!r}: " + _HOW_TO_ADD.format(path=path, name=model.strip()))


# (re's own cache keeps them compiled: only a --threshold value needs them, not every process)
_TOKENS = r"[0-9]+|[0-9]{1,3}(?:[,_][0-9]{3})+"
_PERCENT = r"([0-9]+(?:\.[0-9]+)?)\s*%"


def parse_threshold(value: str, window: int) -> tuple[int | None, str]:
    """(threshold, source) from a ``--threshold`` value: tokens (``150000``, ``150_000``, ``150,000``), a
    share of the window (``80%``, ``82.5%``, rounded down), or ``0`` / ``0%`` to disable compaction."""
    text = value.strip()
    shown = value if len(value) <= 40 else value[:20] + "…"
    bad = f"invalid --threshold {shown!r}: "
    if len(text) > 40:  # no threshold needs more digits; int() of thousands of them is refused (or slow)
        raise UsageError(bad + f"{len(text):,} characters; give tokens (150000) or a share of the "
                         "window (80%)")
    if m := re.fullmatch(_PERCENT, text):
        share = Fraction(m.group(1)) / 100
        if share > 1:
            raise UsageError(bad + "a share of the window cannot be over 100%")
        if share == 0:
            return None, "disabled"
        threshold = int(window * share)
        if threshold <= 0:
            raise UsageError(bad + f"{text} of a {window}-token window is less than one token")
        return threshold, "--threshold %"
    if re.fullmatch(_TOKENS, text):
        tokens = int(text.replace("_", "").replace(",", ""))
        if tokens == 0:
            return None, "disabled"
        if tokens > window:
            raise UsageError(bad + f"{tokens} tokens is larger than the window ({window} tokens)")
        return tokens, "--threshold"
    if text.startswith("-"):
        raise UsageError(bad + "must not be negative")
    raise UsageError(bad + "give tokens (150000), a share of the window (80%), or 0 to disable compaction")


def make_budget(
    window: int | None,
    model: str | None,
    threshold: str | None,
    config_path: str | Path | None = None,
) -> Budget:
    """The budget from ``--window``, ``--model`` and ``--threshold`` (see the module docstring)."""
    if window is not None:
        if isinstance(window, bool) or not isinstance(window, int) or not 0 < window <= MAX_TOKENS:
            raise UsageError(f"--window must be a positive number of tokens up to {MAX_TOKENS:,}, "
                             f"got {window!r}")
        win, window_source = window, "--window"
    elif model:
        win, window_source = lookup_window(model, config_path)
    else:
        win, window_source = DEFAULT_WINDOW, "default"
    buffer = buffer_for(win)
    if threshold is None or threshold.strip() == "":
        thr: int | None = win - buffer
        threshold_source = "default"
    else:
        thr, threshold_source = parse_threshold(threshold, win)
    return Budget(
        window=win,
        buffer=buffer,
        threshold=thr,
        summary_budget=summary_budget_for(buffer),
        window_source=window_source,
        threshold_source=threshold_source,
    )
