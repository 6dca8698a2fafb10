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

over increasing child-index sequences I1, I2, with d(I) = I_last - I_first + 1 (a pair with a leaf
gives mu * lambda^2). The sum over sequences is a dynamic programme over the child grid
(Moschitti 2006)::

    DPS(i, j) = lambda^2 * Delta(c1_i, c2_j) * (1 + DP(i-1, j-1))    sequences ending at (i, j)
    DP(i, j)  = sum_{i' <= i, j' <= j} lambda^(i-i' + j-j') DPS(i', j')
              = lambda * DP(i-1, j) + S(i, j),   S(i, j) = lambda * S(i, j-1) + DPS(i, j)
    sum       = sum_{i, j} DPS(i, j)

(the sequence length is not capped, so the paper's per-length tables fold into one; the running
row sum S avoids the subtraction of the inclusion-exclusion form).

Normalised kernel: ``K(x, y) / sqrt(K(x, x) K(y, y))``. Defaults lambda = mu = 0.4 (SVM-light-TK).

Speed: trees are packed once into a ``Forest`` (flat arrays: post-order node ids, label and
production ids of one process-wide vocabulary, CSR child lists, each tree's nodes sorted by label
and by production; identical trees stored once). The kernel of one tree pair is a numba-compiled
loop: for every node of the first tree in post-order, the nodes of the second tree with the same
key come from a binary search, and Delta is memoised in a dense node x node matrix (post-order
makes every child pair come before its parents). Gram blocks release the GIL, so ``n_jobs``
threads fill disjoint rows of one matrix in parallel, with no process start-up or pickling.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numba import njit

from qa_core.structure.trees import Tree

KernelKind = Literal["ptk", "stk"]

# Labels (str) and productions (tuple of label ids) share one id space, for the life of the process:
# forests built at different times stay comparable.
_IDS: dict[str | tuple[int, ...], int] = {}
_IDS_LOCK = threading.Lock()


def _intern(key: str | tuple[int, ...]) -> int:
    found = _IDS.get(key)
    if found is None:
        with _IDS_LOCK:
            found = _IDS.setdefault(key, len(_IDS))
    return found


@dataclass(frozen=True)
class KernelParams:
    """Which kernel, its decays, and whether it is normalised."""

    kind: KernelKind = "ptk"
    lam: float = 0.4
    mu: float = 0.4
    normalize: bool = True

    def __post_init__(self) -> None:
        if self.kind not in ("ptk", "stk"):
            raise ValueError(f"unknown tree kernel {self.kind!r}: use 'ptk' or 'stk'")
        if not (0 < self.lam <= 1 and 0 < self.mu <= 1):
            raise ValueError(f"lambda and mu must lie in (0, 1], got {self.lam}, {self.mu}")


@dataclass(frozen=True, eq=False)
class Forest:
    """Distinct trees packed into flat arrays; ``index[i]`` is the packed tree of input ``i``."""

    labels: np.ndarray  # [nodes] label ids, each tree's nodes in post-order
    productions: np.ndarray  # [nodes] production ids, -1 for leaves
    child_start: np.ndarray  # [nodes + 1] CSR offsets into child_ids
    child_ids: np.ndarray  # [edges] node ids
    tree_start: np.ndarray  # [trees + 1] first node of each tree
    by_label: np.ndarray  # [nodes] node ids, each tree's range sorted by label
    by_production: np.ndarray  # [nodes] node ids, each tree's range sorted by production
    index: np.ndarray  # [inputs] packed tree of each input tree

    @classmethod
    def build(cls, trees: Sequence[Tree]) -> Forest:
        unique: dict[Tree, int] = {}
        index = np.array([unique.setdefault(tree, len(unique)) for tree in trees], dtype=np.int64)
        labels: list[int] = []
        productions: list[int] = []
        child_lists: list[list[int]] = []
        tree_start = [0]

        def visit(node: Tree) -> int:
            child_ids = [visit(child) for child in node.children]
            label = _intern(node.label)
            labels.append(label)
            productions.append(_intern((label, *(labels[c] for c in child_ids))) if child_ids else -1)
            child_lists.append(child_ids)
            return len(labels) - 1

        for tree in unique:
            visit(tree)
            tree_start.append(len(labels))
        counts = np.array([len(children) for children in child_lists], dtype=np.int64)
        label_array = np.array(labels, dtype=np.int64)
        production_array = np.array(productions, dtype=np.int64)
        starts = np.array(tree_start, dtype=np.int64)
        tree_of_node = np.repeat(np.arange(len(unique)), np.diff(starts))
        return cls(
            labels=label_array,
            productions=production_array,
            child_start=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
            child_ids=np.array([c for children in child_lists for c in children], dtype=np.int64),
            tree_start=starts,
            by_label=np.lexsort((label_array, tree_of_node)).astype(np.int64),
            by_production=np.lexsort((production_array, tree_of_node)).astype(np.int64),
            index=index,
        )

    @property
    def n_trees(self) -> int:
        return len(self.tree_start) - 1

    @property
    def max_nodes(self) -> int:
        return int(np.diff(self.tree_start).max(initial=1))

    @property
    def max_children(self) -> int:
        return int(np.diff(self.child_start).max(initial=0))

    def sizes(self) -> np.ndarray:
        """Nodes of each input tree."""
        return np.diff(self.tree_start)[self.index]

    def arrays(self, kind: KernelKind) -> tuple[np.ndarray, ...]:
        """What the compiled loops read: (keys, nodes sorted by key, child_start, child_ids, tree_start)."""
        if kind == "ptk":
            return self.labels, self.by_label, self.child_start, self.child_ids, self.tree_start
        return self.productions, self.by_production, self.child_start, self.child_ids, self.tree_start


