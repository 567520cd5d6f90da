"""The package layout: imports point one way and form no cycle, every package is installed, and an installed
copy works without the repository.

The layering: `tasks` and `rewards` import nothing of the others, `policy` imports only
`tasks`, `training` imports `policy` and `rewards`, `search` sits on top; the registry (NEUTRAL) is of no
layer. Imports are read with `ast`, so an import inside a function counts as much as one at the top (it runs
too, only later); an import under `if TYPE_CHECKING:` does not (it never runs). An import that goes through a package's namespace,
`from arts.x import y` or `import arts.x.y` (which binds `arts` and reaches y as `arts.x.y`), is an edge to
`arts.x`'s `__init__` as well as to y: a submodule that imports its siblings that way while the package's
`__init__` imports it (to register it, say) is a cycle, and works only while the `__init__` is half run.
`from arts.x.y import f` reads y's namespace alone: it is an edge to y only.

Module sizes follow the house style (one concept per module): none over MAX_LINES, and the median over every
module of the five packages (each `__init__.py` included) at most MEDIAN_LINES.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import statistics
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("tasks", "rewards", "policy", "training", "search")
MAY_IMPORT = {
    "tasks": {"tasks"},
    "rewards": {"rewards"},
    "policy": {"policy", "tasks"},
    "training": {"training", "policy", "rewards"},
    "search": set(PACKAGES),
}
"""What each package may import."""
NEUTRAL = {"arts.tasks.registry"}
"""Modules of no layer, which every package may import: each imports nothing of arts (checked), so importing
one brings in no layer. The registry sits in `tasks` only because the installed layout has no other place."""
MAX_LINES = 400
"""No module is longer (lines in the file); a longer one holds more than one concept."""
MEDIAN_LINES = 140
"""The median module is no longer than this."""


def source_modules() -> dict[str, Path]:
    """`arts.<package>...` module name -> file, for every module of the five packages."""
    found = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            rel = path.relative_to(REPO).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            if all((REPO / Path(*rel.parts[:i]) / "__init__.py").is_file() for i in range(1, len(rel.parts))):
                found[".".join(("arts", *parts))] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, module: str, is_package: bool, known: set[str]) -> Iterator[tuple[str, int]]:
    """(imported name, line) of every import that runs, at any depth, skipping `if TYPE_CHECKING:`. A name
    is the module it loads where that is one of `known` (`from arts.x import y`: arts.x.y if y is a module,
    else arts.x), and the packages it goes through (`import arts.x.y` and `from arts.x import y`: arts.x)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                yield from ((".".join(parts[:i]), node.lineno) for i in range(len(parts), 0, -1))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against this module's package
                package = module.split(".") if is_package else module.split(".")[:-1]
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                if f"{base}.{alias.name}" in known:
                    yield f"{base}.{alias.name}", node.lineno
                yield base, node.lineno
        stack.extend(ast.iter_child_nodes(node))


def import_graph() -> tuple[dict[str, dict[str, str]], list[str]]:
    """module -> {imported module: 'file:line'} over the source modules, and imports of the bare top-level
    names (`import search`), which only the repository root, never an installed arts, provides."""
    modules = source_modules()
    graph: dict[str, dict[str, str]] = {m: {} for m in modules}
    bare = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        for name, line in _imports(tree, module, path.name == "__init__.py", set(modules)):
            where = f"{path.relative_to(REPO)}:{line}"
            if name.split(".")[0] in PACKAGES:
                if not any(b.startswith(f"{where} ") for b in bare):  # once per import, not per package
                    bare.append(f"{where} imports {name!r}; write arts.{name}")
                continue
            while name not in modules and "." in name:  # `import arts.x.y.attr`: the module it loads
                name = name.rsplit(".", 1)[0]
            if name in modules and name != module:
                graph[module].setdefault(name, where)
    return graph, bare


