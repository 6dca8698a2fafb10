"""The client side of the scoring-service contract (README, "Scoring services", version 1).

A service scores one question's candidates per request::

    POST <url>       {"question": "...", "candidates": [{"id": "d1", "text": "..."}, ...]}
                  -> {"scores": [0.7, -1.2, ...]}          (one finite number per candidate, in order)
    GET  <url>/../info (optional: "info" beside the scoring path)
                  -> {"name": "...", "version": "...", "max_batch": 64}

Calls have a timeout and at most ``concurrency`` requests in flight. A request that fails for a
reason that may pass (the connection fails, no answer within the timeout, HTTP 502, 503 or 504 from
a proxy or an overloaded service) is sent again, at most ``retries`` more times and none once twice
the timeout has passed (a service that hangs costs two timeouts, not four), after exponential
backoff with full jitter (tenacity: a random wait of up to 0.5 s, 1 s, 2 s, ...); an answer that will not change (any
other HTTP error, a 4xx, a wrong number of scores, a score that is not a number) is not retried.
What a service gets wrong in the end is one ``ServiceError`` sentence naming the service (and the
tries it took), and a batch of pools is all or nothing: no pool's scores come back unless every
pool's did.

Scores are cached per (system, its version from ``/info`` or else its URL, question, candidates),
in this process, so a page that asks again (another view, the same question) sends nothing.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    retry_if_result,
    stop_after_attempt,
    stop_after_delay,
    wait_random_exponential,
)

from qa_core.types import Candidate, InputError

CONTRACT_VERSION = 1
TIMEOUT_S = 30.0
RETRIES = 3  # sends after the first, for a failure that may pass
TIMEOUTS_IN_ALL = 2  # no retry starts after this many timeouts: a hung service costs one retry, not three
BACKOFF_S = 0.5  # the first wait before a retry (doubling, with jitter, up to BACKOFF_MAX_S)
BACKOFF_MAX_S = 8.0
RETRIED_STATUSES = frozenset({502, 503, 504})  # a gateway or an overloaded service: may pass
# Transport failures that may pass on another try; a bad URL scheme, a proxy or protocol mistake of ours will not.
TRANSIENT_ERRORS = (httpx.ConnectError, httpx.TimeoutException, httpx.ReadError, httpx.WriteError,
                    httpx.RemoteProtocolError)
CONCURRENCY = 4
DEFAULT_MAX_BATCH = 256
CACHE_ENTRIES = 100_000
_EXCERPT = 80


class ServiceError(InputError):
    """A scoring service failed a request: down, slow, an HTTP error, or an answer outside the contract."""


@dataclass(frozen=True)
class ServiceInfo:
    """What ``GET /info`` said (``None`` fields: it said nothing about them)."""

    name: str | None = None
    version: str | None = None
    max_batch: int | None = None


def info_url(url: str) -> str:
    """Where the optional ``/info`` lives: beside the scoring path (``http://h/score`` -> ``http://h/info``)."""
    return str(httpx.URL(url).join("info"))


_SECRET_SHOWN = ("would be stored in plain text and shown on the Systems page, in 'systems list' and in the "
                 "audit trail")
_INSTEAD = ("serve the service with no credentials in its URL, on a private address (such as 127.0.0.1 or an "
            "internal network) or behind a proxy that adds them, and add that URL instead")


def check_url(url: str) -> str:
    """The URL stripped; ``InputError`` unless it is an absolute http(s) URL without a secret in it.

    A user and password (``http://user:pw@host/``) or a query string (``?token=...``) is refused:
    the URL is stored in plain text and shown on the Systems page, in ``systems list``, in the
    audit trail and in every error sentence about the service. Any query is refused, not only
    parameters named like a token: a key hides under any name (Azure Functions' ``code``, a signed
    URL's ``sig``), and the contract has no use for one (``/info`` beside the path drops it).
    No message repeats the secret: each shows the URL as ``shown_url`` does."""
    url = (url or "").strip()
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        parsed = None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.host:
        raise InputError(f"a service URL is an absolute http:// or https:// address, got {shown_url(url)[:_EXCERPT]!r}")
    if parsed.userinfo:
        raise InputError(f"refused the service URL {shown_url(url)}: it carries a user name or password (before "
                         f"the '@'), which {_SECRET_SHOWN}; {_INSTEAD}")
    if parsed.query:
        raise InputError(f"refused the service URL {shown_url(url)}: its query string (after the '?') may carry a "
                         f"token, which {_SECRET_SHOWN}; {_INSTEAD}")
    return url


def shown_url(url: str) -> str:
    """``url`` as a message or a page may show it: no user or password, no query (it may hold a
    token), and, where the text can be read two ways, nothing that either reading takes for one.

    Cut by hand on the text rather than with a URL parser, because the text may not parse (a bad
    port, no scheme) and a parser's reading is not the writer's (``http://u:12/34@h/`` is host u,
    port 12 to httpx, a password to its writer). So: an '@' inside the host part (before the first
    '/', '?' or '#') ends a user and password, cut at its last '@'; an '@' after a host part that
    holds a ':' (a port, or a password cut short by a '/') leaves only the text before that ':'
    (``http://10.0.0.5:…``); an '@' after a plain host is in the path and stays."""
    scheme, sep, rest = url.partition("://")
    authority = rest
    for end in "/?#":
        authority = authority.partition(end)[0]
    if "@" in url and sep and "@" not in authority and ":" in authority:
        return f"{scheme}{sep}{authority.partition(':')[0]}:…"
    if "@" in authority:
        url = f"{scheme}{sep}…@{rest[len(authority.rpartition('@')[0]) + 1:]}"
    elif "@" in url and not sep:  # no scheme: no host part to tell by
        url = f"…@{url.rpartition('@')[2]}"
    path, query, _ = url.partition("?")
    return f"{path}?…" if query else path


class _Cache:
    """Scores by request key, least recently used dropped first; shared by every client in the process.
    (A few lines of OrderedDict: functools' caches key on call arguments, and no cache library is
    installed.)"""

    def __init__(self, entries: int) -> None:
        self._entries = entries
        self._scores: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> np.ndarray | None:
        with self._lock:
            scores = self._scores.get(key)
            if scores is not None:
                self._scores.move_to_end(key)
            return scores

    def put(self, key: str, scores: np.ndarray) -> None:
        with self._lock:
            self._scores[key] = scores
            while len(self._scores) > self._entries:
                self._scores.popitem(last=False)


CACHE = _Cache(CACHE_ENTRIES)


class ServiceClient:
    """Scores pools with one service. ``cache_id`` names the service in cache keys: the system's
    name with its version, or its URL (``ServiceRanker`` sets it)."""

    def __init__(
        self, url: str, *, cache_id: str | None = None, timeout: float = TIMEOUT_S, retries: int = RETRIES,
        concurrency: int = CONCURRENCY, max_batch: int | None = None, backoff: float = BACKOFF_S,
    ) -> None:
        self.url = check_url(url)
        self.cache_id = cache_id or self.url
        self.timeout = timeout
        self.retries = max(0, retries)
        self.backoff = backoff
        self.concurrency = max(1, concurrency)
        self.max_batch = max(1, max_batch or DEFAULT_MAX_BATCH)
        self._http = httpx.Client(timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def info(self) -> ServiceInfo | None:
        """The service's ``GET /info``; ``None`` when it has none (404, 405); ``ServiceError`` when
        it is down or slow, or its answer is not the contract's."""
        where = info_url(self.url)
        response = self._send("GET", where, also_fine=(404, 405))
        if response.status_code in (404, 405):
            return None
        body = self._json(response, where)
        if not isinstance(body, dict):
            raise ServiceError(f"the service's {where} answered {_excerpt(body)}, not a JSON object")
        max_batch = body.get("max_batch")
        if max_batch is not None and (isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1):
            raise ServiceError(f"the service's {where} gave max_batch {max_batch!r}; it must be a positive integer")
        return ServiceInfo(_text_or_none(body.get("name")), _text_or_none(body.get("version")), max_batch)

    def score_pools(self, pools: Sequence[tuple[str, Sequence[Candidate]]]) -> list[np.ndarray]:
        """One score array per pool, each pool sent in requests of at most ``max_batch`` candidates,
        ``concurrency`` at a time; cached requests are not sent. All or nothing (``ServiceError``)."""
        requests = [(question, list(pool[start:start + self.max_batch]))
                    for question, pool in pools for start in range(0, max(len(pool), 1), self.max_batch)]
        with ThreadPoolExecutor(max_workers=self.concurrency) as workers:
            futures = [workers.submit(self._scores, question, batch) for question, batch in requests]
            try:
                parts = [future.result() for future in futures]
            except BaseException:
                for future in futures:
                    future.cancel()
                raise
        out, at = [], 0
        for _, pool in pools:
            count = max(len(pool), 1)
            pieces = -(-count // self.max_batch)
            out.append(np.concatenate(parts[at:at + pieces]) if pool else np.zeros(0))
            at += pieces
        return out

    def _scores(self, question: str, batch: list[Candidate]) -> np.ndarray:
        if not batch:
            return np.zeros(0)
        payload = {"question": question, "candidates": [{"id": c.doc_id, "text": c.text} for c in batch]}
        key = hashlib.sha256(json.dumps([self.cache_id, payload], ensure_ascii=False).encode()).hexdigest()
        cached = CACHE.get(key)
        if cached is not None:
            return cached
        body = self._json(self._send("POST", self.url, payload), self.url)
        scores = body.get("scores") if isinstance(body, dict) else None
        if not isinstance(scores, list):
            raise ServiceError(f"the service at {self.url} answered {_excerpt(body)} instead of {{\"scores\": [...]}}")
        if len(scores) != len(batch):
            raise ServiceError(f"the service at {self.url} returned {len(scores)} scores for {len(batch)} candidates")
        for candidate, score in zip(batch, scores, strict=True):
            if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
                raise ServiceError(f"the service at {self.url} returned {_excerpt(score)} for candidate "
                                   f"{candidate.doc_id!r}, which is not a finite number")
        values = np.asarray(scores, dtype=np.float64)
        CACHE.put(key, values)
        return values

    def _send(self, method: str, url: str, payload: dict[str, Any] | None = None, *,
              also_fine: tuple[int, ...] = ()) -> httpx.Response:
        """The service's answer (HTTP 200 or a status in ``also_fine``), sent again (``retries`` times
        at most, with backoff) while it fails in a way that may pass; else ``ServiceError``."""
        retrying = Retrying(
            retry=retry_if_exception_type(TRANSIENT_ERRORS)
            | retry_if_result(lambda response: response.status_code in RETRIED_STATUSES),
            stop=stop_after_attempt(self.retries + 1) | stop_after_delay(TIMEOUTS_IN_ALL * self.timeout),
            wait=wait_random_exponential(multiplier=self.backoff, max=BACKOFF_MAX_S),
            retry_error_callback=_last_outcome,
        )
        try:
            response = retrying(self._http.request, method, url, json=payload)
        except httpx.TimeoutException:
            raise ServiceError(f"the service at {url} did not answer within {self.timeout:g} s"
                               f"{_tries(retrying)}") from None
        except httpx.TransportError as error:
            raise ServiceError(f"the service at {url} is down or unreachable ({type(error).__name__}: "
                               f"{_excerpt(str(error) or 'no answer')}){_tries(retrying)}") from None
        if response.status_code != 200 and response.status_code not in also_fine:
            raise ServiceError(f"the service at {url} answered HTTP {response.status_code}: "
                               f"{_excerpt(response.text)}{_tries(retrying)}")
        return response

    def _json(self, response: httpx.Response, url: str) -> Any:
        try:
            return response.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ServiceError(f"the service at {url} answered {_excerpt(response.text)}, which is not JSON") from None


def _last_outcome(state: RetryCallState) -> httpx.Response:
    """When the tries are spent: the last answer, or the last try's exception raised."""
    return state.outcome.result()  # type: ignore[union-attr]  # set: tenacity calls this after a try


def _tries(retrying: Retrying) -> str:
    """' (after N tries)' when the request was sent more than once, for the error sentence."""
    tries = retrying.statistics.get("attempt_number", 1)
    return f" (after {tries} tries)" if tries > 1 else ""


def _text_or_none(value: object) -> str | None:
    return None if value is None else str(value)[:_EXCERPT]


def _excerpt(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = " ".join(text.split())
    return repr(text if len(text) <= _EXCERPT else text[:_EXCERPT] + "…")
