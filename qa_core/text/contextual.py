"""spaCy's own token vectors: ``doc.tensor`` of the pipeline's tok2vec layer (96-d in
``en_core_web_sm``), one row per spaCy token, as an optional model input.

They are context-sensitive (a convolution over the neighbouring words) and trained for tagging,
parsing and NER, so they carry what the 50-d GloVe rows do not: the word's syntactic role here.
Only the tokenizer and the tok2vec component run (the component is called directly, so the shared
pipeline is never reconfigured while another thread parses with it); the rows are exactly those the
full pipeline leaves in ``doc.tensor``. The text is cut at ``nlp.MAX_CHARS`` as ``parse`` cuts it, so
row i belongs to ``parse(text).tokens[i]``.

Results are remembered in memory (float16, least recently used dropped first); they are cheap
enough to recompute that no disk cache is kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence

import numpy as np

from qa_core.text.nlp import MAX_CHARS, get_nlp, text_key

CONTEXT_DIM = 96
REMEMBERED_TEXTS = 100_000  # ~6 KB each for a 30-token sentence

_remembered: OrderedDict[str, np.ndarray] = OrderedDict()
_lock = threading.Lock()


def token_vectors(texts: Sequence[str], batch_size: int = 256) -> list[np.ndarray]:
    """One float16 (tokens, ``CONTEXT_DIM``) array per text, rows aligned with ``parse(text).tokens``."""
    keys = [text_key(text) for text in texts]
    with _lock:
        known = {key: _remembered[key] for key in keys if key in _remembered}
    missing = {key: text for key, text in zip(keys, texts) if key not in known}
    if missing:
        nlp = get_nlp()
        tok2vec = nlp.get_pipe("tok2vec")
        docs = (nlp.make_doc(text[:MAX_CHARS]) for text in missing.values())
        for key, doc in zip(missing, tok2vec.pipe(docs, batch_size=batch_size)):
            known[key] = np.asarray(doc.tensor, dtype=np.float16).reshape(len(doc), CONTEXT_DIM)
    _keep({key: known[key] for key in keys})
    return [known[key] for key in keys]


def remember(vectors: Mapping[str, np.ndarray]) -> None:
    """Keep texts' rows (text -> ``token_vectors`` row block) computed elsewhere, as if computed here:
    for a machine without spaCy (``benchmarks/gpu_check.py`` brings them to its GPU node)."""
    _keep({text_key(text): np.asarray(rows, dtype=np.float16) for text, rows in vectors.items()})


def _keep(rows_by_key: Mapping[str, np.ndarray]) -> None:
    with _lock:
        for key, rows in rows_by_key.items():
            _remembered[key] = rows
            _remembered.move_to_end(key)
        while len(_remembered) > REMEMBERED_TEXTS:
            _remembered.popitem(last=False)
