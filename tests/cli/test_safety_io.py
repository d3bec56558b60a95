"""Nothing ctxcompact does destroys a file it was not asked to write, hangs on a FIFO or a device, or reads
without bound (issue 26; docs/reference/safety.md). Each test is the repro of a class."""

from __future__ import annotations

import io
import os
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path

import orjson
import pytest

from ctxcompact import paths
from ctxcompact.errors import StateError, UsageError
from ctxcompact.source import InputData

SAMPLE = Path(__file__).parent.parent.parent / "samples" / "openai-session.jsonl"
TIMEOUT = 60  # every subprocess here would hang without the fix: the timeout turns a hang into a failure


def ctxcompact(*args: str, cwd: Path | None = None, pass_fds: tuple[int, ...] = (),
               stdin: object = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "ctxcompact", *args], capture_output=stdin is None,
                          env={**os.environ, **env} if env else None,
                          stdout=subprocess.PIPE if stdin is not None else None,
                          stderr=subprocess.PIPE if stdin is not None else None, stdin=stdin,  # type: ignore[arg-type]
                          cwd=cwd, timeout=TIMEOUT, pass_fds=pass_fds)


@pytest.fixture
def log(tmp_path: Path) -> Path:
    p = tmp_path / "in.jsonl"
    p.write_bytes(SAMPLE.read_bytes())
    return p


# --- 1, 2: the input overwritten through another name -------------------------------------------------


@pytest.mark.parametrize("form", ["/proc/self/fd/{fd}", "/dev/fd/{fd}"])
@pytest.mark.parametrize("command", ["run", "clean", "eval-html"])
def test_an_open_descriptor_of_the_input_is_the_input(log: Path, form: str, command: str) -> None:
    original = log.read_bytes()
    fd = os.open(log, os.O_RDONLY)
    try:
        target = form.format(fd=fd)
        if command == "eval-html":
            args = ["eval", str(log), "--window", "3000", "--html", target]
        else:
            args = [command, str(log), "-o", target] + (["--window", "3000", "--no-state"]
                                                          if command == "run" else [])
        done = ctxcompact(*args, pass_fds=(fd,))
    finally:
        os.close(fd)
    assert done.returncode == 2, done.stderr
    assert b"is the input" in done.stderr
    assert log.read_bytes() == original


def test_stdin_redirected_from_the_input_is_the_input(log: Path) -> None:
    original = log.read_bytes()
    with open(log, "rb") as f:
        done = ctxcompact("run", "-", "--window", "3000", "--no-state", "-o", str(log), stdin=f)
    assert done.returncode == 2, done.stderr
    assert b"is the input" in done.stderr and log.read_bytes() == original


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="no /dev/shm here")
def test_a_regular_file_under_dev_is_compared_and_replaced_atomically(tmp_path: Path) -> None:
    folder = Path("/dev/shm") / f"ctxcompact-test-{os.getpid()}-{tmp_path.name}"
    folder.mkdir()
    try:
        src = folder / "in.jsonl"
        src.write_bytes(SAMPLE.read_bytes())
        done = ctxcompact("run", str(src), "--window", "3000", "--no-state", "-o", str(src))
        assert done.returncode == 2 and b"is the input" in done.stderr
        assert src.read_bytes() == SAMPLE.read_bytes()
        out = folder / "out.jsonl"
        out.write_bytes(b"old\n")
        inode = out.stat().st_ino
        done = ctxcompact("run", str(src), "--window", "3000", "--no-state", "-o", str(out))
        assert done.returncode == 0, done.stderr
        assert b"ctxcompact summary" in out.read_bytes()
        assert out.stat().st_ino != inode  # renamed into place, not truncated and rewritten
    finally:
        shutil.rmtree(folder)


