"""The commands: a thin click layer over :mod:`ctxcompact.api`.

Each command turns flags into :class:`~ctxcompact.options.Options`, calls one library function and prints its
result. Heavy modules (tiktoken, jsonschema, the SDKs, the engine) are imported inside the commands that need
them, so ``ctxcompact --help`` starts fast. This module holds the group and ``run``, a hook's command; the
others are defined in :mod:`.tools` and :mod:`.serve`, loaded when one of them runs or the commands are
listed (``--help``, completion), so a hook's ``run`` does not build them (:data:`ELSEWHERE`)."""

from __future__ import annotations

import errno
from importlib import import_module
from pathlib import Path
from typing import Any

import click

from .. import __version__
from ..atomic import output_error
from ..errors import UsageError
from .options import (
    EXIT_CODES,
    budget_options,
    echo_err,
    env_name,
    estimate_options,
    format_options,
    from_environment,
    input_argument,
    opt,
    options_from,
    output_option,
    source_of,
    state_options,
    stdout,
    strategy_options,
    summary_options,
    to_option,
    trailing_option,
)
from .render import compaction_line, render_dry_run, repairs_line, run_json, to_json

ELSEWHERE = {"calibrate": "tools", "clean": "tools", "estimate": "tools", "eval": "tools", "mcp": "serve",
             "simulate": "tools", "state": "tools", "validate": "tools"}
"""The commands defined in another module of this package, by name (tests/cli/test_lazy_commands.py checks
that it names every command)."""


class _Group(click.Group):
    """Writing to stdout can fail too (``| head`` closed the pipe, ``> /dev/full``): that is exit 6 with a
    message, not click's silent exit 1 (docs/reference/exit-codes.md#the-codes). A command of
    :data:`ELSEWHERE` is defined (its module imported) when it is asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *ELSEWHERE})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in ELSEWHERE:
            import_module(f"{__package__}.{ELSEWHERE[cmd_name]}")  # registers its commands on the group
        return self.commands.get(cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except OSError as exc:
            if exc.filename is not None or exc.errno not in _WRITE_ERRNOS:
                raise
            raise output_error(exc, "output", None) from None


_WRITE_ERRNOS = frozenset((errno.EPIPE, errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO))


@click.group(
    cls=_Group,
    epilog=EXIT_CODES, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100}
)
@click.version_option(__version__, "--version", prog_name="ctxcompact")
def cli() -> None:
    """Validate, clean, estimate and compact LLM agent transcripts (JSONL) so they fit the context window.

    \b
    Example:
      ctxcompact estimate samples/openai-long.jsonl --window 32000
      ctxcompact run samples/openai-long.jsonl --window 32000 -o compacted.jsonl
    Every option can also be set as CTXCOMPACT_<OPTION> (e.g. CTXCOMPACT_WINDOW=32000).
    Shell completion: eval "$(_CTXCOMPACT_COMPLETE=bash_source ctxcompact)" (zsh_source, fish_source).
    Colour and progress only on a terminal; NO_COLOR=1 turns colour off.
    """
    from ..progress import set_quiet

    set_quiet(False)  # -q of an earlier in-process call does not carry over


@cli.command(epilog=EXIT_CODES)
@input_argument
@output_option
@format_options
@to_option
@budget_options
@estimate_options
@state_options
@strategy_options
@trailing_option
@summary_options
@opt("--dry-run", is_flag=True, help="Print what would happen; write nothing.")
@opt(
    "--json",
    "as_json",
    is_flag=True,
    envvar=env_name("json"),
    help="Print the run's report as one JSON object on stdout (decision, tokens before and after, repairs, "
    "summary, what was kept, state). Needs -o FILE, since without it stdout carries the transcript (set "
    "by CTXCOMPACT_JSON alone, it is then ignored); with --dry-run, the report of what would happen.",
)
@opt("-q", "--quiet", is_flag=True, help="No summary, repairs line or progress on stderr.")
def run(file: str | None, output: str | None, dry_run: bool, as_json: bool, quiet: bool, **kw: Any) -> None:
    """Validate, apply the state, clean, estimate, and compact if over the threshold; write the transcript
    and the state.

    The output is `[system messages] + [summary] + [continuation quoting the latest request]` when it
    compacts, else the cleaned transcript with any earlier summary applied. The next run on the grown
    transcript replaces what the summary covers (the watermark in the state) and keeps only newer records.

    \b
    Example:
      ctxcompact run samples/openai-long.jsonl --window 32000 -o compacted.jsonl
      agent-log | ctxcompact run - --state s.json --model gpt-4o > context.jsonl
    """
    from .. import api

    api.quiet_progress(quiet)
    out_path = Path(output) if output and output != "-" else None
    if as_json and not dry_run and out_path is None and from_environment("as_json"):
        as_json = False  # CTXCOMPACT_JSON set for the other commands: run's stdout stays the transcript
    if as_json and not dry_run and out_path is None:
        raise UsageError("run --json prints the report on stdout, where the transcript goes without -o: "
                         "give -o FILE for the transcript (or --dry-run --json for a report alone)")
    source = source_of(file)
    opts = options_from(**kw)
    if dry_run:
        result = api.run(source, opts, dry_run=True, warn=echo_err)
        if as_json:
            click.echo(to_json(run_json(result, dry_run=True, output=None)))
        else:
            click.echo(render_dry_run(result))
        return
    result = api.run(source, opts, output=out_path or stdout(), warn=echo_err)
    if as_json:
        click.echo(to_json(run_json(result, dry_run=False, output=output)))
    for problem in result.problems:
        echo_err(str(problem))
    for warning in result.warnings:
        echo_err(f"warning: {warning}")
    if not quiet and result.repairs:
        echo_err(repairs_line(result.repairs))
    if not quiet and result.compacted:
        echo_err(compaction_line(result))
    if result.exit_code:
        raise SystemExit(result.exit_code)
