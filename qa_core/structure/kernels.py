"""Convolution tree kernels: the Subset Tree Kernel (STK) and the Partial Tree Kernel (PTK).

Both count the fragments two trees share, ``K(T1, T2) = sum_{n1 in T1} sum_{n2 in T2} Delta(n1, n2)``
(Nicosia 2018, eq. 2.13); they differ in which fragments exist.

STK (Collins & Duffy 2002 with decay lambda; thesis section 2.4.2): fragments keep whole grammar
rules, so only nodes with the same production match::

    Delta(n1, n2) = 0                                            productions differ (a leaf has none)
    Delta(n1, n2) = lambda                                       same production, pre-terminals
    Delta(n1, n2) = lambda * prod_j (1 + Delta(c1_j, c2_j))      same production otherwise

(the pre-terminal case is the general one, as Delta(leaf, leaf) = 0).

PTK (Moschitti 2006; thesis eq. 2.16): fragments keep any subsequence of a node's children::

    Delta(n1, n2) = 0                                            labels differ, else
    Delta(n1, n2) = mu * (lambda^2 + sum_{I1, I2: |I1| = |I2|} lambda^(d(I1) + d(I2))
                                                     * prod_j Delta(c1[I1_j], c2[I2_j]))

over increasing child-index sequences I1, I2, with d(I) = I_last - I_first + 1 (a leaf pair gives
mu * lambda^2). The sum over sequences is a dynamic programme over the child grid (Moschitti 2006)::

    DPS(i, j) = lambda^2 * Delta(c1_i, c2_j) * (1 + DP(i-1, j-1))    sequences ending at (i, j)
    DP(i, j)  = sum_{i' <= i, j' <= j} lambda^(i-i' + j-j') DPS(i', j')
              = lambda * DP(i-1, j) + sum_{j' <= j} lambda^(j-j') DPS(i, j')
    sum       = sum_{i, j} DPS(i, j)

(the sequence length is not capped, so the paper's per-length tables fold into one).

Normalised kernel: ``K(x, y) / sqrt(K(x, x) K(y, y))``. Defaults lambda = mu = 0.4 (SVM-light-TK).

Speed: each tree is compiled once into arrays (post-order node ids, labels and productions as ints
of one process-wide vocabulary, child-index rows padded with -1). One tree is then compared with a
whole *forest* (many compiled trees concatenated) in one pass: node pairs with equal keys come from
a merge of sorted keys (``searchsorted``, O((n1 + n2) log n2 + pairs)); Delta is memoised in a dense
matrix and filled level by level, a pair's level being max(height1, height2) so that child pairs
are always done first; each level is vectorised over all of its pairs with numpy (PTK: one numpy
step per child row of the grid); per-tree sums come from ``bincount``. One call gives a Gram row.
"""

from __future__ import annotations

import math
import multiprocessing
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Literal

import numpy as np

from qa_core.structure.trees import Tree

KernelKind = Literal["ptk", "stk"]

# Labels (str) and productions (tuple of label ids) share one id space. Ids are only comparable
# within a process: compile every tree you compare in the same process (gram_matrix does).
_IDS: dict[str | tuple[int, ...], int] = {}

# A forest block's memo matrix has (row-tree nodes + 1) x (forest nodes + 1) floats; capping the
# forest at this many nodes keeps it near 30 MB for 80-node rows.
_MAX_FOREST_NODES = 50_000

# Starting spawned workers costs about 0.4 s; below about a second of serial work (PTK ~20k, STK
# ~160k evaluations a second on 85-node shallow trees) it costs more than it saves.
_MIN_PARALLEL_EVALUATIONS: dict[str, int] = {"ptk": 20_000, "stk": 200_000}


def _intern(key: str | tuple[int, ...]) -> int:
    return _IDS.setdefault(key, len(_IDS))


