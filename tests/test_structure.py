"""The package's structure, read from its own imports (at module level and inside functions): no import
cycle between modules (a package's __init__ and its own children aside), no use of another module's
_private names, no runtime module importing the developer tooling, no module over 700 lines, and the CLI
starting without the heavy layers. docs/DESIGN.md "Layers" says why."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "ctxcompact"


def _modules() -> dict[str, Path]:
    out = {}
    for path in PKG.rglob("*.py"):
        parts = path.relative_to(PKG.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _owner(name: str) -> str | None:
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(name: str, path: Path) -> list[tuple[str, str | None]]:
    """(imported module, imported name or None) for every ctxcompact import in a module."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if target.split(".")[0] == "ctxcompact":
                found.extend((target, alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            found.extend((alias.name, None) for alias in node.names if alias.name.startswith("ctxcompact"))
    return found


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for name, path in MODULES.items():
        for target, imported in _imports(name, path):
            sub = f"{target}.{imported}" if imported else target
            dep = sub if sub in MODULES else _owner(target)
            if dep and dep != name:
                graph[name].add(dep)
    return graph


def _family(a: str, b: str) -> bool:
    """A package's __init__ importing its own children (or the reverse) is re-exporting, not layering."""
    return (MODULES[a].name == "__init__.py" and b.startswith(a + ".")) or (
        MODULES[b].name == "__init__.py" and a.startswith(b + "."))


def test_no_import_cycles() -> None:
    graph = {m: {d for d in deps if not _family(m, d)} for m, deps in _graph().items()}
    cycles = []
    state: dict[str, int] = {}  # 1 on the path, 2 done

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                cycles.append(" -> ".join([*path[path.index(d):], d]))
            elif d not in state:
                visit(d, [*path, d])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert cycles == []


def test_no_private_names_across_modules() -> None:
    reach_ins = []
    for name, path in MODULES.items():
        for target, imported in _imports(name, path):
            if imported and imported.startswith("_") and not imported.startswith("__") \
                    and f"{target}.{imported}" not in MODULES:
                reach_ins.append(f"{name} imports {target}.{imported}")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        aliases = {a.asname or a.name: f"{t}.{a.name}" for t, a in
                   ((_resolve(name, path, n), a) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                    for a in n.names) if f"{t}.{a.name}" in MODULES}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in aliases and node.attr.startswith("_")
                    and not node.attr.startswith("__") and aliases[node.value.id] != name):
                reach_ins.append(f"{name} uses {aliases[node.value.id]}.{node.attr}")
    assert reach_ins == []


def _resolve(name: str, path: Path, node: ast.ImportFrom) -> str:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    if not node.level:
        return node.module or ""
    base = package.split(".")
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def test_the_runtime_never_imports_the_developer_tooling() -> None:
    graph = _graph()
    tooling = ("ctxcompact.devtools", "ctxcompact.cli")
    bad = [f"{m} -> {d}" for m, deps in graph.items() for d in deps
           if d.startswith("ctxcompact.devtools") and not m.startswith(tooling)]
    assert bad == []


def test_no_module_over_700_lines() -> None:
    sizes = {m: p.read_text(encoding="utf-8").count("\n") for m, p in MODULES.items()}
    assert {m: n for m, n in sizes.items() if n > 700} == {}


def test_the_cli_starts_without_the_heavy_layers() -> None:
    heavy = ("ctxcompact.engine", "ctxcompact.strategies.", "ctxcompact.state", "tiktoken", "jsonschema",
             "anthropic", "openai")
    code = f"import sys, ctxcompact.cli; print(' '.join(m for m in sys.modules if m.startswith({heavy!r})))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == []


# --- docs/DESIGN.md "Layers": the map is read from the document and checked against the code -------------

DESIGN = PKG.parent / "docs" / "DESIGN.md"


def _layer_map() -> dict[str, int]:
    """Module → layer (0 at the top) from the code block under DESIGN.md's "## Layers": one entry per line
    that starts in the first column (its continuation lines are indented); a package's entry lists its
    modules, comma-separated, notes in parentheses, free text after " — "."""
    text = DESIGN.read_text(encoding="utf-8")
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```\n", 1)[1].split("```", 1)[0]
    entries: list[list[str]] = []
    for line in block.splitlines():
        if line.strip() and not line[0].isspace():
            entries.append([line])
        elif line.strip():
            assert entries, f"DESIGN.md Layers: a continuation line before any entry: {line!r}"
            entries[-1].append(line)
    layers: dict[str, int] = {}
    for layer, lines in enumerate(entries):
        words = lines[0].split()
        heads = []
        for w in words:
            if not (w.endswith(".py") or w.endswith("/")):
                break
            heads.append(w)
        assert heads, f"DESIGN.md Layers: an entry names no module: {lines[0]!r}"
        for head in heads:
            if head.endswith(".py"):
                name = head.removesuffix(".py")
                layers["ctxcompact" if name == "__init__" else f"ctxcompact.{name}"] = layer
                continue
            package = f"ctxcompact.{head.removesuffix('/')}"
            assert len(heads) == 1, f"DESIGN.md Layers: a package shares its line: {lines[0]!r}"
            listed = " ".join([lines[0].split(head, 1)[1], *lines[1:]]).split(" — ")[0]
            while True:  # notes in parentheses, innermost first
                stripped = re.sub(r"\([^()]*\)", "", listed)
                if stripped == listed:
                    break
                listed = stripped
            for item in (i.strip() for i in listed.split(",")):
                assert re.fullmatch(r"\w+", item), f"DESIGN.md Layers: {head} lists {item!r}, not a module"
                layers[package if item == "__init__" else f"{package}.{item}"] = layer
    return layers


def _layer_of(module: str, layers: dict[str, int]) -> int | None:
    """A module's layer: its own entry, else its closest named ancestor's (a module inside a package named in
    the map, e.g. a module split into a package)."""
    name = module
    while name:
        if name in layers and (name == module or name != "ctxcompact"):
            return layers[name]
        name = name.rpartition(".")[0]
    return None


def test_design_names_only_modules_that_exist() -> None:
    missing = [m for m in _layer_map() if m not in MODULES]
    assert missing == [], "docs/DESIGN.md's Layers names modules that do not exist"


def test_design_names_every_module() -> None:
    layers = _layer_map()
    unnamed = sorted(m for m in MODULES if _layer_of(m, layers) is None)
    assert unnamed == [], "modules docs/DESIGN.md's Layers does not name"


def test_modules_import_only_their_layer_or_below() -> None:
    layers = _layer_map()
    upward = sorted(f"{m} -> {d}" for m, deps in _graph().items() for d in deps
                    if (lm := _layer_of(m, layers)) is not None and (ld := _layer_of(d, layers)) is not None
                    and ld < lm)
    assert upward == [], "imports upwards (docs/DESIGN.md Layers)"


def test_the_layer_map_reader_sees_what_it_should() -> None:
    layers = _layer_map()
    assert layers["ctxcompact.__main__"] == 0 and layers["ctxcompact.model"] == max(layers.values())
    strategies = layers["ctxcompact.strategies"]
    assert strategies == layers["ctxcompact.strategies.mask"] < layers["ctxcompact.report"]
    assert layers["ctxcompact.formats.claude_code"] > layers["ctxcompact.clean"]
    assert _layer_of("ctxcompact.strategies.sliding_window.plan", layers) == strategies  # a split module
    assert _layer_of("ctxcompact.nowhere", layers) is None  # the root package's entry is its __init__ only


def _resolve_reference(ref: str) -> bool:
    """Whether ``ref`` (``pkg/module.py``, ``module.name``, ``pkg/module.Class.attr``, ``Format.method``)
    names something that exists in the package."""
    import importlib

    path = ref.replace("/", ".").removesuffix(".py").split(".")
    if path[0] in ("Format", "Layout"):
        path = ["formats", "base", *path]
    for cut in range(len(path), 0, -1):
        module = "ctxcompact." + ".".join(path[:cut])
        if module in MODULES:
            obj: object = importlib.import_module(module)
            for attr in path[cut:]:
                if not hasattr(obj, attr):
                    return False
                obj = getattr(obj, attr)
            return True
    return False


def test_the_rule_table_names_what_exists() -> None:
    """Every module or name in DESIGN.md's "Where each rule lives" column exists (a rule whose owner moved
    must move in the table too)."""
    text = DESIGN.read_text(encoding="utf-8")
    section = text.split("\n## Where each rule lives\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|") and not line.startswith("|--")]
    refs = [ref for row in rows[1:] for ref in re.findall(r"`([^`]+)`", row.rsplit("|", 2)[1])
            if "." in ref or "/" in ref]
    assert len(refs) >= 30
    assert [r for r in refs if not _resolve_reference(r)] == []
    assert not _resolve_reference("summarizers/provider.error_reason")  # the check can fail


