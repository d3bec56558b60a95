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

import copy
import importlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from .errors import UsageError

T = TypeVar("T")

@dataclass(frozen=True, slots=True)
class Option:
    """One of a plug-in's own options, declared once with its default: the ``Options`` attribute ``name``
    (``Options.option(name)``), the flag ``--name-with-dashes`` and the variable ``CTXCOMPACT_NAME``
    (docs/DESIGN.md "Adding a strategy"). ``kind``: ``number`` (its range ``low``..``high`` inclusive, a
    whole number when ``low`` is an int; ``high`` None is ``options.MAX_TOKENS``), ``flag`` (on or off) or
    ``names`` (repeatable, or comma-separated). ``help`` is the flag's, without the plug-in's name."""

    name: str
    default: Any
    help: str
    kind: str = "number"
    low: float | None = None
    high: float | None = None
    metavar: str | None = None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


@dataclass(frozen=True, slots=True)
class Builtin:
    name: str
    target: str  # "package.module:ATTRIBUTE"
    traits: frozenset[str] = frozenset()
    options: tuple[Option, ...] = ()  # its own options (the CLI's flags read them without loading it)
    state_key: str | None = None  # the key of its own section of the state file, if it keeps one
    #: that section's class (``module:attribute``), loaded to check a section read (its ``problem``)
    state_section: str | None = None
    #: the JSON of that section in a state where it holds nothing, when every state file carries it
    #: (schemas/state.schema.json ``required``); None: written only when it holds something
    state_empty: Any = field(default=None, compare=False)
    #: a format: the names the message-list API takes for it (``messages.compact(format=...)``), in order, its
    #: own among them when a list of messages is in this format; none when its records are not a message list
    message_names: tuple[str, ...] = ()


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
        self.check(name)
        builtin = self._builtins[k]
        if k not in self._loaded:
            self._loaded[k] = _load(builtin.target)
        return self._loaded[k]

    def check(self, name: str) -> None:
        """UsageError naming the known ones when ``name`` is unknown (without loading anything)."""
        if name not in self:
            raise UsageError(f"unknown {self.kind} {name!r}; known: {', '.join(self.names())}")

    def is_builtin(self, name: str) -> bool:
        return key(name) in self._builtins

    def has(self, name: str, trait: str) -> bool:
        """Whether ``name`` declares ``trait`` (without loading it)."""
        k = key(name)
        if k in self._registered:
            return trait in self._registered[k][1]
        builtin = self._builtins.get(k)
        return builtin is not None and trait in builtin.traits

    def register(self, name: str, plugin: T, traits: Iterable[str] = ()) -> None:
        """Make ``plugin`` available as ``name`` (ValueError for a built-in name, or for an option or a
        state key another plug-in already declares). The plug-in's own options and state section are its
        attributes ``options`` (a sequence of :class:`Option`) and ``state_section`` (a class with ``KEY``),
        if it has them."""
        k = key(name)
        if k in self._builtins:
            raise ValueError(f"{name!r} is a built-in {self.kind}")
        others = {n: p for n, p in self.plugins() if n != k}
        taken = {o.name for n in others for o in self.options_of(n)}
        clash = [o.name for o in getattr(plugin, "options", ()) if o.name in taken]
        section = getattr(plugin, "state_section", None)
        state_key = getattr(section, "KEY", None)
        if clash:
            raise ValueError(f"{name!r} declares options already taken: {', '.join(clash)}")
        if state_key is not None and state_key in {self.state_key_of(n) for n in others}:
            raise ValueError(f"{name!r} keeps its state under {state_key!r}, which another {self.kind} uses")
        self._registered[k] = (plugin, frozenset(traits))

    def unregister(self, name: str) -> None:
        self._registered.pop(key(name), None)

    def plugins(self) -> list[tuple[str, T | None]]:
        """(name, the registered plug-in, or None for a built-in not loaded here) in :meth:`names` order."""
        return [(n, self._registered[n][0] if n in self._registered else None) for n in self.names()]

    def options_of(self, name: str) -> tuple[Option, ...]:
        """The options ``name`` declares (a built-in's without loading it)."""
        k = key(name)
        if k in self._registered:
            return tuple(getattr(self._registered[k][0], "options", ()))
        builtin = self._builtins.get(k)
        return builtin.options if builtin is not None else ()

    def options(self, builtin_only: bool = False) -> list[tuple[str, Option]]:
        """(plug-in name, option) for every option declared, in :meth:`names` order."""
        names = self.builtin_names() if builtin_only else self.names()
        return [(n, o) for n in names for o in self.options_of(n)]

    def option(self, name: str) -> Option | None:
        """The declaration of the option called ``name`` (an ``Options`` attribute), or None."""
        return next((o for _, o in self.options() if o.name == name), None)

    def required_sections(self) -> dict[str, Any]:
        """The state sections every state file carries, each as it is written empty (``Builtin.state_empty``),
        by key: the built-ins' (one registered at run time is out of the file's closed schema)."""
        return {b.state_key: copy.deepcopy(b.state_empty) for b in self._builtins.values()
                if b.state_key is not None and b.state_empty is not None}

    def message_names(self) -> dict[str, str]:
        """Every name the message-list API takes (``Builtin.message_names``) → the built-in it names."""
        return {n: b.name for b in self._builtins.values() for n in b.message_names}

    def section_problem(self, name: str, value: Any) -> str | None:
        """What ``name``'s own section of the state says is wrong with ``value`` as read (its class's
        ``problem(value)``, if it has one), or None. A built-in's class is loaded only for a section that
        holds something: one as written empty (``Builtin.state_empty``) has nothing to check."""
        k = key(name)
        if k in self._registered:
            section = getattr(self._registered[k][0], "state_section", None)
        else:
            builtin = self._builtins.get(k)
            if builtin is None or builtin.state_section is None or value == builtin.state_empty:
                return None
            section = _load(builtin.state_section)
        check = getattr(section, "problem", None)
        return check(value) if callable(check) else None

    def state_key_of(self, name: str) -> str | None:
        """The key of ``name``'s own section in the state file, or None (a built-in's without loading it)."""
        k = key(name)
        if k in self._registered:
            return getattr(getattr(self._registered[k][0], "state_section", None), "KEY", None)
        builtin = self._builtins.get(k)
        return builtin.state_key if builtin is not None else None


