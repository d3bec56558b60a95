"""The commands other than `run` are defined when asked for (cli/commands.py `ELSEWHERE`): a hook's `run` does
not build them, and `--help`, completion and the generated CLI reference still list every one."""

from __future__ import annotations

import subprocess
import sys

import click
from click.testing import CliRunner

from ctxcompact.cli.commands import ELSEWHERE, cli

PROBE = ("import sys, runpy\nsys.argv = ['ctxcompact', *sys.argv[1:]]\n"
         "try:\n    runpy.run_module('ctxcompact', run_name='__main__', alter_sys=True)\n"
         "except SystemExit:\n    pass\n"
         "print(sorted(m for m in sys.modules if m.startswith('ctxcompact.cli')), file=sys.stderr)\n")


def _cli_modules(*args: str) -> str:
    return subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True,
                          check=False).stderr.strip().splitlines()[-1]


def test_elsewhere_names_every_command_and_where_it_is() -> None:
    from ctxcompact.cli import serve, tools

    ctx = click.Context(cli)
    for name, module in ELSEWHERE.items():
        cmd = cli.get_command(ctx, name)
        assert cmd is not None, name
        assert cmd.callback is not None and cmd.callback.__module__ == f"ctxcompact.cli.{module}", name
    assert set(cli.commands) == {"run", *ELSEWHERE}  # a command added to tools.py is named there too
    assert cli.list_commands(ctx) == sorted(cli.commands)
    assert tools.__name__ and serve.__name__


def test_run_loads_no_other_command(tmp_path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "s.jsonl"
    src.write_text('{"role": "user", "content": "hi"}\n')
    loaded = _cli_modules("run", str(src), "--no-state", "-o", str(tmp_path / "o.jsonl"))
    assert "ctxcompact.cli.commands" in loaded
    assert "ctxcompact.cli.tools" not in loaded and "ctxcompact.cli.serve" not in loaded
    assert "ctxcompact.cli.tools" in _cli_modules("estimate", str(src), "--no-state")  # the probe sees it


def test_help_lists_every_command() -> None:
    out = CliRunner().invoke(cli, ["--help"]).output
    block = out.split("Commands:")[1].split("\n\n")[0]
    assert [line.split()[0] for line in block.strip().splitlines()] == sorted({"run", *ELSEWHERE})
    state = CliRunner().invoke(cli, ["state", "--help"]).output  # a group defined elsewhere, with its own
    assert all(sub in state for sub in ("show", "path", "reset"))
    assert CliRunner().invoke(cli, ["nosuch"]).exit_code == 2
