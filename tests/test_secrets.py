"""Credentials in a transcript are never copied into what ctxcompact composes (issue 26 item 19, issue 23
item 7): the summary, the state's facts, ``eval`` in every form, error messages, warnings and repairs. The
transcript's own records pass through as they are."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxcompact import api
from ctxcompact.errors import Problem
from ctxcompact.options import Options
from ctxcompact.secrets import MASK, scrub, scrub_credentials

KEYS = {
    "openai": "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z",
    "anthropic": "sk-ant-api03-Zy9xWv8uTs7rQp6oNm5lKj4iHg3fEd2cBa1-_XyZ",
    "github": "ghp_aB1cD2eF3gH4iJ5kL6mN7oP8qR9sT0uV1wX2",
    "bearer": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZ2VudCJ9.c2lnbmF0dXJlLXZhbHVlLTEyMzQ",
    "url": "AIzaSyD4nG7k2Lp9Qw3Er5Ty8Ui1Op6As0Df2Gh",
}


def _session() -> bytes:
    k = KEYS
    lines = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": f"Use my key {k['openai']} and never commit it. Fix the geocoder."},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "bash", "arguments": orjson.dumps({"command": (
                f"curl -H 'Authorization: Bearer {k['bearer']}' "
                f"'https://maps.googleapis.com/maps/api/geocode/json?address=x&key={k['url']}' > src/geo.json"
            )}).decode()}}]},
        {"role": "tool", "tool_call_id": "c1",
         "content": f"Error: 403 for key {k['url']}\nANTHROPIC_API_KEY={k['anthropic']}\nGH={k['github']}"},
        {"role": "assistant", "content": f"The call failed; your GitHub token {k['github']} is in the env."},
    ]
    for i in range(30):
        lines += [{"role": "user", "content": f"Step {i}: keep going on src/geo{i}.py " + "x" * 300},
                  {"role": "assistant", "content": f"Done step {i} " + "y" * 300}]
    lines.append({"role": "user", "content": f"Finally retry with {k['anthropic']} please."})
    return b"".join(orjson.dumps(x) + b"\n" for x in lines)


def _leaks(text: str | bytes) -> list[str]:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return [name for name, key in KEYS.items() if key in text]


@pytest.mark.parametrize("name", sorted(KEYS))
def test_each_kind_of_credential_is_recognised(name: str) -> None:
    assert KEYS[name] not in scrub_credentials(f"x {KEYS[name]} y")


@pytest.mark.parametrize("text", [
    "sorted(xs, key=lambda x: x)", "the primary key: user_id", "sk-learn is a library",
    "a task-oriented agent",
    "tokens: 1,234 used", "Token limit exceeded", "https://example.com/a?page=2&q=python",
    "see https://github.com/org/repo/blob/main/src/x.py#L10", "ghp_short", "password reset flow",
])
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert scrub_credentials(text) == text


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80), st.sampled_from(sorted(KEYS.values())), st.text(max_size=80))
def test_a_key_anywhere_in_text_is_removed_and_scrubbing_is_idempotent(before: str, key: str,
                                                                       after: str) -> None:
    text = f"{before} {key} {after}"
    once = scrub_credentials(text)
    assert key not in once
    assert scrub_credentials(once) == once


def test_the_scrubber_keeps_the_word_that_announces_a_credential() -> None:
    assert scrub_credentials("Authorization: Bearer abcdefghijklmnop1234") == f"Authorization: Bearer {MASK}"
    assert scrub_credentials("export OPENAI_API_KEY=abc123def456") == f"export OPENAI_API_KEY={MASK}"
    url = "postgres://admin:s3cr3tpass@db:5432/app"
    assert scrub_credentials(url) == f"postgres://admin:{MASK}@db:5432/app"
    assert scrub("a\nbbbb " + KEYS["github"], ["bbbb"]) == f"a {MASK} {MASK}"


def test_a_problem_never_quotes_a_credential() -> None:
    p = Problem(3, "$.role", f"unknown role {KEYS['anthropic']!r}")
    assert _leaks(str(p)) == [] and _leaks(orjson.dumps(p.to_json())) == []


def test_summary_state_and_output(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(_session())
    out = tmp_path / "out.jsonl"
    result = api.run(src, Options(window=3000), output=out)
    assert result.compacted
    assert result.summary is not None and _leaks(result.summary.text) == []
    state = tmp_path / "in.jsonl.ctxstate.json"
    assert _leaks(state.read_bytes()) == []
    written = [orjson.loads(x) for x in out.read_bytes().splitlines()]
    composed = [x for x in written if "[ctxcompact" in str(x.get("content"))]
    assert composed and _leaks(orjson.dumps(composed)) == []
    # the kept records are the transcript's own: they pass through as they are
    assert _leaks(written[-1]["content"]) == [] or KEYS["anthropic"] in written[-1]["content"]


def _cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "ctxcompact", *args], capture_output=True, timeout=300,
                          input=stdin)


@pytest.mark.parametrize("form", [[], ["--json"], ["--html", "{html}"]])
def test_eval_in_every_form(tmp_path: Path, form: list[str]) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(_session())
    html = tmp_path / "page.html"
    done = _cli("eval", str(src), "--window", "3000", *[a.replace("{html}", str(html)) for a in form])
    assert done.returncode == 0, done.stderr
    assert _leaks(done.stdout) == [] and _leaks(done.stderr) == []
    if form and form[0] == "--html":
        assert _leaks(html.read_bytes()) == []


@pytest.mark.parametrize("command", [["validate"], ["validate", "--json"], ["estimate"],
                                     ["estimate", "--json"], ["run", "--no-state"],
                                     ["run", "--no-state", "--json"], ["validate", "--lenient"],
                                     ["run", "--no-state", "--lenient"]])
def test_error_messages_and_diagnostics(tmp_path: Path, command: list[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"role":"user","content":"hi"}\n{"role":"assistant","content":"ok"}\n'
                    + orjson.dumps({"role": KEYS["anthropic"], "content": "x"}) + b"\n"
                    + orjson.dumps({"role": "user", "content": "y", KEYS["github"]: 1}) + b"\n")
    out = ["-o", str(tmp_path / "out.jsonl")] if command[0] == "run" else []  # the records, as they are
    done = _cli(command[0], str(bad), *command[1:], *out)
    assert done.returncode in (0, 1, 2), done.stderr
    assert _leaks(done.stdout) == [] and _leaks(done.stderr) == [], (done.stdout, done.stderr)
    assert b"line 3" in done.stdout + done.stderr or b'"line": 3' in done.stdout
