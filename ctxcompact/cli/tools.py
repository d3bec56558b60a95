"""The commands other than ``run`` (validate, clean, estimate, eval, calibrate, state, simulate), defined on
the group of :mod:`.commands` when this module is imported: when one of them is asked for
(docs/measurements/performance-log.md#the-per-call-floor-cached-checks-own-lock-lazy-commands-2026-11-29)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ..errors import ExitCode, UsageError
from ..options import Options
from ..sdk import PROVIDERS
from .commands import cli
from .options import (
    DEFAULTS,
    EXIT_CODES,
    FORMAT_NAMES,
    STRATEGY_NAMES,
    budget_options,
    echo_err,
    env_name,
    estimate_options,
    format_options,
    input_argument,
    opt,
    options_from,
    output_option,
    ranged,
    source_of,
    state_options,
    strategy_options,
    strategy_tuning_options,
    summary_options,
    to_option,
    trailing_option,
    write_output,
)
from .render import ROW, render_estimate, to_json


@cli.command(epilog=EXIT_CODES)
@input_argument
@format_options
@opt("--json", "as_json", is_flag=True, envvar=env_name("json"), help="Machine-readable report on stdout.")
@opt("-v", "--verbose", is_flag=True,
     help="Also name the lines passed through unchecked: not part of the conversation, of a type ctxcompact "
          "does not know.")
def validate(file: str | None, fmt: str, lenient: bool, as_json: bool, verbose: bool) -> None:
    """Check every line against its format's JSON Schema and the cross-record rules.

    Each problem is printed as `line N: <json path>: <what>`. Exit 1 when the input is invalid. Lines that
    are not part of the conversation, of a type ctxcompact does not know (a newer client's), are not
    checked: they pass through as they are and are not counted (--verbose names them).

    \b
    Example:
      ctxcompact validate samples/anthropic-session.jsonl
      cat session.jsonl | ctxcompact validate --json | jq .problems
    """
    from .. import api

    report = api.validate(source_of(file), fmt, lenient=lenient)
    if as_json:
        click.echo(to_json(report.to_json()))
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
        if verbose and report.passed_through:
            kinds = ", ".join(f"{k} ×{n}" for k, n in sorted(report.passed_through.items()))
            click.echo("passed through, not part of the conversation (types ctxcompact does not know): "
                       + kinds)
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
    """Repair a transcript and write it: missing tool results, separated or orphan results,
    a trailing tool result, role order.

    \b
    Example:
      ctxcompact clean session.jsonl --report -o session.clean.jsonl
    """
    from .. import api

    api.check_paths(input=Path(source_of(file)), output=Path(output) if output and output != "-" else None,
                    state=None)
    result = api.clean_file(
        source_of(file),
        fmt=fmt,
        lenient=lenient,
        to=to,
        warn=echo_err,
        keep_trailing_results=keep_trailing_results,
    )
    for problem in result.problems:
        echo_err(str(problem))
    if report:
        for repair in result.repairs:
            echo_err(f"repair: {repair}")
        echo_err(f"{len(result.repairs)} repairs")
    write_output(result.lines(), output)


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
    envvar=env_name("json"),
    help="Machine-readable report on stdout (with several files: one JSON object per line, then totals).",
)
@opt(
    "--check",
    is_flag=True,
    help="Exit 10 when `run` would compact (any file, with several), 0 otherwise; invalid input is still 1.",
)
@opt(
    "-r", "--recursive", is_flag=True, help="Directories: also their subdirectories; globs: ** matches them."
)
@opt(
    "-j",
    "--jobs",
    type=click.IntRange(min=1, max=1024),
    help="Processes for several files (default: all cores); 1 runs them in turn.",
)
@opt("-q", "--quiet", is_flag=True, help="No progress on stderr (it is shown only on a terminal anyway).")
def estimate(
    files: tuple[str, ...], as_json: bool, check: bool, recursive: bool, jobs: int | None, quiet: bool,
    **kw: Any
) -> None:
    """Dry run: counts, tokens (heuristic, exact, calibrated), the budget, and whether `run` would compact.

    Reads the state beside the input (if any) and writes nothing. Several files, directories (their
    *.jsonl files) or globs give a row per file and totals, on all cores; a file that fails gets an
    error row, the others go on, and the exit code is 1.

    \b
    Example:
      ctxcompact estimate samples/openai-long.jsonl --window 32000
      ctxcompact estimate session.jsonl --json | jq .tokens.calibrated
      ctxcompact estimate session.jsonl --check --threshold 80%; [ $? = 10 ] && echo "time to compact"
      ctxcompact estimate ~/.claude/projects -r --exact none --json | jq -c '{file, percent_used}'
    """
    from .. import api

    api.quiet_progress(quiet)
    opts = options_from(**kw)
    if len(files) > 1 or recursive or (files and files[0] != "-" and _is_many(files[0])):
        _estimate_many(files, opts, as_json, check, recursive, jobs)
        return

    report = api.estimate(source_of(files[0] if files else None), opts)
    if as_json:
        click.echo(to_json(report.to_json()))
    else:
        click.echo(render_estimate(report))
    if check and report.would_compact:
        raise SystemExit(ExitCode.WOULD_COMPACT)


def _is_many(arg: str) -> bool:
    """A directory, or a glob that is not itself a file name."""
    path = Path(arg)
    return path.is_dir() or (not path.exists() and any(c in arg for c in "*?["))


def _estimate_many(
    files: tuple[str, ...], opts: Options, as_json: bool, check: bool, recursive: bool, jobs: int | None
) -> None:
    import orjson

    from .. import api

    paths = api.expand_paths(files, recursive)
    if not paths:
        raise UsageError(f"no *.jsonl files in {' '.join(files)}")
    totals = api.Totals()
    compact = False
    if not as_json:
        click.echo(
            ROW.format("file", "format", "records", "heuristic", "exact", "calibrated", "used", "compact")
        )
    with api.progress_bar(len(paths), "estimating") as bar:
        for row in api.estimate_many(paths, opts, jobs):
            bar.hide()  # the rows and the bar share a terminal: the bar is redrawn below the row
            _estimate_row(row, as_json, totals)
            bar.advance(row.path)
            compact = compact or bool(row.report is not None and row.report["would_compact"])
    tj = totals.to_json()
    if as_json:
        click.echo(orjson.dumps({"totals": tj}).decode())
    else:
        tt = tj["tokens"]
        click.echo(
            ROW.format(
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
    if totals.failed:  # a broken file matters more to a script than a full one
        raise SystemExit(ExitCode.INVALID_INPUT)
    if check and compact:
        raise SystemExit(ExitCode.WOULD_COMPACT)


def _estimate_row(row: Any, as_json: bool, totals: Any) -> None:
    """One file's row of `estimate` with several files (its error on stderr too)."""
    import orjson

    totals.add(row)
    if as_json:
        click.echo(orjson.dumps(row.to_json()).decode())
    elif row.report is not None:
        r, t = row.report, row.report["tokens"]
        click.echo(
            ROW.format(
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
        click.echo(ROW.format(row.path, "error", "", "", "", "", "", ""))
    if row.error is not None:
        echo_err(f"error: {row.path}: {row.error}")





@cli.command("eval", epilog=EXIT_CODES)
@click.argument("files", nargs=-1, type=click.Path(allow_dash=True))
@format_options
@budget_options
@estimate_options
@strategy_tuning_options
@state_options
@opt(
    "--strategy",
    "strategies",
    default=DEFAULTS.strategy,
    show_default=True,
    help=f"Strategy to measure; several, comma-separated ({','.join(STRATEGY_NAMES)}), side by side.",
)
@to_option
@trailing_option
@summary_options
@opt(
    "--probes",
    "probes_file",
    type=click.Path(dir_okay=False),
    help='JSONL of {"expect": …} or {"expect_regex": …} that must survive the compaction.',
)
@opt("--replay", is_flag=True, help="Replay the session turn by turn, compacting as the window forces.")
@opt(
    "--json",
    "as_json",
    is_flag=True,
    envvar=env_name("json"),
    help="The stable JSON object (a list of them with several files or strategies).",
)
@opt("-r", "--recursive", is_flag=True, help="Directories: also their subdirectories.")
@opt(
    "--judge",
    type=click.Choice(list(PROVIDERS)),
    help="Ask this provider each probe's question against the compacted context (needs --summary-model).",
)
@opt(
    "--html",
    "html_file",
    type=click.Path(dir_okay=False, writable=True),
    help="Also write one self-contained HTML page (tables, inline SVG chart) here.",
)
@opt("-q", "--quiet", is_flag=True, help="No progress on stderr (it is shown only on a terminal anyway).")
def eval_command(
    files: tuple[str, ...],
    strategies: str,
    probes_file: str | None,
    replay: bool,
    as_json: bool,
    recursive: bool,
    html_file: str | None,
    judge: str | None,
    quiet: bool,
    **kw: Any,
) -> None:
    """Measure what a compaction keeps, offline: compact in memory exactly as `run` would (writing nothing,
    not even a state) and score the result, and a naive truncation to the same size, against the original.

    \b
    Example:
      ctxcompact eval samples/openai-long.jsonl --window 8000
      ctxcompact eval samples --strategy threshold,mask,sliding-window --window 8000
      ctxcompact eval session.jsonl --replay --window 8000 --json | jq .replay.compactions
    """
    import dataclasses

    from .. import api

    api.quiet_progress(quiet)
    opts = options_from(**kw)
    names = [n.strip() for n in strategies.split(",") if n.strip()]
    for name in names:
        if name not in STRATEGY_NAMES:
            choices = ", ".join(STRATEGY_NAMES)
            raise UsageError(f"--strategy: unknown strategy {name!r} (choose from {choices})")
    probes = api.load_probes(probes_file) if probes_file else []
    many = len(files) > 1 or recursive or (files and files[0] != "-" and _is_many(files[0]))
    paths = api.expand_paths(files, recursive) if many else [source_of(files[0] if files else None)]
    if not paths:
        raise UsageError(f"no *.jsonl files in {' '.join(files)}")
    if html_file:  # the one check of every written file: never a file eval reads (docs/reference/safety.md)
        reads: list[tuple[str, Path | None]] = [("input", Path(p)) for p in paths]
        reads += [("--probes file", Path(probes_file) if probes_file else None),
                  ("--todos file", opts.todos_file), ("config file", opts.config_path),
                  ("state", opts.state_path)]
        api.check_writes([("HTML report", Path(html_file))], reads)
    rows: list[dict[str, Any]] = []
    failed = 0
    items = len(paths) * len(names)  # one item: its replay has the bar (over the turns), else the items do
    with api.progress_bar(items, "evaluating", enabled=items > 1) as bar:
        for path in paths:
            source: Any = path
            if path == "-":
                import sys

                source = sys.stdin.buffer.read()
            for name in names:
                o = dataclasses.replace(opts, strategy=name)
                bar.hide()
                try:
                    rows.append(_eval_one(api, source, path, o, probes, judge, replay, single=items == 1))
                except Exception as exc:
                    if not many:  # one file: its error is the command's (message and exit code)
                        raise
                    err = api.error_row(path, exc)
                    failed += 1
                    echo_err(f"error: {path} ({name}): {err.error}")
                    rows.append({"file": path, "strategy": name, "error": err.error,
                                 "exit_code": err.exit_code})
                bar.advance(f"{path} ({name})")
    if html_file:
        api.write_output([api.eval_html(rows).encode().rstrip(b"\n")], html_file)
    if as_json:
        click.echo(to_json(rows[0] if len(rows) == 1 else rows))
    else:
        click.echo(api.eval_table(rows))
        for r in rows:
            if "replay" in r:
                click.echo(f"\nreplay of {r['file']} ({r['strategy']}):")
                click.echo(api.eval_chart(r["replay"]))
    if failed:
        raise SystemExit(ExitCode.INVALID_INPUT)


def _eval_one(api: Any, source: Any, path: str, opts: Options, probes: Any, judge: str | None, replay: bool,
              single: bool) -> dict[str, Any]:
    """One file and strategy of `eval`: the scores, and with --replay the replay (a bar over its turns when
    it is the only item)."""
    r: dict[str, Any] = api.evaluate(source, opts, probes, judge=judge)
    if path == "-":
        r["file"] = "-"
    if replay:
        if single:
            with api.progress_bar(0, "replaying") as turns:
                def on_turn(done: int, total: int) -> None:
                    turns.total = total
                    turns.advance("turn", n=done - turns.done)

                r["replay"] = api.replay(source, opts, probes, on_turn=on_turn)
        else:
            r["replay"] = api.replay(source, opts, probes)
    return r


@cli.command(epilog=EXIT_CODES)
@opt(
    "--state",
    "state_path",
    type=click.Path(dir_okay=False),
    required=True,
    envvar=env_name("state"),
    help="The state file `run` wrote.",
)
@opt(
    "--prompt-tokens",
    type=ranged("real_tokens"),
    default=None,
    help="Prompt tokens the provider reported for the last request.",
)
@opt("--usage-json", metavar="JSON|@FILE|-", default=None,
     help="The usage object or whole response the provider returned (JSON, @file, - for stdin).")
def calibrate(state_path: str, prompt_tokens: int | None, usage_json: str | None) -> None:
    """Record the prompt tokens the provider reported for the last request (what an after-model hook sees),
    so the next `run` corrects its estimate. Give --prompt-tokens or --usage-json.

    \b
    Example:
      ctxcompact calibrate --state session.jsonl.ctxstate.json --prompt-tokens 48213
      ctxcompact calibrate --state s.json --usage-json '{"input_tokens": 9, "cache_read_input_tokens": 2500}'
    """
    from .. import api

    if (prompt_tokens is None) == (usage_json is None):
        raise UsageError("give --prompt-tokens or --usage-json (one of them)")
    if usage_json is not None:
        prompt_tokens = api.usage_prompt_tokens(api.load_usage_json(usage_json)).tokens
    state = api.calibrate(Path(state_path), prompt_tokens or 0)
    cal = state.calibration
    if cal.last_estimate:
        echo_err(
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
    from .. import api

    st = api.load_state(Path(path))
    if st is None:
        raise UsageError(f"no state file at {path}")
    click.echo(to_json(st.to_json()))


@state.command("path")
@click.argument("file", type=click.Path(dir_okay=False))
@opt(
    "--state-dir",
    type=click.Path(file_okay=False),
    help="The folder `run --state-dir` keeps states in (default: beside the input).",
)
def state_path_command(file: str, state_dir: str | None) -> None:
    """Print where `run` keeps the state of FILE (whether or not it exists yet): for `calibrate --state`,
    `state show` and `state reset` when the states live in a --state-dir.

    \b
    Example:
      ctxcompact calibrate --state "$(ctxcompact state path session.jsonl --state-dir ~/.cache/ctx)" \\
        --prompt-tokens 48213
    """
    from .. import api

    path = api.state_path(file, options_from(state_dir=state_dir))
    click.echo(str(path))


@state.command("reset")
@click.argument("path", type=click.Path(dir_okay=False))
def state_reset(path: str) -> None:
    """Delete a state file (the next run starts from scratch).

    \b
    Example:
      ctxcompact state reset session.jsonl.ctxstate.json
    """
    from .. import api

    existed = api.reset_state(Path(path))
    echo_err(f"{'removed' if existed else 'no state at'} {path}")


@cli.command(epilog=EXIT_CODES)
@opt(
    "--only",
    multiple=True,
    metavar="PATTERN",
    help="Run only scenarios whose name (or category) matches: a glob or a substring; repeatable.",
)
@opt("--seed", type=int, default=0, show_default=True, help="Seed of the generated content (deterministic).")
@opt("--json", "as_json", is_flag=True, envvar=env_name("json"),
     help="One JSON object per scenario, as an array.")
@opt("--list", "list_only", is_flag=True, help="List the scenarios and exit.")
@opt(
    "--prune",
    "compare_prune",
    is_flag=True,
    envvar=env_name("simulate_prune"),
    help="Play each scenario twice, summary-only and with --prune, and compare what the summarizer did.",
)
def simulate(only: tuple[str, ...], seed: int, as_json: bool, list_only: bool, compare_prune: bool) -> None:
    """Run the multi-turn stress matrix through the real pipeline and print its table.

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
    from ..devtools.scenarios import select
    from ..devtools.simulate import simulate_command

    if list_only:
        for s in select(only):
            click.echo(f"{s.category:<11} {s.name}")
        return
    if compare_prune:
        import dataclasses

        from ..devtools.prune import render_prune_table, simulate_with_pruning

        rows = simulate_with_pruning(select(only), seed)
        if as_json:
            click.echo(to_json([dataclasses.asdict(r) for r in rows]))
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
