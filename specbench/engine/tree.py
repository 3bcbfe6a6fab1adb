"""Draft shapes: chains, static trees and dynamic (EAGLE-2 style) trees, as data.

A tree of N draft nodes hangs below the root (the last token already emitted). Node i has a
parent (−1: the root), a depth (1 for the root's children) and a rank: the r-th most likely
(greedy) or r-th sampled child of its parent. γ is always the depth.

Shapes are written as:

* ``chain`` — one path of γ tokens;
* ``3x2x1`` — branching per depth: 3 children of the root, 2 below each, 1 below those;
* ``paths:FILE`` or ``@NAME`` (a file in ``trees/``) — explicit rank paths, the Medusa
  "choices" format: a list such as [[0], [1], [0, 0], [0, 1], [1, 0]] in JSON or YAML;
* ``dynamic:topk=K,nodes=N`` — grown per round by the drafter's cumulative probability:
  the K best nodes of each depth are expanded by their K best children, to depth γ, and the
  N best nodes overall are verified;
* ``dynamic:topk=K,nodes=N,lambda=L`` — the same growth, with the N nodes chosen expert-aware
  (MoE targets, ECOSPEC-style): by cumulative draft probability minus L × the experts per layer
  each node newly adds to the verification (`specbench.engine.drafters.growth.select_expert_aware`).

A static shape is cut to depth γ in a sweep (the tree axis × the γ axis). `TreeLayout`
(decoder.py) turns parents into the ancestor mask and positions that verification needs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property, lru_cache
from importlib import resources
from pathlib import Path

import torch

from specbench.bounds import GAMMA_LIMIT
from specbench.engine.decoder import TreeLayout
from specbench.errors import SpecbenchError, did_you_mean
from specbench.safe_files import load_yaml_file

MAX_NODES = 512


@dataclass(frozen=True)
class StaticTree:
    """A fixed set of rank paths, closed under prefixes, sorted by depth then ranks."""

    paths: tuple[tuple[int, ...], ...]

    @classmethod
    def chain(cls, depth: int) -> StaticTree:
        return cls(tuple((0,) * d for d in range(1, depth + 1)))

    @classmethod
    def from_paths(cls, paths, where: str = "tree") -> StaticTree:
        try:
            clean = {tuple(int(r) for r in p) for p in paths}
        except (TypeError, ValueError):
            raise SpecbenchError(
                f"{where}: a path list must be lists of integer ranks, e.g. [[0], [1], [0, 0]]"
            ) from None
        if not clean:
            raise SpecbenchError(f"{where}: empty tree")
        if len(clean) > MAX_NODES:  # before the checks below, which compare paths pairwise
            raise SpecbenchError(f"{where}: {len(clean)} nodes is more than the {MAX_NODES} supported")
        if () in clean:
            raise SpecbenchError(f"{where}: empty path (depth 0)")
        for p in clean:
            if min(p) < 0:
                raise SpecbenchError(f"{where}: negative rank in path {list(p)}")
        for p in clean:
            if p[:-1] and p[:-1] not in clean:
                raise SpecbenchError(f"{where}: path {list(p)} has no parent path {list(p[:-1])}")
            sibling_ranks = {q[-1] for q in clean if q[:-1] == p[:-1]}
            if sibling_ranks != set(range(len(sibling_ranks))):
                raise SpecbenchError(f"{where}: ranks below {list(p[:-1])} must be 0..k-1, got {sorted(sibling_ranks)}")
        return cls(tuple(sorted(clean, key=lambda p: (len(p), p))))

    @classmethod
    def from_branching(cls, text: str) -> StaticTree:
        try:
            widths = [int(w) for w in text.lower().split("x")]
        except ValueError:
            raise SpecbenchError(f"tree '{text}': a branching spec is widths per depth like 3x2x1") from None
        if not widths or min(widths) < 1:
            raise SpecbenchError(f"tree '{text}': every depth needs at least one child")
        nodes, level = 0, 1
        for width in widths:  # counted before anything is built: '999999x9' must not be expanded
            level *= width
            nodes += level
            if nodes > MAX_NODES:
                raise SpecbenchError(f"tree '{text}': more than {MAX_NODES} nodes")
        paths, frontier = [], [()]
        for width in widths:
            frontier = [p + (r,) for p in frontier for r in range(width)]
            paths.extend(frontier)
            if len(paths) > MAX_NODES:
                raise SpecbenchError(f"tree '{text}': more than {MAX_NODES} nodes")
        return cls(tuple(paths))

    # ------------------------------------------------------------------ structure
    @property
    def depth(self) -> int:
        return max(len(p) for p in self.paths)

    @property
    def num_nodes(self) -> int:
        return len(self.paths)

    @property
    def is_chain(self) -> bool:
        return all(p == (0,) * len(p) for p in self.paths)

    @property
    def expert_cost(self) -> float:
        """λ of an expert-aware tree: a static tree's nodes are fixed, never chosen by the experts they touch."""
        return 0.0

    @cached_property
    def parents(self) -> list[int]:
        index = {p: i for i, p in enumerate(self.paths)}
        return [index[p[:-1]] if len(p) > 1 else -1 for p in self.paths]

    @cached_property
    def ranks(self) -> list[int]:
        return [p[-1] for p in self.paths]

    def children_count(self, node: int) -> int:
        """Children of ``node`` (−1: the root)."""
        return sum(1 for parent in self.parents if parent == node)

    def truncated(self, depth: int) -> StaticTree:
        return StaticTree(tuple(p for p in self.paths if len(p) <= depth))

    def describe(self) -> str:
        return f"{self.num_nodes} nodes, depth {self.depth}"


