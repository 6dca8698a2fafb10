"""The benchmark formats: WikiQA folders, TrecQA's QApairs XML and SemEval 2016 task 3's XML, each
read whole into a ``Dataset`` (or an ``InputError`` naming the file and line)."""

from __future__ import annotations

import dataclasses
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from qa_core.data.reading import GoldByText, add_question, failer, read_lines, split_from_name, split_key
from qa_core.text import truecasing
from qa_core.types import (
    Candidate,
    Dataset,
    InputError,
    Question,
)

WIKIQA_FILES: tuple[str, ...] = ("a.toks", "b.toks", "sim.txt", "id.txt")
# Candidate sources (formats) whose question pools are each one document, in its order: a WikiQA
# pool is the summary sentences of one Wikipedia page (the files name no page, but the pool is it).
DOCUMENT_POOLS = frozenset({"wikiqa"})


def _wikiqa_split_dirs(root: Path) -> list[Path]:
    if not root.is_dir():
        raise InputError("expected a WikiQA folder (train/dev/test subfolders or one split folder)", path=str(root))
    if any((root / name).exists() for name in WIKIQA_FILES):
        return [root]
    splits = [d for d in root.iterdir() if d.is_dir() and any((d / name).exists() for name in WIKIQA_FILES)]
    if not splits:
        raise InputError(f"no WikiQA split folder holding {', '.join(WIKIQA_FILES)}", path=str(root))
    return sorted(splits, key=lambda d: split_key(d.name.lower()))


def _wikiqa_split(folder: Path, source: str) -> list[Question]:
    for name in WIKIQA_FILES:
        if not (folder / name).is_file():
            raise InputError(f"missing {name} (a WikiQA split needs {', '.join(WIKIQA_FILES)})", path=str(folder / name))
    columns = {name: read_lines(folder / name) for name in WIKIQA_FILES}
    expected = len(columns["a.toks"])
    for name, lines in columns.items():
        if len(lines) != expected:
            raise InputError(
                f"{len(lines)} lines but a.toks has {expected}: the four files must be line-aligned",
                path=str(folder / name),
                line=min(len(lines), expected) + 1,
            )
    split = folder.name.lower()
    questions: dict[str, Question] = {}
    first_line: dict[str, int] = {}
    gold = GoldByText()
    rows = zip(columns["a.toks"], columns["b.toks"], columns["sim.txt"], columns["id.txt"])
    for number, (question_text, candidate_text, sim, raw_id) in enumerate(rows, start=1):
        raw_id, sim = raw_id.strip(), sim.strip()
        question_text, candidate_text = question_text.strip(), candidate_text.strip()
        if not raw_id or any(c.isspace() for c in raw_id):
            raise InputError(f"expected one question id, got {raw_id!r}", path=str(folder / "id.txt"), line=number)
        if sim not in ("0", "1"):
            raise InputError(f"expected label 0 or 1, got {sim!r}", path=str(folder / "sim.txt"), line=number)
        for name, text in (("a.toks", question_text), ("b.toks", candidate_text)):
            if not text:
                raise InputError("empty line", path=str(folder / name), line=number)
        # Ids restart at 1 in every split: the split prefix keeps them unique in one dataset.
        qid = f"{split}-{raw_id}"
        question = questions.get(qid)
        if question is None:
            question = questions[qid] = Question(qid=qid, text=question_text, split=split)
            first_line[qid] = number
        elif question.text != question_text:
            raise InputError(
                f"question id {raw_id} has a different question on line {first_line[qid]}",
                path=str(folder / "a.toks"),
                line=number,
            )
        gold.check(qid, candidate_text, int(sim), number, failer(folder / "sim.txt", number))
        doc_id = f"{qid}-{len(question.candidates)}"
        question.candidates.append(
            Candidate(doc_id=doc_id, text=candidate_text, label=int(sim), source=source, positional_id=True)
        )
    return list(questions.values())


