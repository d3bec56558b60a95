"""The command line: a thin click layer over :mod:`ctxcompact.api`.

Each command turns flags into :class:`~ctxcompact.options.Options`, calls one library function and prints
its result. Heavy modules (tiktoken, jsonschema, the SDKs) are imported inside the commands that need them,
so ``ctxcompact --help`` starts fast.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from . import __version__
from .errors import CtxCompactError, ExitCode, UsageError
from .options import Options

F = TypeVar("F", bound=Callable[..., Any])

EXIT_CODES = """\b
Exit codes:
  0  success
  1  the input is invalid (nothing written); `estimate --check`: run would compact
  2  usage error (bad option or argument)
  3  the state file belongs to another transcript, or is locked or corrupt (nothing written)
  4  the summarizer failed and --no-fallback was given (nothing written)
  5  written, but the result still does not fit the window (a warning says why)
"""

FORMAT_NAMES = ["auto", "openai", "anthropic", "genai", "claude-code", "codex"]


def _env(name: str) -> str:
    return "CTXCOMPACT_" + name.upper().replace("-", "_")


def opt(*decls: str, **kw: Any) -> Callable[[F], F]:
    """click.option with the CTXCOMPACT_<OPTION> variable every option has (§3)."""
    long = next(d for d in decls if d.startswith("--"))
    kw.setdefault("envvar", _env(long[2:].split("/")[0]))
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
        default="auto",
        show_default=True,
        envvar=_env("format"),
        help="Input format; auto detects it from the content.",
    )(f)
    return f


def budget_options(f: F) -> F:
    f = opt(
        "--config",
        "config_path",
        type=click.Path(dir_okay=False),
        envvar=_env("config"),
        help="Config file with extra models (default ~/.config/ctxcompact/config.json).",
    )(f)
    f = opt(
        "--threshold",
        help="Compact at N tokens, or N% of the window; 0 disables compaction (default: window − buffer).",
    )(f)
    f = opt("--model", help="Model name: sets the window from the known-models table and the encoding.")(f)
    f = opt("--window", type=click.IntRange(min=1), help="Context window in tokens (default 200000).")(f)
    return f


def estimate_options(f: F) -> F:
    f = opt(
        "--real-tokens",
        type=click.IntRange(min=0),
        help="Prompt tokens the provider reported for the last request (calibration).",
    )(f)
    f = opt(
        "--default-factor",
        type=click.FloatRange(min=1.0, max=5.0),
        help="Correction factor when nothing was reported (default 2.0 heuristic, see README for exact).",
    )(f)
    f = opt(
        "--encoding",
        type=click.Choice(["o200k_base", "cl100k_base"]),
        help="tiktoken encoding (default: from --model, else o200k_base).",
    )(f)
    f = opt(
        "--exact",
        type=click.Choice(["tiktoken", "none", "anthropic", "openai"]),
        default="tiktoken",
        show_default=True,
        help="Exact counter: tiktoken (offline), none (heuristic only), "
        "anthropic (the provider's count_tokens endpoint); openai has no such endpoint and says so.",
    )(f)
    return f


def strategy_options(f: F) -> F:
    f = opt(
        "--safety-ratio",
        type=click.FloatRange(min=0.05, max=1.0),
        default=0.7,
        show_default=True,
        help="sliding-window: also compact when the context exceeds this share of the window.",
    )(f)
    f = opt(
        "--overlap",
        type=click.IntRange(min=0),
        default=2,
        show_default=True,
        help="sliding-window: invocations before the new ones that each event re-covers (ω).",
    )(f)
    f = opt(
        "--invocation-threshold",
        type=click.IntRange(min=1),
        default=5,
        show_default=True,
        help="sliding-window: compact every θ new invocations.",
    )(f)
    f = opt(
        "--clear-thinking",
        is_flag=True,
        help="mask: also clear thinking blocks older than the latest assistant turn.",
    )(f)
    f = opt(
        "--min-savings",
        type=click.IntRange(min=0),
        help="mask: mask only when it frees at least this many tokens.",
    )(f)
    f = opt(
        "--exclude-tools",
        multiple=True,
        metavar="NAME",
        help="mask: never clear results of this tool (repeatable, or comma-separated).",
    )(f)
    f = opt(
        "--protect-tokens",
        type=click.IntRange(min=0),
        help="mask: never clear the newest T tokens of tool output.",
    )(f)
    f = opt(
        "--keep-results",
        type=click.IntRange(min=0),
        default=3,
        show_default=True,
        help="mask: never clear the N most recent tool results.",
    )(f)
    f = opt(
        "--prune",
        is_flag=True,
        envvar=_env("prune"),
        help="threshold: mask old tool results first; summarize only if still over the threshold.",
    )(f)
    f = opt(
        "--strategy",
        type=click.Choice(["threshold", "mask", "sliding-window"]),
        default="threshold",
        show_default=True,
        help="Compaction strategy (see README: when to use which).",
    )(f)
    return f


def state_options(f: F) -> F:
    f = opt("--reset-state", is_flag=True, help="Ignore and replace a state that does not match the input.")(
        f
    )
    f = opt("--no-state", is_flag=True, help="Neither read nor write a state file.")(f)
    f = opt(
        "--state",
        "state_path",
        type=click.Path(dir_okay=False),
        envvar=_env("state"),
        help="State file (default <input>.ctxstate.json; required for stdin).",
    )(f)
    return f


def _source(file: str | None) -> str:
    if file is None or file == "-":
        if file is None and sys.stdin.isatty():
            raise UsageError("no input: give a FILE, or pipe a transcript on stdin")
        return "-"
    return file


def _options(**kw: Any) -> Options:
    opts = Options()
    mapping = {"fmt": "format", "state_path": "state_path", "config_path": "config_path"}
    for key, value in kw.items():
        if value is None:
            continue
        name = mapping.get(key, key)
        if name in ("state_path", "config_path", "todos_file"):
            value = Path(value)
        if name == "no_state":
            opts.use_state = not value
            continue
        if name == "exclude_tools":
            value = tuple(t.strip() for item in value for t in item.split(",") if t.strip())
        setattr(opts, name, value)
    return opts


def _echo_err(message: str) -> None:
    click.echo(f"ctxcompact: {message}", err=True)


def _stdout() -> Any:
    return sys.stdout.buffer


# --------------------------------------------------------------------------------------------------


@click.group(
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
    """


