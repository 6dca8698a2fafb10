"""Rankers behind one interface; see ``base.Ranker`` and ``registry``."""

from qa_core.rankers.base import Explanation, Link, RankedCandidate, Ranker
from qa_core.rankers.registry import available, create, load, save

__all__ = ["Explanation", "Link", "RankedCandidate", "Ranker", "available", "create", "load", "save"]