@dataclass(frozen=True)
class DynamicTree:
    """Grown each round from the drafter's probabilities (EAGLE-2 style)."""

    depth: int
    topk: int = 4
    nodes: int = 32
    expert_cost: float = 0.0  # λ: > 0 selects nodes expert-aware (MoE targets)

    @property
    def num_nodes(self) -> int:
        return self.nodes

    @property
    def is_chain(self) -> bool:
        return False

    def truncated(self, depth: int) -> DynamicTree:
        return replace(self, depth=min(depth, self.depth))

    def describe(self) -> str:
        aware = f", expert-aware λ={self.expert_cost:g}" if self.expert_cost else ""
        return f"dynamic, top-{self.topk} per depth, {self.nodes} nodes, depth {self.depth}{aware}"


def _dynamic(text: str) -> DynamicTree:
    params = {}
    body = text.split(":", 1)[1] if ":" in text else ""
    for item in filter(None, (p.strip() for p in body.split(","))):
        key, _, value = item.partition("=")
        if key not in ("topk", "nodes", "depth", "lambda"):
            raise SpecbenchError(f"tree '{text}': unknown parameter '{key}' (topk, nodes, depth, lambda)")
        try:
            params[key] = float(value) if key == "lambda" else int(value)
        except ValueError:
            kind = "a number" if key == "lambda" else "an integer"
            raise SpecbenchError(f"tree '{text}': {key} must be {kind}") from None
    if not 0 <= params.get("lambda", 0.0) < float("inf"):
        raise SpecbenchError(f"tree '{text}': lambda must be a finite number >= 0")
    tree = DynamicTree(
        depth=params.get("depth", 64),
        topk=params.get("topk", 4),
        nodes=params.get("nodes", 32),
        expert_cost=params.get("lambda", 0.0),
    )
    if tree.topk < 1 or tree.nodes < 1 or tree.depth < 1:
        raise SpecbenchError(f"tree '{text}': topk, nodes and depth must be >= 1")
    if tree.nodes > MAX_NODES or tree.topk > MAX_NODES:
        raise SpecbenchError(f"tree '{text}': more than {MAX_NODES} nodes (topk and nodes are at most {MAX_NODES})")
    if tree.depth > GAMMA_LIMIT:
        raise SpecbenchError(f"tree '{text}': depth must be at most {GAMMA_LIMIT} (γ's limit in the bounds table)")
    return tree


def _paths_file(path: Path, text: str) -> StaticTree:

    data = load_yaml_file(path, f"tree '{text}' file")  # size-limited UTF-8, no YAML aliases
    if isinstance(data, dict):
        data = data.get("paths")
    if not isinstance(data, list):
        raise SpecbenchError(f"tree '{text}': {path} must hold a list of rank paths (or a mapping with 'paths')")
    return StaticTree.from_paths(data, where=f"tree '{text}'")