def _load(target: str) -> Any:
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


# the types (Format, Strategy, Summarizer class) are the packages' (get_format, get_strategy, get_summarizer):
# this bottom-layer module names no upper layer but in these strings
_F, _S, _Z = "ctxcompact.formats.", "ctxcompact.strategies.", "ctxcompact.summarizers."

#: a format trait: a list of its messages carries the system prompt apart (Anthropic's ``system=``): the
#: message-list API takes ``compact(system=...)`` for it alone, writes it as the system line the format reads
#: first, and reads a list given with ``system=`` and no format as the first format with this trait
SYSTEM_APART = "system-apart"

#: a format trait: the message-list API returns the messages it makes (the summary, a repaired message) as
#: the class of the SDK objects given, for code that reads their attributes (google-genai ``Content``, ADK
#: ``Event``)
REBUILDS_SDK_OBJECTS = "rebuilds-sdk-objects"

#: the order is detection's on a tie (docs/reference/formats.md) and --help's
FORMATS: Registry[Any] = Registry("format", [
    Builtin("openai", _F + "openai:FORMAT", message_names=("openai", "chat")),
    Builtin("anthropic", _F + "anthropic:FORMAT", traits=frozenset({SYSTEM_APART}),
            message_names=("anthropic",)),
    Builtin("genai", _F + "genai:FORMAT", traits=frozenset({REBUILDS_SDK_OBJECTS}),
            message_names=("gemini", "genai")),
    Builtin("claude-code", _F + "claude_code:FORMAT"),
    # (a list of OpenAI Responses input items is read by the Codex format: its ``response_item`` payloads)
    Builtin("codex", _F + "codex:FORMAT", message_names=("responses",)),
], default="openai")

#: a strategy trait: its ``describe`` needs only the counts while none of its own flags is on, so ``estimate``
#: and ``run`` may stream without loading it (strategies.estimate_needs_context); without it, they read the
#: whole context
ESTIMATE_STREAMS = "estimate-streams"

#: a strategy trait: ``run``'s pass 1 streams with the strategy's own gatherer (its ``gathering(state)``)
#: and the context passes through streamed when what it gathered says nothing is due (its ``quiet(counted,
#: opts, state)``, its report keys then, else None); any other outcome reads the file held
#: (streaming.may_stream, route_file.run_file)
RUN_GATHERS = "run-gathers"

#: a strategy trait: over the threshold (or with an event due, for one that RUN_GATHERS), its compaction may
#: be made in pass 2 without holding the file, while none of its own flags is on (threshold's ``--prune``
#: masks first): given the conversation reader's ``Conversation`` (``StrategyInput.conversation``) instead of
#: the context's records (compaction_stream.may_compact_streamed)
COMPACTS_STREAMED = "compacts-streamed"

#: a strategy trait, with COMPACTS_STREAMED: also of an append-only log (``Format.compaction_seen``: Codex,
#: ADK events, Claude Code), whose lines are copied, then what the compaction appends
COMPACTS_LOGS_STREAMED = "compacts-logs-streamed"