def load_wikiqa(path: str | Path, name: str = "wikiqa", restore_case: bool | None = None) -> Dataset:
    """WikiQA as prepared by castorini: line-aligned a.toks, b.toks, sim.txt, id.txt per split folder.

    ``path`` is the folder holding train/dev/test (any split folder name is used as the split) or
    one split folder. Question ids are ``f"{split}-{id}"``, candidate ids ``f"{qid}-{index}"``.
    castorini's release is lowercased; ``restore_case`` (default: when no text has an uppercase
    letter) puts the case back with a statistical truecaser, token by token, because spaCy's
    tagger and entity recogniser need it (``qa_core.text.truecasing``).
    """
    root = Path(path)
    questions: dict[str, Question] = {}
    for folder in _wikiqa_split_dirs(root):
        for question in _wikiqa_split(folder, source="wikiqa"):
            add_question(questions, question, folder / "id.txt", None)
    found = list(questions.values())
    texts = [text for q in found for text in (q.text, *(c.text for c in q.candidates))]
    if restore_case is None:
        restore_case = truecasing.is_lowercased(texts)
    if restore_case:
        found = _with_case_restored(found, texts)
    return Dataset(name=name, questions=found, source=str(root))


def _with_case_restored(questions: list[Question], texts: list[str]) -> list[Question]:
    """The questions with every text truecased (whitespace-tokenised texts, so split on spaces)."""
    distinct = list(dict.fromkeys(texts))
    restored = truecasing.restore_case([text.split() for text in distinct])
    cased = {text: " ".join(tokens) for text, tokens in zip(distinct, restored)}
    return [
        dataclasses.replace(
            q, text=cased[q.text], candidates=[dataclasses.replace(c, text=cased[c.text]) for c in q.candidates]
        )
        for q in questions
    ]


# ----------------------------------------------------------------------------------------- TrecQA

# TrecQA files are pseudo-XML, not XML: there is no single root element and tokens hold raw '&'
# and '<', so any XML parser rejects them. Tags always stand alone on their lines, which makes a
# line-by-line state machine both sufficient and exact about line numbers.
_TAG = re.compile(r"^<(/?)([A-Za-z_][\w.-]*)((?:\s[^<>]*)?)>$")
_QAPAIRS_ID = re.compile(r"""^\s+id\s*=\s*(['"])([^'"]+)\1\s*$""")
_BLOCK_LABELS = {"question": None, "positive": 1, "negative": 0}


class _TrecQAReader:
    """One TrecQA file read line by line: the open <QApairs> and the open <question>/<positive>/
    <negative> block, each with the line it opened on."""

    def __init__(self, path: Path, source: str) -> None:
        self.path, self.source, self.split = path, source, path.stem.lower()
        self.found: list[tuple[int, Question]] = []
        self.pair: Question | None = None  # the open <QApairs>
        self.pair_line = 0
        self.block: str | None = None  # the open <question>/<positive>/<negative>
        self.block_line = 0
        self.tokens: str | None = None  # the first line of the open block
        self.gold = GoldByText()

    def fail(self, message: str, line: int) -> InputError:
        return InputError(message, path=str(self.path), line=line)

    def read(self) -> list[tuple[int, Question]]:
        """(line of <QApairs>, question) for every block of the file."""
        for number, line in enumerate(read_lines(self.path), start=1):
            tag = _TAG.match(line.strip())
            if self.block is not None:
                self._in_block(number, line, tag)
            elif line.strip():
                self._between_blocks(number, line, tag)
        if self.block is not None:
            raise self.fail(f"<{self.block}> is never closed", self.block_line)
        if self.pair is not None:
            raise self.fail(f"<QApairs id='{self.pair.qid}'> is never closed", self.pair_line)
        if not self.found:
            raise self.fail("no <QApairs> blocks", 1)
        return self.found

    def _in_block(self, number: int, line: str, tag: re.Match[str] | None) -> None:
        block = self.block
        if tag is None:
            if self.tokens is None:
                self.tokens = " ".join(line.split())
                if not self.tokens:
                    raise self.fail(f"<{block}> must start with its tab-separated tokens", number)
            return  # POS tags, dependencies, heads, NE tags, answer spans: not used
        closing, tag_name = tag.group(1), tag.group(2)
        if closing and tag_name == block:
            self._close_block(number)
            return
        if tag_name in _BLOCK_LABELS or tag_name == "QApairs":
            raise self.fail(f"<{block}> opened on line {self.block_line} is not closed before <{closing}{tag_name}>", number)
        raise self.fail(f"unknown tag <{closing}{tag_name}>", number)

    def _close_block(self, number: int) -> None:
        block, pair, tokens = self.block, self.pair, self.tokens
        if tokens is None:
            raise self.fail(f"empty <{block}> block", number)
        assert pair is not None and block is not None
        if block == "question":
            if pair.text:
                raise self.fail(f"second <question> in <QApairs id='{pair.qid}'>", self.block_line)
            pair.text = tokens
        else:
            self.gold.check(pair.qid, tokens, _BLOCK_LABELS[block], self.block_line, failer(self.path, self.block_line))
            doc_id = f"{pair.qid}-{len(pair.candidates)}"
            pair.candidates.append(
                Candidate(doc_id, tokens, label=_BLOCK_LABELS[block], source=self.source, positional_id=True)
            )
        self.block, self.tokens = None, None

    def _between_blocks(self, number: int, line: str, tag: re.Match[str] | None) -> None:
        pair = self.pair
        if tag is None:
            where = f"<QApairs id='{pair.qid}'>" if pair else "a <QApairs> block"
            raise self.fail(f"text outside a <question>/<positive>/<negative> block of {where}", number)
        closing, tag_name, attributes = tag.groups()
        if pair is None:
            if tag_name != "QApairs" or closing:
                raise self.fail(f"expected <QApairs id='...'>, got {line.strip()!r}", number)
            qid = _QAPAIRS_ID.match(attributes)
            if qid is None:
                raise self.fail("<QApairs> needs an id attribute: <QApairs id='1.4'>", number)
            self.pair, self.pair_line = Question(qid=qid.group(2), text="", split=self.split), number
        elif tag_name in _BLOCK_LABELS and not closing:
            self.block, self.block_line = tag_name, number
        elif tag_name == "QApairs" and closing:
            if not pair.text:
                raise self.fail(f"<QApairs id='{pair.qid}'> has no <question>", self.pair_line)
            self.found.append((self.pair_line, pair))
            self.pair = None
        elif tag_name == "QApairs":
            raise self.fail(f"<QApairs> opened on line {self.pair_line} is not closed", number)
        else:
            raise self.fail(f"unknown or misplaced tag {line.strip()!r}", number)


