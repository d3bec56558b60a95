"""One registry shape for formats, strategies and summarizers (``ctxcompact.plugins``): the CLI's choices,
help and defaults read from it and from ``options.Options``; every built-in loads and is what its name says;
no module exposing a plug-in is left out; importing the registry loads no plug-in."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

from ctxcompact import plugins
from ctxcompact.cli.commands import cli
from ctxcompact.errors import UsageError
from ctxcompact.formats import get_format
from ctxcompact.formats.base import Format
from ctxcompact.options import Options
from ctxcompact.strategies import get_strategy, names, register
from ctxcompact.summarizers import get_summarizer
from ctxcompact.summarizers.base import Summarizer

REGISTRIES = {"formats": plugins.FORMATS, "strategies": plugins.STRATEGIES,
              "summarizers": plugins.SUMMARIZERS}
ATTRIBUTE = {"formats": "FORMAT", "strategies": "STRATEGY"}


def _params(command: str) -> dict[str, click.Parameter]:
    cmd = cli.get_command(click.Context(cli), command)  # a command of cli/tools.py is loaded on first use
    assert cmd is not None
    return {p.name: p for p in cmd.params if p.name}


def _choices(param: click.Parameter) -> list[str]:
    assert isinstance(param.type, click.Choice)
    return list(param.type.choices)


def test_the_cli_choices_are_the_registries() -> None:
    run = _params("run")
    assert _choices(run["fmt"]) == ["auto", *plugins.FORMATS.names()]
    assert _choices(run["to"]) == list(plugins.FORMATS.names())
    assert _choices(run["strategy"]) == list(plugins.STRATEGIES.names())
    assert _choices(run["summarizer"]) == list(plugins.SUMMARIZERS.names())
    for command in ("validate", "clean", "estimate"):
        assert _choices(_params(command)["fmt"]) == ["auto", *plugins.FORMATS.names()]
    help_text = _params("eval")["strategies"].help or ""
    assert f"({','.join(plugins.STRATEGIES.names())})" in help_text


@pytest.mark.parametrize("command", ["validate", "clean", "estimate", "eval", "run"])
def test_every_cli_default_is_the_library_default(command: str) -> None:
    defaults = Options()
    fields = {f.name for f in dataclasses.fields(Options)}
    rename = {"fmt": "format", "strategies": "strategy"}
    checked = 0
    for name, param in _params(command).items():
        field = rename.get(name, name)
        # a default the option shows (str/int/float: not a flag, not click's "unset")
        if (field in fields and isinstance(param.default, (str, int, float))
                and not isinstance(param.default, bool) and not getattr(param, "is_flag", False)):
            assert param.default == getattr(defaults, field), f"{command} --{name}"
            checked += 1
    assert checked >= (1 if command in ("validate", "clean") else 3)


def test_the_defaults_a_flags_help_names_are_the_librarys() -> None:
    """A default the help text names, where the flag shows none (a None the library resolves later), is the
    constant the library resolves it to."""
    from ctxcompact.budget import DEFAULT_WINDOW
    from ctxcompact.summarizers import anthropic, openai
    from ctxcompact.tokens.calibration import DEFAULT_EXACT_FACTOR, DEFAULT_HEURISTIC_FACTOR
    from ctxcompact.tokens.counts import encoding_name

    run = {n: p.help or "" for n, p in _params("run").items() if isinstance(p, click.Option)}
    assert f"(default {DEFAULT_WINDOW})" in run["window"]
    factors = f"(default {DEFAULT_HEURISTIC_FACTOR} heuristic, {DEFAULT_EXACT_FACTOR} exact;"
    assert factors in run["default_factor"]
    assert f"else {encoding_name(Options())})" in run["encoding"]
    windows = f"else {anthropic.DEFAULT_CONTEXT_WINDOW} / {openai.DEFAULT_CONTEXT_WINDOW})"
    assert windows in run["summary_window"]


@pytest.mark.parametrize("kind", sorted(REGISTRIES))
def test_every_builtin_loads_and_is_what_its_name_says(kind: str) -> None:
    registry = REGISTRIES[kind]
    assert registry.default in registry.builtin_names()
    for name in registry.builtin_names():
        plugin = registry.get(name)
        assert registry.get(name.upper().replace("-", "_")) is plugin  # one name, however written
        if kind == "formats":
            assert isinstance(plugin, Format) and plugin.name == name and get_format(name) is plugin
        elif kind == "strategies":
            assert plugin.name == name and get_strategy(name) is plugin
        else:
            assert issubclass(plugin, Summarizer) and plugin.name == name


@pytest.mark.parametrize("kind", sorted(ATTRIBUTE))
def test_no_module_exposing_a_plugin_is_left_out(kind: str) -> None:
    package = importlib.import_module(f"ctxcompact.{kind}")
    registered = {REGISTRIES[kind].get(n) for n in REGISTRIES[kind].builtin_names()}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"ctxcompact.{kind}.{info.name}")
        exposed = getattr(module, ATTRIBUTE[kind], None)
        assert exposed is None or exposed in registered, f"{module.__name__} is not registered"


def test_summarizer_classes_are_all_registered() -> None:
    registered = {plugins.SUMMARIZERS.get(n) for n in plugins.SUMMARIZERS.builtin_names()}
    package = importlib.import_module("ctxcompact.summarizers")
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"ctxcompact.summarizers.{info.name}")
        for value in vars(module).values():
            if (isinstance(value, type) and issubclass(value, Summarizer)
                    and value.__module__ == module.__name__ and getattr(value, "name", None)):
                assert value in registered, value


def test_unknown_names_and_builtin_names() -> None:
    for registry in REGISTRIES.values():
        with pytest.raises(UsageError, match=f"unknown {registry.kind} 'nope'; known: "):
            registry.get("nope")
        with pytest.raises(ValueError, match="built-in"):
            registry.register(registry.default, object())
        assert "nope" not in registry and registry.default in registry and 3 not in registry
    with pytest.raises(UsageError, match="unknown summarizer"):
        get_summarizer("")


def test_a_registered_strategy_is_found_by_name_until_unregistered() -> None:
    class Quiet:
        name = "quiet-test"
        state_layer = 0

    try:
        register(Quiet())  # type: ignore[arg-type]
        assert "quiet-test" in names() and plugins.STRATEGIES.get("quiet-test").name == "quiet-test"
    finally:
        plugins.STRATEGIES.unregister("quiet-test")
    assert "quiet-test" not in names()


@pytest.mark.parametrize("prune", [False, True])
def test_whether_an_estimate_streams_is_the_registry_s_answer(prune: bool) -> None:
    """Only threshold without --prune describes from the counts (--prune's figures mask the context); a
    strategy registered at run time answers by the trait it declares, off while one of its flags is on."""
    from ctxcompact.strategies import estimate_needs_context

    opts = Options(prune=prune)
    got = {n: estimate_needs_context(n, opts) for n in plugins.STRATEGIES.builtin_names()}
    assert got == {"threshold": prune, "mask": True, "sliding-window": True}

    class Streams:
        name = "streams-test"
        state_layer = 0
        traits = frozenset({plugins.ESTIMATE_STREAMS})
        options = (plugins.Option("streams_flag", False, "a flag.", kind="flag"),)

    class Holds:
        name = "holds-test"
        state_layer = 0

    try:
        register(Streams())  # type: ignore[arg-type]
        register(Holds())  # type: ignore[arg-type]
        assert not estimate_needs_context("streams-test", opts)
        assert estimate_needs_context("streams-test", Options(strategy_options={"streams_flag": True}))
        assert estimate_needs_context("holds-test", opts)
    finally:
        plugins.STRATEGIES.unregister("streams-test")
        plugins.STRATEGIES.unregister("holds-test")
    with pytest.raises(UsageError, match="unknown strategy 'nope'"):
        estimate_needs_context("nope", opts)


@pytest.mark.parametrize(("code", "plugin_modules"), [
    pytest.param("import ctxcompact.plugins as p, ctxcompact.strategies as s, ctxcompact.options as o; "
                 "p.STRATEGIES.check('Threshold'); s.estimate_needs_context('threshold', o.Options()); "
                 "s.estimate_needs_context('mask', o.Options())",
                 ("ctxcompact.strategies.",), id="checking-a-name-or-asking-a-trait"),
    pytest.param("import ctxcompact.plugins as p, ctxcompact.cli.options; "
                 "[r.names() for r in (p.FORMATS, p.STRATEGIES, p.SUMMARIZERS)]",
                 ("ctxcompact.formats", "ctxcompact.summarizers", "ctxcompact.strategies."),
                 id="reading-the-names"),
])
def test_asking_the_registries_loads_no_plugin(code: str, plugin_modules: tuple[str, ...]) -> None:
    probe = f"import sys; {code}; print(' '.join(m for m in sys.modules if m.startswith({plugin_modules!r})))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.split() == []


def test_an_unknown_name_is_refused_with_the_known_ones() -> None:
    with pytest.raises(UsageError, match="unknown strategy 'nope'; known: threshold, mask"):
        plugins.STRATEGIES.check("nope")


def test_each_strategy_option_is_declared_once_and_becomes_its_flag() -> None:
    from ctxcompact.options import LIMITS, MAX_TOKENS

    declared = plugins.STRATEGIES.options(builtin_only=True)
    assert len({o.name for _, o in declared}) == len(declared) >= 9  # one declaration per option
    for command in ("run", "estimate", "eval"):
        params = _params(command)
        for strategy, option in declared:
            param = params[option.name]
            assert param.opts == [option.flag] and (param.help or "").startswith(f"{strategy}: ")
            assert param.envvar == "CTXCOMPACT_" + option.name.upper()
            assert getattr(Options(), option.name) == option.default == Options().option(option.name)
            if option.kind == "number":
                high = option.high if option.high is not None else MAX_TOKENS
                assert LIMITS[option.name] == (option.low, high)
                assert isinstance(param.type, click.IntRange | click.FloatRange)
                assert (param.type.min, param.type.max) == LIMITS[option.name]
                if option.default is not None:  # None: the strategy's own rule decides (no default shown)
                    assert param.default == option.default
            else:
                assert getattr(param, "is_flag", False) == (option.kind == "flag")
                assert param.multiple == (option.kind == "names")



def test_the_message_list_apis_format_names_are_the_entries() -> None:
    from ctxcompact import messages

    assert {"auto": "auto", **plugins.FORMATS.message_names()} == messages.FORMATS
    assert plugins.FORMATS.message_names() == {"openai": "openai", "chat": "openai", "anthropic": "anthropic",
                                               "gemini": "genai", "genai": "genai", "responses": "codex"}


def test_masks_resolved_defaults_are_its_declared_options() -> None:
    from ctxcompact.strategies.mask import MaskParams

    declared = {o.name: o.default for o in plugins.STRATEGIES.options_of("mask")}
    assert MaskParams().keep_results == declared["keep_results"] == Options().keep_results
    assert MaskParams().clear_thinking == declared["clear_thinking"]
    assert MaskParams().exclude_tools == frozenset(declared["exclude_tools"])


def test_the_states_required_sections_are_the_strategies_declarations() -> None:
    from ctxcompact.state import model, new_state

    toy = plugins.Registry("strategy", [
        plugins.Builtin("a", "x:Y", state_key="kept", state_empty={}),
        plugins.Builtin("b", "x:Z", state_key="only-when-held"),
    ], default="a")
    got = toy.required_sections()
    assert got == {"kept": {}} and got["kept"] is not toy.required_sections()["kept"]  # a copy each time
    assert model.REQUIRED_SECTIONS == plugins.STRATEGIES.required_sections() == {"events": []}
    assert new_state("openai").to_json()["events"] == []


# -- docs/DESIGN.md's Traits table: every trait, what holds it, and who reads it -----------------------------

def _traits_table() -> list[tuple[str, str, list[str]]]:
    """(trait constant, kind, readers) of each row of DESIGN.md's traits table."""
    text = (Path(__file__).parent.parent / "docs" / "DESIGN.md").read_text(encoding="utf-8")
    section = text.split("\n**Traits** (`plugins.py`)", 1)[1].split("\n\n", 2)[1]
    rows = [line.split("|")[1:-1] for line in section.splitlines()[2:]]
    return [(cells[0].strip().strip("`"), cells[1].strip(), re.findall(r"`([\w.]+)`", cells[3]))
            for cells in rows]


def test_the_design_traits_table_is_the_registrys_traits_and_their_readers() -> None:
    """Each trait a built-in declares has its row (the kind whose registry declares it), each row names a
    trait, and each reader it names exists and reads that trait: the table cannot drift from the code."""
    registries = {"format": plugins.FORMATS, "strategy": plugins.STRATEGIES,
                  "summarizer": plugins.SUMMARIZERS}
    declared = {(name, kind) for kind, reg in registries.items() for name in dir(plugins)
                if name.isupper() and isinstance(getattr(plugins, name), str)
                and any(reg.has(b, getattr(plugins, name)) for b in reg.builtin_names())}
    rows = _traits_table()
    assert {(trait, kind) for trait, kind, _ in rows} == declared
    for trait, _kind, readers in rows:
        assert readers, f"{trait}: no reader named"
        for ref in readers:
            module, _, name = ref.rpartition(".")
            source = inspect.getsource(getattr(importlib.import_module(f"ctxcompact.{module}"), name))
            assert trait in source, f"{ref} does not read {trait}"
