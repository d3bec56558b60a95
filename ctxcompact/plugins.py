"""The one registry shape for the three plug-in points: formats, strategies and summarizers.

Each built-in is listed here by name and ``module:attribute`` (the way a plug-in names itself in an entry
point) and loaded on first use, so importing this module loads none of them: the CLI's choices, defaults and
help read the names from here without paying for the layers behind them. A library user adds one at run time
with :meth:`Registry.register`; a built-in name cannot be taken.

Adding a built-in: its module (exposing the object: a ``Format`` instance, a ``Strategy`` object, a
``Summarizer`` class) with its tests, and its line below (docs/DESIGN.md "Contracts"). A trait is what the
engine may know of a plug-in without loading it.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .errors import UsageError

T = TypeVar("T")

@dataclass(frozen=True, slots=True)
class Builtin:
    name: str
    target: str  # "package.module:ATTRIBUTE"
    traits: frozenset[str] = frozenset()


def key(name: str) -> str:
    """A name as the registries compare it: ``claude_code``, ``Claude-Code`` and ``claude-code`` are one."""
    return name.strip().lower().replace("_", "-")


class Registry(Generic[T]):
    """Names → plug-ins of one ``kind``: the built-ins in their order (detection ties, ``--help``), then
    those registered at run time."""

    def __init__(self, kind: str, builtins: Sequence[Builtin], default: str) -> None:
        self.kind = kind
        self.default = default
        self._builtins = {b.name: b for b in builtins}
        self._loaded: dict[str, T] = {}
        self._registered: dict[str, tuple[T, frozenset[str]]] = {}
        assert default in self._builtins and all(key(b.name) == b.name for b in builtins)

    def names(self) -> tuple[str, ...]:
        """Every name: the built-ins, then those registered at run time."""
        return (*self._builtins, *self._registered)

    def builtin_names(self) -> tuple[str, ...]:
        return tuple(self._builtins)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and key(name) in self.names()

    def get(self, name: str) -> T:
        """The plug-in called ``name`` (UsageError naming the known ones for an unknown name). A built-in
        whose module cannot be imported raises the ImportError."""
        k = key(name)
        if k in self._registered:
            return self._registered[k][0]
        builtin = self._builtins.get(k)
        if builtin is None:
            raise UsageError(f"unknown {self.kind} {name!r}; known: {', '.join(self.names())}")
        if k not in self._loaded:
            module, _, attribute = builtin.target.partition(":")
            self._loaded[k] = getattr(importlib.import_module(module), attribute)
        return self._loaded[k]

    def has(self, name: str, trait: str) -> bool:
        """Whether ``name`` declares ``trait`` (without loading it)."""
        k = key(name)
        if k in self._registered:
            return trait in self._registered[k][1]
        builtin = self._builtins.get(k)
        return builtin is not None and trait in builtin.traits

    def register(self, name: str, plugin: T, traits: Iterable[str] = ()) -> None:
        """Make ``plugin`` available as ``name`` (ValueError for a built-in name)."""
        k = key(name)
        if k in self._builtins:
            raise ValueError(f"{name!r} is a built-in {self.kind}")
        self._registered[k] = (plugin, frozenset(traits))

    def unregister(self, name: str) -> None:
        self._registered.pop(key(name), None)


# the types (Format, Strategy, Summarizer class) are the packages' (get_format, get_strategy, get_summarizer):
# this bottom-layer module names no upper layer but in these strings
_F, _S, _Z = "ctxcompact.formats.", "ctxcompact.strategies.", "ctxcompact.summarizers."

#: the order is detection's on a tie (docs/reference/formats.md) and --help's
FORMATS: Registry[Any] = Registry("format", [
    Builtin("openai", _F + "openai:FORMAT"),
    Builtin("anthropic", _F + "anthropic:FORMAT"),
    Builtin("genai", _F + "genai:FORMAT"),
    Builtin("claude-code", _F + "claude_code:FORMAT"),
    Builtin("codex", _F + "codex:FORMAT"),
], default="openai")

STRATEGIES: Registry[Any] = Registry("strategy", [
    Builtin("threshold", _S + "threshold:STRATEGY"),
    Builtin("mask", _S + "mask:STRATEGY"),
    Builtin("sliding-window", _S + "sliding_window:STRATEGY"),
], default="threshold")

SUMMARIZERS: Registry[Any] = Registry("summarizer", [
    Builtin("extractive", _Z + "extractive:ExtractiveSummarizer"),
    Builtin("anthropic", _Z + "anthropic:AnthropicSummarizer"),
    Builtin("openai", _Z + "openai:OpenAISummarizer"),
], default="extractive")