@cli.command(epilog=EXIT_CODES)
@input_argument
@format_options
@opt("--json", "as_json", is_flag=True, envvar=_env("json"), help="Machine-readable report on stdout.")
def validate(file: str | None, fmt: str, lenient: bool, as_json: bool) -> None:
    """Check every line against its format's JSON Schema and the cross-record rules.

    Each problem is printed as `line N: <json path>: <what>`. Exit 1 when the input is invalid.

    \b
    Example:
      ctxcompact validate samples/anthropic-session.jsonl
      cat session.jsonl | ctxcompact validate --json | jq .problems
    """
    from .validate import validate as do_validate

    report = do_validate(_source(file), fmt, lenient=lenient)
    if as_json:
        click.echo(_json(report.to_json()))
    else:
        for problem in report.problems:
            click.echo(str(problem))
        status = "valid" if report.ok else "invalid"
        click.echo(
            f"{status}: {report.records} records, format {report.format}, "
            f"{sum(p.severity == 'error' for p in report.problems)} errors, "
            f"{sum(p.severity == 'warning' for p in report.problems)} warnings"
            + (f", {report.dropped} lines dropped" if report.dropped else "")
        )
    if not report.ok:
        raise SystemExit(ExitCode.INVALID_INPUT)


@cli.command(epilog=EXIT_CODES)
@input_argument
@output_option
@format_options
@opt("--to", type=click.Choice(FORMAT_NAMES[1:]), help="Output format (default: the input's).")
@opt("--report", is_flag=True, help="List each repair on stderr.")
@trailing_option
def clean(
    file: str | None,
    output: str | None,
    fmt: str,
    lenient: bool,
    to: str | None,
    report: bool,
    keep_trailing_results: bool,
) -> None:
    """Repair a transcript (§4) and write it: missing tool results, separated or orphan results,
    a trailing tool result, role order.

    \b
    Example:
      ctxcompact clean session.jsonl --report -o session.clean.jsonl
    """
    from . import api

    result = api.clean_file(
        _source(file),
        fmt=fmt,
        lenient=lenient,
        to=to,
        warn=_echo_err,
        keep_trailing_results=keep_trailing_results,
    )
    for problem in result.problems:
        _echo_err(str(problem))
    if report:
        for repair in result.repairs:
            _echo_err(f"repair: {repair}")
        _echo_err(f"{len(result.repairs)} repairs")
    _write(result.lines(), output)