# -- the tests mirror the package (docs/DESIGN.md#rules-every-module-follows) --------------------------------
TESTS = Path(__file__).resolve().parent
# The only test files at tests/ that name no module: the checks of the whole project.
PROJECT_CHECKS = {
    "test_structure.py": "the package's structure and the test layout",
    "test_doc_refs.py": "every documentation citation resolves",
    "test_readme.py": "the README's size and its recipe",
    "test_design_example.py": "docs/DESIGN.md's worked example",
}
# Test folders that mirror no module: the real clients (their own marker, `pytest -m clients`).
OWN_FOLDERS = {"clients"}


def _misplaced(files: list[str], packages: set[str], top_level: set[str]) -> list[str]:
    """The test files (paths under tests/) that break the layout rule: tests/<package>/ or tests/<module>/
    (a top-level module whose tests fill a folder), or tests/test_<module>[_<aspect>].py, or a project
    check; a module's tests in one of the two places, not both; basenames unique (pytest imports each
    file by its basename, tests/conftest.py)."""
    bad = []
    folders = {f.split("/")[0] for f in files if "/" in f}
    for f in files:
        *folder, name = f.split("/")
        if folder:
            if len(folder) > 1 or folder[0] not in packages | top_level | OWN_FOLDERS:
                bad.append(f"{f}: its folder mirrors no package or module")
            continue
        if name in PROJECT_CHECKS:
            continue
        owners = [m for m in top_level if name == f"test_{m}.py" or name.startswith(f"test_{m}_")]
        if not owners:
            bad.append(f"{f}: names no top-level module (or move it to the folder of what it tests)")
        elif any(m in folders for m in owners):
            bad.append(f"{f}: its module's tests have a folder, tests/{owners[0]}/")
    names = [f.rsplit("/", 1)[-1] for f in files]
    bad += [f"{f}: another test file has its name" for f, n in zip(files, names, strict=True)
            if names.count(n) > 1]
    return bad


