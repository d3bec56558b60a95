"""Builds tests/data/real-corpus.json: every real (public, licensed) log under
tests/data/{claude-code,codex,genai} with its format, source, licence, CLI version and the features it
exhibits, read from the raw JSON lines (not through ctxcompact, so the manifest is an independent account
of what the log holds).

Sources and licences come from the SOURCES.md table next to each log (columns: file, source repository,
path, commit, license). Run after adding a log:

    python bench/corpus_features.py            # rewrites tests/data/real-corpus.json
    python bench/corpus_features.py --check    # exit 1 if the manifest is stale
    python bench/corpus_features.py FILE ...   # print the features of other files (no manifest)
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
MANIFEST = DATA / "real-corpus.json"
FORMAT_DIRS = {"claude-code": "claude-code", "codex": "codex", "genai": "genai"}

# Built-in Claude Code commands that start no model turn (a custom command is a request, these are not).
LOCAL_COMMANDS = {"/exit", "/clear", "/model", "/compact", "/cost", "/help", "/config", "/status",
                  "/resume", "/login", "/logout", "/doctor", "/init", "/memory", "/permissions", "/mcp",
                  "/context", "/usage", "/agents", "/hooks", "/ide", "/rewind", "/theme", "/vim"}
COMMAND_NAME = re.compile(r"<command-name>\s*(/?[^<\s]+)\s*</command-name>")
ERROR_WORD = re.compile(r"\berror\b", re.IGNORECASE)


def read_lines(path: Path) -> list[Any]:
    out: list[Any] = []
    for raw in path.read_bytes().splitlines():
        if raw.strip():
            try:
                out.append(json.loads(raw))
            except ValueError:
                out.append(None)
    return out


def detect(objs: list[Any]) -> str:
    """The format by structure alone."""
    kinds = {o.get("type") for o in objs if isinstance(o, dict)}
    if kinds & {"session_meta", "response_item", "event_msg", "turn_context"}:
        return "codex"
    if any(isinstance(o, dict) and "invocationId" in o and "author" in o for o in objs):
        return "genai"
    if any(isinstance(o, dict) and "sessionId" in o and o.get("type") in ("user", "assistant") for o in objs):
        return "claude-code"
    return "unknown"


def _blocks(msg: Any) -> list[dict[str, Any]]:
    content = msg.get("content") if isinstance(msg, dict) else None
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _text_of(msg: Any) -> str:
    content = msg.get("content") if isinstance(msg, dict) else None
    if isinstance(content, str):
        return content
    return " ".join(str(b.get("text", "")) for b in _blocks(msg))


def claude_code_features(objs: list[Any]) -> dict[str, Any]:
    recs = [o for o in objs if isinstance(o, dict)]
    versions = sorted({str(o["version"]) for o in recs if o.get("version")})
    uuids = {o.get("uuid") for o in recs if o.get("uuid")}
    progress_uuids = {o.get("uuid") for o in recs if o.get("type") == "progress" and o.get("uuid")}
    ids_seen: dict[str, int] = {}
    usage_points = zero_usage = 0
    commands: list[str] = []
    images = 0
    tool_errors = 0
    thinking = redacted = 0
    for o in recs:
        msg = o.get("message")
        if o.get("type") == "assistant" and isinstance(msg, dict):
            mid = msg.get("id")
            if mid:
                ids_seen[mid] = ids_seen.get(mid, 0) + 1
            usage = msg.get("usage")
            if isinstance(usage, dict):
                total = sum(v for k, v in usage.items() if k.endswith("input_tokens") and isinstance(v, int))
                if total == 0:
                    zero_usage += 1
                elif not o.get("isSidechain"):
                    usage_points += 1
        for b in _blocks(msg):
            if b.get("type") == "image":
                images += 1
            if b.get("type") == "tool_result":
                if b.get("is_error"):
                    tool_errors += 1
                nested = b.get("content") if isinstance(b.get("content"), list) else []
                images += sum(1 for c in nested if isinstance(c, dict) and c.get("type") == "image")
            thinking += b.get("type") == "thinking"
            redacted += b.get("type") == "redacted_thinking"
        if o.get("type") == "user":
            commands += COMMAND_NAME.findall(_text_of(msg))
        if o.get("type") == "system" and isinstance(o.get("content"), str):
            commands += COMMAND_NAME.findall(o["content"])
    split = sum(1 for n in ids_seen.values() if n > 1)
    roots = sum(1 for o in recs if o.get("uuid") and o.get("parentUuid") is None)
    dangling = sum(1 for o in recs if o.get("parentUuid") and o["parentUuid"] not in uuids)
    return {
        "versions": versions,
        "records": len(recs),
        "compact_boundary": sum(1 for o in recs if o.get("subtype") == "compact_boundary"),
        "compact_summary": sum(1 for o in recs if o.get("isCompactSummary")),
        "logical_parent": sum(1 for o in recs if o.get("logicalParentUuid")),
        "sidechain": sum(1 for o in recs if o.get("isSidechain")),
        "slash_command": bool(commands),
        "custom_command": sorted({c for c in commands if c not in LOCAL_COMMANDS}),
        "local_command": sorted({c for c in commands if c in LOCAL_COMMANDS}),
        "meta": sum(1 for o in recs if o.get("isMeta")),
        "image": images,
        "progress": len(progress_uuids),
        "progress_chain": sum(1 for o in recs if o.get("parentUuid") in progress_uuids),
        "split_message": split,
        "zero_usage": zero_usage,
        "usage_points": usage_points,
        "tool_errors": tool_errors,
        "thinking": thinking,
        "redacted_thinking": redacted,
        "roots": roots,
        "dangling_parent": dangling,
        "types": sorted({str(o.get("type")) for o in recs}),
    }


def codex_features(objs: list[Any]) -> dict[str, Any]:
    recs = [o for o in objs if isinstance(o, dict)]
    versions = sorted({str(p["cli_version"]) for o in recs if o.get("type") == "session_meta"
                       for p in [o.get("payload") or {}] if p.get("cli_version")})
    payload_types: dict[str, int] = {}
    token_counts = compacted = replacement = 0
    calls: dict[str, str] = {}
    error_exit_zero = nonzero_exit = 0
    for o in recs:
        p = o.get("payload") if isinstance(o.get("payload"), dict) else {}
        kind = f"{o.get('type')}:{p.get('type', '')}"
        payload_types[kind] = payload_types.get(kind, 0) + 1
        if o.get("type") == "event_msg" and p.get("type") == "token_count" and p.get("info"):
            token_counts += 1
        if o.get("type") == "compacted":
            compacted += 1
            replacement += "replacement_history" in p
        if p.get("type") in ("function_call_output", "custom_tool_call_output"):
            out = p.get("output")
            text = out if isinstance(out, str) else json.dumps(out)
            code = None
            try:
                parsed = json.loads(text)
                if isinstance(parsed, dict):
                    code = (parsed.get("metadata") or {}).get("exit_code")
                    text = str(parsed.get("output", text))
            except ValueError:
                m = re.search(r"(?:Exit code|Process exited with code):?\s*(-?\d+)", text)
                code = int(m.group(1)) if m else None
            if code == 0 and ERROR_WORD.search(text):
                error_exit_zero += 1
            if isinstance(code, int) and code != 0:
                nonzero_exit += 1
        if (o.get("type") == "event_msg" and p.get("type") == "exec_command_end" and p.get("exit_code") == 0
                and ERROR_WORD.search(str(p.get("aggregated_output") or p.get("stdout")))):
            error_exit_zero += 1
        if p.get("type") in ("function_call", "custom_tool_call") and p.get("call_id"):
            calls[p["call_id"]] = str(p.get("name"))
    return {
        "versions": versions,
        "records": len(recs),
        "usage_points": token_counts,
        "codex_compacted": compacted,
        "replacement_history": replacement,
        "error_exit_zero": error_exit_zero,
        "nonzero_exit": nonzero_exit,
        "tool_calls": len(calls),
        "images": sum(1 for o in recs for b in _blocks(o.get("payload")) if b.get("type") == "input_image"),
        "types": sorted(payload_types),
    }


def genai_features(objs: list[Any]) -> dict[str, Any]:
    recs = [o for o in objs if isinstance(o, dict)]
    authors = sorted({str(o.get("author")) for o in recs if o.get("author")})
    parts = [p for o in recs for p in ((o.get("content") or {}).get("parts") or []) if isinstance(p, dict)]
    usage_key = next((k for k in ("usageMetadata", "usage_metadata") if any(k in o for o in recs)), None)
    return {
        "versions": [],
        "records": len(recs),
        "authors": authors,
        "invocations": len({o.get("invocationId") for o in recs if o.get("invocationId")}),
        "usage_points": sum(1 for o in recs if usage_key and o.get(usage_key)),
        "function_calls": sum(1 for p in parts if "functionCall" in p or "function_call" in p),
        "function_responses": sum(1 for p in parts if "functionResponse" in p or "function_response" in p),
        "adk_compaction": sum(1 for o in recs if (o.get("actions") or {}).get("compaction")),
        "state_delta": sum(1 for o in recs if (o.get("actions") or {}).get("stateDelta")
                           or (o.get("actions") or {}).get("state_delta")),
    }


FEATURES = {"claude-code": claude_code_features, "codex": codex_features, "genai": genai_features}


# Placeholders a publisher put where the conversation's text was: such a log's structure and usage are real
# but what the model saw is not there, so it cannot measure calibration. Signatures and ids do not count.
REDACTED_TEXT = re.compile(rb"\[REDACTED_(?!SIGNATURE|MESSAGE_ID|REQUESTID|NAME)[A-Z_]+")


def features(path: Path) -> dict[str, Any]:
    objs = read_lines(path)
    fmt = detect(objs)
    out: dict[str, Any] = {"format": fmt, "bytes": path.stat().st_size,
                           "redacted_text": len(REDACTED_TEXT.findall(path.read_bytes()))}
    if fmt in FEATURES:
        out.update(FEATURES[fmt](objs))
    return out


def sources_table(directory: Path) -> dict[str, dict[str, str]]:
    """file name -> {repo, path, commit, license} from the SOURCES.md table."""
    table: dict[str, dict[str, str]] = {}
    sources = directory / "SOURCES.md"
    if not sources.exists():
        return table
    for line in sources.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 5 or not cells[0].startswith("`"):
            continue
        name = cells[0].strip("`")
        table[name] = {"repo": cells[1], "path": cells[2], "commit": cells[3], "license": cells[4]}
    return table


def manifest() -> dict[str, Any]:
    logs = []
    for fmt, sub in FORMAT_DIRS.items():
        directory = DATA / sub
        table = sources_table(directory)
        for path in sorted(directory.glob("*.jsonl")):
            if path.name not in table:
                raise SystemExit(f"{path.relative_to(REPO)}: not in {sub}/SOURCES.md (every real log needs "
                                 "its source and licence)")
            feats = features(path)
            if feats["format"] != fmt:
                raise SystemExit(f"{path.relative_to(REPO)}: looks like {feats['format']}, "
                                 f"lives under {sub}/")
            logs.append(entry(str(path.relative_to(DATA)), table[path.name], feats))
    return {"generated_by": "bench/corpus_features.py", "logs": logs}


# The features a log exhibits (true when its count is not zero), by format; the counts stay in "counts".
FLAGS = {
    "claude-code": ("compact_boundary", "compact_summary", "logical_parent", "sidechain", "slash_command",
                    "custom_command", "local_command", "meta", "image", "progress_chain", "split_message",
                    "zero_usage", "tool_errors", "thinking", "redacted_thinking", "dangling_parent"),
    "codex": ("codex_compacted", "replacement_history", "error_exit_zero", "nonzero_exit", "images"),
    "genai": ("function_calls", "adk_compaction", "state_delta"),
}


def entry(file: str, source: dict[str, str], feats: dict[str, Any]) -> dict[str, Any]:
    """One manifest row: where the log comes from, its format and CLI version, which features it has
    (booleans) and the counts behind them."""
    fmt = feats["format"]
    path_cell = source["path"]
    quoted = re.match(r"`([^`]+)`", path_cell)
    versions = feats.get("versions", [])
    # An excerpt may lack the lines that carry the version (Codex's session_meta): SOURCES.md names it.
    stated = re.search(r"CLI (\d[\w.-]*)", path_cell)
    version = versions[-1] if versions else (stated.group(1) if stated else None)
    shown_apart = ("format", "versions", "types", "bytes", "records", "usage_points", "redacted_text")
    counts = {k: v for k, v in feats.items() if k not in shown_apart}
    return {
        "file": file,
        "format": fmt,
        "version": version,
        "version_from": "log" if versions else ("SOURCES.md" if version else None),
        "versions": versions,
        "repo": source["repo"],
        "path": quoted.group(1) if quoted else path_cell,
        "excerpt": "**excerpt**" in path_cell,
        "note": path_cell,
        "commit": source["commit"],
        "license": source["license"],
        "bytes": feats["bytes"],
        "records": feats["records"],
        "usage_points": feats.get("usage_points", 0),
        "redacted": feats["redacted_text"] > 0,  # the text the model saw is not there (calibration skips it)
        "features": {flag: bool(feats.get(flag)) for flag in FLAGS.get(fmt, ())},
        "counts": counts,
        "record_types": feats.get("types", []),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--check", action="store_true", help="exit 1 if the manifest is not up to date")
    args = ap.parse_args(argv)
    if args.files:
        for f in args.files:
            print(json.dumps({"file": str(f), **features(f)}))
        return 0
    text = json.dumps(manifest(), indent=1, ensure_ascii=False) + "\n"
    if args.check:
        current = MANIFEST.read_text(encoding="utf-8") if MANIFEST.exists() else ""
        if current != text:
            print(f"{MANIFEST.relative_to(REPO)} is stale: run python bench/corpus_features.py",
                  file=sys.stderr)
            return 1
        return 0
    MANIFEST.write_text(text, encoding="utf-8")
    print(f"wrote {MANIFEST.relative_to(REPO)} ({text.count(chr(10))} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