def test_a_bind_mounted_name_is_the_input(log: Path, tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    done = subprocess.run(["mount", "--bind", str(log.parent), str(mnt)], capture_output=True)
    if done.returncode != 0:
        pytest.skip("mount --bind is not allowed here")
    try:
        done = ctxcompact("run", str(log), "--window", "3000", "--no-state", "-o", str(mnt / "in.jsonl"))
        assert done.returncode == 2 and b"is the input" in done.stderr
        assert log.read_bytes() == SAMPLE.read_bytes()
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


@pytest.mark.parametrize("spelling", ["same", "symlink", "hardlink"])
def test_eval_html_never_replaces_a_file_eval_reads(log: Path, spelling: str) -> None:
    probes = log.parent / "probes.jsonl"
    probes.write_bytes(b'{"expect": "cafe"}\n')
    for victim in (log, probes):
        name = {"same": str(victim), "symlink": str(log.parent / "link"),
                "hardlink": str(log.parent / "hard")}[spelling]
        if spelling == "symlink":
            Path(name).unlink(missing_ok=True)
            Path(name).symlink_to(victim)
        if spelling == "hardlink":
            Path(name).unlink(missing_ok=True)
            os.link(victim, name)
        before = victim.read_bytes()
        done = ctxcompact("eval", str(log), "--window", "3000", "--probes", str(probes), "--html", name)
        assert done.returncode == 2, done.stderr
        assert b"never overwrites" in done.stderr
        assert victim.read_bytes() == before


def test_eval_html_to_a_new_file_is_written(log: Path) -> None:
    done = ctxcompact("eval", str(log), "--window", "3000", "--html", str(log.parent / "report.html"))
    assert done.returncode == 0, done.stderr
    assert (log.parent / "report.html").read_bytes().startswith(b"<!doctype html>")


@pytest.mark.parametrize("reader", ["--todos", "--config"])
def test_run_never_writes_over_a_file_an_option_reads(log: Path, reader: str) -> None:
    side = log.parent / ("todos.md" if reader == "--todos" else "config.json")
    side.write_bytes(b"- [ ] ship it\n" if reader == "--todos" else b'{"models": {}}\n')
    before = side.read_bytes()
    done = ctxcompact("run", str(log), "--window", "3000", "--no-state", reader, str(side), "-o", str(side))
    assert done.returncode == 2, done.stderr
    assert b"never overwrites" in done.stderr and side.read_bytes() == before


def test_the_count_cache_and_the_lock_are_never_the_input(tmp_path: Path) -> None:
    # --state s makes the cache s.counts and the lock s.lock: an input with either name is refused
    for suffix in (".counts", ".lock"):
        src = tmp_path / f"s{suffix}"
        src.write_bytes(SAMPLE.read_bytes())
        done = ctxcompact("run", str(src), "--window", "3000", "--state", str(tmp_path / "s"),
                          "-o", str(tmp_path / "o.jsonl"))
        assert done.returncode == 2, done.stderr
        assert b"is the input" in done.stderr and src.read_bytes() == SAMPLE.read_bytes()


def test_check_writes_compares_what_paths_are(tmp_path: Path) -> None:
    a = tmp_path / "a"
    a.write_bytes(b"x")
    os.link(a, tmp_path / "b")
    (tmp_path / "c").symlink_to(a)
    for other in ("b", "c", "./a"):
        with pytest.raises(UsageError, match="is the input"):
            paths.check_writes([("output", tmp_path / other)], [("input", a)])
    with pytest.raises(UsageError, match="is the state"):
        paths.check_writes([("state", tmp_path / "new"), ("output", tmp_path / "sub" / ".." / "new")])
    paths.check_writes([("output", tmp_path / "new")], [("input", a), ("nothing", None)])
    assert paths.same_file(a, f"/proc/self/fd/{os.open(a, os.O_RDONLY)}")


# --- 3: state reset deletes only a state ---------------------------------------------------------------


def test_state_reset_refuses_what_is_not_a_state(log: Path) -> None:
    done = ctxcompact("state", "reset", str(log))
    assert done.returncode == 3, done.stderr
    assert b"not a ctxcompact state" in done.stderr
    assert log.read_bytes() == SAMPLE.read_bytes()
    assert not Path(f"{log}.lock").exists()  # refused before the lock: nothing left behind
    for content in (b"", b"{}", b'{"version": 2}', b"not json"):
        other = log.parent / "other.json"
        other.write_bytes(content)
        assert ctxcompact("state", "reset", str(other)).returncode == 3
        assert other.read_bytes() == content


def test_state_reset_removes_a_state(log: Path) -> None:
    state = log.parent / "s.json"
    assert ctxcompact("run", str(log), "--window", "3000", "--state", str(state),
                      "-o", str(log.parent / "o.jsonl")).returncode == 0
    # a hand-broken state (newer version, unknown key) is still a state and can be reset
    obj = orjson.loads(state.read_bytes())
    obj["version"], obj["typo"] = 99, 1
    state.write_bytes(orjson.dumps(obj))
    done = ctxcompact("state", "reset", str(state))
    assert done.returncode == 0, done.stderr
    assert not state.exists()
    done = ctxcompact("state", "reset", str(state))
    assert done.returncode == 0 and b"no state at" in done.stderr


def test_state_reset_refuses_a_link_and_a_fifo(tmp_path: Path) -> None:
    link = tmp_path / "s.json"
    link.symlink_to(tmp_path / "target.json")
    (tmp_path / "target.json").write_bytes(b'{"version": 2, "watermark": 0, "fingerprint": {}}')
    assert ctxcompact("state", "reset", str(link)).returncode == 3
    assert (tmp_path / "target.json").exists() and link.is_symlink()
    fifo = tmp_path / "f.json"
    os.mkfifo(fifo)
    assert ctxcompact("state", "reset", str(fifo)).returncode == 3
    assert fifo.is_fifo()


# --- 4: every side file: no symlink -------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["", ".lock", ".counts"])
def test_no_side_file_is_written_through_a_symlink(log: Path, suffix: str) -> None:
    state = Path(f"{log}.ctxstate.json")
    precious = log.parent / "precious.txt"
    precious.write_bytes(b"precious\n")
    Path(f"{state}{suffix}").symlink_to(precious)
    for args in (["run", str(log), "--window", "3000", "-o", str(log.parent / "o.jsonl")],
                 ["run", str(log), "-o", str(log.parent / "o.jsonl")],  # the fast path writes the cache
                 ["calibrate", "--state", str(state), "--prompt-tokens", "100"]):
        done = ctxcompact(*args)
        assert done.returncode == 3, (args, done.stderr)
        assert b"symbolic link" in done.stderr
        assert precious.read_bytes() == b"precious\n"
    assert not (log.parent / "o.jsonl").exists()


# --- 8: FIFOs and devices: refused at once or read within a bound -------------------------------------


@pytest.mark.parametrize("suffix", ["", ".lock", ".counts"])
@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_fifo_or_device_side_file_is_refused_at_once(log: Path, suffix: str, kind: str) -> None:
    side = Path(f"{log}.ctxstate.json{suffix}")
    if kind == "fifo":
        os.mkfifo(side)
    else:
        if os.geteuid() != 0:
            pytest.skip("making a device node needs root")
        os.mknod(side, 0o666 | stat.S_IFCHR, os.makedev(1, 5))  # a private /dev/zero
    done = ctxcompact("run", str(log), "-o", str(log.parent / "o.jsonl"))
    assert done.returncode == 3, done.stderr
    assert b"not a regular file" in done.stderr
    assert not (log.parent / "o.jsonl").exists()


@pytest.mark.parametrize("command", [["state", "show"], ["estimate", "--state"],
                                     ["calibrate", "--prompt-tokens", "5", "--state"]])
def test_a_fifo_or_device_state_never_blocks_a_reader(log: Path, command: list[str]) -> None:
    fifo = log.parent / "s.fifo"
    os.mkfifo(fifo)
    args = [*command, str(fifo)] if command[0] != "estimate" else ["estimate", str(log), "--state", str(fifo)]
    done = ctxcompact(*args)
    assert done.returncode == 3, done.stderr
    assert b"not a regular file" in done.stderr
    done = ctxcompact(*([*command, "/dev/zero"] if command[0] != "estimate"
                        else ["estimate", str(log), "--state", "/dev/zero"]))
    assert done.returncode == 3, done.stderr


def test_a_device_input_is_read_within_a_bound(log: Path) -> None:
    done = ctxcompact("run", "/dev/zero", "--no-state", "-o", str(log.parent / "o.jsonl"))
    assert done.returncode == 2, done.stderr
    assert b"gave more than" in done.stderr and b"Traceback" not in done.stderr


def test_the_stream_bound_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(paths, "STREAM_INPUT_LIMIT", 1000)
    with pytest.raises(UsageError, match="more than 1,000 bytes"):
        InputData.load("/dev/zero")


def test_a_fifo_input_is_read_when_written_and_empty_without_a_writer(log: Path) -> None:
    fifo = log.parent / "in.fifo"
    os.mkfifo(fifo)
    # no writer: an empty input at once, never a hang
    done = ctxcompact("estimate", str(fifo), "--no-state", "--exact", "none")
    assert b"Traceback" not in done.stderr
    # a writer (process substitution, a FIFO fed by another process): the transcript is read whole

    def feed() -> None:
        with open(fifo, "wb") as f:
            f.write(SAMPLE.read_bytes())

    writer = threading.Thread(target=feed)
    writer.start()
    done = ctxcompact("run", str(fifo), "--no-state", "--window", "3000", "-o", str(log.parent / "o.jsonl"))
    writer.join(TIMEOUT)
    assert done.returncode == 0, done.stderr
    assert b"ctxcompact summary" in (log.parent / "o.jsonl").read_bytes()


def test_stdin_still_streams(log: Path) -> None:
    with open(log, "rb") as f:
        done = ctxcompact("run", "-", "--window", "3000", "--no-state", stdin=f)
    assert done.returncode == 0, done.stderr
    assert b"ctxcompact summary" in done.stdout


def test_read_regular_refuses_links_when_asked(tmp_path: Path) -> None:
    (tmp_path / "t").write_bytes(b"x")
    (tmp_path / "l").symlink_to(tmp_path / "t")
    assert paths.read_regular(tmp_path / "l", "x", 10) == b"x"
    with pytest.raises(StateError, match="symbolic link"):
        paths.read_regular(tmp_path / "l", "x", 10, error=StateError, follow=False)
    with pytest.raises(UsageError, match="limit"):
        paths.read_regular(tmp_path / "t", "x", 0)


# --- 11: a glob walk visits each folder once -----------------------------------------------------------


def _looping_tree(root: Path) -> None:
    """Folders whose links point back up, two per level: a walk that follows them blindly never ends."""
    deep = root / "a" / "b" / "c"
    deep.mkdir(parents=True)
    (deep / "x.jsonl").write_bytes(SAMPLE.read_bytes())
    (root / "top.jsonl").write_bytes(SAMPLE.read_bytes())
    for folder in (root / "a", root / "a" / "b", deep):
        (folder / "up1").symlink_to(root, target_is_directory=True)
        (folder / "up2").symlink_to(root / "a", target_is_directory=True)


@pytest.mark.parametrize("arg", ["**/*.jsonl", "{root}/**/*.jsonl", "{root}"])
def test_a_recursive_walk_ends_on_links_that_loop(tmp_path: Path, arg: str) -> None:
    _looping_tree(tmp_path)
    done = ctxcompact("estimate", arg.format(root=tmp_path), "-r", "--no-state", "--exact", "none",
                      "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = [orjson.loads(line) for line in done.stdout.splitlines()]
    assert rows[-1]["totals"]["files"] == 2  # each file once, under the first name the walk met


def test_the_recursive_glob_matches_what_glob_matches_without_links(tmp_path: Path) -> None:
    import glob

    from ctxcompact.batch import expand

    for rel in ("a.jsonl", "d/b.jsonl", "d/e/c.jsonl", "d/e/c.txt", "d/.hidden.jsonl", ".h/z.jsonl",
                "d/e/f/[x].jsonl", "q/w/e/r.jsonl"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(b"{}\n")
    for pattern in ("**/*.jsonl", "d/**/*.jsonl", "**/e/*.jsonl", "**/[ab].jsonl", "**/[!a].jsonl",
                    "q/**/r.jsonl", "**/?.jsonl", "**"):
        want = sorted(os.path.relpath(m, tmp_path) for m in glob.glob(str(tmp_path / pattern), recursive=True)
                      if Path(m).is_file())
        got = sorted(os.path.relpath(m, tmp_path) for m in expand([str(tmp_path / pattern)], True))
        assert got == want, pattern


# --- 13: a hand-edited state that passes the schema is exit 3 with a message, never a crash -------------


@pytest.fixture(scope="module")
def compacted_state(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes]:
    folder = tmp_path_factory.mktemp("state")
    src = folder / "in.jsonl"
    src.write_bytes(SAMPLE.read_bytes())
    done = ctxcompact("run", str(src), "--window", "3000", "-o", str(folder / "o.jsonl"))
    assert done.returncode == 0, done.stderr
    return src, Path(f"{src}.ctxstate.json").read_bytes()


def _deep(depth: int) -> dict[str, object]:
    root: dict[str, object] = {}
    cur = root
    for _ in range(depth):
        nxt: dict[str, object] = {}
        cur["a"] = nxt
        cur = nxt
    return root


def _edit(raw: bytes, how: str) -> bytes:
    from ctxcompact.reader import encode_json

    obj = orjson.loads(raw)
    nbytes = obj["fingerprint"]["bytes"]
    if how == "bytes 1e19":
        return raw.replace(b'"bytes": %d' % nbytes, b'"bytes": 1e19')
    if how == "bytes 10**20":
        return raw.replace(b'"bytes": %d' % nbytes, b'"bytes": 100000000000000000000')
    if how == "x- 1,000 deep":
        obj["x-notes"] = _deep(1000)
    if how == "points 1e308":
        obj["calibration"]["points"] = [[1e308, 1e308]]
    if how == "negative huge":
        obj["calibration"]["last_estimate"] = -(2**62)
    if how == "unknown format":
        obj["fingerprint"]["format"] = "nope"
    return encode_json(obj)


@pytest.mark.parametrize("how", ["bytes 1e19", "bytes 10**20", "x- 1,000 deep", "points 1e308",
                                 "negative huge",
                                 "unknown format"])
def test_a_hand_edited_state_is_exit_3(compacted_state: tuple[Path, bytes], tmp_path: Path, how: str) -> None:
    src, raw = compacted_state
    edited = _edit(raw, how)
    assert edited != raw
    log = tmp_path / "in.jsonl"
    log.write_bytes(src.read_bytes())
    state = Path(f"{log}.ctxstate.json")
    for args in (["state", "show", str(state)],
                 ["run", str(log), "--window", "3000", "-o", str(tmp_path / "o")], ["estimate", str(log)],
                 ["calibrate", "--state", str(state), "--prompt-tokens", "100"]):
        state.write_bytes(edited)
        done = ctxcompact(*args)
        assert done.returncode == 3, (how, args, done.stderr)
        assert b"not a valid ctxcompact state" in done.stderr and b"internal error" not in done.stderr
        assert len(done.stderr) < 600  # a clear message, not the whole path of a deep key
        assert state.read_bytes() == edited


def test_a_whole_number_written_as_a_float_is_read(compacted_state: tuple[Path, bytes],
                                                   tmp_path: Path) -> None:
    src, raw = compacted_state
    nbytes = orjson.loads(raw)["fingerprint"]["bytes"]
    log = tmp_path / "in.jsonl"
    log.write_bytes(src.read_bytes())
    Path(f"{log}.ctxstate.json").write_bytes(raw.replace(b'"bytes": %d' % nbytes, b'"bytes": %d.0' % nbytes))
    done = ctxcompact("run", str(log), "--window", "3000", "-o", str(tmp_path / "o"))
    assert done.returncode == 0, done.stderr


def test_a_modest_x_key_is_kept(compacted_state: tuple[Path, bytes], tmp_path: Path) -> None:
    src, raw = compacted_state
    obj = orjson.loads(raw)
    obj["x-notes"] = {"tree": _deep(20), "big": 2**63, "float": 1e300}
    log = tmp_path / "in.jsonl"
    log.write_bytes(src.read_bytes())
    state = Path(f"{log}.ctxstate.json")
    state.write_bytes(orjson.dumps(obj))
    done = ctxcompact("run", str(log), "--window", "3000", "-o", str(tmp_path / "o"))
    assert done.returncode == 0, done.stderr
    assert orjson.loads(state.read_bytes())["x-notes"] == {"tree": _deep(20), "big": 2**63, "float": 1e300}


# --- 21: a provider that drips bytes: a wall-clock deadline per call, then the documented fallback --------


class _Drip:
    """An OpenAI-compatible server on 127.0.0.1 that sends its headers at once, then one byte of a body
    every ``interval`` seconds: every read succeeds, so a per-read timeout never fires. Each reply drips for
    ``life`` seconds, then its connection is closed with the body short: a client with no deadline of its
    own waits that long for each attempt, and ``outlived`` counts the replies that dripped their whole life.

    A test asserts ``outlived == 0`` where the call has returned: the client gave up while the server was
    still sending, whatever the machine's load (a bound on the wall time the call took, 6 s for a 1 s
    timeout, failed at load 8-14 where the test's process, niced, waited seconds for a core)."""

    def __init__(self, interval: float = 0.2, life: float = 30.0) -> None:
        import socketserver
        import time
        from http.server import BaseHTTPRequestHandler

        stop = self.stop = threading.Event()
        self.requests = self.outlived = 0
        self.asked = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _drip(self) -> None:
                outer.requests += 1
                outer.asked.set()
                length = int(self.headers.get("content-length") or 0)
                self.rfile.read(length)
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", "100000")
                self.end_headers()
                ends = time.monotonic() + life
                try:
                    while not stop.wait(interval):
                        if time.monotonic() >= ends:
                            outer.outlived += 1  # (the client still reading: closed under it, the body short)
                            return
                        self.wfile.write(b" ")
                        self.wfile.flush()
                except OSError:  # (the client went away)
                    pass

            do_POST = _drip
            do_GET = _drip

            def log_message(self, *args: object) -> None:
                pass

        class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("window", [["--summary-window", "16000"], []])  # [] asks the server for the window
def test_a_dripping_provider_falls_back_within_the_timeout(log: Path, window: list[str]) -> None:
    drip = _Drip()
    try:
        done = ctxcompact("run", str(log), "--window", "3000", "--no-state", "-o", str(log.parent / "o"),
                          "--summarizer", "openai", "--summary-model", "m", "--base-url", drip.url,
                          "--timeout", "2", "--max-retries", "3", *window)
        outlived = drip.outlived
    finally:
        drip.close()
    assert done.returncode == 0, done.stderr
    assert b"fallback" in done.stderr and b"within 2 s" in done.stderr
    # the window question and the call each given up while their reply still dripped (with no deadline, the
    # first would wait 30 s for each of 4 attempts, past TIMEOUT)
    assert drip.requests >= 1 and outlived == 0
    assert b"ctxcompact summary" in (log.parent / "o").read_bytes()


def test_no_fallback_is_exit_4_within_the_timeout(log: Path) -> None:
    drip = _Drip()
    try:
        done = ctxcompact("run", str(log), "--window", "3000", "--no-state", "-o", str(log.parent / "o"),
                          "--summarizer", "openai", "--summary-model", "m", "--base-url", drip.url,
                          "--summary-window", "16000", "--timeout", "1", "--no-fallback")
    finally:
        drip.close()
    assert done.returncode == 4, done.stderr
    assert b"timed out" in done.stderr  # said, flushed, before the process ended without finalization
    assert not (log.parent / "o").exists()


def test_the_cli_ends_unfinalized_while_an_abandoned_call_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """An SDK call left running at its deadline: the command's exit code ends the process at once
    (os._exit), not the interpreter's finalization with the thread inside the SDK (seen once as SIGSEGV
    after the error was printed); without such a thread the exit is the usual SystemExit."""
    from ctxcompact import cli, sdk

    class Ended(Exception):
        pass

    ended: list[object] = []

    def exit_now(code: object) -> None:
        ended.append(code)
        raise Ended

    def fails(argv: list[str] | None) -> None:
        raise SystemExit(4)

    monkeypatch.setattr(cli.os, "_exit", exit_now)
    monkeypatch.setattr(cli, "_main", fails)
    monkeypatch.setattr(cli.gc, "freeze", lambda: None)  # (the test process keeps its collector)
    release = threading.Event()
    call = threading.Thread(target=release.wait, name=sdk.PROVIDER_CALL_THREAD, daemon=True)
    call.start()
    try:
        with pytest.raises(Ended):
            cli.main()
        assert ended == [4]
        with pytest.raises(SystemExit):  # an in-process caller (argv given) is never ended
            cli.main(["estimate"])
        release.set()
        call.join()
        with pytest.raises(SystemExit) as done:
            cli.main()
        assert done.value.code == 4 and ended == [4]
    finally:
        release.set()


def test_call_with_deadline_passes_results_and_errors_through() -> None:
    from ctxcompact.errors import SummarizerError
    from ctxcompact.summarizers.provider import call_with_deadline

    assert call_with_deadline(lambda: 42, 5, "x") == 42
    with pytest.raises(KeyError):
        call_with_deadline(lambda: {}["missing"], 5, "x")
    with pytest.raises(SummarizerError, match=r"within 0\.2 s"):
        call_with_deadline(lambda: threading.Event().wait(30), 0.2, "x")


def test_exact_anthropic_count_against_a_dripping_server_ends_within_the_timeout() -> None:
    """The token count of ``--exact anthropic`` is a provider call too: the same wall-clock deadline
    (sdk.call's), a clear error naming the timeout instead of a hang."""
    from ctxcompact.formats import read_transcript
    from ctxcompact.tokens.provider import count_transcript_tokens

    transcript = read_transcript(io.BytesIO(b'{"role": "user", "content": "hi"}\n'), "openai").transcript
    drip = _Drip()
    try:
        with pytest.raises(Exception, match=r"within 1 s") as raised:
            count_transcript_tokens(transcript, "anthropic", "claude-x", api_key="sk-ant-test-key",
                                    base_url=drip.url.removesuffix("/v1"), timeout=1.0, max_retries=3)
        outlived = drip.outlived  # (the abandoned call still reads: counted as it returned)
        # (its request may reach the server after the deadline: the client is made within it, ~4 s cold on a
        # loaded machine)
        assert drip.asked.wait(TIMEOUT)
    finally:
        drip.close()
    assert "sk-ant-test-key" not in str(raised.value)
    assert outlived == 0  # given up while the reply dripped, not after 4 attempts of 30 s


# --- 22: numbers that are not sane ----------------------------------------------------------------------


@pytest.mark.parametrize("args", [
    ["--threshold", "9" * 5001], ["--threshold", "1" + "0" * 50 + "%"], ["--default-factor", "nan"],
    ["--default-factor", "inf"], ["--safety-ratio", "nan"], ["--window", "1" + "0" * 30],
    ["--window", "9" * 5001], ["--real-tokens", "1" + "0" * 20], ["--timeout", "inf"], ["--timeout", "nan"],
    ["--max-retries", "1000000"], ["--summary-window", "1" + "0" * 20], ["--keep-results", "1" + "0" * 20],
])
def test_an_insane_number_is_a_usage_error(log: Path, args: list[str]) -> None:
    for command in ("run", "estimate"):
        extra = ["-o", str(log.parent / "o.jsonl")] if command == "run" else []
        done = ctxcompact(command, str(log), "--no-state", *extra, *args)
        assert done.returncode == 2, (args, done.stderr)
        assert b"internal error" not in done.stderr and len(done.stderr) < 800
    assert not (log.parent / "o.jsonl").exists()


def test_the_library_checks_the_same_ranges() -> None:
    from ctxcompact import api
    from ctxcompact.options import LIMITS, Options

    for name, (low, high) in LIMITS.items():
        too_big = high * 10 if isinstance(high, int) else float("nan")
        with pytest.raises(UsageError, match=f"--{name.replace('_', '-')}"):
            api.estimate(SAMPLE, Options(**{name: too_big}))  # type: ignore[arg-type]
        if low > 0:
            with pytest.raises(UsageError):
                api.estimate(SAMPLE, Options(**{name: type(low)(0) if low >= 1 else 0.0}))  # type: ignore[arg-type]


def test_calibrate_refuses_an_insane_figure(log: Path) -> None:
    state = log.parent / "s.json"
    assert ctxcompact("run", str(log), "--state", str(state), "-o", str(log.parent / "o")).returncode == 0
    done = ctxcompact("calibrate", "--state", str(state), "--prompt-tokens", "1" + "0" * 30)
    assert done.returncode == 2 and b"internal error" not in done.stderr


def _with_usage(prompt_tokens: int, window: int | None = None) -> bytes:
    lines = [orjson.loads(line) for line in SAMPLE.read_bytes().splitlines() if line.strip()]
    for obj in lines:
        if obj.get("role") == "assistant":
            obj["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": 5}
            break
    return b"".join(orjson.dumps(o) + b"\n" for o in lines)


def test_an_enormous_usage_in_a_log_is_no_measurement(tmp_path: Path) -> None:
    log = tmp_path / "in.jsonl"
    log.write_bytes(_with_usage(10**18))
    for _ in range(2):  # the second run reads the state the first wrote
        done = ctxcompact("run", str(log), "-o", str(tmp_path / "o.jsonl"))
        assert done.returncode == 0, done.stderr
    assert 10**18 not in [p[1] for p in orjson.loads(Path(f"{log}.ctxstate.json").read_bytes())
                          ["calibration"]["points"]]


def test_a_server_announcing_an_enormous_window_is_not_taken(tmp_path: Path) -> None:
    from ctxcompact.summarizers.base import SummaryRequest
    from ctxcompact.summarizers.openai import OpenAISummarizer

    s = OpenAISummarizer(model="m", base_url="http://127.0.0.1:9/v1")
    s.discover_window = lambda key: (10**30, "server: /models max_model_len")  # type: ignore[method-assign]
    window, source = s.window("k")
    assert window == s.default_context_window and source == "default"
    assert SummaryRequest  # the request type the flow takes (imported: the module is the one under test)


# --- also seen: --to genai on tool arguments nested ~1,023 levels ----------------------------------------


def _nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.mark.parametrize("depth", [1000, 1021, 1022])
@pytest.mark.parametrize("to", ["genai", "anthropic", "openai"])
def test_deep_tool_arguments_convert_and_validate(tmp_path: Path, depth: int, to: str) -> None:
    from ctxcompact.reader import encode_json

    args = encode_json(_nested(depth)).decode()
    lines = [{"role": "user", "content": "do it"},
             {"role": "assistant", "content": None,
              "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": args}}]},
             {"role": "tool", "tool_call_id": "c1", "content": "ok"},
             {"role": "assistant", "content": "done"}]
    src = tmp_path / "deep.jsonl"
    src.write_bytes(b"".join(encode_json(line) + b"\n" for line in lines))
    out = tmp_path / "o.jsonl"
    done = ctxcompact("run", str(src), "--no-state", "--to", to, "-o", str(out))
    assert done.returncode == 0, done.stderr
    done = ctxcompact("validate", str(out))
    assert done.returncode == 0, done.stdout


