"""The layer map in docs/architecture.md holds: every module is placed, and imports only point down.

The map is read from the document itself, so the picture a reader sees and the rule the code keeps
cannot drift apart.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "foldline"
DOC = ROOT / "docs" / "architecture.md"
FACADES = {"__init__.py", "api/__init__.py", "compact/__init__.py"}
"""No layer: the package's own `__init__` re-exports everything lazily (PEP 562), and the two
subpackage `__init__`s only carry a docstring (a test below keeps them import-free)."""


def _layers() -> dict[str, int]:
    """Each path of the map (`engine.py`, `cli/`) and its layer number."""
    text = DOC.read_text()
    block = text[text.index("## Layers") :].split("```")[1]
    layers: dict[str, int] = {}
    current = 0
    for line in block.splitlines():
        line = line.split("(")[0]  # the parenthesised note after a layer's modules
        if match := re.match(r"\s*(\d)\s+[a-z ]+?\s{2,}(.*)", line):
            current, line = int(match[1]), match[2]
        for path in line.split():
            layers[path] = current
    return layers


def _layer_of(relative: str, layers: dict[str, int]) -> int | None:
    """The layer of a module file (`api/cache.py`), by the longest path of the map that holds it."""
    best = None
    for path, layer in layers.items():
        holds = relative == path or (path.endswith("/") and relative.startswith(path))
        if holds and (best is None or len(path) > len(best[0])):
            best = (path, layer)
    return None if best is None else best[1]


def _module_file(name: str) -> str | None:
    """`foldline.api.cache` -> `api/cache.py`; a package -> its `__init__.py`."""
    parts = name.split(".")[1:]
    if not parts:
        return None
    as_module = PACKAGE.joinpath(*parts).with_suffix(".py")
    if as_module.is_file():
        return as_module.relative_to(PACKAGE).as_posix()
    as_package = PACKAGE.joinpath(*parts, "__init__.py")
    return as_package.relative_to(PACKAGE).as_posix() if as_package.is_file() else None


def _imports(path: Path) -> set[str]:
    """Every foldline module `path` imports, at module level or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("foldline."))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("foldline."):
            found.add(node.module)
            found.update(
                f"{node.module}.{a.name}" for a in node.names if _module_file(f"{node.module}.{a.name}")
            )
    return found


def _modules() -> list[str]:
    return sorted(
        p.relative_to(PACKAGE).as_posix()
        for p in PACKAGE.rglob("*.py")
        if p.relative_to(PACKAGE).as_posix() not in FACADES
    )


def test_every_module_has_a_layer() -> None:
    layers = _layers()
    assert set(layers.values()) == {1, 2, 3, 4, 5}
    assert [m for m in _modules() if _layer_of(m, layers) is None] == []


def test_imports_point_down() -> None:
    layers = _layers()
    upward = []
    for module in _modules():
        own = _layer_of(module, layers)
        for name in _imports(PACKAGE / module):
            target = _module_file(name)
            if target is None or target in FACADES:
                continue
            theirs = _layer_of(target, layers)
            if own is not None and theirs is not None and theirs > own:
                upward.append(f"{module} (layer {own}) imports {name} (layer {theirs})")
    assert upward == []


def test_the_subpackage_markers_import_nothing() -> None:
    for marker in sorted(FACADES - {"__init__.py"}):
        tree = ast.parse((PACKAGE / marker).read_text())
        assert not [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)], marker


def test_the_map_is_read() -> None:
    layers = _layers()
    assert layers["engine.py"] == 4
    assert layers["timeline.py"] == 1
    assert layers["cli/"] == 5


def test_the_request_path_imports_no_compaction_level() -> None:
    """`api/` builds requests from records; compaction is above it and never imported back (the
    short-id tag it needs is the timeline's)."""
    upward = sorted(
        f"{module} imports {name}"
        for module in _modules()
        if module.startswith("api/")
        for name in _imports(PACKAGE / module)
        if name.startswith("foldline.compact")
    )
    assert upward == []


def test_the_engine_leaves_the_context_arithmetic_to_its_window() -> None:
    """The estimate, the exact count, pending cache_edits and the compaction round live in
    `compact/window.py`; the engine only calls it (one home, so they cannot drift apart)."""
    engine = ast.parse((PACKAGE / "engine.py").read_text())
    engine_class = next(n for n in engine.body if isinstance(n, ast.ClassDef) and n.name == "QueryEngine")
    methods = {n.name for n in engine_class.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    assert not methods & {"_compact", "_estimate", "_repin", "_over_blocking_limit", "_compaction_context"}
    assert not {
        "foldline.projection.context_count_of",
        "foldline.compact.pipeline.run_round",
        "foldline.compact.pipeline.run_recovery",
    } & {
        f"{n.module}.{a.name}"
        for n in ast.walk(engine)
        if isinstance(n, ast.ImportFrom) and n.module
        for a in n.names
    }
