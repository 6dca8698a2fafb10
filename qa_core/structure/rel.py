"""REL tagging: mark the question/answer shallow-tree nodes that are linked across the pair.

Tree kernels compare question with question and answer with answer, so the link between a question
and its answer must be written into the trees themselves (Severyn & Moschitti 2013; Nicosia 2018,
chapter 6):

- lexical REL: a question token and an answer token with the same lowercased lemma (neither a
  stopword nor punctuation; the rule is ``qa_core.text.links.lexical_links``) get "REL-" prepended
  to their POS node and their chunk node, in both trees (REL-NN, REL-NP). Leaves are never tagged.
- focus REL: the chunk holding the question focus word is linked to every answer chunk holding a
  named entity whose type fits the question class; both chunk nodes are renamed
  "REL-FOCUS-<CLASS>" (this replaces a lexical REL- tag on the same chunk).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from qa_core.structure.trees import NodePath, ShallowTree, Tree, build_shallow_tree
from qa_core.text.links import Link, lexical_links

if TYPE_CHECKING:
    from qa_core.text.nlp import Parsed

_ENTY_TYPES = frozenset({"NORP", "ORG", "FAC", "PRODUCT", "EVENT", "WORK_OF_ART", "LAW", "LANGUAGE"})
_NUM_TYPES = frozenset({"DATE", "TIME", "PERCENT", "QUANTITY", "ORDINAL", "CARDINAL", "MONEY"})

CLASS_ENTITY_TYPES: dict[str, frozenset[str]] = {
    "HUM": frozenset({"PERSON"}),
    "LOC": frozenset({"LOC", "GPE"}),
    "NUM": _NUM_TYPES,
    "ENTY": _ENTY_TYPES,
    "DESC": _ENTY_TYPES | _NUM_TYPES,
    "ABBR": _ENTY_TYPES,
}
"""Question class -> spaCy (OntoNotes) entity types an answer must hold (thesis Table 6.5)."""

REL_PREFIX = "REL-"


FocusAndClass = Callable[["Parsed"], tuple[int | None, str | None]]
"""Question -> (focus token index in the spaCy parse, coarse UIUC class); either may be None.

