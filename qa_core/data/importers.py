"""Importers: benchmark formats and user files -> ``Dataset``; TREC run and qrels readers.

Every loader reads its whole input before returning, and any malformed input raises
``InputError`` naming the file and (where one exists) the line, so the CLI and pages can show the
user what to fix; nothing partial is ever returned.

Question ids must be unique within a dataset and candidate ids unique within a question: the store
and the TREC exporters key on them. Where a file has no candidate ids, the id made up from the
position is marked (``Candidate.positional_id``), and the store knows such a candidate by its
question and text instead. The same text twice in one question with different gold labels is
refused: the file must say which label holds.
"""

from __future__ import annotations

import codecs
import csv
import dataclasses
import gzip
import hashlib
import io
import json
import math
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import ir_measures

from qa_core import config, ordering
from qa_core.text import truecasing
from qa_core.types import (
    MAX_CANDIDATE_CHARS,
    MAX_NAME_CHARS,
    MAX_QUESTION_CHARS,
    Candidate,
    Dataset,
    InputError,
    Question,
)

FORMATS: tuple[str, ...] = ("wikiqa", "trecqa", "semeval", "csv", "jsonl")
WIKIQA_FILES: tuple[str, ...] = ("a.toks", "b.toks", "sim.txt", "id.txt")
GZIP_MAGIC = b"\x1f\x8b"
PAIRS_DEFAULT_SPLIT = "train"  # same default as ``Question.split``: an imported file is training data unless it says otherwise
MAX_LABEL = 4

_SPLIT_ORDER = ("train", "dev", "test")
_SNIFF_BYTES = 65536


# ---------------------------------------------------------------------------------------- reading