def _xml_files(path: Path) -> list[Path]:
    """The file itself, or the *.xml files of a folder, train/dev/test first."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise InputError("no such file or folder", path=str(path))
    files = [f for f in path.iterdir() if f.is_file() and f.suffix.lower() == ".xml"]
    if not files:
        raise InputError("no .xml files in this folder", path=str(path))
    return sorted(files, key=lambda f: split_key(f.stem.lower()))


def load_trecqa(path: str | Path, name: str = "trecqa") -> Dataset:
    """TrecQA (Yao et al. 2013 format): a folder of TRAIN/DEV/TEST.xml, or one file.

    The split is the file's lowercase stem. Question text and candidates keep only each block's
    token line (tokens joined by spaces); <positive> is label 1, <negative> 0.
    """
    root = Path(path)
    questions: dict[str, Question] = {}
    for file in _xml_files(root):
        for line, question in _TrecQAReader(file, source="trecqa").read():
            add_question(questions, question, file, line)
    return Dataset(name=name, questions=list(questions.values()), source=str(root))


# -------------------------------------------------------------------------------- SemEval 2016 T3

_SEMEVAL_LABELS = {"PerfectMatch": 1, "Relevant": 1, "Irrelevant": 0}
# defusedxml is not installed and expat would expand internal entities (exponential "billion
# laughs" blow-up); SemEval files never declare any, so a DOCTYPE or ENTITY is refused unparsed.
_DECLARATION = re.compile(r"<!\s*(DOCTYPE|ENTITY)", re.IGNORECASE)


def _parse_xml(path: Path) -> tuple[ET.Element, dict[ET.Element, int]]:
    """The root element and the line of every element's start tag (for error messages)."""
    lines = read_lines(path)
    for number, line in enumerate(lines, start=1):
        declaration = _DECLARATION.search(line)
        if declaration:
            raise InputError(
                f"<!{declaration.group(1).upper()}> declarations are refused (entity expansion is unsafe without defusedxml)",
                path=str(path),
                line=number,
            )
    parser = ET.XMLPullParser(events=("start",))
    element_lines: dict[ET.Element, int] = {}
    try:
        # Fed a line at a time, each start event comes out right after the line that holds its tag.
        for number, line in enumerate(lines, start=1):
            parser.feed(line + "\n")
            for _, element in parser.read_events():
                element_lines[element] = number
        parser.close()
    except ET.ParseError as error:
        line, column = error.position
        message = re.sub(r": line \d+, column \d+$", "", str(error))
        raise InputError(f"malformed XML: {message} (column {column + 1})", path=str(path), line=line) from None
    root = next(iter(element_lines))
    return root, element_lines