def find_cycles(graph: dict[str, dict[str, str]]) -> list[tuple[list[str], list[str]]]:
    """Per strongly connected component with a cycle: one shortest cycle through it (modules, first = last)
    and all the modules of the component."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            components.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    cycles = []
    for component in components:
        members = set(component)
        if len(component) == 1 and component[0] not in graph[component[0]]:
            continue
        start = min(component)
        path, seen = [start], {start: None}
        queue = [start]
        while queue:  # shortest way back to start inside the component
            v = queue.pop(0)
            if start in graph[v] and (v != start or len(component) == 1):
                cycle = [v]
                while seen[cycle[-1]] is not None:
                    cycle.append(seen[cycle[-1]])
                path = [*reversed(cycle), start]
                break
            for w in sorted(graph[v]):
                if w in members and w not in seen:
                    seen[w] = v
                    queue.append(w)
        cycles.append((path, sorted(component)))
    return cycles


def test_no_import_cycles():
    graph, _ = import_graph()
    cycles = find_cycles(graph)
    report = [
        " -> ".join(cycle)
        + "".join(f"\n    {a} -> {b}  ({graph[a][b]})" for a, b in zip(cycle, cycle[1:]))
        + (f"\n    (tangled together: {', '.join(component)})" if len(component) > len(cycle) - 1 else "")
        for cycle, component in cycles
    ]
    assert not cycles, f"{len(cycles)} import cycle(s):\n" + "\n".join(report)


def test_imports_follow_the_layering():
    graph, bare = import_graph()
    wrong = [
        f"{where}: {module} imports {target} ({module.split('.')[1]} may import only "
        f"{', '.join(sorted(MAY_IMPORT[module.split('.')[1]]))})"
        for module, edges in sorted(graph.items())
        for target, where in sorted(edges.items(), key=lambda e: e[1])
        if target.split(".")[1] not in MAY_IMPORT[module.split(".")[1]] and target not in NEUTRAL
    ]
    assert not wrong + bare, "imports against the layering (MAY_IMPORT):\n" + "\n".join(wrong + bare)


def test_the_neutral_modules_import_nothing_of_arts():
    graph, _ = import_graph()
    wrong = {m: sorted(graph[m]) for m in sorted(NEUTRAL) if graph[m]}
    assert not wrong, f"a layer-neutral module (NEUTRAL) imports arts modules; move those out: {wrong}"


def test_tests_import_no_test_module_and_no_script():
    """Shared test helpers live in tests/doubles.py (fixtures in conftest.py): a test module imported by
    another runs under two names (two module objects, two copies of its globals); scripts/ is not installed,
    so a test runs a script as a command instead of importing it."""
    wrong = []
    for path in sorted((REPO / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names = re.findall(
                    r"\btests\.test_\w+", node.value
                )  # code run in a subprocess, `module:attr`
            for name in names:
                if name.startswith(("tests.test_", "test_", "scripts.")) or name == "scripts":
                    wrong.append(f"{path.relative_to(REPO)}:{node.lineno} imports {name}")
    assert not wrong, "import shared helpers from tests.doubles, run scripts as commands:\n" + "\n".join(
        wrong
    )


def test_every_package_folder_is_installed():
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed, dirs = set(setuptools["packages"]), setuptools["package-dir"]
    folders = {
        "arts." + ".".join(init.parent.relative_to(REPO).parts): init.parent.relative_to(REPO)
        for package in PACKAGES
        for init in (REPO / package).rglob("__init__.py")
    }

    def folder_of(name: str) -> Path | None:  # setuptools: the longest listed prefix maps the rest below it
        for cut in range(name.count(".") + 1, 0, -1):
            prefix = ".".join(name.split(".")[:cut])
            if prefix in dirs:
                return Path(dirs[prefix], *name.split(".")[cut:])
        return None

    missing = sorted(set(folders) - listed)
    assert not missing, f"add to [tool.setuptools] packages in pyproject.toml: {missing}"
    assert not sorted(listed - set(folders)), (
        f"listed but no folder with __init__.py: {listed - set(folders)}"
    )
    wrong = {name: str(folder_of(name)) for name, folder in folders.items() if folder_of(name) != folder}
    assert not wrong, f"[tool.setuptools.package-dir] maps these elsewhere (or nowhere): {wrong}"


FRESH = """
import importlib.util, sys
from pathlib import Path
target, repo = Path(sys.argv[1]), Path(sys.argv[2])
assert not any(Path(p or ".").resolve() == repo for p in sys.path), sys.path
import arts.search.cli.main, arts.tasks.base
from arts.tasks.base import BUILTIN_DIR, builtin_names, resolve_task
for module in (arts.search.cli.main, arts.tasks.base):
    assert Path(module.__file__).is_relative_to(target), module.__file__
assert BUILTIN_DIR.is_relative_to(target) and len(builtin_names()) >= 5, BUILTIN_DIR
for name in builtin_names():
    task = resolve_task(name)
    assert all((task.root / p).is_file() for p in task.material_files()), name
