"""The one graph search of the fabric: a path through every Mac once over the cables (a ring, or a ring's
missing arc), as mlx.distributed_config finds its ring."""

from __future__ import annotations

from typing import Callable, TypeVar

Node = TypeVar("Node")


def path_through(start: Node, nodes: list[Node], joined: Callable[[Node, Node], bool],
                 closes: Callable[[Node], bool], *, steps: int | None = None) -> list[Node] | None:
    """The first path from start through every one of nodes once, each joined to the next, whose last node
    closes it: a depth-first search trying nodes in the order given. None when there is none, or when it
    gives up after ``steps`` steps (so a large cabling never stalls a run)."""
    path, seen, budget = [start], {start}, [steps]

    def search() -> bool:
        if budget[0] is not None:
            budget[0] -= 1
            if budget[0] < 0:
                return False
        if len(path) == len(nodes):
            return closes(path[-1])
        for node in nodes:
            if node not in seen and joined(path[-1], node):
                path.append(node)
                seen.add(node)
                if search():
                    return True
                seen.discard(path.pop())
        return False

    return path if search() else None
