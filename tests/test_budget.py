"""Budget per docs/concepts/calibration.md#budget: window, buffer, threshold and summary budget; the model
table and user config."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from ctxcompact.budget import (
    DEFAULT_WINDOW,
    Budget,
    buffer_for,
    builtin_models,
    lookup_window,
    make_budget,
    parse_threshold,
)
from ctxcompact.errors import UsageError


@pytest.fixture(autouse=True)
def _no_user_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Keep the developer's own ~/.config out of the tests.
    monkeypatch.delenv("CTXCOMPACT_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))


@pytest.mark.parametrize(
    ("window", "buffer", "threshold", "summary"),
    [
        (8_000, 1_600, 6_400, 800),  # 20 %
        (32_000, 6_400, 25_600, 3_200),
        (128_000, 25_600, 102_400, 12_800),
        (199_999, 39_999, 160_000, 19_999),  # just under the large-window rule: still 20 % (rounded down)
        (200_000, 20_000, 180_000, 10_000),  # fixed 20k from 200k up
        (1_000_000, 20_000, 980_000, 10_000),
        (1_048_576, 20_000, 1_028_576, 10_000),
    ],
)
def test_budget_table(window: int, buffer: int, threshold: int, summary: int) -> None:
    b = make_budget(window, None, None)
    assert b == Budget(
        window=window,
        buffer=buffer,
        threshold=threshold,
        summary_budget=summary,
        window_source="--window",
        threshold_source="default",
    )
    assert not b.disabled
    assert b.would_compact(threshold) and not b.would_compact(threshold - 1)


def test_tiny_windows_use_integers() -> None:
    assert buffer_for(1) == 0
    assert buffer_for(9) == 1
    b = make_budget(9, None, None)
    assert (b.buffer, b.threshold, b.summary_budget) == (1, 8, 0)


def test_default_window() -> None:
    b = make_budget(None, None, None)
    assert (b.window, b.window_source, b.threshold) == (DEFAULT_WINDOW, "default", 180_000)
    assert DEFAULT_WINDOW == 200_000


def test_window_wins_over_model_and_unknown_model_is_then_irrelevant() -> None:
    b = make_budget(50_000, "no-such-model", None)
    assert (b.window, b.window_source) == (50_000, "--window")


@pytest.mark.parametrize("bad", [0, -5])
def test_bad_window(bad: int) -> None:
    with pytest.raises(UsageError, match="--window"):
        make_budget(bad, None, None)


# --- threshold ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "threshold", "source"),
    [
        ("150000", 150_000, "--threshold"),
        ("150_000", 150_000, "--threshold"),
        ("150,000", 150_000, "--threshold"),
        (" 1 ", 1, "--threshold"),
        ("200000", 200_000, "--threshold"),  # equal to the window is allowed
        ("80%", 160_000, "--threshold %"),
        ("82.5%", 165_000, "--threshold %"),
        ("100%", 200_000, "--threshold %"),
        ("33.3333%", 66_666, "--threshold %"),  # rounded down
        ("0", None, "disabled"),
        ("0%", None, "disabled"),
    ],
)
def test_parse_threshold(value: str, threshold: int | None, source: str) -> None:
    assert parse_threshold(value, 200_000) == (threshold, source)


def test_threshold_zero_disables_compaction() -> None:
    b = make_budget(None, None, "0")
    assert b.disabled and b.threshold is None and b.threshold_source == "disabled"
    assert not b.would_compact(10**12)
    assert (b.buffer, b.summary_budget) == (20_000, 10_000)  # still known for reports


def test_threshold_percent_through_make_budget() -> None:
    b = make_budget(128_000, None, "80%")
    assert (b.threshold, b.threshold_source, b.buffer) == (102_400, "--threshold %", 25_600)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("-5", "negative"),
        ("-5%", "negative"),
        ("101%", "over 100%"),
        ("250%", "over 100%"),
        ("abc", "80%"),
        ("", "80%"),
        ("1.5", "80%"),
        ("1,2,3", "80%"),
        ("80 percent", "80%"),
        ("200001", "larger than the window"),
        ("0.0001%", "less than one token"),
    ],
)
def test_bad_thresholds(value: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_threshold(value, 200_000)


def test_empty_threshold_string_in_make_budget_means_default() -> None:
    assert make_budget(None, None, "").threshold == 180_000


# --- model table -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "window", "source"),
    [
        ("claude-sonnet-4-5", 200_000, "model:claude-sonnet-4-5"),
        ("claude-sonnet-4-5-20250929", 200_000, "model:claude-sonnet-4-5"),  # longest prefix
        ("claude-3-5-haiku-20241022", 200_000, "model:claude-3-5-haiku"),
        ("claude-sonnet-4-5[1m]", 1_000_000, "model:[1m]"),
        ("claude-future-model", 200_000, "model:claude"),
        ("gpt-4o-2024-08-06", 128_000, "model:gpt-4o"),
        ("gpt-4o-mini", 128_000, "model:gpt-4o-mini"),
        ("gpt-4-0613", 8_192, "model:gpt-4"),
        ("gpt-4.1", 1_047_576, "model:gpt-4.1"),
        ("gpt-4.1-mini-2025-04-14", 1_047_576, "model:gpt-4.1-mini"),
        ("gpt-5", 400_000, "model:gpt-5"),
        ("o3-mini", 200_000, "model:o3-mini"),
        ("o4-mini-2025-04-16", 200_000, "model:o4-mini"),
        ("gemini-2.5-pro", 1_048_576, "model:gemini-2.5-pro"),
        ("gemini-2.0-flash-001", 1_048_576, "model:gemini-2.0-flash"),
        ("GPT-4O", 128_000, "model:gpt-4o"),  # case-insensitive
        ("openai/gpt-4o", 128_000, "model:gpt-4o"),  # provider prefix
        ("anthropic/claude-opus-4-1-20250805", 200_000, "model:claude-opus-4-1"),
    ],
)
def test_model_lookup(model: str, window: int, source: str) -> None:
    assert lookup_window(model) == (window, source)
    b = make_budget(None, model, None)
    assert (b.window, b.window_source) == (window, source)


def test_builtin_table_is_sane() -> None:
    table = builtin_models()
    assert len(table) >= 40
    assert all(isinstance(v, int) and v >= 8_000 for v in table.values())
    assert all(k == k.lower() for k in table)


def test_unknown_model_says_how_to_add_it(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as info:
        make_budget(None, "llama-3-70b", None)
    text = str(info.value)
    assert "llama-3-70b" in text
    assert str(tmp_path / "xdg" / "ctxcompact" / "config.json") in text
    assert '"models"' in text and "--window" in text


def _write(path: Path, obj: object) -> Path:
    path.write_bytes(orjson.dumps(obj))
    return path


def test_user_config_extends_and_overrides(tmp_path: Path) -> None:
    cfg = _write(tmp_path / "c.json", {"models": {"llama-3-70b": 8_192, "gpt-4o": 64_000, "my": 32_000}})
    assert lookup_window("llama-3-70b-instruct", cfg) == (8_192, "config:llama-3-70b")
    assert lookup_window("gpt-4o", cfg) == (64_000, "config:gpt-4o")  # the user's entry wins
    # A longer built-in prefix still beats a shorter user one.
    assert lookup_window("gpt-4o-mini", cfg) == (128_000, "model:gpt-4o-mini")
    assert lookup_window("claude-opus-4", cfg)[0] == 200_000  # built-ins remain
    b = make_budget(None, "llama-3-70b", "50%", cfg)
    assert (b.window, b.threshold, b.buffer) == (8_192, 4_096, 1_638)


def test_config_from_environment_and_xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    xdg = tmp_path / "xdg" / "ctxcompact"
    xdg.mkdir(parents=True)
    _write(xdg / "config.json", {"models": {"xdg-model": 1_000}})
    assert lookup_window("xdg-model") == (1_000, "config:xdg-model")
    env_cfg = _write(tmp_path / "env.json", {"models": {"env-model": 2_000}})
    monkeypatch.setenv("CTXCOMPACT_CONFIG", str(env_cfg))
    assert lookup_window("env-model") == (2_000, "config:env-model")
    with pytest.raises(UsageError):
        lookup_window("xdg-model")  # $CTXCOMPACT_CONFIG replaces the default file


def test_config_without_models_key_is_fine(tmp_path: Path) -> None:
    cfg = _write(tmp_path / "c.json", {"other": 1})
    assert lookup_window("gpt-5", cfg) == (400_000, "model:gpt-5")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "JSON object"),
        (b'{"models": [1]}', "must be an object"),
        (b'{"models": {"x": "big"}}', "positive integer"),
        (b'{"models": {"x": 0}}', "positive integer"),
        (b'{"models": {"x": true}}', "positive integer"),
    ],
)
def test_bad_config_is_usage_error_naming_the_file(tmp_path: Path, content: bytes, message: str) -> None:
    cfg = tmp_path / "bad.json"
    cfg.write_bytes(content)
    with pytest.raises(UsageError, match=message) as info:
        lookup_window("gpt-5", cfg)
    assert str(cfg) in str(info.value)


def test_missing_explicit_config_is_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        lookup_window("gpt-5", tmp_path / "nope.json")
    monkeypatch.setenv("CTXCOMPACT_CONFIG", str(tmp_path / "nope.json"))
    with pytest.raises(UsageError, match="does not exist"):
        make_budget(None, "gpt-5", None)


def test_empty_model_name() -> None:
    with pytest.raises(UsageError):
        lookup_window("  ")