@dataclass(frozen=True)
class CompiledTree:
    """Array form of a tree (or of a forest of trees), nodes numbered in post-order."""

    labels: np.ndarray  # [n] label ids
    productions: np.ndarray  # [n] production ids, -1 for leaves
    heights: np.ndarray  # [n] 0 for leaves
    n_children: np.ndarray  # [n]
    children: np.ndarray  # [n, max children] child node ids, padded with -1

    @property
    def n_nodes(self) -> int:
        return len(self.labels)


def compile_tree(tree: Tree) -> CompiledTree:
    """Compile once, compare many times."""
    labels: list[int] = []
    productions: list[int] = []
    heights: list[int] = []
    child_rows: list[list[int]] = []

    def visit(node: Tree) -> int:
        child_ids = [visit(child) for child in node.children]
        label = _intern(node.label)
        labels.append(label)
        if child_ids:
            productions.append(_intern((label, *(labels[c] for c in child_ids))))
            heights.append(1 + max(heights[c] for c in child_ids))
        else:
            productions.append(-1)
            heights.append(0)
        child_rows.append(child_ids)
        return len(labels) - 1

    visit(tree)
    width = max(len(row) for row in child_rows)
    children = np.full((len(labels), width), -1, dtype=np.int64)
    for node, row in enumerate(child_rows):
        children[node, : len(row)] = row
    return CompiledTree(
        labels=np.asarray(labels, dtype=np.int64),
        productions=np.asarray(productions, dtype=np.int64),
        heights=np.asarray(heights, dtype=np.int64),
        n_children=np.asarray([len(row) for row in child_rows], dtype=np.int64),
        children=children,
    )


@dataclass(frozen=True)
class _Forest:
    """Compiled trees concatenated, with each node's tree and the nodes sorted by match key."""

    nodes: CompiledTree
    tree_of_node: np.ndarray
    n_trees: int
    sorted_keys: np.ndarray
    key_order: np.ndarray

    @classmethod
    def build(cls, trees: Sequence[CompiledTree], kind: KernelKind) -> _Forest:
        width = max(tree.children.shape[1] for tree in trees)
        offsets = np.cumsum([0] + [tree.n_nodes for tree in trees[:-1]])
        children = np.full((sum(tree.n_nodes for tree in trees), width), -1, dtype=np.int64)
        for tree, offset in zip(trees, offsets, strict=True):
            block = children[offset : offset + tree.n_nodes, : tree.children.shape[1]]
            block[...] = np.where(tree.children >= 0, tree.children + offset, -1)
        nodes = CompiledTree(
            labels=np.concatenate([tree.labels for tree in trees]),
            productions=np.concatenate([tree.productions for tree in trees]),
            heights=np.concatenate([tree.heights for tree in trees]),
            n_children=np.concatenate([tree.n_children for tree in trees]),
            children=children,
        )
        keys = nodes.labels if kind == "ptk" else nodes.productions
        order = np.argsort(keys, kind="stable")
        return cls(
            nodes=nodes,
            tree_of_node=np.repeat(np.arange(len(trees)), [tree.n_nodes for tree in trees]),
            n_trees=len(trees),
            sorted_keys=keys[order],
            key_order=order,
        )


@dataclass(frozen=True)
class _Params:
    kind: KernelKind
    lam: float
    mu: float

    def __post_init__(self) -> None:
        if self.kind not in ("ptk", "stk"):
            raise ValueError(f"unknown tree kernel {self.kind!r}: use 'ptk' or 'stk'")
        if not (0 < self.lam <= 1 and 0 < self.mu <= 1):
            raise ValueError(f"lambda and mu must lie in (0, 1], got {self.lam}, {self.mu}")