@cli.command(epilog=EXIT_CODES)
@click.argument("files", nargs=-1, type=click.Path(allow_dash=True))
@format_options
@budget_options
@estimate_options
@strategy_options
@state_options
@opt(
    "--json",
    "as_json",
    is_flag=True,
    envvar=_env("json"),
    help="Machine-readable report on stdout (with several files: one JSON object per line, then totals).",
)
@opt("--check", is_flag=True, help="Exit 1 when `run` would compact (any file, with several), 0 otherwise.")
@opt(
    "-r", "--recursive", is_flag=True, help="Directories: also their subdirectories; globs: ** matches them."
)
@opt(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    help="Processes for several files (default: all cores); 1 runs them in turn.",
)
def estimate(
    files: tuple[str, ...], as_json: bool, check: bool, recursive: bool, jobs: int | None, **kw: Any
) -> None:
    """Dry run: counts, tokens (heuristic, exact, calibrated), the budget, and whether `run` would compact.

    Reads the state beside the input (if any) and writes nothing. Several files, directories (their
    *.jsonl files) or globs give a row per file and totals, on all cores; a file that fails gets an
    error row, the others go on, and the exit code is 1.

    \b
    Example:
      ctxcompact estimate samples/openai-long.jsonl --window 32000
      ctxcompact estimate session.jsonl --json | jq .tokens.calibrated
      ctxcompact estimate session.jsonl --check --threshold 80% || echo "time to compact"
      ctxcompact estimate ~/.claude/projects -r --exact none --json | jq -c '{file, percent_used}'
    """
    opts = _options(**kw)
    if len(files) > 1 or recursive or (files and files[0] != "-" and _is_many(files[0])):
        _estimate_many(files, opts, as_json, check, recursive, jobs)
        return
    from . import api

    report = api.estimate(_source(files[0] if files else None), opts)
    if as_json:
        click.echo(_json(report.to_json()))
    else:
        click.echo(_render_estimate(report))
    if check and report.would_compact:
        raise SystemExit(ExitCode.INVALID_INPUT)


def _is_many(arg: str) -> bool:
    """A directory, or a glob that is not itself a file name."""
    path = Path(arg)
    return path.is_dir() or (not path.exists() and any(c in arg for c in "*?["))


def _estimate_many(
    files: tuple[str, ...], opts: Options, as_json: bool, check: bool, recursive: bool, jobs: int | None
) -> None:
    import orjson

    from .batch import Totals, estimate_many, expand

    paths = expand(files, recursive)
    if not paths:
        raise UsageError(f"no *.jsonl files in {' '.join(files)}")
    totals = Totals()
    compact = False
    if not as_json:
        click.echo(
            _ROW.format("file", "format", "records", "heuristic", "exact", "calibrated", "used", "compact")
        )
    for row in estimate_many(paths, opts, jobs):
        totals.add(row)
        if row.report is not None:
            compact = compact or bool(row.report["would_compact"])
        if as_json:
            click.echo(orjson.dumps(row.to_json()).decode())
        elif row.report is not None:
            r, t = row.report, row.report["tokens"]
            click.echo(
                _ROW.format(
                    row.path,
                    r["format"],
                    f"{r['records']:,}",
                    f"{t['heuristic']:,}",
                    "-" if t["exact"] is None else f"{t['exact']:,}",
                    f"{t['calibrated']:,}",
                    f"{r['percent_used']:.1f}%",
                    "yes" if r["would_compact"] else "no",
                )
            )
        else:
            click.echo(_ROW.format(row.path, "error", "", "", "", "", "", ""))
        if row.error is not None:
            _echo_err(f"error: {row.path}: {row.error}")
    tj = totals.to_json()
    if as_json:
        click.echo(orjson.dumps({"totals": tj}).decode())
    else:
        tt = tj["tokens"]
        click.echo(
            _ROW.format(
                f"total ({tj['files']} files, {tj['failed']} failed)",
                "",
                f"{tj['records']:,}",
                f"{tt['heuristic']:,}",
                "-" if tt["exact"] is None else f"{tt['exact']:,}",
                f"{tt['calibrated']:,}",
                "",
                f"{tj['would_compact']}",
            )
        )
    if totals.failed or (check and compact):
        raise SystemExit(ExitCode.INVALID_INPUT)


