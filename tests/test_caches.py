"""The server's shared caches are bounded by settings (issue 45, item 19): beyond
``RERANK_LAB_MAX_MODELS`` loaded rankers and ``RERANK_LAB_MAX_INDEXES`` BM25 collections, the least
recently used goes, and nothing else keeps it alive."""

from __future__ import annotations

import gc
import importlib
import weakref
from collections.abc import Callable, Iterator

import pytest

from db.store import Store
from qa_core.data.demo import load_demo
from qa_core.services import candidate_pools
from qa_core.types import Dataset


@pytest.fixture
def demo_store(store_url: str) -> Iterator[Store]:
    store = Store(store_url)
    store.datasets.import_dataset(load_demo())
    yield store
    store.close()


@pytest.fixture
def caches_with(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[int], object]]:
    """``pages.common.caches`` as a server started with ``RERANK_LAB_MAX_MODELS=n`` imports it (the
    setting is read once, when the pages are imported); afterwards as it was, its caches emptied."""
    module = importlib.import_module("pages.common.caches")

    def started_with(models: int):
        monkeypatch.setenv("RERANK_LAB_MAX_MODELS", str(models))
        reloaded = importlib.reload(module)
        reloaded.get_ranker.clear()
        return reloaded

    yield started_with
    monkeypatch.undo()
    importlib.reload(module).get_ranker.clear()


def test_one_model_kept_when_the_setting_says_one(demo_store: Store, store_url: str, caches_with) -> None:
    caches = caches_with(1)
    version = candidate_pools.dataset_version(demo_store, "demo")
    first = caches.get_ranker(demo_store, store_url, "bm25", "demo", None, version)
    assert caches.get_ranker(demo_store, store_url, "bm25", "demo", None, version) is first  # cached
    gone = weakref.ref(first)
    del first
    caches.get_ranker(demo_store, store_url, "overlap", "demo", None, version)  # the second evicts the first
    gc.collect()
    assert gone() is None  # its memory is free: nothing else holds the evicted ranker


def test_the_least_recently_used_model_goes_first(demo_store: Store, store_url: str, caches_with) -> None:
    caches = caches_with(2)
    version = candidate_pools.dataset_version(demo_store, "demo")

    def ranker(model_version: str):  # three versions of a model: three entries
        return caches.get_ranker(demo_store, store_url, "bm25", "demo", model_version, version)

    first, second = ranker("1"), ranker("2")
    assert ranker("1") is first  # used again: now the most recent
    ranker("3")  # one too many: the second goes, not the first loaded
    assert ranker("1") is first
    assert ranker("2") is not second


def test_the_least_recently_used_index_goes_first(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RERANK_LAB_MAX_INDEXES", "1")
    monkeypatch.setattr(candidate_pools, "_indexes", type(candidate_pools._indexes)())  # this test's own
    store = Store(store_url)
    demo = load_demo()
    store.datasets.import_dataset(demo)
    store.datasets.import_dataset(Dataset("other", demo.questions))
    try:
        first = candidate_pools.collection_index(store, "demo")
        assert candidate_pools.collection_index(store, "demo") is first
        gone = weakref.ref(first)
        del first
        candidate_pools.collection_index(store, "other")  # the second dataset's evicts the first's
        assert [key[1] for key in candidate_pools._indexes] == ["other"]
        gc.collect()
        assert gone() is None
    finally:
        store.close()


@pytest.mark.parametrize("value", ["0", "three", "-1", "2.5"])
def test_a_bad_setting_is_said_and_the_default_kept(value: str, monkeypatch: pytest.MonkeyPatch,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    from qa_core import config

    monkeypatch.setenv("RERANK_LAB_MAX_MODELS", value)
    assert config.max_models() == config.MAX_MODELS
    assert caplog.messages == [f"RERANK_LAB_MAX_MODELS must be a whole number of at least 1, got {value!r}; "
                               f"using {config.MAX_MODELS}"]