The focus/class source is injectable: ``heuristic_focus_and_class`` (wh-word rules) by default, or a
``qa_core.classifiers.analysis.QuestionAnalyzer`` (the trained class CNN and focus tagger), which is
callable in this shape (the focus is an index into the spaCy tokens of the ``Parsed`` it receives)."""


@dataclass(frozen=True)
class RelTagged:
    """Both REL-tagged trees, the links behind the tags, and the focus/class that were used."""

    question: Tree
    answer: Tree
    links: list[Link]
    focus: int | None
    qclass: str | None


def _rel(label: str) -> str:
    return label if label.startswith(REL_PREFIX) else REL_PREFIX + label


def _focus_links(q: ShallowTree, a_parsed: Parsed, a: ShallowTree, focus: int, qclass: str) -> list[Link]:
    """Focus chunk -> each answer chunk overlapping an entity of a type that fits the class."""
    focus_nodes = q.token_nodes[focus] if 0 <= focus < len(q.token_nodes) else None
    if focus_nodes is None:
        return []
    focus_chunk = q.chunks[focus_nodes.chunk[0]]
    wanted = CLASS_ENTITY_TYPES.get(qclass, frozenset())
    links: list[Link] = []
    for chunk in a.chunks:
        entity = next(
            (label for start, end, label in a_parsed.ents if label in wanted and start < chunk.end and chunk.start < end),
            None,
        )
        if entity is not None:
            links.append(
                Link(focus_chunk.start, focus_chunk.end, chunk.start, chunk.end, f"REL-FOCUS-{qclass}", entity)
            )
    return links


def rel_tag(
    q: Parsed, a: Parsed, focus: int | None = None, qclass: str | None = None, *, max_tokens: int | None = None
) -> RelTagged:
    """Shallow trees of a question/answer pair with REL tags, and the links they encode.

    Lexical links always; focus links when both ``focus`` and ``qclass`` are given (the thesis's
    +F; without them this is CH+V's lexical REL alone). ``max_tokens`` caps each tree (see
    ``build_shallow_tree``); links beyond the cap are kept but tag nothing.
    """
    q_tree, a_tree = build_shallow_tree(q, max_tokens), build_shallow_tree(a, max_tokens)
    lexical = lexical_links(q, a)
    focus_links = _focus_links(q_tree, a, a_tree, focus, qclass) if focus is not None and qclass else []

    q_labels: dict[NodePath, str] = {}
    a_labels: dict[NodePath, str] = {}
    for link in lexical:
        q_nodes, a_nodes = q_tree.token_nodes[link.q_start], a_tree.token_nodes[link.a_start]
        if q_nodes is None or a_nodes is None:
            continue
        for shallow, labels, nodes in ((q_tree, q_labels, q_nodes), (a_tree, a_labels, a_nodes)):
            for path in (nodes.pos, nodes.chunk):
                labels[path] = _rel(labels.get(path, shallow.tree.node(path).label))
    for link in focus_links:
        q_labels[_chunk_path(q_tree, link.q_start)] = link.kind
        a_labels[_chunk_path(a_tree, link.a_start)] = link.kind
    return RelTagged(
        question=q_tree.tree.relabel(q_labels),
        answer=a_tree.tree.relabel(a_labels),
        links=lexical + focus_links,
        focus=focus,
        qclass=qclass,
    )


def _chunk_path(shallow: ShallowTree, chunk_start: int) -> NodePath:
    return next((index,) for index, chunk in enumerate(shallow.chunks) if chunk.start == chunk_start)


def linked_tokens(links: list[Link], side: str, length: int) -> list[float]:
    """1.0 for every token of ``side`` ("question" or "answer") inside a link, else 0.0."""
    weights = [0.0] * length
    for link in links:
        start, end = (link.q_start, link.q_end) if side == "question" else (link.a_start, link.a_end)
        for index in range(start, min(end, length)):
            weights[index] = 1.0
    return weights


# ---------------------------------------------------------------------------------------------
# The app's entry point


def analyze(q: Parsed, analyzer: FocusAndClass | None = None) -> tuple[int | None, str | None]:
    """(focus, class) of a parsed question from ``analyzer``, else the wh-word rules."""
    return (analyzer or heuristic_focus_and_class)(q)


# ---------------------------------------------------------------------------------------------
# Heuristic focus and class (a stand-in for the CNN focus tagger and question classifier)

_WH_CLASSES = {"who": "HUM", "whom": "HUM", "whose": "HUM", "where": "LOC", "when": "NUM", "why": "DESC"}
_HOW_NUM = frozenset(
    {"many", "much", "long", "old", "far", "tall", "high", "big", "large", "often", "deep", "wide", "fast"}
)
# Head nouns after what/which/name that decide the class; any other noun means ENTY.
FOCUS_NOUN_CLASSES: dict[str, str] = {
    **dict.fromkeys(
        (
            "person", "people", "man", "woman", "author", "writer", "president", "leader", "king",
            "queen", "actor", "actress", "singer", "founder", "inventor", "player", "director",
            "composer", "painter", "scientist", "poet", "emperor",
        ),
        "HUM",
    ),
    **dict.fromkeys(
        (
            "city", "country", "state", "place", "capital", "continent", "river", "mountain", "island",
            "town", "region", "location", "nation", "county", "lake", "ocean", "province",
        ),
        "LOC",
    ),
    **dict.fromkeys(
        (
            "year", "date", "population", "number", "age", "percentage", "percent", "amount", "cost",
            "price", "day", "month", "century", "distance", "height", "length", "size", "temperature",
            "speed",
        ),
        "NUM",
    ),
}  # fmt: skip


def _first_noun(q: Parsed, after: int) -> int | None:
    return next((i for i in range(after + 1, len(q.tokens)) if q.pos[i] == "NOUN"), None)


def heuristic_focus_and_class(q: Parsed) -> tuple[int | None, str | None]:
    """(focus token index, coarse class) of a question from wh-word rules.

    - who/whom/whose -> HUM, where -> LOC, when -> NUM; the focus is the wh-word itself.
    - why -> DESC, no focus (nothing in an answer names a reason).
    - how + many/much/long/old/far/... -> NUM; the focus is the first common noun after it
      ("How many followers"), else the quantity word ("How long"). Any other how -> DESC, no focus.
    - what/which (or an imperative "Name ...") -> the focus is the first common noun after it; the
      class comes from FOCUS_NOUN_CLASSES (person/author -> HUM, city/country -> LOC, year/population
      -> NUM), else ENTY. With no common noun ("What is Wicca?") -> DESC, no focus.
    - anything else -> (None, None).
    """
    words = [token.lower() for token in q.tokens]
    for index, word in enumerate(words):
        if word in _WH_CLASSES:
            return (None if word == "why" else index), _WH_CLASSES[word]
        if word == "how":
            if index + 1 < len(words) and words[index + 1] in _HOW_NUM:
                noun = _first_noun(q, index + 1)
                return (index + 1 if noun is None else noun), "NUM"
            return None, "DESC"
        if word in ("what", "which") or (word == "name" and index == 0):
            noun = _first_noun(q, index)
            if noun is None:
                return None, "DESC"
            return noun, FOCUS_NOUN_CLASSES.get(q.lemmas[noun].lower(), "ENTY")
    return None, None
