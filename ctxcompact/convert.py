"""Converting a transcript to another format so that it validates as that format (``--to``): written by the
target format, read back and cleaned (so it sits above :mod:`.clean`, not in ``formats/``)."""

from __future__ import annotations

from collections.abc import Iterator

from .clean import clean
from .formats.jsonl import read_transcript, write_transcript
from .formats.registry import get_format
from .model import Transcript


def convert(transcript: Transcript, fmt: str) -> Transcript:
    """The transcript as a valid transcript of ``fmt``: written by the target format from the model, read
    back, and cleaned with the target's layout (e.g. OpenAI's one ``tool`` message per result become one
    Anthropic user message; Claude Code's one-line-per-block assistant turn becomes one message)."""
    target = get_format(fmt)
    if not target.writable and target.fallback:
        target = get_format(target.fallback)
    if target.name == transcript.format:
        return transcript
    turns = get_format(transcript.format).api_turns(transcript.records)
    if turns is not transcript.records:
        transcript = Transcript(transcript.format, turns, transcript.source)
    data = b"".join(write_transcript(transcript, target.name))
    converted = read_transcript(data, target.name, schema=False).transcript
    return clean(converted).transcript


def lines_in(transcript: Transcript, fmt: str) -> Iterator[bytes]:
    """Output lines in ``fmt``: as written when it is the transcript's own format (or it passes through
    unchanged), else converted and cleaned so the result validates as ``fmt``."""
    if fmt == transcript.format:
        return write_transcript(transcript, fmt)
    return write_transcript(convert(transcript, fmt))