def _matching_pairs(keys: np.ndarray, forest: _Forest) -> tuple[np.ndarray, np.ndarray]:
    """All (tree node, forest node) pairs with equal non-negative keys, by a sorted merge."""
    low = np.searchsorted(forest.sorted_keys, keys, side="left")
    high = np.searchsorted(forest.sorted_keys, keys, side="right")
    counts = np.where(keys >= 0, high - low, 0)
    group_starts = np.cumsum(counts) - counts
    tree_nodes = np.repeat(np.arange(len(keys)), counts)
    positions = np.repeat(low - group_starts, counts) + np.arange(counts.sum())
    return tree_nodes, forest.key_order[positions]


def _kernel_row(tree: CompiledTree, forest: _Forest, params: _Params) -> np.ndarray:
    """K(tree, t) for every tree t of the forest (unnormalised)."""
    keys = tree.labels if params.kind == "ptk" else tree.productions
    left, right = _matching_pairs(keys, forest)
    if left.size == 0:
        return np.zeros(forest.n_trees)
    levels = np.maximum(tree.heights[left], forest.nodes.heights[right])
    order = np.argsort(levels, kind="stable")
    left, right, levels = left[order], right[order], levels[order]
    # memo[n1, n2] = Delta(n1, n2); the extra last row and column stay 0 for the -1 child padding.
    memo = np.zeros((tree.n_nodes + 1, forest.nodes.n_nodes + 1))
    deltas = np.empty(left.size)
    level_delta = _ptk_level if params.kind == "ptk" else _stk_level
    bounds = [0, *(np.flatnonzero(np.diff(levels)) + 1).tolist(), left.size]
    for start, end in zip(bounds[:-1], bounds[1:], strict=True):
        a, b = left[start:end], right[start:end]
        values = level_delta(tree, forest.nodes, a, b, memo, params)
        memo[a, b] = values
        deltas[start:end] = values
    return np.bincount(forest.tree_of_node[right], weights=deltas, minlength=forest.n_trees)


def _stk_level(
    tree: CompiledTree, forest: CompiledTree, a: np.ndarray, b: np.ndarray, memo: np.ndarray, params: _Params
) -> np.ndarray:
    """lambda * prod_j (1 + Delta(c1_j, c2_j)); equal productions mean equally many children."""
    width = int(tree.n_children[a].max())
    child_deltas = memo[tree.children[a, :width], forest.children[b, :width]]
    return params.lam * np.prod(1.0 + child_deltas, axis=1)


def _ptk_level(
    tree: CompiledTree, forest: CompiledTree, a: np.ndarray, b: np.ndarray, memo: np.ndarray, params: _Params
) -> np.ndarray:
    """PTK Delta of one level's pairs, in buckets of similar child counts.

    Padding every pair to the level's widest child grid would waste most of the work (a 12-word NP
    next to thousands of one-word chunks), so pairs are bucketed by the power-of-two classes of their
    two child counts and each bucket gets its own grid.
    """
    rows, cols = tree.n_children[a], forest.n_children[b]
    out = np.full(a.size, params.mu * params.lam**2)  # a pair with a leaf: mu * lambda^2
    inner = np.flatnonzero((rows > 0) & (cols > 0))
    if inner.size == 0:
        return out
    size_classes = np.ceil(np.log2(rows[inner])) * 64 + np.ceil(np.log2(cols[inner]))
    order = np.argsort(size_classes, kind="stable")
    inner, size_classes = inner[order], size_classes[order]
    bounds = [0, *(np.flatnonzero(np.diff(size_classes)) + 1).tolist(), inner.size]
    for start, end in zip(bounds[:-1], bounds[1:], strict=True):
        pairs = inner[start:end]
        out[pairs] = _ptk_grid(tree, forest, a[pairs], b[pairs], memo, params)
    return out


