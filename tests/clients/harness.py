"""The real clients, installed from the npm registry and run against the recording fake provider.

docs/guides/claude-code-codex.md is the recipe this proves. Everything runs in a temporary HOME: the
clients' session folders (``CLAUDE_CONFIG_DIR``, ``CODEX_HOME``) are inside it, every provider URL points
at 127.0.0.1, telemetry and update checks are off, and ``HTTPS_PROXY``/``HTTP_PROXY`` name a closed port on
127.0.0.1 (``NO_PROXY`` only loopback), so a request a client would send elsewhere fails instead of leaving
the machine.

The npm install is cached outside the repository (``$CTXCOMPACT_CLIENTS_CACHE``, default
``~/.cache/ctxcompact-clients``): a rerun reuses it. The versions are pinned below;
``CTXCOMPACT_CODEX_VERSION`` runs the suite with another Codex, installed into a folder of its own in the
cache (``codex-<version>``) beside the pinned pair.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from tests.clients.fake_provider import FakeProvider

#: the versions the suite installs: the ones issue 24 was reported with. Claude Code 2.1.198 and later
#: declare node >= 22 (node here is 20) but ship a native binary per platform, which npm installs as an
#: optional dependency and which runs without node; Codex's npm package is a node launcher (node 16+) for
#: its native binary.
CLAUDE_CODE = "@anthropic-ai/claude-code@2.1.328"
CODEX = "@openai/codex@0.169.0"

CACHE = Path(os.environ.get("CTXCOMPACT_CLIENTS_CACHE") or Path.home() / ".cache" / "ctxcompact-clients")


class Unavailable(Exception):
    """The clients cannot be installed or run here (no node or npm, no registry): the suite skips."""


def _version_of(prefix: Path, package: str) -> str | None:
    name = package.rsplit("@", 1)[0]
    manifest = prefix / "node_modules" / name / "package.json"
    try:
        return str(json.loads(manifest.read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


def _npm_install(prefix: Path, wanted: list[str]) -> None:
    """``wanted`` (``name@version``) installed into ``prefix`` unless they are there at those versions."""
    if all(_version_of(prefix, p) == p.rsplit("@", 1)[1] for p in wanted):
        return
    npm = shutil.which("npm")
    if shutil.which("node") is None or npm is None:
        raise Unavailable("node and npm are needed to install the clients from the npm registry")
    prefix.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--prefix", str(prefix), *wanted],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
    except subprocess.TimeoutExpired as e:
        raise Unavailable("npm install of the clients timed out (is the registry reachable?)") from e
    if done.returncode != 0:
        tail = " ".join(done.stderr.strip().splitlines()[-3:])
        raise Unavailable(f"npm install of {' '.join(wanted)} failed: {tail}")


def codex_package(version: str | None = None) -> str:
    """The Codex package to run: ``version``, else ``$CTXCOMPACT_CODEX_VERSION``, else the pinned one."""
    version = version or os.environ.get("CTXCOMPACT_CODEX_VERSION")
    return f"@openai/codex@{version}" if version else CODEX


def install_codex(version: str | None = None) -> Path:
    """Codex's launcher at ``version`` (:func:`codex_package`): the pinned one is :func:`install`'s, another
    one has a folder of its own in the cache, so switching versions does not reinstall the pinned pair."""
    package = codex_package(version)
    if package == CODEX:
        return install()[1]
    prefix = CACHE / f"codex-{package.rsplit('@', 1)[1]}"
    _npm_install(prefix, [package])
    codex = prefix / "node_modules" / "@openai" / "codex" / "bin" / "codex.js"
    _check_runs(codex, package)
    return codex


def install() -> tuple[Path, Path]:
    """The two clients' executables, installed into the cache if they are not there at the pinned versions."""
    _npm_install(CACHE, [CLAUDE_CODE, CODEX])
    modules = CACHE / "node_modules"
    # the platform package's binary; the wrapper package's bin/claude.exe is the same file once npm linked it
    native = sorted((modules / "@anthropic-ai").glob("claude-code-*/claude"))
    claude = native[0] if native else modules / "@anthropic-ai" / "claude-code" / "bin" / "claude.exe"
    codex = modules / "@openai" / "codex" / "bin" / "codex.js"
    for exe, package in ((claude, CLAUDE_CODE), (codex, CODEX)):
        _check_runs(exe, package)
    return claude, codex


def _check_runs(exe: Path, package: str) -> None:
    """``exe --version`` names ``package``'s version (the install is whole and runs here)."""
    if not exe.exists():
        raise Unavailable(f"{exe} is missing after the install")
    try:
        with tempfile.TemporaryDirectory(prefix="ctxcompact-clients-") as home:
            env = {"PATH": os.environ.get("PATH", ""), "HOME": home, "CODEX_HOME": home,
                   "CLAUDE_CONFIG_DIR": home}
            done = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=60,
                                  check=False, env=env)
    except OSError as e:
        raise Unavailable(f"{exe} does not run here: {e}") from e
    if package.rsplit("@", 1)[1] not in done.stdout:
        raise Unavailable(f"{exe} --version says {done.stdout.strip()!r} {done.stderr.strip()[-200:]!r}")


