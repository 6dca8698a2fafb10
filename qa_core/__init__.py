"""Rerank Lab core library: data, text pipeline, retrieval, rankers, training and evaluation.

Plain library: no Streamlit import anywhere under this package.
"""

__version__ = "0.1.0"
