"""MkDocs hook: the pages that must not drift from the code are generated from it at build time.

- ``<!-- ctxcompact:help -->`` (docs/reference/cli.md) becomes every command's own ``--help`` text, walked from
  the click group, so a new command or option appears without editing a page.
- ``<!-- ctxcompact:state-schema -->`` (docs/reference/state-schema.md) becomes a table of every property of
  ``ctxcompact/schemas/state.schema.json`` (path, type, description) followed by the schema itself.

Nothing here is imported by the package; ``mkdocs build`` loads it (``hooks:`` in mkdocs.yml).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

ROOT = Path(__file__).resolve().parents[2]
WIDTH = 100


def _help_sections() -> str:
    from ctxcompact.cli import cli

    out: list[str] = []

    def walk(cmd: click.Command, name: str, parent: click.Context | None) -> None:
        ctx = click.Context(cmd, info_name=name, parent=parent, terminal_width=WIDTH, max_content_width=WIDTH)
        out.append(f"### `{ctx.command_path}`\n\n```text\n{cmd.get_help(ctx).rstrip()}\n```\n")
        if isinstance(cmd, click.Group):
            for sub in cmd.list_commands(ctx):
                child = cmd.get_command(ctx, sub)
                if child is not None and not child.hidden:
                    walk(child, sub, ctx)

    walk(cli, "ctxcompact", None)
    return "\n".join(out)


def _type(node: dict[str, Any]) -> str:
    t = node.get("type")
    if isinstance(t, list):
        return " or ".join(str(x) for x in t)
    if t:
        return str(t)
    for key in ("oneOf", "anyOf"):
        if key in node:
            return " or ".join(_type(n) for n in node[key])
    if "$ref" in node:
        return node["$ref"].rsplit("/", 1)[-1]
    if "const" in node:
        return json.dumps(node["const"])
    if "enum" in node:
        return " \\| ".join(json.dumps(v) for v in node["enum"])
    return "any"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _schema_section() -> str:
    path = ROOT / "ctxcompact" / "schemas" / "state.schema.json"
    schema = json.loads(path.read_text(encoding="utf-8"))
    defs = schema.get("$defs", schema.get("definitions", {}))
    rows: list[str] = []
    seen: set[str] = set()

    def walk(node: dict[str, Any], where: str, depth: int) -> None:
        if depth > 6:
            return
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            name = ref.rsplit("/", 1)[-1]
            if name in seen:
                return
            seen.add(name)
            walk({**defs.get(name, {}), **{k: v for k, v in node.items() if k != "$ref"}}, where, depth)
            seen.discard(name)
            return
        for key in ("oneOf", "anyOf", "allOf"):
            for member in node.get(key, []):
                if isinstance(member, dict):
                    walk(member, where, depth + 1)
        required = set(node.get("required", []))
        for key, sub in node.get("properties", {}).items():
            if not isinstance(sub, dict):
                continue
            p = f"{where}.{key}" if where else key
            req = "yes" if key in required else ""
            rows.append(f"| `{p}` | {_cell(_type(sub))} | {req} | {_cell(sub.get('description', ''))} |")
            walk(sub, p, depth + 1)
            items = sub.get("items")
            if isinstance(items, dict):
                walk(items, p + "[]", depth + 1)

    walk(schema, "", 0)
    head = "| property | type | required | what it holds |\n|---|---|---|---|\n"
    full = json.dumps(schema, indent=2, ensure_ascii=False)
    return (f"{_cell(schema.get('description', ''))}\n\n{head}" + "\n".join(rows)
            + f"\n\n### The schema itself\n\n```json\n{full}\n```\n")


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if "<!-- ctxcompact:help -->" in markdown:
        markdown = markdown.replace("<!-- ctxcompact:help -->", _help_sections())
    if "<!-- ctxcompact:state-schema -->" in markdown:
        markdown = markdown.replace("<!-- ctxcompact:state-schema -->", _schema_section())
    return markdown