@dataclass
class Home:
    """A temporary HOME with the clients' folders, the fake provider and the environment to run them in."""

    root: Path
    provider: FakeProvider
    claude: Path
    codex: Path
    codex_config: dict[str, Any] = field(default_factory=dict)

    @property
    def work(self) -> Path:
        return self.root / "work"

    @property
    def claude_dir(self) -> Path:
        return self.root / ".claude"

    @property
    def codex_home(self) -> Path:
        return self.root / ".codex"

    def env(self) -> dict[str, str]:
        closed = "http://127.0.0.1:9"  # the discard port: nothing listens, nothing leaves the machine
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.root),
            "TERM": "dumb",
            "LANG": "C.UTF-8",
            "CLAUDE_CONFIG_DIR": str(self.claude_dir),
            "CODEX_HOME": str(self.codex_home),
            "ANTHROPIC_BASE_URL": self.provider.url,
            "ANTHROPIC_API_KEY": "sk-ant-fake-key",
            "OPENAI_BASE_URL": self.provider.url + "/v1",
            "OPENAI_API_KEY": "sk-fake-key",
            "CODEX_API_KEY": "sk-fake-key",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_BUG_COMMAND": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "HTTPS_PROXY": closed,
            "HTTP_PROXY": closed,
            "https_proxy": closed,
            "http_proxy": closed,
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }

    def _write_codex_config(self) -> None:
        # Codex 0.169 takes the built-in provider's URL from openai_base_url (OPENAI_BASE_URL is set too)
        lines = [f'openai_base_url = "{self.provider.url}/v1"', "check_for_update_on_startup = false"]
        lines += [f"{k} = {json.dumps(v)}" for k, v in self.codex_config.items()]
        lines += ["[analytics]", "enabled = false", "[features]", "responses_websockets = false"]
        self.codex_home.mkdir(parents=True, exist_ok=True)
        (self.codex_home / "config.toml").write_text("\n".join(lines) + "\n")

    # -- the session files -------------------------------------------------------------------------------

    def claude_session(self, session_id: str) -> Path:
        project = re.sub(r"[^A-Za-z0-9]", "-", str(self.work))
        return self.claude_dir / "projects" / project / f"{session_id}.jsonl"

    def place_claude(self, log: Path) -> tuple[str, Path]:
        """Put a real log where Claude Code keeps the sessions of ``work``; its session id and path."""
        sid = next(o["sessionId"] for o in lines_of(log.read_bytes()) if isinstance(o.get("sessionId"), str))
        path = self.claude_session(sid)
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(log, path)
        return sid, path

    def place_codex(self, log: Path) -> tuple[str, Path]:
        """Put a real rollout where Codex keeps it (``sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``)."""
        meta = next(o for o in lines_of(log.read_bytes()) if o.get("type") == "session_meta")["payload"]
        sid, ts = meta["id"], meta["timestamp"]
        path = (
            self.codex_home
            / "sessions"
            / ts[:4]
            / ts[5:7]
            / ts[8:10]
            / f"rollout-{ts[:19].replace(':', '-')}-{sid}.jsonl"
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(log, path)
        return sid, path

    def files(self) -> list[Path]:
        """Every JSONL file the clients keep sessions in (subagents and tool results included)."""
        return sorted(
            [*self.claude_dir.glob("projects/**/*.jsonl"), *self.codex_home.glob("sessions/**/*.jsonl")]
        )

    # -- running the clients -------------------------------------------------------------------------------

    def run_claude(self, session_id: str, prompt: str) -> Run:
        return self._run(
            [str(self.claude), "-p", prompt, "--resume", session_id, "--permission-mode", "dontAsk"]
        )

    def run_codex(self, session_id: str, prompt: str) -> Run:
        self._write_codex_config()
        return self._run([str(self.codex), "exec", "--skip-git-repo-check", "resume", session_id, prompt])

    def start_codex(self, prompt: str) -> tuple[str, Path]:
        """A new Codex session (its first turn, ``prompt``): its id and rollout."""
        self._write_codex_config()
        before = set(self.files())
        run = self._run([str(self.codex), "exec", "--skip-git-repo-check", prompt])
        assert run.code == 0, run.stderr[-2000:]
        [path] = set(self.files()) - before
        meta = next(o for o in lines_of(path.read_bytes()) if o.get("type") == "session_meta")["payload"]
        return str(meta["id"]), path

    def _run(self, argv: list[str]) -> Run:
        self.work.mkdir(parents=True, exist_ok=True)
        before = len(self.provider.received)
        done = subprocess.run(
            argv,
            env=self.env(),
            cwd=self.work,
            capture_output=True,
            text=True,
            timeout=180,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        return Run(done.returncode, done.stdout, done.stderr, self.provider.received[before:])


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    requests: list[Any]

    def model_requests(self, suffix: str) -> list[Any]:
        return [
            r
            for r in self.requests
            if r.method == "POST" and r.path.split("?")[0].endswith(suffix) and isinstance(r.body, dict)
        ]


def backup_of(session: Path) -> Path:
    """Where the recipe keeps a session file's original: beside a Claude Code session, outside the sessions
    folder for a Codex rollout (``<CODEX_HOME>/backups``): Codex 0.80 resumed a ``<rollout>.jsonl.bak``
    beside the rollout about half the time (0.169 never did)."""
    if session.name.startswith("rollout-") and session.parents[3].name == "sessions":
        folder = session.parents[4] / "backups"
        folder.mkdir(exist_ok=True)
        return folder / (session.name + ".bak")
    return session.with_name(session.name + ".bak")


def lines_of(data: bytes) -> list[dict[str, Any]]:
    out = []
    for line in data.splitlines():
        if line.strip():
            obj = orjson.loads(line)
            if isinstance(obj, dict):
                out.append(obj)
    return out


def ctxcompact(*args: str) -> subprocess.CompletedProcess[str]:
    """The real CLI, as the recipe runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXCOMPACT_")}
    return subprocess.run(
        [sys.executable, "-m", "ctxcompact", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