_ROW = "{:<40} {:<11} {:>9} {:>12} {:>12} {:>12} {:>7} {:>7}"


@cli.command(epilog=EXIT_CODES)
@input_argument
@output_option
@format_options
@opt("--to", type=click.Choice(FORMAT_NAMES[1:]), help="Output format (default: the input's).")
@budget_options
@estimate_options
@state_options
@strategy_options
@trailing_option
@opt(
    "--summarizer",
    type=click.Choice(["extractive", "anthropic", "openai"]),
    default="extractive",
    show_default=True,
    help="Who writes the summary; extractive is offline and deterministic.",
)
@opt("--summary-model", help="Model of the LLM summarizer.")
@opt("--base-url", help="API base URL (any OpenAI-compatible server for --summarizer openai).")
@opt(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=60.0,
    show_default=True,
    help="Seconds before a provider call times out.",
)
@opt("--max-retries", type=click.IntRange(min=0), default=2, show_default=True, help="Provider retries.")
@opt("--instructions", help="What the summary should focus on (like /compact <instructions>).")
@opt("--no-fallback", is_flag=True, help="Exit 4 instead of falling back to extractive when the LLM fails.")
@opt(
    "--todos",
    "todos_file",
    type=click.Path(dir_okay=False, exists=True),
    envvar=_env("todos"),
    help="Open todo items to carry into the summary (JSON list or Markdown checklist).",
)
@opt("--dry-run", is_flag=True, help="Print what would happen; write nothing.")
@opt("--json", "as_json", is_flag=True, envvar=_env("json"), help="With --dry-run: a JSON report.")
@opt("-q", "--quiet", is_flag=True, help="No summary line on stderr.")
def run(file: str | None, output: str | None, dry_run: bool, as_json: bool, quiet: bool, **kw: Any) -> None:
    """Validate, clean, apply the state, estimate, and compact if over the threshold; write the transcript
    and the state.

    The output is `[system messages] + [summary] + [continuation quoting the latest request]` when it
    compacts, else the cleaned transcript with any earlier summary applied. The next run on the grown
    transcript replaces what the summary covers (the watermark in the state) and keeps only newer records.

    \b
    Example:
      ctxcompact run samples/openai-long.jsonl --window 32000 -o compacted.jsonl
      agent-log | ctxcompact run - --state s.json --model gpt-4o > context.jsonl
    """
    from . import api

    source = _source(file)
    opts = _options(**kw)
    out_path = Path(output) if output and output != "-" else None
    if dry_run:
        result = api.run(source, opts, dry_run=True, warn=_echo_err)
        if as_json:
            click.echo(_json(_dry_run_json(result)))
        else:
            click.echo(_render_dry_run(result))
        return
    result = api.run(source, opts, output=out_path or _stdout(), warn=_echo_err)
    for problem in result.problems:
        _echo_err(str(problem))
    for warning in result.warnings:
        _echo_err(f"warning: {warning}")
    if not quiet and result.compacted:
        _echo_err(_compaction_line(result))
    if result.exit_code:
        raise SystemExit(result.exit_code)


@cli.command(epilog=EXIT_CODES)
@opt(
    "--state",
    "state_path",
    type=click.Path(dir_okay=False),
    required=True,
    envvar=_env("state"),
    help="The state file `run` wrote.",
)
@opt(
    "--prompt-tokens",
    type=click.IntRange(min=0),
    required=True,
    help="Prompt tokens the provider reported for the last request.",
)
def calibrate(state_path: str, prompt_tokens: int) -> None:
    """Record the prompt tokens the provider reported for the last request (what an after-model hook sees),
    so the next `run` corrects its estimate.

    \b
    Example:
      ctxcompact calibrate --state session.jsonl.ctxstate.json --prompt-tokens 48213
    """
    from . import api

    state = api.calibrate(Path(state_path), prompt_tokens)
    cal = state.calibration
    if cal.last_estimate:
        _echo_err(
            f"calibrated: real {prompt_tokens:,} / estimate {cal.last_estimate:,} "
            f"→ factor {cal.factor or 0:.3f}"
        )