# ---------------------------------------------------------------------------------------------
# Compiled loops


@njit(nogil=True, cache=True)
def _pair_kernel(is_ptk, lam, mu, a, t1, b, t2, memo, touched, prev, cur):  # pragma: no cover - numba
    """Unnormalised K(tree t1 of forest a, tree t2 of forest b)."""
    keys1, _, cs1, cids1, ts1 = a
    keys2, sorted2, cs2, cids2, ts2 = b
    s1, e1 = ts1[t1], ts1[t1 + 1]
    s2, e2 = ts2[t2], ts2[t2 + 1]
    lam2 = lam * lam
    total = 0.0
    n_touched = 0
    for n1 in range(s1, e1):  # post-order: children before parents
        key = keys1[n1]
        if key < 0:
            continue
        low, high = s2, e2  # first position in t2's sorted range with keys2 >= key
        while low < high:
            mid = (low + high) >> 1
            if keys2[sorted2[mid]] < key:
                low = mid + 1
            else:
                high = mid
        position = low
        while position < e2 and keys2[sorted2[position]] == key:
            n2 = sorted2[position]
            position += 1
            nc1 = cs1[n1 + 1] - cs1[n1]
            nc2 = cs2[n2 + 1] - cs2[n2]
            if is_ptk:
                if nc1 == 0 or nc2 == 0:
                    delta = mu * lam2
                else:
                    for j in range(nc2 + 1):
                        prev[j] = 0.0
                    grid = 0.0
                    for i in range(nc1):
                        c1 = cids1[cs1[n1] + i] - s1
                        running = 0.0
                        cur[0] = 0.0
                        for j in range(nc2):
                            child = memo[c1, cids2[cs2[n2] + j] - s2]
                            dps = lam2 * child * (1.0 + prev[j]) if child != 0.0 else 0.0
                            grid += dps
                            running = lam * running + dps
                            cur[j + 1] = lam * prev[j + 1] + running
                        for j in range(nc2 + 1):
                            prev[j] = cur[j]
                    delta = mu * (lam2 + grid)
            else:  # equal productions: as many children, with equal labels
                delta = lam
                for j in range(nc1):
                    delta *= 1.0 + memo[cids1[cs1[n1] + j] - s1, cids2[cs2[n2] + j] - s2]
            memo[n1 - s1, n2 - s2] = delta
            touched[n_touched, 0] = n1 - s1
            touched[n_touched, 1] = n2 - s2
            n_touched += 1
            total += delta
    for k in range(n_touched):  # leave the memo all zeros for the next pair
        memo[touched[k, 0], touched[k, 1]] = 0.0
    return total


@njit(nogil=True, cache=True)
def _scratch(max_a, max_b, max_children):  # pragma: no cover - numba
    """``_pair_kernel``'s work buffers (memo, touched, prev, cur), made once per thread's batch."""
    memo = np.zeros((max_a, max_b))
    touched = np.empty((max_a * max_b, 2), dtype=np.int64)
    return memo, touched, np.zeros(max_children + 1), np.zeros(max_children + 1)


@njit(nogil=True, cache=True)
def _fill_rows(is_ptk, lam, mu, a, b, rows, upper, out, max_a, max_b, max_children):  # pragma: no cover
    """out[r, c] = K(a's tree r, b's tree c) for the given rows (c >= r only when ``upper``)."""
    memo, touched, prev, cur = _scratch(max_a, max_b, max_children)
    n_columns = out.shape[1]
    for r in rows:
        for c in range(r if upper else 0, n_columns):
            out[r, c] = _pair_kernel(is_ptk, lam, mu, a, r, b, c, memo, touched, prev, cur)


@njit(nogil=True, cache=True)
def _fill_pairs(is_ptk, lam, mu, a, b, rows, columns, out, max_a, max_b, max_children):  # pragma: no cover
    """out[k] = K(a's tree rows[k], b's tree columns[k])."""
    memo, touched, prev, cur = _scratch(max_a, max_b, max_children)
    for k in range(len(rows)):
        out[k] = _pair_kernel(is_ptk, lam, mu, a, rows[k], b, columns[k], memo, touched, prev, cur)


# ---------------------------------------------------------------------------------------------
# Public API

TreesLike = Sequence[Tree] | Forest


def _forest(trees: TreesLike) -> Forest:
    return trees if isinstance(trees, Forest) else Forest.build(trees)


