"""No two epub2audio modules import each other, directly or round a longer loop.

The rule, as this test reads the source (ast, nothing is imported):
* Every `import` that can run counts, at module level and inside functions alike. An import moved
  into a function to dodge a cycle still makes the two modules depend on each other; it only hides
  the loop from Python's loader until a caller meets a half-initialised module. Function-level
  imports are for keeping heavy or optional runtimes (torch, ray, watchdog) and slow modules out of
  start-up, and they are allowed wherever, counted as edges, they close no cycle.
* Imports under `if TYPE_CHECKING:` never run and do not count.
* `from pkg import name` is an edge to the module pkg.name when there is one, else to pkg (whose
  __init__ defines the name). Importing a.b.c also runs the __init__ of a and a.b: those are edges
  too, except to the importer's own enclosing packages, which are always loaded first anyway
  (a name taken from an enclosing package's __init__ is an edge to it, like any other).
* KNOWN_CYCLES lists the loops that are there today and not yet taken apart, each with why. A new
  loop fails the test; so does a listed loop that is gone (take it off the list).
"""

from __future__ import annotations

import ast
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[1] / "engine"

KNOWN_CYCLES = {
    # Reading a compressed folder (checkpoint) and writing one (compress) share the manifest and the
    # table names; the fix is a module of its own for the compressed layout that both import.
    frozenset({"epub2audio.voices.cosyvoice3.checkpoint", "epub2audio.voices.cosyvoice3.compress",
               "epub2audio.voices.cosyvoice3.llm_mlx_folder"}),
    # The package re-exports the command (`epub2audio verify`), which calls the package's verify_m4b;
    # the fix is verify_m4b in a module of its own.
    frozenset({"epub2audio.audiobook.verify", "epub2audio.audiobook.verify.command"}),
}


def package_modules(root: Path, package: str) -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is a package) for every module of `package` under `root`."""
    modules = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        modules[".".join(parts)] = (path, is_package)
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST):
    """Every import statement that can run, wherever it is."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                yield from _imports(ast.Module(body=[child], type_ignores=[]))
        else:
            yield from _imports(node)


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    modules = package_modules(root, package)

    def with_packages(name: str, importer: str) -> set[str]:
        """`name` and the packages around it whose __init__ importing it runs."""
        parts = name.split(".")
        own = {".".join(importer.split(".")[:i]) for i in range(1, importer.count(".") + 1)}
        return ({".".join(parts[:i]) for i in range(1, len(parts))} - own | {name}) - {importer}

    graph = {}
    for name, (path, is_package) in modules.items():
        here = name.split(".") if is_package else name.split(".")[:-1]
        edges: set[str] = set()
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = here[:len(here) - node.level + 1] if node.level else []
                source = ".".join(base + ([node.module] if node.module else []))
                targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source for a in node.names]
            for target in targets:
                while target and target not in modules:  # `import a.b.c` of a non-module: its package
                    target = target.rpartition(".")[0]
                if target:
                    edges |= with_packages(target, name)
        graph[name] = edges & set(modules)
    return graph


def cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), set()
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.add(frozenset(component))
    return found


def test_no_two_epub2audio_modules_import_each_other():
    found = cycles(import_graph(ENGINE, "epub2audio"))
    new = [sorted(c) for c in found - KNOWN_CYCLES]
    assert not new, f"import cycles: {new}"
    gone = [sorted(c) for c in KNOWN_CYCLES - found]
    assert not gone, f"these cycles are gone: take them off KNOWN_CYCLES: {gone}"


def test_the_front_doors_share_options_instead_of_importing_each_other():
    graph = import_graph(ENGINE, "epub2audio")
    watch_modules = {m for m in graph if m == "epub2audio.watch" or m.startswith("epub2audio.watch.")}
    assert "epub2audio.options" in graph["epub2audio.cli"]
    assert not any(m in graph["epub2audio.cli"] for m in watch_modules - {"epub2audio.watch",
                                                                        "epub2audio.watch.command"})
    assert all("epub2audio.cli" not in graph[m] for m in watch_modules)
    assert graph["epub2audio.options"] <= {"epub2audio.errors", "epub2audio.config", "epub2audio.library",
                                           "epub2audio.render", "epub2audio.voices.catalog", "epub2audio.voices"}


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_the_checker_sees_lazy_imports_and_package_inits_but_not_type_checking(tmp_path):
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from . import b\n",
        "pkg/b.py": "def later():\n    from .a import thing\n",  # lazy, still a cycle
        "pkg/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .d import D\n",
        "pkg/d.py": "from .c import C\n",  # c only names d for type checkers: no cycle
        "pkg/sub/__init__.py": "from .inner import run\n",
        "pkg/sub/inner.py": "from .. import e\n",
        "pkg/e.py": "import pkg.sub.inner\n",  # runs sub/__init__, which imports inner, which imports e
        "pkg/g/__init__.py": "from .cmd import main\n\ndef check():\n    pass\n",
        "pkg/g/cmd.py": "from . import check\n",  # a name from its own package's __init__, which imports it
    })
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.a"] == {"pkg.b"} and graph["pkg.b"] == {"pkg.a"}
    assert graph["pkg.c"] == set() and graph["pkg.d"] == {"pkg.c"}
    assert graph["pkg.e"] == {"pkg.sub", "pkg.sub.inner"}
    assert graph["pkg.sub.inner"] == {"pkg.e"}
    assert graph["pkg.g.cmd"] == {"pkg.g"}
    assert cycles(graph) == {frozenset({"pkg.a", "pkg.b"}), frozenset({"pkg.e", "pkg.sub", "pkg.sub.inner"}),
                             frozenset({"pkg.g", "pkg.g.cmd"})}