@cli.group(epilog=EXIT_CODES)
def state() -> None:
    """Print or clear a state file.

    \b
    Example:
      ctxcompact state show session.jsonl.ctxstate.json
      ctxcompact state reset session.jsonl.ctxstate.json
    """


@state.command("show")
@click.argument("path", type=click.Path(dir_okay=False))
def state_show(path: str) -> None:
    """Print a state file as JSON.

    \b
    Example:
      ctxcompact state show session.jsonl.ctxstate.json | jq .watermark
    """
    from .state import load_state

    st = load_state(Path(path))
    if st is None:
        raise UsageError(f"no state file at {path}")
    click.echo(_json(st.to_json()))


@state.command("reset")
@click.argument("path", type=click.Path(dir_okay=False))
def state_reset(path: str) -> None:
    """Delete a state file (the next run starts from scratch).

    \b
    Example:
      ctxcompact state reset session.jsonl.ctxstate.json
    """
    from .state import reset_state, state_lock

    with state_lock(Path(path)):
        existed = reset_state(Path(path))
    _echo_err(f"{'removed' if existed else 'no state at'} {path}")


@cli.command(epilog=EXIT_CODES)
@opt(
    "--only",
    multiple=True,
    metavar="PATTERN",
    help="Run only scenarios whose name (or category) matches: a glob or a substring; repeatable.",
)
@opt("--seed", type=int, default=0, show_default=True, help="Seed of the generated content (deterministic).")
@opt(
    "--json", "as_json", is_flag=True, envvar=_env("json"), help="One JSON object per scenario, as an array."
)
@opt("--list", "list_only", is_flag=True, help="List the scenarios and exit.")
@opt(
    "--prune",
    "compare_prune",
    is_flag=True,
    envvar=_env("simulate_prune"),
    help="Play each scenario twice, summary-only and with --prune, and compare what the summarizer did.",
)
def simulate(only: tuple[str, ...], seed: int, as_json: bool, list_only: bool, compare_prune: bool) -> None:
    """Run the multi-turn stress matrix (§11) through the real pipeline and print its table.

    Each scenario plays a whole agent session: `run` before every model call and `calibrate` after it,
    on an append-only log with a real state file, against a simulated provider that bills a chosen ratio
    of the chars/4 heuristic. Exit 1 when any scenario overflows the window or loops (outside the documented
    limitation: no usage reported and a ratio above the default factor), errors, or ends in an unexpected
    exit 5.

    \b
    Example:
      ctxcompact simulate
      ctxcompact simulate --only '8k_*' --seed 7
      ctxcompact simulate --json | jq '.[] | select(.overflow or .loop) | .name'
    """
    from .simulate import select, simulate_command

    if list_only:
        for s in select(only):
            click.echo(f"{s.category:<11} {s.name}")
        return
    if compare_prune:
        import dataclasses

        from .strategies.mask import render_prune_table, simulate_with_pruning

        rows = simulate_with_pruning(select(only), seed)
        if as_json:
            click.echo(_json([dataclasses.asdict(r) for r in rows]))
        else:
            click.echo(render_prune_table(rows))
        if any(r.failures_plain or r.failures_prune for r in rows):
            raise SystemExit(ExitCode.INVALID_INPUT)
        return
    code = simulate_command(only, seed, as_json, echo=click.echo)
    if code:
        raise SystemExit(code)


# --------------------------------------------------------------------------------------------------
# rendering


def _json(obj: Any) -> str:
    import orjson

    return orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode()


def _write(lines: Any, output: str | None) -> None:
    if output and output != "-":
        from .atomic import atomic_writer

        with atomic_writer(Path(output)) as fh:
            for line in lines:
                fh.write(line)
    else:
        out = _stdout()
        for line in lines:
            out.write(line)
        out.flush()