#: a strategy trait: while one of its own flags is on, or always when it does not ESTIMATE_STREAMS, its
#: ``describe`` and ``apply`` mask first (``strategies.mask``: the mask strategy, threshold's ``--prune``),
#: so ``run`` streams it: below the threshold with mask's report keys (``strategies.mask.quiet``), over it
#: masking in pass 2 without holding the file (mask_stream, route_file.mask_streamed)
MASKS_STREAMED = "masks-streamed"

#: each strategy's options (the --help order is this one, strategy by strategy) and its state section's key;
#: ``--prune``'s tier takes mask's options
STRATEGIES: Registry[Any] = Registry("strategy", [
    Builtin("threshold", _S + "threshold:STRATEGY",
            traits=frozenset({ESTIMATE_STREAMS, COMPACTS_STREAMED, COMPACTS_LOGS_STREAMED, MASKS_STREAMED}),
            options=(
        Option("prune", False, "mask old tool results first; summarize only if still over the threshold.",
               kind="flag"),
    )),
    Builtin("mask", _S + "mask:STRATEGY", traits=frozenset({MASKS_STREAMED}), options=(
        Option("keep_results", 3, "never clear the N most recent tool results.", low=0),
        Option("protect_tokens", None, "never clear the newest T tokens of tool output.", low=0),
        Option("exclude_tools", (), "never clear results of this tool (repeatable, or comma-separated).",
               kind="names", metavar="NAME"),
        Option("min_savings", None, "mask only when it frees at least this many tokens.", low=0),
        Option("clear_thinking", False, "also clear thinking blocks older than the latest assistant turn.",
               kind="flag"),
    ), state_key="masking"),
    Builtin("sliding-window", _S + "sliding_window:STRATEGY",
            traits=frozenset({RUN_GATHERS, COMPACTS_STREAMED}), options=(
        Option("invocation_threshold", 5, "compact every θ new invocations.", low=1),
        Option("overlap", 2, "invocations before the new ones that each event re-covers (ω).", low=0),
        Option("safety_ratio", 0.7, "also compact when the context exceeds this share of the window.",
               low=0.05, high=1.0),
    ), state_key="events", state_empty=[], state_section=_S + "sliding_window_state:WindowEvents"),
], default="threshold")

#: the token counters ``--exact`` names: the local ones (tiktoken: exact and offline; none: the chars/4
#: heuristic), then providers by name, True for one whose token-counting endpoint ctxcompact calls (a provider
#: without one is refused with the reason: tokens.provider.unsupported_provider)
LOCAL_COUNTERS = ("tiktoken", "none")
PROVIDER_COUNTERS = {"anthropic": True, "openai": False}
COUNTERS = (*LOCAL_COUNTERS, *PROVIDER_COUNTERS)
#: the tiktoken encodings ``--encoding`` names (tokens.exact holds their patterns and ranks' hashes), and the
#: one a model not known to use another is counted with (tokens.exact.encoding_for_model)
DEFAULT_ENCODING = "o200k_base"
ENCODINGS = (DEFAULT_ENCODING, "cl100k_base")

#: a summarizer trait: it runs offline with nothing to configure (no key, no server, none of the provider
#: options), so ``run`` does not load it to check its configuration before any work
#: (run_setup.check_summarizer)
OFFLINE = "offline"

#: a summarizer trait: it summarizes a conversation not held, from the fact store (pass 2's
#: ``facts.gather.FactFeed``) and the records read again from the file as often as it iterates them
#: (``SummaryRequest.records``, ``strategies.conversation.Summarized``), so a compaction made without holding
#: the file may use it (compaction_stream.may_compact_streamed)
SUMMARIZES_STREAMED = "summarizes-streamed"

#: a summarizer trait: its summary is the extracted facts themselves, written by no model, so it is not
#: checked against them (summarizers.fallback.summarize) and its time is not reported
#: (cli.render.summary_details)
EXTRACTS = "extracts"

SUMMARIZERS: Registry[Any] = Registry("summarizer", [
    Builtin("extractive", _Z + "extractive:ExtractiveSummarizer",
            traits=frozenset({OFFLINE, SUMMARIZES_STREAMED, EXTRACTS})),
    Builtin("anthropic", _Z + "anthropic:AnthropicSummarizer", traits=frozenset({SUMMARIZES_STREAMED})),
    Builtin("openai", _Z + "openai:OpenAISummarizer", traits=frozenset({SUMMARIZES_STREAMED})),
], default="extractive")

#: what a summary falls back to when the chosen summarizer fails (summarizers.fallback.summarize)
FALLBACK_SUMMARIZER = "extractive"