def _ptk_grid(
    tree: CompiledTree, forest: CompiledTree, a: np.ndarray, b: np.ndarray, memo: np.ndarray, params: _Params
) -> np.ndarray:
    """mu * (lambda^2 + sum of DPS over the child grid) for pairs of internal nodes, all at once.

    The DP runs one numpy step per grid row; the kernel is symmetric in the two child sequences, so
    the grid is turned to make its rows the shorter side.
    """
    lam, lam2 = params.lam, params.lam**2
    rows, cols = int(tree.n_children[a].max()), int(forest.n_children[b].max())
    grid = memo[tree.children[a, :rows, None], forest.children[b, None, :cols]]  # [pairs, rows, cols]
    if rows > cols:
        grid, rows, cols = grid.transpose(0, 2, 1), cols, rows
    # decay[j', j] = lambda^(j - j') for j' <= j: "dps @ decay" is the decayed prefix sum over j.
    offsets = np.subtract.outer(np.arange(cols), np.arange(cols)).T
    decay = np.where(offsets >= 0, lam ** np.maximum(offsets, 0), 0.0)
    dp = np.zeros((a.size, cols))
    total = np.zeros(a.size)
    shifted = np.ones((a.size, cols))  # 1 + DP(i-1, j-1), with DP(., -1) = 0
    for i in range(rows):
        shifted[:, 1:] = 1.0 + dp[:, :-1]
        dps = lam2 * grid[:, i, :] * shifted
        total += dps.sum(axis=1)
        dp = lam * dp + dps @ decay
    return params.mu * (lam2 + total)


TreeLike = Tree | CompiledTree


def _compiled(tree: TreeLike) -> CompiledTree:
    return tree if isinstance(tree, CompiledTree) else compile_tree(tree)


def _kernel(x: TreeLike, y: TreeLike, params: _Params) -> float:
    return float(_kernel_row(_compiled(x), _Forest.build([_compiled(y)], params.kind), params)[0])


def stk(x: TreeLike, y: TreeLike, lam: float = 0.4) -> float:
    """Unnormalised Subset Tree Kernel."""
    return _kernel(x, y, _Params("stk", lam, 1.0))


def ptk(x: TreeLike, y: TreeLike, lam: float = 0.4, mu: float = 0.4) -> float:
    """Unnormalised Partial Tree Kernel."""
    return _kernel(x, y, _Params("ptk", lam, mu))


def tree_kernel(
    x: TreeLike,
    y: TreeLike,
    kind: KernelKind = "ptk",
    lam: float = 0.4,
    mu: float = 0.4,
    normalize: bool = True,
) -> float:
    """K(x, y), by default normalised to K(x, y) / sqrt(K(x, x) K(y, y)) (0 when either is 0)."""
    params = _Params(kind, lam, mu)
    x, y = _compiled(x), _compiled(y)
    value = _kernel(x, y, params)
    if not normalize:
        return value
    scale = math.sqrt(_kernel(x, x, params) * _kernel(y, y, params))
    return value / scale if scale > 0 else 0.0


# ---------------------------------------------------------------------------------------------
# Gram matrices


class _GramJob:
    """The compiled trees of one Gram matrix and the pieces of work on them (run here or in workers)."""

    def __init__(self, rows: list[CompiledTree], columns: list[CompiledTree], params: _Params) -> None:
        self.rows, self.columns, self.params = rows, columns, params

    def block(self, row_start: int, row_end: int, column_start: int) -> np.ndarray:
        """K(rows[row_start:row_end], columns[column_start:]), forest blocks capped in size."""
        out = np.empty((row_end - row_start, len(self.columns) - column_start))
        for first, last in _forest_blocks(self.columns, column_start):
            forest = _Forest.build(self.columns[first:last], self.params.kind)
            for row in range(row_start, row_end):
                out[row - row_start, first - column_start : last - column_start] = _kernel_row(
                    self.rows[row], forest, self.params
                )
        return out

    def self_kernels(self, side: Literal["rows", "columns"], start: int, end: int) -> np.ndarray:
        trees = self.rows if side == "rows" else self.columns
        kind = self.params.kind
        return np.array([_kernel_row(tree, _Forest.build([tree], kind), self.params)[0] for tree in trees[start:end]])


