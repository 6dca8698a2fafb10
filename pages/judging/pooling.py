"""The Label page's ``pool`` order (depth-k pooling, issue 37): which systems, how deep, and the
pool's progress. The systems are the pages' model listing (``model_loading.model_names``: built-in
models and fusions), the same scores the other model-based orders use."""

from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

from pages.render.markdown import as_markdown
from qa_core.services.labeling import pooling
from qa_core.services.labeling.strategies import DEFAULT_POOL_DEPTH, Scores

if TYPE_CHECKING:
    from pages.label.shared import Desk

MAX_DEPTH = 100


def pool_options(names: list[str]) -> tuple[list[str], int]:
    """The systems to pool (the M key's box, shared with the disagreement order) and the depth k."""
    left, right = st.columns([3, 1])
    chosen = left.multiselect("Systems to pool", names, default=names[:3], key="order_models",
                              help="the union of each system's top k per question is the queue")
    depth = int(right.number_input("Pool depth k", 1, MAX_DEPTH, DEFAULT_POOL_DEPTH, key="pool_depth"))
    return chosen, depth


def show_pool_progress(desk: Desk, scores: dict[str, Scores], depth: int, split: str) -> None:
    """How much of the pool is judged, and judged@k of every pooled system; provisional (said so, no
    judged@k) while a system is still scoring: its top k is of the pairs scored so far."""
    scoring = {model: desk.scores(model).progress() for model in scores}
    progress = pooling.store_pool_progress(desk.store, desk.dataset, scores, depth, split, scoring)
    st.progress(progress.judged / progress.size if progress.size else 1.0,
                text=as_markdown(progress.describe()))
