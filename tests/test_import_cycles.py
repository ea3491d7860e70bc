"""No import circle inside src/anchorgpu.

The graph is read from the source, not from a running interpreter: every ``.py`` file is parsed with ``ast``
and every import it holds becomes an edge, at module level and inside functions alike (a function-level
import only postpones the circle to the first call; it is still two modules that cannot be understood, or
moved, apart). Relative imports are resolved against the importing module's package. ``from X import Y``
points at the module ``X.Y`` when there is one, else at ``X``. Imports under ``if TYPE_CHECKING:`` are left
out: they never run. Importing a package's submodule also runs the package's ``__init__``, but that is the
package's own business, not an edge (most of ours are empty).

A failure names each circle as ``a -> b -> a``, one per strongly connected group of modules.
"""

from __future__ import annotations

import ast
from collections import deque
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = "anchorgpu"


def _modules() -> dict[str, tuple[Path, bool]]:
    """Module name -> (file, whether it is a package's ``__init__``)."""
    found = {}
    for path in sorted((SRC / ROOT).rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        found[".".join(parts)] = (path, is_package)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST):
    """Every Import/ImportFrom node, at any depth, except those under ``if TYPE_CHECKING:``."""
    pending = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            pending.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        pending.extend(ast.iter_child_nodes(node))


def _known(name: str, modules) -> str | None:
    """The longest prefix of a dotted name that is one of our modules."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def _targets(module: str, is_package: bool, node, modules) -> set[str]:
    if isinstance(node, ast.Import):
        return {t for alias in node.names if (t := _known(alias.name, modules))}
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        base = package[:len(package) - (node.level - 1)]
        where = ".".join(base + ([node.module] if node.module else []))
    else:
        where = node.module or ""
    if where != ROOT and not where.startswith(ROOT + "."):
        return set()
    targets = set()
    for alias in node.names:
        submodule = f"{where}.{alias.name}"
        target = submodule if submodule in modules else _known(where, modules)
        if target:
            targets.add(target)
    return targets


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph = {}
    for module, (path, is_package) in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        edges = set()
        for node in _imports(tree):
            edges |= _targets(module, is_package, node, modules)
        edges.discard(module)  # `from . import x` in a package naming itself is no circle
        graph[module] = edges
    return graph


def _groups(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index, low, on_stack, stack, groups, counter = {}, {}, set(), [], [], [0]
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
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
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return sorted(groups)


def _shortest_circle(graph: dict[str, set[str]], group: list[str]) -> list[str]:
    """One shortest circle through the group's first module, staying inside the group."""
    inside, start = set(group), group[0]
    came_from = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for child in sorted(graph[node] & inside):
            if child == start:
                path = [node]
                while came_from[path[-1]] is not None:
                    path.append(came_from[path[-1]])
                return path[::-1] + [start]  # start ... node, back to start
            if child not in came_from:
                came_from[child] = node
                queue.append(child)
    raise AssertionError(f"no circle through {start} in {group}")  # a group always has one


def circles(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for group in _groups(graph):
        text = " -> ".join(_shortest_circle(graph, group))
        found.append(text if len(group) <= 2 else f"{text}  (group of {len(group)}: {', '.join(group)})")
    return found


def test_the_graph_reads_relative_absolute_and_function_level_imports():
    graph = import_graph()
    assert len(graph) > 100
    assert "anchorgpu.pilot.errors" in graph["anchorgpu.pilot.scale"]  # from .errors import ... (module level)
    assert "anchorgpu.pilot.run" in graph["anchorgpu.pilot.command"]  # from .run import ... inside a function
    assert "anchorgpu.wsgi" in graph["anchorgpu.serve"]  # from anchorgpu.wsgi import ... inside a function
    assert "anchorgpu.ops.metrics_dir" in graph["anchorgpu.gunicorn_conf"]  # from anchorgpu.ops import metrics_dir


def test_the_circle_finder_names_a_circle_and_only_a_real_one():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d"}}
    assert circles(graph) == ["a -> b -> c -> a  (group of 3: a, b, c)"]
    assert circles({"a": {"b"}, "b": {"a"}}) == ["a -> b -> a"]
    assert circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_module_of_the_shop_takes_part_in_an_import_circle():
    found = circles(import_graph())
    assert not found, "import circles in src/anchorgpu:\n  " + "\n  ".join(found)
