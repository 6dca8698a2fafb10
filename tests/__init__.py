"""Rerank Lab's tests; ``ROOT`` is the project folder the processes and pages under test start in."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