def read_text(path: Path) -> str:
    """The UTF-8 text of a user file (gunzipped when it is gzip, a leading BOM dropped).

    Missing, empty, binary (NUL bytes: also what a UTF-16 file looks like) and non-UTF-8 files
    raise ``InputError`` with the line of the first offending byte.
    """
    if path.is_dir():
        raise InputError("is a folder; expected a file", path=str(path))
    if not path.is_file():
        raise InputError("file not found", path=str(path))
    data = path.read_bytes()
    if data.startswith(GZIP_MAGIC):  # the exporters write .gz when the path asks for it
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as error:
            raise InputError(f"corrupt gzip file: {error}", path=str(path)) from None
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    if not data.strip():
        raise InputError("file is empty", path=str(path))
    nul = data.find(b"\x00")
    if nul >= 0:
        raise InputError(
            "binary file (NUL byte found); expected UTF-8 text (UTF-16 files must be re-saved as UTF-8)",
            path=str(path),
            line=data.count(b"\n", 0, nul) + 1,
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(
            f"not UTF-8 text (byte 0x{data[error.start]:02x}); re-save the file as UTF-8",
            path=str(path),
            line=data.count(b"\n", 0, error.start) + 1,
        ) from None


def read_lines(path: Path) -> list[str]:
    """The file's lines, split on newlines only.

    ``str.splitlines`` also splits on form feeds and U+2028, which occur inside sentences and would
    shift line numbers (and break line-aligned formats such as WikiQA).
    """
    return _split_lines(read_text(path))


def _split_lines(text: str) -> list[str]:
    lines = text.replace("\r\n", "\n").split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def _split_key(split: str) -> tuple[int, str]:
    """Sort key putting train, dev, test first, then any other split by name."""
    return (_SPLIT_ORDER.index(split) if split in _SPLIT_ORDER else len(_SPLIT_ORDER), split)


def _split_from_name(stem: str) -> str:
    """'SemEval2016-Task3-CQA-QL-dev' -> 'dev'; names without train/dev/test count as train."""
    lowered = stem.lower()
    for split in ("test", "dev", "train"):
        if split in lowered:
            return split
    return "train"


class _GoldByText:
    """The first gold label (and its line) of every candidate text of a question: the same text
    again with another label contradicts it, and a model cannot learn both."""

    def __init__(self) -> None:
        self._first: dict[tuple[str, str], tuple[int | None, int | None]] = {}

    def check(self, qid: str, text: str, label: int | None, line: int | None, fail: Callable[[str], InputError]) -> None:
        first_label, first_line = self._first.setdefault((qid, text), (label, line))
        if first_label != label:
            where = f" on line {first_line}" if first_line is not None else ""
            raise fail(
                f"candidate {_excerpt(text)} of question {qid} has gold label {label} here but {first_label}{where}; "
                "one text cannot be both"
            )


def _excerpt(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")


def _add_question(questions: dict[str, Question], question: Question, path: Path, line: int | None) -> None:
    if question.qid in questions:
        raise InputError(f"duplicate question id {question.qid!r}", path=str(path), line=line)
    questions[question.qid] = question


# ----------------------------------------------------------------------------------------- WikiQA


def _wikiqa_split_dirs(root: Path) -> list[Path]:
    if not root.is_dir():
        raise InputError("expected a WikiQA folder (train/dev/test subfolders or one split folder)", path=str(root))
    if any((root / name).exists() for name in WIKIQA_FILES):
        return [root]
    splits = [d for d in root.iterdir() if d.is_dir() and any((d / name).exists() for name in WIKIQA_FILES)]
    if not splits:
        raise InputError(f"no WikiQA split folder holding {', '.join(WIKIQA_FILES)}", path=str(root))
    return sorted(splits, key=lambda d: _split_key(d.name.lower()))


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
    gold = _GoldByText()
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
        gold.check(qid, candidate_text, int(sim), number, _failer(folder / "sim.txt", number))
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
            _add_question(questions, question, folder / "id.txt", None)
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


def _trecqa_file(path: Path, source: str) -> list[tuple[int, Question]]:
    """(line of <QApairs>, question) for every block of one TrecQA file."""
    split = path.stem.lower()
    found: list[tuple[int, Question]] = []
    pair: Question | None = None  # the open <QApairs>
    pair_line = 0
    block: str | None = None  # the open <question>/<positive>/<negative>
    block_line = 0
    tokens: str | None = None  # the first line of the open block
    gold = _GoldByText()

    def fail(message: str, line: int) -> InputError:
        return InputError(message, path=str(path), line=line)

    for number, line in enumerate(read_lines(path), start=1):
        tag = _TAG.match(line.strip())
        if block is not None:
            if tag is None:
                if tokens is None:
                    tokens = " ".join(line.split())
                    if not tokens:
                        raise fail(f"<{block}> must start with its tab-separated tokens", number)
                continue  # POS tags, dependencies, heads, NE tags, answer spans: not used
            closing, tag_name = tag.group(1), tag.group(2)
            if closing and tag_name == block:
                if tokens is None:
                    raise fail(f"empty <{block}> block", number)
                assert pair is not None
                if block == "question":
                    if pair.text:
                        raise fail(f"second <question> in <QApairs id='{pair.qid}'>", block_line)
                    pair.text = tokens
                else:
                    gold.check(pair.qid, tokens, _BLOCK_LABELS[block], block_line, _failer(path, block_line))
                    doc_id = f"{pair.qid}-{len(pair.candidates)}"
                    pair.candidates.append(
                        Candidate(doc_id, tokens, label=_BLOCK_LABELS[block], source=source, positional_id=True)
                    )
                block, tokens = None, None
                continue
            if tag_name in _BLOCK_LABELS or tag_name == "QApairs":
                raise fail(f"<{block}> opened on line {block_line} is not closed before <{tag.group(1)}{tag_name}>", number)
            raise fail(f"unknown tag <{tag.group(1)}{tag_name}>", number)
        if not line.strip():
            continue
        if tag is None:
            where = f"<QApairs id='{pair.qid}'>" if pair else "a <QApairs> block"
            raise fail(f"text outside a <question>/<positive>/<negative> block of {where}", number)
        closing, tag_name, attributes = tag.groups()
        if pair is None:
            if tag_name != "QApairs" or closing:
                raise fail(f"expected <QApairs id='...'>, got {line.strip()!r}", number)
            qid = _QAPAIRS_ID.match(attributes)
            if qid is None:
                raise fail("<QApairs> needs an id attribute: <QApairs id='1.4'>", number)
            pair, pair_line = Question(qid=qid.group(2), text="", split=split), number
        elif tag_name in _BLOCK_LABELS and not closing:
            block, block_line = tag_name, number
        elif tag_name == "QApairs" and closing:
            if not pair.text:
                raise fail(f"<QApairs id='{pair.qid}'> has no <question>", pair_line)
            found.append((pair_line, pair))
            pair = None
        elif tag_name == "QApairs":
            raise fail(f"<QApairs> opened on line {pair_line} is not closed", number)
        else:
            raise fail(f"unknown or misplaced tag {line.strip()!r}", number)
    if block is not None:
        raise fail(f"<{block}> is never closed", block_line)
    if pair is not None:
        raise fail(f"<QApairs id='{pair.qid}'> is never closed", pair_line)
    if not found:
        raise fail("no <QApairs> blocks", 1)
    return found


def _xml_files(path: Path) -> list[Path]:
    """The file itself, or the *.xml files of a folder, train/dev/test first."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise InputError("no such file or folder", path=str(path))
    files = [f for f in path.iterdir() if f.is_file() and f.suffix.lower() == ".xml"]
    if not files:
        raise InputError("no .xml files in this folder", path=str(path))
    return sorted(files, key=lambda f: _split_key(f.stem.lower()))


def load_trecqa(path: str | Path, name: str = "trecqa") -> Dataset:
    """TrecQA (Yao et al. 2013 format): a folder of TRAIN/DEV/TEST.xml, or one file.

    The split is the file's lowercase stem. Question text and candidates keep only each block's
    token line (tokens joined by spaces); <positive> is label 1, <negative> 0.
    """
    root = Path(path)
    questions: dict[str, Question] = {}
    for file in _xml_files(root):
        for line, question in _trecqa_file(file, source="trecqa"):
            _add_question(questions, question, file, line)
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
    split = _split_from_name(path.stem)

    def fail(message: str, element: ET.Element) -> InputError:
        return InputError(message, path=str(path), line=lines[element])

    def attribute(element: ET.Element, name: str) -> str:
        value = (element.get(name) or "").strip()
        if not value:
            raise fail(f"<{element.tag}> has no {name} attribute", element)
        return value

    originals = list(root.iter("OrgQuestion"))
    gold = _GoldByText()
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
            gold.check(qid, candidate_text, _SEMEVAL_LABELS[relevance], lines[related], _failer(path, lines[related]))
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


# ------------------------------------------------------------------------------------- CSV, JSONL

PAIR_FIELDS_REQUIRED: tuple[str, ...] = ("question", "candidate", "label")
PAIR_FIELDS_OPTIONAL: tuple[str, ...] = ("qid", "doc_id", "split", "rank", "score", "url")
_CSV_EXTRA = "(fields beyond the header)"


def _csv_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    reader = csv.DictReader(io.StringIO(read_text(path), newline=""), restkey=_CSV_EXTRA)
    start = 1
    try:
        missing = [f for f in PAIR_FIELDS_REQUIRED if f not in (reader.fieldnames or [])]
        if missing:
            raise InputError(f"the header lacks column(s) {', '.join(missing)}", path=str(path), line=1)
        start = reader.line_num + 1
        for row in reader:
            if _CSV_EXTRA in row or None in row.values():
                raise InputError(f"expected {len(reader.fieldnames or [])} fields like the header", path=str(path), line=start)
            # Empty CSV cells mean "not given", as a missing JSON key does.
            yield start, {key: value for key, value in row.items() if value != ""}
            start = reader.line_num + 1
    except csv.Error as error:  # the csv module's own refusals, at the record that starts on ``start``
        raise InputError(_csv_problem(error), path=str(path), line=start) from None


def _csv_problem(error: csv.Error) -> str:
    if "field larger than field limit" in str(error):
        return f"a field is longer than {csv.field_size_limit():,} characters, the CSV reader's limit"
    return f"malformed CSV ({error})"


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # JSON's \\uXXXX escapes can make them; UTF-8 cannot hold them


def _jsonl_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(f"invalid JSON: {error.msg} (column {error.colno})", path=str(path), line=number) from None
        if not isinstance(record, dict):
            raise InputError(f"expected a JSON object, got {type(record).__name__}", path=str(path), line=number)
        lone = _LONE_SURROGATE.search(json.dumps(record, ensure_ascii=False))
        if lone is not None:
            raise InputError(
                f"the escape \\u{ord(lone.group()):04x} is half of a surrogate pair without its other half, which "
                "is no character; write the character itself, or both halves (such as \\ud83d\\ude00)",
                path=str(path), line=number,
            )
        yield number, {key: value for key, value in record.items() if value is not None}


def _integer(value: Any) -> int | None:
    """An int from a JSON int or a CSV cell of digits; None for anything else (bools, floats, words)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        return int(value)
    return None


def _identifier(record: dict[str, Any], key: str, fail: Callable[[str], InputError]) -> str | None:
    value = record.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise fail(f"{key} must be a string or an integer, got {value!r}")
    text = str(value).strip()
    if not text or any(c.isspace() for c in text):
        raise fail(f"{key} must be non-empty without whitespace (TREC files cannot hold it), got {value!r}")
    if len(text) > MAX_NAME_CHARS or "\x00" in text:
        raise fail(f"{key} must be at most {MAX_NAME_CHARS} characters without NUL, got {_excerpt(text)}")
    return text


TEXT_LIMITS = {"question": MAX_QUESTION_CHARS, "candidate": MAX_CANDIDATE_CHARS}


def _text(record: dict[str, Any], key: str, fail: Callable[[str], InputError]) -> str:
    value = record.get(key)
    if not isinstance(value, str) or not value.strip():
        raise fail(f"{key} must be non-empty text, got {value!r}")
    if "\x00" in value:
        raise fail(f"{key} holds a NUL character, which no text may hold")
    return _within_limit(value.strip(), key, fail)


def _within_limit(text: str, key: str, fail: Callable[[str], InputError]) -> str:
    if len(text) > TEXT_LIMITS[key]:
        raise fail(f"the {key} is too long ({len(text):,} characters; the limit is {TEXT_LIMITS[key]:,}): "
                   f"split it into passages first, {_excerpt(text)}")
    return text


def _failer(path: Path, line: int) -> Callable[[str], InputError]:
    return lambda message: InputError(message, path=str(path), line=line)


def _pair_rows(records: Iterable[tuple[int, dict[str, Any]]], path: Path, source: str) -> list[Question]:
    questions: dict[str, Question] = {}
    first_line: dict[str, int] = {}
    candidate_lines: dict[tuple[str, str], int] = {}
    gold = _GoldByText()
    for number, record in records:
        fail = _failer(path, number)
        text = _text(record, "question", fail)
        candidate_text = _text(record, "candidate", fail)
        label = _integer(record["label"]) if "label" in record else None
        if label is None or not 0 <= label <= MAX_LABEL:
            raise fail(f"label must be an integer 0..{MAX_LABEL}, got {record.get('label')!r}")
        qid = _identifier(record, "qid", fail) or "q" + hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]
        split = _identifier(record, "split", fail) or PAIRS_DEFAULT_SPLIT
        rank = None
        if "rank" in record:
            rank = _integer(record["rank"])
            if rank is None or rank < 1:
                raise fail(f"rank must be a positive integer, got {record['rank']!r}")
        score = None
        if "score" in record:
            try:
                score = float(record["score"])
            except (TypeError, ValueError):
                score = math.nan
            if isinstance(record["score"], bool) or not math.isfinite(score):
                raise fail(f"score must be a finite number, got {record['score']!r}")
        url = record.get("url")
        if url is not None and not isinstance(url, str):
            raise fail(f"url must be text, got {url!r}")

        question = questions.get(qid)
        if question is None:
            question = questions[qid] = Question(qid=qid, text=text, split=split)
            first_line[qid] = number
        elif question.text != text or question.split != split:
            raise fail(f"question {qid} has a different text or split on line {first_line[qid]}")
        given_id = _identifier(record, "doc_id", fail)
        doc_id = given_id or f"{qid}-{len(question.candidates)}"
        if (qid, doc_id) in candidate_lines:
            raise fail(f"duplicate candidate ({qid}, {doc_id}), first on line {candidate_lines[qid, doc_id]}")
        candidate_lines[qid, doc_id] = number
        gold.check(qid, candidate_text, label, number, fail)
        question.candidates.append(
            Candidate(doc_id, candidate_text, label, first_stage_rank=rank, first_stage_score=score, source=source,
                      url=url, positional_id=given_id is None)
        )
    if not questions:
        raise InputError("no rows", path=str(path))
    return list(questions.values())


def load_pairs(path: str | Path, name: str | None = None, fmt: str | None = None) -> Dataset:
    """Question-candidate pairs from CSV (header row) or JSONL (one object a line).

    Required: question, candidate, label (an integer 0..4; strings such as "true" are refused).
    Optional: qid (default: a stable hash of the question text), doc_id (default
    ``f"{qid}-{index within question}"``), split (default ``PAIRS_DEFAULT_SPLIT``, "train"),
    rank and score (the first stage's), url. ``fmt`` ("csv" or "jsonl") overrides the extension.
    """
    path = Path(path)
    fmt = fmt or path.suffix.lower().lstrip(".")
    readers = {"csv": _csv_records, "jsonl": _jsonl_records}
    if fmt not in readers:
        raise InputError("expected a .csv or .jsonl file", path=str(path))
    return Dataset(name=name or path.stem, questions=_pair_rows(readers[fmt](path), path, fmt), source=str(path))


# --------------------------------------------------------------------------------- TREC run/qrels


def _trec_fields(path: Path, text: str, shape: str) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of every non-blank line, each checked to have ``shape``'s field count."""
    expected = len(shape.split())
    for number, line in enumerate(_split_lines(text), start=1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != expected:
            raise InputError(f"expected {expected} fields '{shape}', got {len(fields)}", path=str(path), line=number)
        yield number, fields


def read_trec_run(path: str | Path) -> dict[str, list[tuple[str, int, float]]]:
    """A TREC run: qid -> [(doc_id, position, score)] best first, positions numbered from 1.

    The scores decide the order and ties follow ``qa_core.ordering`` (trec_eval's order): the rank
    column is checked but, as trec_eval does, not trusted, so a run reads as every evaluator reads
    it. Parsed here rather than by ``ir_measures.read_trec_run`` for the line numbers of errors.
    """
    run, _ = read_run_located(path, "trec")
    return {qid: [(doc_id, position, score) for position, (doc_id, score) in enumerate(ordering.ranked(docs), start=1)]
            for qid, docs in run.items()}


RUN_FORMATS = ("trec", "jsonl")


def read_run_located(
    path: str | Path, fmt: str | None = None
) -> tuple[dict[str, dict[str, float]], dict[tuple[str, str], int]]:
    """A run, ``{qid: {doc_id: score}}``, and the line of every (qid, doc_id), so that a pair the
    caller refuses (an id its dataset lacks) is reported with its line.

    ``fmt``: "trec" (``qid Q0 docid rank score tag``) or "jsonl" (``{"qid", "doc_id", "score"}`` a
    line); by default a ``.jsonl`` name is JSONL and anything else TREC. Duplicate pairs, scores that
    are not finite numbers and malformed lines are refused with their line.
    """
    path = Path(path)
    fmt = fmt or ("jsonl" if path.suffix.lower() == ".jsonl" else "trec")
    if fmt not in RUN_FORMATS:
        raise InputError(f"unknown run format {fmt!r}; expected one of {', '.join(RUN_FORMATS)}", path=str(path))
    run: dict[str, dict[str, float]] = {}
    lines: dict[tuple[str, str], int] = {}
    for number, qid, doc_id, score in (_trec_run_rows if fmt == "trec" else _jsonl_run_rows)(path):
        if not math.isfinite(score):
            raise InputError(f"score must be a finite number, got {score!r}", path=str(path), line=number)
        if (qid, doc_id) in lines:
            raise InputError(f"document {doc_id} appears twice for query {qid} (first on line {lines[qid, doc_id]})",
                             path=str(path), line=number)
        lines[qid, doc_id] = number
        run.setdefault(qid, {})[doc_id] = score
    return run, lines


def _trec_run_rows(path: Path) -> Iterator[tuple[int, str, str, float]]:
    for number, (qid, _, doc_id, rank_text, score_text, _tag) in _trec_fields(path, read_text(path), "qid Q0 docid rank score tag"):
        rank = _integer(rank_text)
        if rank is None or rank < 0:
            raise InputError(f"rank must be a non-negative integer, got {rank_text!r}", path=str(path), line=number)
        try:
            score = float(score_text)
        except ValueError:
            raise InputError(f"score must be a finite number, got {score_text!r}", path=str(path), line=number) from None
        yield number, qid, doc_id, score


def _jsonl_run_rows(path: Path) -> Iterator[tuple[int, str, str, float]]:
    for number, record in _jsonl_records(path):
        def fail(message: str, number: int = number) -> InputError:
            return InputError(message, path=str(path), line=number)

        qid, doc_id = _identifier(record, "qid", fail), _identifier(record, "doc_id", fail)
        if qid is None or doc_id is None:
            raise fail("each line needs \"qid\", \"doc_id\" and \"score\"")
        score = record.get("score")
        if isinstance(score, bool) or not isinstance(score, (int, float)):
            raise fail(f"score must be a finite number, got {score!r}")
        yield number, qid, doc_id, float(score)


def read_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """TREC qrels: qid -> {doc_id: grade} (see ``read_qrels_located``)."""
    return read_qrels_located(path)[0]


def read_qrels_located(path: str | Path) -> tuple[dict[str, dict[str, int]], dict[tuple[str, str], int]]:
    """TREC qrels, qid -> {doc_id: grade}, and the line of every (qid, doc_id), so that a judgement
    the store refuses (unknown document, grade outside 0..4) is reported with its line.

    Each line's shape, integer grade and uniqueness are checked first, so an error names its line;
    ``ir_measures.read_trec_qrels`` then parses the text exactly as the evaluator does.
    """
    path = Path(path)
    text = read_text(path)
    lines: dict[tuple[str, str], int] = {}
    for number, (qid, _, doc_id, grade) in _trec_fields(path, text, "qid 0 docid grade"):
        if _integer(grade) is None:
            raise InputError(f"grade must be an integer, got {grade!r}", path=str(path), line=number)
        if (qid, doc_id) in lines:
            raise InputError(f"document {doc_id} is judged twice for query {qid}", path=str(path), line=number)
        lines[(qid, doc_id)] = number
    qrels: dict[str, dict[str, int]] = {}
    for qrel in ir_measures.read_trec_qrels(io.StringIO(text)):
        qrels.setdefault(qrel.query_id, {})[qrel.doc_id] = qrel.relevance
    return qrels, lines


# -------------------------------------------------------------------------------------- dispatch


def _sniff(path: Path) -> str:
    with path.open("rb") as handle:
        return handle.read(_SNIFF_BYTES).decode("utf-8", errors="replace")


def detect_format(path: str | Path) -> str:
    """The format of a file or folder: WikiQA folders hold a.toks files; XML is told apart by its tags."""
    path = Path(path)
    if not path.exists():
        raise InputError("no such file or folder", path=str(path))
    if path.is_dir():
        if (path / "a.toks").exists() or any((d / "a.toks").exists() for d in path.iterdir() if d.is_dir()):
            return "wikiqa"
        xml_files = sorted(path.glob("*.xml"))
        if not xml_files:
            raise InputError(f"cannot tell the format of this folder; choose one of {', '.join(FORMATS)}", path=str(path))
        path = xml_files[0]
    suffix = path.suffix.lower().lstrip(".")
    if suffix in ("csv", "jsonl"):
        return suffix
    if suffix == "xml":
        head = _sniff(path)
        if "<QApairs" in head:
            return "trecqa"
        if "<OrgQuestion" in head:
            return "semeval"
    raise InputError(f"cannot tell the format; choose one of {', '.join(FORMATS)}", path=str(path))


_LOADERS: dict[str, Callable[..., Dataset]] = {
    "wikiqa": load_wikiqa,
    "trecqa": load_trecqa,
    "semeval": load_semeval,
    "csv": lambda path, **kw: load_pairs(path, fmt="csv", **kw),
    "jsonl": lambda path, **kw: load_pairs(path, fmt="jsonl", **kw),
}


def load_dataset(path: str | Path, fmt: str = "auto", name: str | None = None) -> Dataset:
    """Load any supported format; ``fmt="auto"`` detects it (see ``detect_format``)."""
    if fmt != "auto" and fmt not in _LOADERS:
        raise InputError(f"unknown format {fmt!r}; expected auto or one of {', '.join(FORMATS)}")
    if name is not None and not name.strip():
        raise InputError("the dataset name is empty; give a name or leave it out to use the file name")
    path = Path(path)
    fmt = detect_format(path) if fmt == "auto" else fmt
    dataset = _LOADERS[fmt](path, **({"name": name} if name is not None else {}))
    _check_lengths(dataset, path)
    check_memory(dataset, path)
    return dataset


# What importing a collection and building its BM25 index take at their peak (the larger of the
# two processes), from benchmarks/scale.py (docs/benchmarks.md, "Scale"): the import's peak grew by
# 2.1 KB per candidate from 100k to 1M candidates (569 MB -> 2,420 MB) over ~360 MB of its own; the
# index build's by 1.2 KB (563 -> 1,604 MB) over ~450 MB. Rounded up to cover both.
MEMORY_BASE = 450 * 2**20
MEMORY_PER_CANDIDATE = 2_200


def check_memory(dataset: Dataset, path: Path) -> None:
    """``InputError`` with the estimate when the dataset is too large to import and index in the
    memory available (``config.available_memory``): a clear refusal before the store and the index
    are built, not an out-of-memory kill half-way. The file itself has been read by then."""
    available = config.available_memory()
    candidates = sum(len(question.candidates) for question in dataset.questions)
    needed = MEMORY_BASE + MEMORY_PER_CANDIDATE * candidates
    if available is not None and needed > available:
        raise InputError(
            f"the collection is too large for this machine: {candidates:,} candidates need about "
            f"{needed / 2**20:,.0f} MB to import and index ({MEMORY_BASE / 2**20:,.0f} MB + "
            f"{MEMORY_PER_CANDIDATE / 1024:.1f} KB per candidate, as measured), and {available / 2**20:,.0f} MB "
            "is available (RERANK_LAB_MEMORY_MB sets the budget); split it into several datasets or import it "
            "on a machine with more memory",
            path=str(path),
        )


def _check_lengths(dataset: Dataset, path: Path) -> None:
    """The text limits for the formats whose readers do not check them line by line (the CSV and
    JSONL readers do, naming the line): the error names the question and candidate instead."""
    for question in dataset.questions:
        texts = [("question", question.text, f"question {question.qid}")]
        texts += [("candidate", c.text, f"question {question.qid}, candidate {c.doc_id}") for c in question.candidates]
        for key, text, where in texts:
            _within_limit(text, key, lambda message, where=where: InputError(f"{where}: {message}", path=str(path)))
