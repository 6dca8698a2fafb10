"""Immutable labelled trees, their bracket notation, and the shallow chunk tree of a sentence.

The shallow tree is the CH representation of Severyn & Moschitti (2013) used in Nicosia's thesis
(chapter 6): ``S -> chunk nodes -> POS-tag nodes -> lemma leaves``. Tree kernels compare these
trees, and REL tagging (``qa_core.structure.rel``) relabels chunk and POS nodes, so the builder keeps,
for every token, the paths of its two parents.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from qa_core.text.nlp import Parsed

NodePath = tuple[int, ...]
"""Child indices from the root to a node; ``()`` is the root."""

# Brackets inside labels would break the notation: escape them the Penn Treebank way.
_ESCAPES = {"(": "-LRB-", ")": "-RRB-"}


def _unescape(token: str) -> str:
    return token.replace(_ESCAPES["("], "(").replace(_ESCAPES[")"], ")")

_BRACKET_TOKEN = re.compile(r"\(|\)|[^\s()]+")


@dataclass(frozen=True, slots=True)
class Tree:
    """A node label and its ordered children; a leaf has no children."""

    label: str
    children: tuple[Tree, ...] = ()

    @property
    def is_leaf(self) -> bool:
        return not self.children

    @property
    def is_preterminal(self) -> bool:
        return bool(self.children) and all(child.is_leaf for child in self.children)

    def production(self) -> str:
        """The grammar rule at this node, ``"NP -> DT NN"`` (what STK matches); ``""`` for a leaf."""
        if self.is_leaf:
            return ""
        return f"{self.label} -> {' '.join(child.label for child in self.children)}"

    def walk(self) -> Iterator[tuple[NodePath, Tree]]:
        """Every node with its path, in pre-order (root first, children left to right)."""
        stack: list[tuple[NodePath, Tree]] = [((), self)]
        while stack:
            path, node = stack.pop()
            yield path, node
            for index in range(len(node.children) - 1, -1, -1):
                stack.append(((*path, index), node.children[index]))

    def nodes(self) -> Iterator[Tree]:
        """Every node in pre-order."""
        for _, node in self.walk():
            yield node

    def size(self) -> int:
        return sum(1 for _ in self.walk())

    def leaves(self) -> list[str]:
        return [node.label for node in self.nodes() if node.is_leaf]

    def node(self, path: NodePath) -> Tree:
        node = self
        for index in path:
            node = node.children[index]
        return node

    def relabel(self, labels: Mapping[NodePath, str]) -> Tree:
        """A copy with the nodes at the given paths renamed; untouched branches are shared."""
        if not labels:
            return self
        return self._relabel((), labels, {path[:depth] for path in labels for depth in range(len(path))})

    def _relabel(self, path: NodePath, labels: Mapping[NodePath, str], ancestors: set[NodePath]) -> Tree:
        children = self.children
        if path in ancestors:
            children = tuple(
                child._relabel((*path, index), labels, ancestors)
                if (*path, index) in ancestors or (*path, index) in labels
                else child
                for index, child in enumerate(children)
            )
        return Tree(labels.get(path, self.label), children)

    def to_bracket(self) -> str:
        """``(S (NP (DT the) (NN cat)))``; a lone leaf is its bare label. Brackets become -LRB-/-RRB-."""
        parts: list[str] = []
        self._write(parts)
        return "".join(parts)

    def _write(self, parts: list[str]) -> None:
        if any(char.isspace() for char in self.label) or not self.label:
            raise ValueError(f"label {self.label!r} cannot be written in bracket notation")
        label = self.label.replace("(", _ESCAPES["("]).replace(")", _ESCAPES[")"])
        if self.is_leaf:
            parts.append(label)
            return
        parts.append(f"({label}")
        for child in self.children:
            parts.append(" ")
            child._write(parts)
        parts.append(")")

    def to_indented(self, indent: str = "  ") -> str:
        """The bracket notation one constituent per line, each child indented under its parent and
        a node whose children are all leaves (a POS tag and its word) kept on one line: what the Ask
        page shows, where a one-line tree of a 30-word answer is unreadable."""
        lines: list[str] = []
        self._indent(0, indent, lines)
        return "\n".join(lines)

    def _indent(self, depth: int, indent: str, lines: list[str]) -> None:
        if self.is_leaf or all(child.is_leaf for child in self.children):
            lines.append(indent * depth + self.to_bracket())
            return
        lines.append(indent * depth + "(" + self.label.replace("(", _ESCAPES["("]).replace(")", _ESCAPES[")"]))
        for child in self.children:
            child._indent(depth + 1, indent, lines)
        lines[-1] += ")"

    @classmethod
    def from_bracket(cls, text: str) -> Tree:
        """Parse bracket notation (also the SVM-light-TK form without spaces between siblings)."""
        tokens = _BRACKET_TOKEN.findall(text)
        if not tokens:
            raise ValueError("empty tree")
        if tokens[0] != "(":
            if len(tokens) == 1:
                return cls(_unescape(tokens[0]))
            raise ValueError(f"tree must start with '(': {text[:60]!r}")
        open_nodes: list[tuple[list[str], list[Tree]]] = []  # ([label] once read, children)
        root: Tree | None = None
        for token in tokens:
            if root is not None:
                raise ValueError(f"text after the end of the tree: {text[:60]!r}")
            if token == "(":
                open_nodes.append(([], []))
            elif token == ")":
                if not open_nodes or not open_nodes[-1][0]:
                    raise ValueError(f"unbalanced ')' or missing label: {text[:60]!r}")
                label, children = open_nodes.pop()
                node = cls(label[0], tuple(children))
                if open_nodes:
                    open_nodes[-1][1].append(node)
                else:
                    root = node
            else:
                label, children = open_nodes[-1]
                word = _unescape(token)
                if label:
                    children.append(cls(word))
                else:
                    label.append(word)
        if root is None:
            raise ValueError(f"unbalanced '(': {text[:60]!r}")
        return root


# ---------------------------------------------------------------------------------------------
# Shallow chunk trees

_VERBAL_POS = frozenset({"AUX", "VERB"})
_NOMINAL_POS = frozenset({"NOUN", "PROPN", "PRON", "NUM"})
_ONE_WORD_CHUNKS = {"ADP": "PP", "ADJ": "ADJP", "ADV": "ADVP"}


@dataclass(frozen=True, slots=True)
class Chunk:
    """A chunk label over the tokens ``[start, end)``."""

    label: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class TokenNodes:
    """Where a token sits in its shallow tree: the chunk (grandparent) and POS (parent) node paths."""

    chunk: NodePath
    pos: NodePath


@dataclass(frozen=True)
class ShallowTree:
    """A shallow tree with its chunks (the children of S, in order) and each token's node paths.

    ``token_nodes[i]`` is None for whitespace tokens, which are left out of the tree.
    """

    tree: Tree
    chunks: tuple[Chunk, ...]
    token_nodes: tuple[TokenNodes | None, ...]


def _is_verbal(parsed: Parsed, index: int) -> bool:
    pos = parsed.pos[index]
    return pos in _VERBAL_POS or (pos == "PART" and parsed.deps[index] == "neg")


def _is_nominal(parsed: Parsed, index: int) -> bool:
    return parsed.pos[index] in _NOMINAL_POS


def chunk(parsed: Parsed) -> list[Chunk]:
    """Shallow chunks of a parsed sentence, left to right, covering every non-whitespace token.

    Mapping (spaCy has noun chunks only, so the other chunk types come from coarse POS, as in the
    CoNLL-2000 chunk set):

    - NP: a spaCy noun chunk; otherwise a run of NOUN/PROPN/PRON/NUM tokens outside noun chunks
      (spaCy leaves e.g. the year in "in 1876" out of its noun chunks).
    - VP: a run of AUX/VERB tokens and negation particles ("has not been written"). A negation with
      no verb in its run is an ADVP.
    - PP: an ADP token (one-word chunk, as shallow chunkers tag prepositions).
    - ADJP / ADVP: an ADJ / ADV token outside noun chunks (one-word chunk).
    - O: any other token (punctuation, conjunctions, determiners outside NPs, ...), one each.

    Whitespace tokens (POS SPACE) belong to no chunk.
    """
    noun_chunk_ends = dict(parsed.noun_chunks)
    chunks: list[Chunk] = []
    index, count = 0, len(parsed.tokens)
    while index < count:
        pos = parsed.pos[index]
        if pos == "SPACE":
            index += 1
            continue
        if index in noun_chunk_ends:
            end = noun_chunk_ends[index]
            chunks.append(Chunk("NP", index, end))
            index = end
            continue
        if _is_verbal(parsed, index) or pos in _NOMINAL_POS:
            run_test = _is_verbal if _is_verbal(parsed, index) else _is_nominal
            end = index + 1
            while end < count and end not in noun_chunk_ends and run_test(parsed, end):
                end += 1
            if run_test is _is_nominal:
                chunks.append(Chunk("NP", index, end))
            elif any(parsed.pos[i] in _VERBAL_POS for i in range(index, end)):
                chunks.append(Chunk("VP", index, end))
            else:
                chunks.extend(Chunk("ADVP", i, i + 1) for i in range(index, end))
            index = end
            continue
        chunks.append(Chunk(_ONE_WORD_CHUNKS.get(pos, "O"), index, index + 1))
        index += 1
    return chunks


def _leaf_label(lemma: str) -> str:
    # Bracket notation cannot hold whitespace inside a label.
    return "_".join(lemma.lower().split()) or "_"


def build_shallow_tree(parsed: Parsed, max_tokens: int | None = None) -> ShallowTree:
    """S -> chunk nodes -> fine-grained POS-tag nodes (NN, VBZ) -> lowercased lemma leaves.

    ``max_tokens`` keeps the first tokens only (the kernels' cost grows with the product of two
    trees' sizes, and a pasted page would dwarf every sentence it is compared with).
    """
    chunks = chunk(parsed)
    if max_tokens is not None:
        chunks = [Chunk(c.label, c.start, min(c.end, max_tokens)) for c in chunks if c.start < max_tokens]
    token_nodes: list[TokenNodes | None] = [None] * len(parsed.tokens)
    chunk_trees: list[Tree] = []
    for chunk_index, span in enumerate(chunks):
        pos_trees: list[Tree] = []
        for token in range(span.start, span.end):
            if parsed.pos[token] == "SPACE":
                continue
            token_nodes[token] = TokenNodes((chunk_index,), (chunk_index, len(pos_trees)))
            pos_trees.append(Tree(parsed.tags[token], (Tree(_leaf_label(parsed.lemmas[token])),)))
        chunk_trees.append(Tree(span.label, tuple(pos_trees)))
    return ShallowTree(Tree("S", tuple(chunk_trees)), tuple(chunks), tuple(token_nodes))