def _render_estimate(r: Any) -> str:
    d = r.to_json()
    t = d["tokens"]
    msgs = ", ".join(f"{k} {v}" for k, v in sorted(d["messages"].items())) or "none"
    threshold = f"{d['threshold']:,}" if d["threshold"] else "disabled"
    rows = [
        ("format", d["format"]),
        (
            "records",
            f"{d['records']:,}"
            + (f" ({d['covered_by_summary']:,} covered by the summary)" if d["covered_by_summary"] else ""),
        ),
        ("messages", msgs),
        ("tool calls", f"{d['tool_calls']:,}"),
        ("characters", f"{d['chars']:,}"),
        ("heuristic tokens", f"{t['heuristic']:,}  (ceil(chars/4))"),
        ("exact tokens", f"{t['exact']:,}  ({t['encoding']})" if t["exact"] is not None else "not counted"),
        ("calibrated tokens", f"{t['calibrated']:,}"),
        ("correction", f"×{d['correction']['factor']:.3f}  from {d['correction']['source']}"),
        ("window", f"{d['window']:,}  ({d['window_source']})"),
        ("buffer", f"{d['buffer']:,}"),
        ("threshold", threshold),
        ("window used", f"{d['percent_used']:.1f} %"),
        ("would compact", "yes" if d["would_compact"] else "no"),
        ("after compaction", f"≈ {d['projected_tokens_after']:,} tokens" if d["would_compact"] else "-"),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def _compaction_line(result: Any) -> str:
    """One line on stderr saying what run did: summarized, or masked."""
    records = result.estimate.records - result.estimate.covered
    change = f"{result.tokens_before:,} → {result.tokens_after:,} tokens"
    s = result.summary
    if s is None:
        masked = len(getattr(result.outcome, "entries", []) or [])
        return f"masked {masked} tool results: {change}"
    how = s.summarizer + (" (fallback)" if s.fallback else "")
    return f"compacted {records} records: {change}, summary by {how}"


def _dry_run_json(result: Any) -> dict[str, Any]:
    est = result.estimate.to_json()
    return {
        "would_compact": result.compacted,
        "tokens_before": result.tokens_before,
        "tokens_after": result.tokens_after,
        "records_out": sum(1 for _ in result.transcript.records),
        "repairs": [str(r) for r in result.repairs],
        "summarizer": result.summary.summarizer if result.summary else None,
        "tier": getattr(result.outcome, "tier", None),
        "exit_code": int(result.exit_code),
        "warnings": result.warnings,
        "estimate": est,
    }


def _render_dry_run(result: Any) -> str:
    lines = [_render_estimate(result.estimate), ""]
    if result.compacted:
        out_records = len(result.transcript.records)
        lines.append(f"run would act: {_compaction_line(result)} ({out_records} records out)")
    else:
        lines.append(f"run would pass the transcript through ({len(result.transcript.records)} records)")
    for repair in result.repairs:
        lines.append(f"repair: {repair}")
    for warning in result.warnings:
        lines.append(f"warning: {warning}")
    lines.append("nothing written (--dry-run)")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> NoReturn:
    """Entry point: every error becomes a message on stderr and a documented exit code, never a traceback."""
    try:
        cli.main(args=argv, prog_name="ctxcompact", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:  # pragma: no cover - click version dependent
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc), err=True)
        raise SystemExit(ExitCode.USAGE) from None
    except click.ClickException as exc:
        exc.show()
        raise SystemExit(ExitCode.USAGE) from None
    except click.exceptions.Abort:
        _echo_err("aborted")
        raise SystemExit(130) from None
    except CtxCompactError as exc:
        _echo_err(f"error: {exc}")
        for problem in getattr(exc, "problems", [])[:50]:
            click.echo(str(problem), err=True)
        extra = len(getattr(exc, "problems", [])) - 50
        if extra > 0:
            _echo_err(f"… and {extra} more problems")
        raise SystemExit(exc.exit_code) from None
    except BrokenPipeError:
        # the reader went away (e.g. `| head`): not an error of ours
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise SystemExit(0) from None
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except SystemExit:
        raise
    except Exception as exc:  # a bug of ours: say so plainly, keep the traceback for CTXCOMPACT_DEBUG=1
        if os.environ.get("CTXCOMPACT_DEBUG"):
            raise
        _echo_err(f"internal error: {type(exc).__name__}: {exc} (set CTXCOMPACT_DEBUG=1 for details)")
        raise SystemExit(ExitCode.INVALID_INPUT) from None
    raise SystemExit(0)


if __name__ == "__main__":  # pragma: no cover
    main()