def test_encode_json_keeps_a_line_within_the_readers_depth() -> None:
    from ctxcompact.reader import ORJSON_MAX_DEPTH, encode_json

    for depth in (10, 300, ORJSON_MAX_DEPTH - 1):  # what fits is written as it is
        value = _nested(depth)
        assert encode_json(value, ORJSON_MAX_DEPTH) == encode_json(value)
    line = {"x": [_nested(ORJSON_MAX_DEPTH + 50)]}
    data = encode_json(line, ORJSON_MAX_DEPTH)
    back = orjson.loads(data)  # the reader's parser takes it
    cur: object = back["x"][0]
    kept = 0  # dict levels written as objects, below the line's object and its list
    while isinstance(cur, dict):
        cur = cur["a"]
        kept += 1
    assert isinstance(cur, str) and 2 + kept == ORJSON_MAX_DEPTH  # as deep as the reader goes, no deeper
    rest = orjson.loads(cur)  # the rest, as its JSON text: nothing lost
    assert rest == _nested(ORJSON_MAX_DEPTH + 50 - kept)


@pytest.mark.parametrize("command", ["validate", "clean", "estimate"])
def test_every_reader_of_a_transcript_is_bounded(tmp_path: Path, command: str) -> None:
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    extra = ["--no-state", "--exact", "none"] if command == "estimate" else []
    done = ctxcompact(command, str(fifo), *extra)  # no writer: an empty input at once, never a hang
    assert b"Traceback" not in done.stderr
    done = ctxcompact(command, "/dev/zero", *extra)
    assert done.returncode == 2, done.stderr
    assert b"gave more than" in done.stderr


def test_a_rank_table_that_is_a_fifo_is_no_table(tmp_path: Path) -> None:
    from ctxcompact.tokens.bpe import load_table

    os.mkfifo(tmp_path / "t.ranks")
    assert load_table(tmp_path / "t.ranks", "00" * 32) is None
