"""An example scoring service: any built-in ranker served over HTTP with the scoring-service contract
(README, "Scoring services"), on Starlette under uvicorn.

    python -m examples.scoring_service --model smcnn --data wikiqa [--db URL] [--port 8765]

``POST /`` takes ``{"question": ..., "candidates": [{"id": ..., "text": ...}]}`` and answers
``{"scores": [...]}`` (one per candidate, in order); ``GET /info`` gives ``name``, ``version`` and
``max_batch``. The model is loaded as the pages load it (``model_loading.load_ranker``: the version in
use for ``--data``, or a checkpoint path), so the service scores exactly what the workbench would.
Then add it: ``python -m qa_core systems add-service http://127.0.0.1:8765/ --name my-service``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from qa_core.rankers.base import Ranker
from qa_core.rankers.service_client import CONTRACT_VERSION
from qa_core.types import Candidate, InputError

MAX_BATCH = 1000


def build_app(ranker: Ranker, version: str, max_batch: int = MAX_BATCH) -> Starlette:
    """The service's ASGI app around ``ranker``; a request outside the contract gets HTTP 400 or 413
    with one sentence."""

    async def score(request: Request) -> JSONResponse:
        try:
            body = await request.json()
        except ValueError:
            return JSONResponse({"error": "the body is not JSON"}, status_code=400)
        question = body.get("question") if isinstance(body, dict) else None
        candidates = body.get("candidates") if isinstance(body, dict) else None
        if not isinstance(question, str) or not isinstance(candidates, list) or not all(
            isinstance(c, dict) and isinstance(c.get("text"), str) for c in candidates
        ):
            return JSONResponse({"error": 'expected {"question": text, "candidates": [{"id", "text"}]}'}, status_code=400)
        if len(candidates) > max_batch:
            return JSONResponse({"error": f"at most {max_batch} candidates a request"}, status_code=413)
        pool = [Candidate(str(c.get("id", i)), c["text"]) for i, c in enumerate(candidates)]
        try:
            scores = await run_in_threadpool(ranker.score, question, pool)
        except InputError as error:
            return JSONResponse({"error": str(error)}, status_code=400)
        return JSONResponse({"scores": [float(s) for s in scores]})

    async def info(request: Request) -> JSONResponse:
        return JSONResponse({"name": ranker.name, "version": version, "max_batch": max_batch,
                             "contract": CONTRACT_VERSION})

    return Starlette(routes=[Route("/", score, methods=["POST"]), Route("/info", info, methods=["GET"])])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.scoring_service", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a registered model name or a checkpoint path")
    parser.add_argument("--data", default=None, help="the dataset whose version in use is served (trained models)")
    parser.add_argument("--db", default=None, help="SQLAlchemy URL of the store (default: RERANK_LAB_DB or the data folder's)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--max-batch", type=int, default=MAX_BATCH)
    args = parser.parse_args(argv)
    from qa_core.services import model_loading, store_setup

    try:
        store = store_setup.open_store(args.db)
        version = model_loading.current_version(store, args.model, args.data) if args.data else None
        ranker = model_loading.load_ranker(store, args.model, args.data, version=version)  # the version it names
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    # The trained version's number and id name it (its cache key holds the server's checkpoint path,
    # which every client would show); a model with no versions is named by its name.
    record = version.record if version is not None else None
    named = f"version {record['version']}, id {record['id']}" if record else args.model
    app = build_app(ranker, named, args.max_batch)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