def self_kernels(forest: Forest, params: KernelParams) -> np.ndarray:
    """Unnormalised K(t, t) of every packed tree (the normalisation denominators)."""
    trees = np.arange(forest.n_trees, dtype=np.int64)
    out = np.empty(forest.n_trees)
    arrays = forest.arrays(params.kind)
    _fill_pairs(
        params.kind == "ptk", params.lam, params.mu, arrays, arrays, trees, trees, out,
        forest.max_nodes, forest.max_nodes, forest.max_children,
    )
    return out


def _packed_gram(a: Forest, b: Forest | None, params: KernelParams, n_jobs: int) -> np.ndarray:
    """Unnormalised kernel between packed trees; ``b is None`` fills the upper triangle of a x a."""
    upper = b is None
    b = a if b is None else b
    out = np.zeros((a.n_trees, b.n_trees))
    if out.size == 0:
        return out
    workers = max(1, min(n_jobs, a.n_trees))
    # Interleaved rows balance the threads (rows of a triangle shrink as they go).
    row_sets = [np.arange(k, a.n_trees, workers, dtype=np.int64) for k in range(workers)]
    args = (params.kind == "ptk", params.lam, params.mu, a.arrays(params.kind), b.arrays(params.kind))
    sizes = (a.max_nodes, b.max_nodes, max(a.max_children, b.max_children))

    def fill(rows: np.ndarray) -> None:
        _fill_rows(*args, rows, upper, out, *sizes)

    if workers == 1:
        fill(row_sets[0])
    else:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(fill, row_sets))
    if upper:
        out = np.triu(out) + np.triu(out, 1).T
    return out


def gram_matrix(
    trees_a: TreesLike,
    trees_b: TreesLike | None = None,
    kind: KernelKind = "ptk",
    lam: float = 0.4,
    mu: float = 0.4,
    normalize: bool = True,
    n_jobs: int = 2,
) -> np.ndarray:
    """K[i, j] = K(trees_a[i], trees_b[j]); trees_b defaults to trees_a (then only the upper
    triangle is computed). Identical trees are computed once; ``n_jobs`` threads share the rows."""
    params = KernelParams(kind, lam, mu, normalize)
    a = _forest(trees_a)
    b = None if trees_b is None else _forest(trees_b)
    packed = _packed_gram(a, b, params, n_jobs)
    if normalize:
        a_self = np.diag(packed).copy() if b is None else self_kernels(a, params)
        b_self = a_self if b is None else self_kernels(b, params)
        packed = normalize_gram(packed, a_self, b_self)
    return packed[np.ix_(a.index, (a if b is None else b).index)]


def normalize_gram(gram: np.ndarray, row_self: np.ndarray, column_self: np.ndarray) -> np.ndarray:
    """K(x, y) / sqrt(K(x, x) K(y, y)), 0 where either self kernel is 0."""
    scale = np.sqrt(np.outer(row_self, column_self))
    return np.divide(gram, scale, out=np.zeros_like(gram), where=scale > 0)


def paired_kernel(
    xs: Sequence[Tree],
    ys: Sequence[Tree],
    kind: KernelKind = "ptk",
    lam: float = 0.4,
    mu: float = 0.4,
    normalize: bool = True,
) -> np.ndarray:
    """K(xs[i], ys[i]) for every i (e.g. question tree vs answer tree of each pair)."""
    if len(xs) != len(ys):
        raise ValueError(f"{len(xs)} trees paired with {len(ys)}")
    params = KernelParams(kind, lam, mu, normalize)
    a, b = Forest.build(xs), Forest.build(ys)
    out = np.zeros(len(xs))
    if len(xs) == 0:
        return out
    _fill_pairs(
        kind == "ptk", lam, mu, a.arrays(kind), b.arrays(kind), a.index, b.index, out,
        a.max_nodes, b.max_nodes, max(a.max_children, b.max_children),
    )
    if not normalize:
        return out
    scale = np.sqrt(self_kernels(a, params)[a.index] * self_kernels(b, params)[b.index])
    return np.divide(out, scale, out=np.zeros_like(out), where=scale > 0)


def tree_kernel(
    x: Tree, y: Tree, kind: KernelKind = "ptk", lam: float = 0.4, mu: float = 0.4, normalize: bool = True
) -> float:
    """K(x, y), by default normalised to K(x, y) / sqrt(K(x, x) K(y, y)) (0 when either is 0)."""
    return float(gram_matrix([x], [y], kind=kind, lam=lam, mu=mu, normalize=normalize, n_jobs=1)[0, 0])


def stk(x: Tree, y: Tree, lam: float = 0.4) -> float:
    """Unnormalised Subset Tree Kernel."""
    return tree_kernel(x, y, kind="stk", lam=lam, mu=1.0, normalize=False)


def ptk(x: Tree, y: Tree, lam: float = 0.4, mu: float = 0.4) -> float:
    """Unnormalised Partial Tree Kernel."""
    return tree_kernel(x, y, kind="ptk", lam=lam, mu=mu, normalize=False)


def evaluations(n_rows: int, n_columns: int | None = None) -> int:
    """Kernel evaluations of a Gram matrix (a symmetric one computes its upper triangle)."""
    return n_rows * (n_rows + 1) // 2 if n_columns is None else n_rows * n_columns

