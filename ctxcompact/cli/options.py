"""The command line's shared pieces: every option and its ``CTXCOMPACT_<OPTION>`` variable, the option
groups the commands share, and turning flags into :class:`~ctxcompact.options.Options`."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from ..errors import EXIT_MEANINGS, UsageError
from ..options import Options, limits
from ..plugins import COUNTERS, DEFAULT_ENCODING, ENCODINGS, FORMATS, STRATEGIES, SUMMARIZERS
from ..secrets import scrub_credentials

F = TypeVar("F", bound=Callable[..., Any])

EXIT_CODES = "\b\nExit codes:\n" + "".join(
    f"  {int(code):>2}  {text}\n" for code, text in EXIT_MEANINGS.items()
)

#: every default a flag shows is the library's (one place: options.Options, and plugins for the names)
DEFAULTS = Options()
FORMAT_NAMES = ["auto", *FORMATS.names()]
STRATEGY_NAMES = STRATEGIES.names()


def _short_value(value: Any, param: click.Parameter | None, ctx: click.Context | None,
                 fail: Callable[..., Any], low: float, high: float) -> None:
    """A value of thousands of characters is named by its start and length, not echoed whole."""
    if isinstance(value, str) and len(value) > 40:
        fail(f"{value[:20]!r}… ({len(value):,} characters) is not a number from {low:,} to {high:,}.",
             param, ctx)


class _Int(click.IntRange):
    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        _short_value(value, param, ctx, self.fail, self.min or 0, self.max or 0)
        return super().convert(value, param, ctx)


class _Finite(click.FloatRange):
    """A FloatRange that also refuses NaN and infinities (click's comparisons let NaN through)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        _short_value(value, param, ctx, self.fail, self.min or 0, self.max or 0)
        rv = super().convert(value, param, ctx)
        if rv != rv or rv in (float("inf"), float("-inf")):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return rv


def ranged(name: str) -> click.ParamType:
    """The click type of the numeric option ``name``, its range from :func:`ctxcompact.options.limits` (the
    same rule ``check_options`` applies to library callers)."""
    low, high = limits(name)
    if isinstance(low, int):
        return _Int(min=low, max=int(high))
    return _Finite(min=low, max=high)


def env_name(name: str) -> str:
    return "CTXCOMPACT_" + name.upper().replace("-", "_")


def opt(*decls: str, **kw: Any) -> Callable[[F], F]:
    """click.option with the CTXCOMPACT_<OPTION> variable every option has
    (docs/reference/cli.md#input-output-and-options)."""
    long = next(d for d in decls if d.startswith("--"))
    kw.setdefault("envvar", env_name(long[2:].split("/")[0]))
    kw.setdefault("show_envvar", True)
    return click.option(*decls, **kw)


def input_argument(f: F) -> F:
    return click.argument("file", required=False, type=click.Path(dir_okay=False, allow_dash=True))(f)


def output_option(f: F) -> F:
    return opt(
        "-o",
        "--output",
        type=click.Path(dir_okay=False, writable=True),
        help="Write here instead of stdout (atomically: temp file, fsync, rename).",
    )(f)


def trailing_option(f: F) -> F:
    return opt(
        "--keep-trailing-results",
        is_flag=True,
        help="Do not append 'Understood.' after a trailing tool result (for a before-model hook called "
        "right after tools ran: the model's next turn answers them).",
    )(f)


def format_options(f: F) -> F:
    f = opt(
        "--lenient", is_flag=True, help="Drop lines that fail their schema (reported) instead of failing."
    )(f)
    f = opt(
        "--format",
        "fmt",
        type=click.Choice(FORMAT_NAMES),
        default=DEFAULTS.format,
        show_default=True,
        envvar=env_name("format"),
        help="Input format; auto detects it from the content.",
    )(f)
    return f


def budget_options(f: F) -> F:
    f = opt(
        "--config",
        "config_path",
        type=click.Path(dir_okay=False),
        envvar=env_name("config"),
        help="Config file with extra models (default ~/.config/ctxcompact/config.json).",
    )(f)
    f = opt(
        "--threshold",
        help="Compact at N tokens, or N% of the window; 0 disables compaction (default: window − buffer).",
    )(f)
    f = opt("--model", help="Model name: sets the window from the known-models table and the encoding.")(f)
    f = opt("--window", type=ranged("window"), help="Context window in tokens (default 200000).")(f)
    return f


def estimate_options(f: F) -> F:
    f = opt(
        "--real-tokens",
        type=ranged("real_tokens"),
        help="Prompt tokens the provider reported for the last request (calibration).",
    )(f)
    f = opt(
        "--default-factor",
        type=ranged("default_factor"),
        help="Correction factor when nothing was reported (default 2.0 heuristic, 1.25 exact; "
        "docs/concepts/calibration.md#calibration).",
    )(f)
    f = opt(
        "--encoding",
        type=click.Choice(list(ENCODINGS)),
        help=f"tiktoken encoding (default: from --model, else {DEFAULT_ENCODING}).",
    )(f)
    f = opt(
        "--exact",
        type=click.Choice(list(COUNTERS)),
        default=DEFAULTS.exact,
        show_default=True,
        help="Exact counter: tiktoken (offline), none (heuristic only), "
        "anthropic (the provider's count_tokens endpoint); openai has no such endpoint and says so.",
    )(f)
    return f


def strategy_options(f: F) -> F:
    f = strategy_tuning_options(f)
    f = opt(
        "--strategy",
        type=click.Choice(list(STRATEGY_NAMES)),
        default=DEFAULTS.strategy,
        show_default=True,
        help="Compaction strategy (docs/guides/strategies.md: when to use which).",
    )(f)
    return f


def strategy_tuning_options(f: F) -> F:
    """The strategies' own options, without ``--strategy`` (``eval`` takes several names): each built-in
    strategy's declarations (plugins.STRATEGIES), in its order, its name before each help."""
    for strategy, option in reversed(STRATEGIES.options(builtin_only=True)):
        kw: dict[str, Any] = {"help": f"{strategy}: {option.help}"}
        if option.kind == "flag":
            kw["is_flag"] = True
        elif option.kind == "names":
            kw.update(multiple=True, metavar=option.metavar)
        else:
            kw["type"] = ranged(option.name)
            if option.default is not None:
                kw.update(default=option.default, show_default=True)
        f = opt(option.flag, **kw)(f)
    return f


def to_option(f: F) -> F:
    return opt("--to", type=click.Choice(FORMAT_NAMES[1:]), help="Output format (default: the input's).")(f)


def summary_options(f: F) -> F:
    """Who writes the summary and how (``run`` and ``eval`` take the same, so eval measures what run does)."""
    f = opt(
        "--todos",
        "todos_file",
        type=click.Path(dir_okay=False, exists=True),
        envvar=env_name("todos"),
        help="Open todo items to carry into the summary (JSON list or Markdown checklist).",
    )(f)
    f = opt("--no-fallback", is_flag=True,
            help="Exit 4 instead of falling back to extractive when the LLM fails.")(f)
    f = opt("--instructions", help="What the summary should focus on (like /compact <instructions>).")(f)
    f = opt("--max-retries", type=ranged("max_retries"), default=DEFAULTS.max_retries, show_default=True,
            help="Provider retries.")(f)
    f = opt(
        "--timeout",
        type=ranged("timeout"),
        default=DEFAULTS.timeout,
        show_default=True,
        help="Seconds before a provider call times out.",
    )(f)
    f = opt(
        "--summary-window",
        type=ranged("summary_window"),
        help="Context window of the summarizer's model, in tokens (default: the models table or config for "
        "--summary-model, else what the server reports, else 200000 / 128000).",
    )(f)
    f = opt("--base-url", help="API base URL (any OpenAI-compatible server for --summarizer openai).")(f)
    f = opt("--summary-model", help="Model of the LLM summarizer.")(f)
    f = opt(
        "--summarizer",
        type=click.Choice(list(SUMMARIZERS.names())),
        default=DEFAULTS.summarizer,
        show_default=True,
        help="Who writes the summary; extractive is offline and deterministic.",
    )(f)
    return f


def state_options(f: F) -> F:
    f = opt("--reset-state", is_flag=True, help="Ignore and replace a state that does not match the input.")(
        f
    )
    f = opt("--no-state", is_flag=True, help="Neither read nor write a state file.")(f)
    f = opt(
        "--state-dir",
        type=click.Path(file_okay=False),
        help="Keep the state, its lock and its count cache in this existing folder, named "
        "<input name>.<digest of the input's path>.ctxstate.json, instead of beside the input. "
        "--state wins over it.",
    )(f)
    f = opt(
        "--state",
        "state_path",
        type=click.Path(dir_okay=False),
        envvar=env_name("state"),
        help="State file (default <input>.ctxstate.json, or one in --state-dir; required for stdin).",
    )(f)
    return f


def source_of(file: str | None) -> str:
    if file is None or file == "-":
        if file is None and sys.stdin.isatty():
            raise UsageError("no input: give a FILE, or pipe a transcript on stdin")
        return "-"
    return file


def options_from(**kw: Any) -> Options:
    opts = Options()
    mapping = {"fmt": "format", "state_path": "state_path", "config_path": "config_path"}
    for key, value in kw.items():
        if value is None:
            continue
        name = mapping.get(key, key)
        if name in ("state_path", "state_dir", "config_path", "todos_file"):
            value = Path(value)
        if name == "no_state":
            opts.use_state = not value
            continue
        declared = STRATEGIES.option(name)
        if declared is not None and declared.kind == "names":
            value = tuple(t.strip() for item in value for t in item.split(",") if t.strip())
        setattr(opts, name, value)
    return opts


_COLOURS = {"error:": "red", "internal error:": "red", "warning:": "yellow"}


def colour(stream: Any) -> bool:
    """Colour only on a terminal, and never when ``NO_COLOR`` is set to anything (https://no-color.org) or
    the terminal is ``dumb``."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def echo_err(message: str) -> None:
    """``ctxcompact: <message>`` on stderr; an ``error:`` or ``warning:`` in colour on a terminal. A message
    never quotes a credential (secrets.scrub_credentials)."""
    message = scrub_credentials(message)
    err = sys.stderr
    if colour(err):
        for word, fg in _COLOURS.items():
            if message.startswith(word):
                message = click.style(word, fg=fg, bold=True) + message[len(word):]
                break
    click.echo(f"ctxcompact: {message}", err=True, color=colour(err))


def stdout() -> Any:
    return sys.stdout.buffer


# --------------------------------------------------------------------------------------------------


def write_output(lines: Any, output: str | None) -> None:
    """A command's output lines to ``-o PATH`` (atomically) or to stdout."""
    from .. import api

    api.write_output(lines, Path(output) if output and output != "-" else stdout())


def from_environment(param: str) -> bool:
    """The option came from its CTXCOMPACT_* variable, not from the command line."""
    from click.core import ParameterSource

    return click.get_current_context().get_parameter_source(param) is ParameterSource.ENVIRONMENT