def _spans(count: int, step: int) -> list[tuple[int, int]]:
    return [(start, min(start + step, count)) for start in range(0, count, step)]


def _forest_blocks(trees: Sequence[CompiledTree], start: int) -> Iterator[tuple[int, int]]:
    first, nodes = start, 0
    for index in range(start, len(trees)):
        if nodes and nodes + trees[index].n_nodes > _MAX_FOREST_NODES:
            yield first, index
            first, nodes = index, 0
        nodes += trees[index].n_nodes
    if first < len(trees):
        yield first, len(trees)


_WORKER_JOB: _GramJob | None = None


def _init_worker(job: _GramJob) -> None:
    global _WORKER_JOB
    _WORKER_JOB = job


def _worker_block(task: tuple[int, int, int]) -> np.ndarray:
    assert _WORKER_JOB is not None
    return _WORKER_JOB.block(*task)


def _worker_self_kernels(task: tuple[Literal["rows", "columns"], int, int]) -> np.ndarray:
    assert _WORKER_JOB is not None
    return _WORKER_JOB.self_kernels(*task)


def gram_matrix(
    trees_a: Sequence[TreeLike],
    trees_b: Sequence[TreeLike] | None = None,
    kind: KernelKind = "ptk",
    lam: float = 0.4,
    mu: float = 0.4,
    normalize: bool = True,
    n_jobs: int = 2,
) -> np.ndarray:
    """K[i, j] = K(trees_a[i], trees_b[j]) (trees_b defaults to trees_a: only the upper triangle is
    computed). Row blocks go to ``n_jobs`` worker processes (spawned: safe next to torch threads);
    small matrices are computed in this process, where starting workers would cost more."""
    params = _Params(kind, lam, mu)
    symmetric = trees_b is None
    rows = [_compiled(tree) for tree in trees_a]
    columns = rows if symmetric else [_compiled(tree) for tree in trees_b]
    gram = np.zeros((len(rows), len(columns)))
    if not rows or not columns:
        return gram
    job = _GramJob(rows, columns, params)
    step = max(1, math.ceil(len(rows) / (4 * max(1, n_jobs))))  # several blocks a worker: balances load
    tasks = [(start, end, start if symmetric else 0) for start, end in _spans(len(rows), step)]
    self_tasks: list[tuple[Literal["rows", "columns"], int, int]] = []
    if normalize and not symmetric:
        self_tasks = [("rows", start, end) for start, end in _spans(len(rows), step)]
        self_tasks += [("columns", start, end) for start, end in _spans(len(columns), step)]
    evaluations = len(rows) * len(columns) // (2 if symmetric else 1)
    if n_jobs > 1 and evaluations >= _MIN_PARALLEL_EVALUATIONS[kind]:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(
            n_jobs, mp_context=context, initializer=_init_worker, initargs=(job,)
        ) as pool:
            blocks = list(pool.map(_worker_block, tasks))
            diagonals = list(pool.map(_worker_self_kernels, self_tasks))
    else:
        blocks = [job.block(*task) for task in tasks]
        diagonals = [job.self_kernels(*task) for task in self_tasks]
    for (start, end, column_start), block in zip(tasks, blocks, strict=True):
        gram[start:end, column_start:] = block
    if symmetric:
        upper = np.triu(gram)
        gram = upper + np.triu(upper, 1).T
    if not normalize:
        return gram
    if symmetric:
        row_self = column_self = np.diag(gram).copy()
    else:
        sides = [side for side, _, _ in self_tasks]
        row_self = np.concatenate([d for side, d in zip(sides, diagonals, strict=True) if side == "rows"])
        column_self = np.concatenate([d for side, d in zip(sides, diagonals, strict=True) if side == "columns"])
    scale = np.sqrt(np.outer(row_self, column_self))
    return np.divide(gram, scale, out=np.zeros_like(gram), where=scale > 0)
