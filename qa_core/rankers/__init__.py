"""Rankers behind one contract (``base.Ranker``), found by name through ``registry``."""
