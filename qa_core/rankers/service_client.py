"""The client side of the scoring-service contract (README, "Scoring services", version 1).

A service scores one question's candidates per request::

    POST <url>       {"question": "...", "candidates": [{"id": "d1", "text": "..."}, ...]}
                  -> {"scores": [0.7, -1.2, ...]}          (one finite number per candidate, in order)
    GET  <url>/../info (optional: "info" beside the scoring path)
                  -> {"name": "...", "version": "...", "max_batch": 64}

Every request has a total deadline of ``timeout`` seconds, headers and body together (a service
that sends its headers and then a byte every few seconds never trips a per-read timeout, so the
whole request runs under one ``asyncio.timeout``), an answer of at most ``MAX_ANSWER_BYTES`` (read
as it arrives and dropped at the limit, never held whole), and a refusal that names the status or
the fault but never repeats the service's body (it may carry a token or a user's text).
At most ``concurrency`` requests are in flight. A request that fails for a reason that may pass
(the connection fails, no whole answer within the deadline, HTTP 502, 503 or 504 from a proxy or an
overloaded service) is sent again, at most ``retries`` more times and none once twice the deadline
has passed (a service that hangs costs two deadlines, not four), after exponential backoff with
full jitter (tenacity: a random wait of up to 0.5 s, 1 s, 2 s, ...); an answer that will not change
(any other HTTP error, a 4xx, an answer over the size limit, a wrong number of scores, a score
that is not a number) is not retried. What a service gets wrong in the end is one ``ServiceError``
sentence naming the service (and the tries it took), and a batch of pools is all or nothing: no
pool's scores come back unless every pool's did.

Scores are cached per (system, its version from ``/info`` or else its URL, question, candidates),
in this process, so a page that asks again (another view, the same question) sends nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import threading
from collections import OrderedDict
from collections.abc import Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
import numpy as np
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    retry_if_result,
    stop_after_attempt,
    stop_after_delay,
    wait_random_exponential,
)

from qa_core.types import MAX_NAME_CHARS, Candidate, InputError

CONTRACT_VERSION = 1
TIMEOUT_S = 30.0
RETRIES = 3  # sends after the first, for a failure that may pass
TIMEOUTS_IN_ALL = 2  # no retry starts after this many timeouts: a hung service costs one retry, not three
BACKOFF_S = 0.5  # the first wait before a retry (doubling, with jitter, up to BACKOFF_MAX_S)
BACKOFF_MAX_S = 8.0
RETRIED_STATUSES = frozenset({502, 503, 504})  # a gateway or an overloaded service: may pass


class _Late(Exception):
    """The whole answer did not arrive within the deadline (``asyncio.timeout`` fired)."""


# Transport failures that may pass on another try; a bad URL scheme, a proxy or protocol mistake of ours will not.
TRANSIENT_ERRORS = (_Late, httpx.ConnectError, httpx.TimeoutException, httpx.ReadError, httpx.WriteError,
                    httpx.RemoteProtocolError)
MAX_ANSWER_BYTES = 8 * 2**20  # 256 scores take a few KiB: a larger answer is a fault, not read whole
CONCURRENCY = 4
DEFAULT_MAX_BATCH = 256
CACHE_ENTRIES = 100_000
SHOWN_VERSION_CHARS = 24  # fits the Systems table's column at 1280 px
_EXCERPT = 80
T = TypeVar("T")


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


def shown_version(version: str | None) -> str | None:
    """A service's ``/info`` version as a page shows it, on one line: a path (a server's checkpoint
    file) by its last part, which names the version while the folders name the server's disk, and
    a version longer than ``SHOWN_VERSION_CHARS`` cut with an ellipsis (never mid-name without one)."""
    if version is None:
        return None
    text = " ".join(version.split())
    text = text.rstrip("/\\").replace("\\", "/").rpartition("/")[2] or text
    return text if len(text) <= SHOWN_VERSION_CHARS else text[:SHOWN_VERSION_CHARS - 1] + "…"


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
    name with its version, or its URL (``ServiceRanker`` sets it). ``timeout``: each request's
    total deadline in seconds; ``max_bytes``: the longest answer read."""

    def __init__(
        self, url: str, *, cache_id: str | None = None, timeout: float = TIMEOUT_S, retries: int = RETRIES,
        concurrency: int = CONCURRENCY, max_batch: int | None = None, backoff: float = BACKOFF_S,
        max_bytes: int = MAX_ANSWER_BYTES,
    ) -> None:
        self.url = check_url(url)
        self.cache_id = cache_id or self.url
        self.timeout = timeout
        self.retries = max(0, retries)
        self.backoff = backoff
        self.concurrency = max(1, concurrency)
        self.max_batch = max(1, max_batch or DEFAULT_MAX_BATCH)
        self.max_bytes = max_bytes

    def info(self) -> ServiceInfo | None:
        """The service's ``GET /info``; ``None`` when it has none (404, 405); ``ServiceError`` when
        it is down or slow, or its answer is not the contract's."""
        return _run(self._info())

    def score_pools(self, pools: Sequence[tuple[str, Sequence[Candidate]]]) -> list[np.ndarray]:
        """One score array per pool, each pool sent in requests of at most ``max_batch`` candidates,
        ``concurrency`` at a time; cached requests are not sent. All or nothing (``ServiceError``)."""
        requests = [(question, list(pool[start:start + self.max_batch]))
                    for question, pool in pools for start in range(0, max(len(pool), 1), self.max_batch)]
        parts = _run(self._all_scores(requests))
        out, at = [], 0
        for _, pool in pools:
            count = max(len(pool), 1)
            pieces = -(-count // self.max_batch)
            out.append(np.concatenate(parts[at:at + pieces]) if pool else np.zeros(0))
            at += pieces
        return out

    async def _info(self) -> ServiceInfo | None:
        where = info_url(self.url)
        async with self._http() as http:
            answer = await self._send(http, "GET", where, also_fine=(404, 405))
        if answer.status in (404, 405):
            return None
        body = self._json(answer, where)
        if not isinstance(body, dict):
            raise ServiceError(f"the service's {where} answered {_kind(body)}, not a JSON object")
        max_batch = body.get("max_batch")
        if max_batch is not None and (isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1):
            raise ServiceError(f"the service's {where} gave as max_batch {_kind(max_batch)}, not a positive integer")
        return ServiceInfo(_text_or_none(body.get("name")), _text_or_none(body.get("version")), max_batch)

    async def _all_scores(self, requests: list[tuple[str, list[Candidate]]]) -> list[np.ndarray]:
        """Every request's scores, ``concurrency`` in flight; the first failure cancels the rest."""
        slots = asyncio.Semaphore(self.concurrency)
        async with self._http() as http:

            async def one(question: str, batch: list[Candidate]) -> np.ndarray:
                async with slots:
                    return await self._scores(http, question, batch)

            tasks = [asyncio.ensure_future(one(question, batch)) for question, batch in requests]
            try:
                return list(await asyncio.gather(*tasks))
            except BaseException:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)  # each closes its connection
                raise

    def _http(self) -> httpx.AsyncClient:
        # Per phase as long as the whole: the deadline (``_request``) is what ends a request.
        return httpx.AsyncClient(timeout=self.timeout)

    async def _scores(self, http: httpx.AsyncClient, question: str, batch: list[Candidate]) -> np.ndarray:
        if not batch:
            return np.zeros(0)
        payload = {"question": question, "candidates": [{"id": c.doc_id, "text": c.text} for c in batch]}
        key = hashlib.sha256(json.dumps([self.cache_id, payload], ensure_ascii=False).encode()).hexdigest()
        cached = CACHE.get(key)
        if cached is not None:
            return cached
        body = self._json(await self._send(http, "POST", self.url, payload), self.url)
        scores = body.get("scores") if isinstance(body, dict) else None
        if not isinstance(scores, list):
            raise ServiceError(f"the service at {self.url} answered {_kind(body)} instead of {{\"scores\": [...]}}")
        if len(scores) != len(batch):
            raise ServiceError(f"the service at {self.url} returned {len(scores)} scores for {len(batch)} candidates")
        for candidate, score in zip(batch, scores, strict=True):
            if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
                raise ServiceError(f"the service at {self.url} returned {_kind(score)} for candidate "
                                   f"{candidate.doc_id!r}, which is not a finite number")
        values = np.asarray(scores, dtype=np.float64)
        CACHE.put(key, values)
        return values

    async def _send(self, http: httpx.AsyncClient, method: str, url: str, payload: dict[str, Any] | None = None, *,
                    also_fine: tuple[int, ...] = ()) -> _Answer:
        """The service's answer (HTTP 200 or a status in ``also_fine``), sent again (``retries`` times
        at most, with backoff) while it fails in a way that may pass; else ``ServiceError``."""
        retrying = AsyncRetrying(
            retry=retry_if_exception_type(TRANSIENT_ERRORS)
            | retry_if_result(lambda answer: answer.status in RETRIED_STATUSES),
            stop=stop_after_attempt(self.retries + 1) | stop_after_delay(TIMEOUTS_IN_ALL * self.timeout),
            wait=wait_random_exponential(multiplier=self.backoff, max=BACKOFF_MAX_S),
            retry_error_callback=_last_outcome,
        )
        try:
            answer = await retrying(self._request, http, method, url, payload, also_fine)
        except (_Late, httpx.TimeoutException):
            raise ServiceError(f"the service at {url} did not answer in full (headers and body) within "
                               f"{self.timeout:g} s{_tries(retrying)}") from None
        except httpx.TransportError as error:
            raise ServiceError(f"the service at {url} is down or unreachable ({type(error).__name__}: "
                               f"{_excerpt(str(error) or 'no answer')}){_tries(retrying)}") from None
        if answer.status != 200 and answer.status not in also_fine:
            reason = httpx.codes.get_reason_phrase(answer.status)  # the standard phrase: nothing the service wrote
            raise ServiceError(f"the service at {url} answered HTTP {answer.status}{f' {reason}' if reason else ''}"
                               f"{_tries(retrying)}")
        return answer

    async def _request(self, http: httpx.AsyncClient, method: str, url: str, payload: dict[str, Any] | None,
                       also_fine: tuple[int, ...]) -> _Answer:
        """One request under the deadline: the body of a 200 (or of a status in ``also_fine``) read
        up to ``max_bytes``; any other status's body is not read."""
        try:
            async with asyncio.timeout(self.timeout), http.stream(method, url, json=payload) as response:
                if response.status_code != 200 and response.status_code not in also_fine:
                    return _Answer(response.status_code, b"")
                declared = response.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > self.max_bytes:
                    raise self._too_long(url)
                body = bytearray()
                async for chunk in response.aiter_bytes():  # decoded: a small gzip of a huge body is held to it too
                    body += chunk
                    if len(body) > self.max_bytes:
                        raise self._too_long(url)
                return _Answer(response.status_code, bytes(body))
        except TimeoutError:
            raise _Late from None

    def _too_long(self, url: str) -> ServiceError:
        return ServiceError(f"the service at {url} sent an answer over {self.max_bytes / 2**20:g} MiB, the most one "
                            "answer may hold; the rest was not read")

    def _json(self, answer: _Answer, url: str) -> Any:
        try:
            return json.loads(answer.body)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ServiceError(f"the service at {url} answered {len(answer.body):,} bytes that are not JSON "
                               "(not shown)") from None