for bare in ("policy", "search", "tasks", "training", "rewards"):
    spec = importlib.util.find_spec(bare)
    assert spec is None or not str(spec.origin).startswith(str(target)), spec
try:
    import search
except ImportError:
    print("fresh install ok")
else:
    raise AssertionError(f"`import search` found {search!r}")
"""


def test_a_fresh_install_works_without_the_repository(tmp_path):
    """Built from a copy of the tree (no build/ left in the repository), installed into a folder, imported by
    an interpreter that sees that folder and the dependencies, not the repository nor the editable finder."""
    src, target, cwd = tmp_path / "src", tmp_path / "target", tmp_path / "cwd"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in (*PACKAGES, "pyproject.toml", "README.md"):
        copy = shutil.copytree if (REPO / name).is_dir() else shutil.copy2
        copy(REPO / name, src / name, **({"ignore": ignore} if (REPO / name).is_dir() else {}))
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target"]
    subprocess.run([*pip, str(target), str(src)], check=True, capture_output=True, timeout=300)
    assert {p.name for p in target.iterdir() if not p.name.endswith(".dist-info") and p.name != "bin"} == {
        "arts"
    }, "an install of arts must claim no top-level name but arts"
    builtin, installed = REPO / "tasks" / "builtin", target / "arts" / "tasks" / "builtin"
    files = {
        p.relative_to(builtin) for p in builtin.rglob("*") if p.is_file() and "__pycache__" not in p.parts
    }
    missing = sorted(str(f) for f in files if not (installed / f).is_file())
    assert not missing, f"built-in task files not installed (package-data in pyproject.toml): {missing}"

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip
    deps = sysconfig.get_paths()["purelib"]  # this venv's: the editable finder's .pth in it stays unread
    Path(site, "arts-fresh.pth").write_text(f"{target}\n{deps}\n")
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
    run = subprocess.run([python, "-c", FRESH, str(target), str(REPO)], cwd=cwd, env=env,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == 0 and "fresh install ok" in run.stdout, run.stdout + run.stderr


@pytest.mark.parametrize(
    "source, cycle",
    [
        ({"a": "import arts.tasks.b", "b": "def f():\n    from arts.tasks import a"}, ["arts.tasks.a", "arts.tasks.b"]),
        ({"a": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import arts.tasks.b", "b": "import arts.tasks.a"}, None),
        ({"": "from arts.tasks import a", "a": "from arts.tasks import b", "b": ""}, ["arts.tasks", "arts.tasks.a"]),
        ({"": "from arts.tasks import a", "a": "import arts.tasks.b", "b": ""}, ["arts.tasks", "arts.tasks.a"]),
        ({"": "from arts.tasks.a import f", "a": "from arts.tasks.b import g", "b": ""}, None),
        ({"": "", "a": "from arts.tasks import b", "b": "import arts.tasks.c", "c": ""}, None),
    ],
)  # fmt: skip
def test_the_cycle_finder_counts_function_imports_package_inits_and_skips_type_checking(source, cycle):
    """An import through a package's namespace is an edge to its `__init__` too (key "": that `__init__`)."""
    names = {m: ".".join(filter(None, ("arts.tasks", m))) for m in source}
    trees = {names[m]: ast.parse(text) for m, text in source.items()}
    graph = {
        m: {n: "" for n, _ in _imports(t, m, m == "arts.tasks", set(trees)) if n in trees and n != m}
        for m, t in trees.items()
    }
    found = find_cycles(graph)
    assert (found[0][1] if found else None) == cycle


def module_lines() -> dict[str, int]:
    """Lines in the file of every module of the five packages (`__init__.py` included)."""
    return {m: len(path.read_text().splitlines()) for m, path in source_modules().items()}


def test_no_module_is_over_the_line_limit():
    long = {m: n for m, n in sorted(module_lines().items(), key=lambda e: -e[1]) if n > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines (split each along its concepts): " + ", ".join(
        f"{m} ({n})" for m, n in long.items()
    )


def test_the_median_module_is_short():
    lines = sorted(module_lines().values())
    median = statistics.median(lines)
    over = sum(n > MEDIAN_LINES for n in lines)
    assert median <= MEDIAN_LINES, (
        f"median module length {median} lines over {len(lines)} modules; at most {MEDIAN_LINES} "
        f"({over} are longer: split the longest along their concepts)"
    )
