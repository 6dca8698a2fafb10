"""App services: what the pages and the CLI do, over the library (``qa_core``'s other packages)
and the store (``db``). No Streamlit here, so every behaviour a page shows is testable without a
browser; the pages add widgets and caching around these calls.

Layers, enforced by import-linter in ``make test`` (``.importlinter``): pages -> services -> db ->
library; nothing below imports anything above it.
"""
