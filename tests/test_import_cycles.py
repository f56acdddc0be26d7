"""No import circles between the modules of ``judge``: every import counts, those inside functions and under
``TYPE_CHECKING`` too (a circle hidden in a function is still a circle: the two modules cannot be understood,
tested or moved apart). Import-linter's layer contracts keep the packages in order; this test keeps the
modules inside a package in order as well."""

from __future__ import annotations

from pathlib import Path

import grimp

import judge


def module_cycles(graph) -> list[list[str]]:
    """The strongly connected components of more than one module (or a module importing itself), each as a
    closed path through it (``a -> b -> a``), sorted so that the message is stable."""
    modules = sorted(graph.modules)
    succ = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0

    # Tarjan's algorithm, iterative (the graph has a few hundred modules, recursion would do, but need not).
    for root in modules:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            if i < len(succ[node]):
                work.append((node, i + 1))
                nxt = succ[node][i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1 or node in succ[node]:
                    components.append(sorted(comp))
    cycles = []
    for comp in sorted(components):
        members = set(comp)
        # One circle through the component's first module, found by a breadth-first search inside it.
        start = comp[0]
        prev: dict[str, str] = {}
        frontier, seen, end = [start], {start}, None
        while frontier and end is None:
            nxt_frontier = []
            for m in frontier:
                for n in succ[m]:
                    if n == start:
                        end = m
                        break
                    if n in members and n not in seen:
                        seen.add(n)
                        prev[n] = m
                        nxt_frontier.append(n)
                if end is not None:
                    break
            frontier = nxt_frontier
        path = [start]
        m = end
        while m is not None and m != start:
            path.insert(1, m)
            m = prev.get(m)
        cycles.append(path + [start])
    return cycles


def test_cycle_finder_names_a_circle():
    # The finder itself, on a graph with one circle of three and one module importing nothing back.
    graph = grimp.ImportGraph()
    for a, b in [("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.d", "p.a")]:
        graph.add_import(importer=a, imported=b)
    assert module_cycles(graph) == [["p.a", "p.b", "p.c", "p.a"]]
    graph.remove_import(importer="p.c", imported="p.a")
    assert module_cycles(graph) == []


def test_no_import_cycles_between_modules():
    # The judge package of this checkout (not an installed copy elsewhere).
    assert Path(judge.__file__).resolve().parents[1] == Path(__file__).resolve().parents[1]
    graph = grimp.build_graph("judge", cache_dir=None)
    cycles = module_cycles(graph)
    assert not cycles, "import circles (function-level and TYPE_CHECKING imports count):\n" + "\n".join(
        " -> ".join(c) for c in cycles
    )
