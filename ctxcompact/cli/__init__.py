"""The command line (docs/reference/cli.md#input-output-and-options): ``main`` turns every error into a
message on stderr and a documented exit code, never a traceback; the commands are in :mod:`.commands`."""

from __future__ import annotations

import contextlib
import errno
import gc
import os
import sys
import threading
from typing import NoReturn

import click

from ..errors import CtxCompactError, ExitCode, OutputError
from ..secrets import scrub_credentials
from .commands import cli
from .options import echo_err

__all__ = ["cli", "main"]


def main(argv: list[str] | None = None) -> NoReturn:
    """Entry point: every error becomes a message on stderr and a documented exit code, never a traceback.

    Without ``argv`` (the console script, ``python -m ctxcompact``: the process's own command line, the
    process ends as this returns), what is alive is frozen out of the garbage collector's sight on the way
    out: the interpreter's collection at exit would traverse every object the command loaded or made, only
    for them all to be freed with the process (~21 M instructions, 7 % of ``--help``; ~14 M of a small
    ``run``). An in-process caller, which gives ``argv``, keeps its collector as it was."""
    try:
        _main(argv)
    except SystemExit as done:
        if argv is None and _abandoned_call_alive():
            _exit_now(done.code)
        raise
    finally:
        if argv is None:
            gc.freeze()


def _abandoned_call_alive() -> bool:
    """A provider call abandoned at its wall-clock deadline (``sdk.with_deadline``) is still running (read
    through ``sys.modules``: a command that made no provider call does not load the SDK layer for this)."""
    sdk = sys.modules.get("ctxcompact.sdk")
    name = getattr(sdk, "PROVIDER_CALL_THREAD", None)
    return name is not None and any(t.name == name and t.is_alive() for t in threading.enumerate())


def _exit_now(code: object) -> NoReturn:
    """End the process with ``code`` once what was written is flushed, without the interpreter's
    finalization: a daemon thread still inside an SDK's read when the interpreter tears down has crashed
    the process (SIGSEGV, after the error message was printed), turning a documented exit code into a
    signal. Nothing of ours waits for finalization: outputs, states and locks are done by now."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more can be said on it
            stream.flush()
    os._exit(code if isinstance(code, int) else (0 if code is None else ExitCode.INVALID_INPUT))


def _main(argv: list[str] | None) -> NoReturn:
    try:
        cli.main(args=argv, prog_name="ctxcompact", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:  # pragma: no cover - click version dependent
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc), err=True)
        raise SystemExit(ExitCode.USAGE) from None
    except click.ClickException as exc:
        exc.message = scrub_credentials(exc.message)  # type: ignore[misc]  # it may quote a value given
        exc.show()
        raise SystemExit(ExitCode.USAGE) from None
    except click.exceptions.Abort:
        echo_err("aborted")
        raise SystemExit(130) from None
    except CtxCompactError as exc:
        if isinstance(exc, OutputError) and exc.errno == errno.EPIPE:
            _quiet_stdout()  # else Python's exit flush raises the same error again
        echo_err(f"error: {exc}")
        for problem in getattr(exc, "problems", [])[:50]:
            click.echo(str(problem), err=True)
        extra = len(getattr(exc, "problems", [])) - 50
        if extra > 0:
            echo_err(f"… and {extra} more problems")
        raise SystemExit(exc.exit_code) from None
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except SystemExit:
        raise
    except Exception as exc:  # a bug of ours: say so plainly, keep the traceback for CTXCOMPACT_DEBUG=1
        if os.environ.get("CTXCOMPACT_DEBUG"):
            raise
        echo_err(f"internal error: {type(exc).__name__}: {exc} (set CTXCOMPACT_DEBUG=1 for details)")
        raise SystemExit(ExitCode.INVALID_INPUT) from None
    raise SystemExit(0)


def _quiet_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # pragma: no cover - stdout without a descriptor
        pass


if __name__ == "__main__":  # pragma: no cover
    main()