def _trees_dir() -> Path:

    return Path(str(resources.files("specbench.builtin_trees")))


def named_trees() -> list[str]:
    return sorted(p.stem for p in _trees_dir().glob("*.yaml"))


def parse_tree(spec: str) -> StaticTree | DynamicTree | None:
    """A tree spec -> its shape; None for ``chain`` (its depth comes from γ)."""
    text = str(spec).strip()
    if text == "chain":
        return None
    if not text:
        raise SpecbenchError("empty tree spec")
    if text.startswith("dynamic"):
        return _dynamic(text)
    if text.startswith("paths:"):
        return _paths_file(Path(text[6:]).expanduser(), text)
    if text.startswith("@"):
        if text[1:] not in named_trees():
            raise SpecbenchError(
                f"unknown named tree '{text}'{did_you_mean(text[1:], named_trees())} "
                f"(named trees: {', '.join(named_trees()) or 'none'})"
            )
        return _paths_file(_trees_dir() / f"{text[1:]}.yaml", text)
    if text[0].isdigit():
        return StaticTree.from_branching(text)

    raise SpecbenchError(
        f"unknown tree shape '{text}'{did_you_mean(text, ['chain', 'dynamic'])} "
        "(chain, a branching spec like 3x2x1, paths:FILE, @NAME or dynamic:topk=K,nodes=N[,lambda=L])"
    )


def shape_for(spec: str, gamma: int) -> StaticTree | DynamicTree:
    """The draft shape of a (tree spec, γ) configuration: the spec cut to depth γ."""
    shape = parse_tree(spec)
    if shape is None:
        return StaticTree.chain(gamma)
    return shape.truncated(gamma)


def tree_depth_limit(spec: str) -> int | None:
    """Deepest γ a spec can use (a static shape's depth; a dynamic tree's depth cap, which its node budget
    also caps); None for a chain. A deeper γ would draft no deeper, so it is skipped (sweeps) or refused
    (`run`): a record's γ is what ran."""
    shape = parse_tree(spec)
    if isinstance(shape, DynamicTree):
        return min(shape.depth, shape.nodes)
    return shape.depth if isinstance(shape, StaticTree) else None


# ----------------------------------------------------------------------------- buffers


def ancestor_mask(parents: list[int]) -> torch.Tensor:
    """[N+1, N+1] bool over (root, nodes): entry [i, j] is True when j is i or an ancestor of i.

    ``parents`` lists each node's parent (−1: root) and every parent precedes its children.
    """
    n = len(parents)
    mask = torch.zeros(n + 1, n + 1, dtype=torch.bool)
    mask[0, 0] = True
    for i, parent in enumerate(parents):
        if parent >= i:
            raise ValueError("tree nodes must come after their parents")
        mask[i + 1] = mask[parent + 1]
        mask[i + 1, i + 1] = True
    return mask


def node_depths(parents: list[int]) -> list[int]:
    depths: list[int] = []
    for parent in parents:
        depths.append(1 if parent < 0 else depths[parent] + 1)
    return depths


def leaf_paths(parents: list[int]) -> torch.Tensor:
    """[leaves, depth] node indices of every root-to-leaf path, padded with −1."""
    n = len(parents)
    has_child = set(p for p in parents if p >= 0)
    paths = []
    for leaf in (i for i in range(n) if i not in has_child):
        path, node = [], leaf
        while node >= 0:
            path.append(node)
            node = parents[node]
        paths.append(path[::-1])
    width = max((len(p) for p in paths), default=0)
    return torch.tensor([p + [-1] * (width - len(p)) for p in paths], dtype=torch.long).reshape(len(paths), width)


@lru_cache(maxsize=256)
def leaf_paths_cached(parents: tuple[int, ...]) -> torch.Tensor:
    return leaf_paths(list(parents))


@lru_cache(maxsize=256)
def verification_layout(parents: tuple[int, ...]):
    """The `TreeLayout` of [root, nodes] for a tree (static shapes reuse it every round)."""

    return TreeLayout(ancestor_mask(list(parents)), torch.tensor([0] + node_depths(list(parents))), 0)