def test_every_test_file_sits_in_the_folder_of_what_it_tests() -> None:
    packages = {p.name for p in PKG.iterdir() if (p / "__init__.py").is_file()}
    top_level = {p.stem for p in PKG.glob("*.py") if p.stem not in ("__init__", "__main__")}
    files = sorted(str(p.relative_to(TESTS)) for p in TESTS.rglob("test_*.py")
                   if "data" not in p.relative_to(TESTS).parts)
    assert _misplaced(files, packages, top_level) == [], "docs/DESIGN.md#rules-every-module-follows"
    # the rule itself can fail: a route test at the root, a folder of nothing, a module in two places, a clash
    assert _misplaced(["test_routes.py", "nothing/test_x.py", "engine/test_a.py", "test_engine_b.py",
                       "cli/test_a.py"], packages, top_level) == [
        "test_routes.py: names no top-level module (or move it to the folder of what it tests)",
        "nothing/test_x.py: its folder mirrors no package or module",
        "test_engine_b.py: its module's tests have a folder, tests/engine/",
        "engine/test_a.py: another test file has its name", "cli/test_a.py: another test file has its name"]


def test_the_files_handed_out_first_exist() -> None:
    # conftest.SLOWEST_FIRST orders the suite for the workers: a file renamed would silently go back to its
    # place in the collection
    # (read from the file: "conftest" by name may be another folder's conftest.py)
    tree = ast.parse((TESTS / "conftest.py").read_text(encoding="utf-8"))
    listed = next(ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
                  and any(isinstance(t, ast.Name) and t.id == "SLOWEST_FIRST" for t in node.targets))
    assert len(listed) > 5
    assert [p for p in listed if not (TESTS.parent / p).is_file()] == []