def _child_text(element: ET.Element, tag: str) -> str:
    child = element.find(tag)
    return " ".join((child.text or "").split()) if child is not None else ""


def _joined(*parts: str) -> str:
    return " ".join(part for part in parts if part)


def _semeval_file(path: Path, source: str, questions: dict[str, Question]) -> None:
    """Add one file's original questions (merged by ORGQ_ID) and their related questions."""
    root, lines = _parse_xml(path)
    split = split_from_name(path.stem)

    def fail(message: str, element: ET.Element) -> InputError:
        return InputError(message, path=str(path), line=lines[element])

    def attribute(element: ET.Element, name: str) -> str:
        value = (element.get(name) or "").strip()
        if not value:
            raise fail(f"<{element.tag}> has no {name} attribute", element)
        return value

    originals = list(root.iter("OrgQuestion"))
    gold = GoldByText()
    if not originals:
        raise fail("no <OrgQuestion> elements: not a SemEval 2016 Task 3 file", root)
    for original in originals:
        qid = attribute(original, "ORGQ_ID")
        text = _joined(_child_text(original, "OrgQSubject"), _child_text(original, "OrgQBody"))
        if not text:
            raise fail(f"question {qid} has an empty OrgQSubject and OrgQBody", original)
        question = questions.setdefault(qid, Question(qid=qid, text=text, split=split))
        if question.split != split:
            raise fail(f"question {qid} is already in split {question.split!r}", original)
        seen = {c.doc_id for c in question.candidates}
        for related in original.iterfind("Thread/RelQuestion"):
            doc_id = attribute(related, "RELQ_ID")
            if doc_id in seen:
                raise fail(f"duplicate RELQ_ID {doc_id} for question {qid}", related)
            order = attribute(related, "RELQ_RANKING_ORDER")
            if not order.isdigit() or int(order) < 1:
                raise fail(f"RELQ_RANKING_ORDER must be a positive integer, got {order!r}", related)
            relevance = attribute(related, "RELQ_RELEVANCE2ORGQ")
            if relevance not in _SEMEVAL_LABELS:
                raise fail(
                    f"unknown RELQ_RELEVANCE2ORGQ {relevance!r} (expected {', '.join(_SEMEVAL_LABELS)})", related
                )
            candidate_text = _joined(_child_text(related, "RelQSubject"), _child_text(related, "RelQBody"))
            if not candidate_text:
                raise fail(f"related question {doc_id} has an empty RelQSubject and RelQBody", related)
            gold.check(qid, candidate_text, _SEMEVAL_LABELS[relevance], lines[related], failer(path, lines[related]))
            seen.add(doc_id)
            question.candidates.append(
                Candidate(doc_id, candidate_text, label=_SEMEVAL_LABELS[relevance], first_stage_rank=int(order), source=source)
            )


def load_semeval(path: str | Path, name: str = "semeval") -> Dataset:
    """SemEval 2016 Task 3 subtask B (question-question) XML: one file, or a folder of them.

    Original question = OrgQSubject + OrgQBody; candidates are the RelQuestion elements of its
    threads (subject + body, doc_id RELQ_ID, first-stage rank RELQ_RANKING_ORDER); PerfectMatch and
    Relevant are label 1, Irrelevant 0. OrgQuestion elements repeating an ORGQ_ID (one per thread
    in the released files) are merged. The split comes from the file name (train unless it says
    dev or test).
    """
    root = Path(path)
    questions: dict[str, Question] = {}
    for file in _xml_files(root):
        _semeval_file(file, "semeval", questions)
    for question in questions.values():
        question.candidates.sort(key=lambda c: (c.first_stage_rank, c.doc_id))
    return Dataset(name=name, questions=list(questions.values()), source=str(root))

