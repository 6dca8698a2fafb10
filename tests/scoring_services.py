"""Real HTTP servers for the systems tests: the example service (``examples/scoring_service.py``) and
services that fail as real ones do, each started as its own uvicorn process on a free port.

    python -m tests.scoring_services faulty --port P   POST /slow (answers after 5 s), /count (one
                                                       score too few), /nan (a word for a score),
                                                       /html (a page, not JSON), /error (HTTP 500),
                                                       /flaky (HTTP 503 twice per question, then
                                                       scores), /unavailable (always 503), /refused
                                                       (always 400), /stalls (the first request per
                                                       question answers after 5 s, the next at once),
                                                       /hangs (every request answers after 5 s),
                                                       /words (a candidate's score: its word count),
                                                       /drip (headers, then valid scores a byte every
                                                       0.25 s: no read waits long, the whole takes 5 s),
                                                       /huge (64 MiB of JSON streamed, no length said),
                                                       /huge-declared (9 MiB with its Content-Length),
                                                       /secret-error, /secret-text, /secret-shape,
                                                       /secret-score (a body holding SECRET: HTTP 500,
                                                       text, {"scores": SECRET}, SECRET as a score);
                                                       GET /seen: requests per "route question"
    python -m tests.scoring_services dies --after N --port P
                                                       answers N requests, then its process exits
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from tests import ROOT

START_TIMEOUT_S = 600  # a bound, not a wait: the example service imports torch and spaCy, 120 s were not enough at load 15
SLOW_S = 5.0
DRIP_S = 0.25  # between two bytes of /drip: far below any read timeout
HUGE_MIB, DECLARED_MIB = 64, 9  # both over the client's 8 MiB limit of an answer
SECRET = "token=abc123"  # what a service's body may hold and no refusal may repeat


async def _count(request: Request) -> Response:
    body = await request.json()
    return JSONResponse({"scores": [1.0] * (len(body["candidates"]) - 1)})


async def _slow(request: Request) -> Response:
    await asyncio.sleep(SLOW_S)
    return await _count(request)


async def _nan(request: Request) -> Response:
    body = await request.json()
    return JSONResponse({"scores": ["high"] + [0.5] * (len(body["candidates"]) - 1)})


async def _html(request: Request) -> Response:
    return HTMLResponse("<html><body>502 Bad Gateway</body></html>")


async def _error(request: Request) -> Response:
    return Response("internal error", status_code=500)


def _scored(body: dict) -> Response:
    return JSONResponse({"scores": [1.0] * len(body["candidates"])})


async def _drip(request: Request) -> Response:
    body = await request.json()
    answer = json.dumps({"scores": [1.0] * len(body["candidates"])}).encode()

    async def bytes_apart():
        for byte in answer:
            yield bytes([byte])
            await asyncio.sleep(DRIP_S)

    return StreamingResponse(bytes_apart(), media_type="application/json")


async def _huge(request: Request) -> Response:
    body = await request.json()

    async def padded():  # valid JSON: scores, then MiBs of blanks before the closing brace
        yield json.dumps({"scores": [1.0] * len(body["candidates"])})[:-1].encode()
        for _ in range(HUGE_MIB):
            yield b" " * 2**20
        yield b"}"

    return StreamingResponse(padded(), media_type="application/json")


async def _huge_declared(request: Request) -> Response:
    return Response(b" " * (DECLARED_MIB * 2**20), media_type="application/json")


async def _secret_error(request: Request) -> Response:
    return PlainTextResponse(SECRET, status_code=500)


async def _secret_text(request: Request) -> Response:
    return PlainTextResponse(SECRET)


async def _secret_shape(request: Request) -> Response:
    return JSONResponse({"scores": SECRET})


async def _secret_score(request: Request) -> Response:
    body = await request.json()
    return JSONResponse({"scores": [SECRET] + [1.0] * (len(body["candidates"]) - 1)})


def faulty_app() -> Starlette:
    seen: Counter[str] = Counter()  # requests per "route question", counted as they arrive

    def counted(route: str, answer):
        async def handler(request: Request) -> Response:
            body = await request.json()
            seen[f"{route} {body['question']}"] += 1
            return await answer(body, seen[f"{route} {body['question']}"])
        return handler

    async def flaky(body: dict, tries: int) -> Response:
        return Response("busy", status_code=503) if tries <= 2 else _scored(body)

    async def unavailable(body: dict, tries: int) -> Response:
        return Response("busy", status_code=503)

    async def refused(body: dict, tries: int) -> Response:
        return Response("bad request", status_code=400)

    async def stalls(body: dict, tries: int) -> Response:
        if tries == 1:
            await asyncio.sleep(SLOW_S)
        return _scored(body)

    async def hangs(body: dict, tries: int) -> Response:
        await asyncio.sleep(SLOW_S)
        return _scored(body)

    async def word_counts(body: dict, tries: int) -> Response:
        return JSONResponse({"scores": [len(c["text"].split()) for c in body["candidates"]]})

    async def counts(request: Request) -> Response:
        return JSONResponse(dict(seen))

    fixed = {"slow": _slow, "count": _count, "nan": _nan, "html": _html, "error": _error, "drip": _drip,
             "huge": _huge, "huge-declared": _huge_declared, "secret-error": _secret_error,
             "secret-text": _secret_text, "secret-shape": _secret_shape, "secret-score": _secret_score}
    retried = {"flaky": flaky, "unavailable": unavailable, "refused": refused, "stalls": stalls,
               "hangs": hangs, "words": word_counts}
    return Starlette(routes=[
        *(Route(f"/{name}", handler, methods=["POST"]) for name, handler in fixed.items()),
        *(Route(f"/{name}", counted(name, answer), methods=["POST"]) for name, answer in retried.items()),
        Route("/seen", counts, methods=["GET"]),
    ])


def dying_app(after: int) -> Starlette:
    """Scores every candidate 1.0 for ``after`` requests; the next one ends the process unanswered."""
    served = 0

    async def score(request: Request) -> Response:
        nonlocal served
        body = await request.json()
        if served >= after:
            os._exit(1)
        served += 1
        return _scored(body)

    return Starlette(routes=[Route("/", score, methods=["POST"])])


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def serving(args: Sequence[str], env: dict[str, str] | None = None) -> Iterator[str]:
    """Start ``python -m <args> --port P`` and yield ``http://127.0.0.1:P/`` once it accepts
    connections; the process is stopped after."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", *args, "--port", str(port)], cwd=ROOT,
                               env={**os.environ, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{args} exited with {process.returncode}: {process.stdout.read().decode()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{args} did not listen within {START_TIMEOUT_S} s") from None
                time.sleep(0.2)  # polling the port, not waiting a fixed time
        yield f"http://127.0.0.1:{port}/"
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:  # uvicorn's graceful stop waits for requests a page still sends
            process.kill()
            process.wait(timeout=20)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["faulty", "dies"])
    parser.add_argument("--after", type=int, default=3)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    app = faulty_app() if args.kind == "faulty" else dying_app(args.after)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
