"""Waiting on other processes (training jobs, workers) in tests, with a deadline instead of a sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
WAIT_S = 240  # a training job on the busy 2-core CI machine


def wait_until(condition: Callable[[], T], what: str, timeout: float = WAIT_S) -> T:
    """``condition()``'s first truthy value, polled every 20 ms; fails the test naming ``what``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")