@dataclass(frozen=True)
class _Answer:
    """What a request got: its status and, for a status that is read, its body."""

    status: int
    body: bytes


def _run(work: Coroutine[Any, Any, T]) -> T:
    """``work`` run to its end from synchronous code: on a loop of its own, or in a thread of its own
    when this thread runs a loop already (a notebook's)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(work)
    with ThreadPoolExecutor(max_workers=1) as thread:
        return thread.submit(asyncio.run, work).result()


def _last_outcome(state: RetryCallState) -> _Answer:
    """When the tries are spent: the last answer, or the last try's exception raised."""
    return state.outcome.result()  # type: ignore[union-attr]  # set: tenacity calls this after a try


def _tries(retrying: AsyncRetrying) -> str:
    """' (after N tries)' when the request was sent more than once, for the error sentence."""
    tries = retrying.statistics.get("attempt_number", 1)
    return f" (after {tries} tries)" if tries > 1 else ""


def _text_or_none(value: object) -> str | None:
    return None if value is None else str(value)[:MAX_NAME_CHARS]


def _kind(value: object) -> str:
    """What a JSON value is, without what it says: a refusal never repeats the service's body."""
    if isinstance(value, dict):
        return "a JSON object" + (" whose \"scores\" is not a list" if "scores" in value else " without \"scores\"")
    if isinstance(value, float) and not math.isfinite(value):
        return "a non-finite number"
    kinds = {bool: "true or false", type(None): "null", str: "a string", list: "a list", int: "a number",
             float: "a number"}
    return kinds.get(type(value), "a JSON value")


def _excerpt(value: str) -> str:
    text = " ".join(value.split())
    return repr(text if len(text) <= _EXCERPT else text[:_EXCERPT] + "…")
