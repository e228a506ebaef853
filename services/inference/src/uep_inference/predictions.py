"""Items of non-generative models: the request a sample becomes, and the prediction a model's answer becomes.

Sample formats (docs/models.md): classification ``input = {"text": str}`` or ``{"features": [numbers]}``;
ranking and embedding retrieval ``input = {"query": str, "candidates": [{"id": str, "text": str}, ...]}``.
Which classification input a model takes is its contract (``text`` or ``features``; a model registered with
another contract name says it in ``spec.input``).

The answer becomes a :class:`uep_common.contract.events.Prediction` and an ``output`` text, so per-item metrics that
read text keep working:

- classification: ``label`` = ``spec.class_names[label index]``, ``probabilities`` = ``{class name: p}``;
  ``output`` = the label.
- ranking / embedding: ``scores`` in the sample's candidate order and ``ranking`` = the candidate ids by
  score, highest first, ties in candidate order (a stable sort); ``output`` = the top id.

A sample that does not have the shape raises :class:`BadInputError` (the item's error ``bad_input``, naming the
field); an answer that does not fit the model's spec raises :class:`BadOutputError` (``bad_output``).
"""

from __future__ import annotations

import math
from typing import Any

from uep_common.contract.events import ModelKind, ModelTarget, Prediction
from uep_inference.backends.base import PredictionOutput, PredictionRequest

MAX_TEXT_CHARS = 100_000
"""Characters of one text, query or candidate."""
MAX_FEATURES = 100_000
"""Values of one feature vector."""
MAX_CANDIDATES = 1000
"""Candidates of one ranking sample."""
MAX_CANDIDATE_CHARS = 4_000_000
"""Characters of all of one sample's candidate texts together."""
PROMPT_PREVIEW_CHARS = 2000
"""Characters of the input kept in ``OutputGenerated.prompt`` (a rendering, not what the model received)."""


class BadInputError(ValueError):
    """The sample's input does not have the shape the model's kind needs; the message names the field."""


class BadOutputError(ValueError):
    """The model's answer does not fit its registry spec (class names, candidate count)."""


def classification_input(target: ModelTarget) -> str:
    """``"text"`` or ``"features"``: the model's contract when it is one of those, else ``spec.input``
    (default ``"text"``)."""
    if target.contract in ("text", "features"):
        return target.contract
    chosen = target.spec.get("input", "text")
    return chosen if chosen in ("text", "features") else "text"


def _text_field(sample_input: dict[str, Any], name: str) -> str:
    value = sample_input.get(name)
    if not isinstance(value, str):
        raise BadInputError(f"input.{name} must be a string ({'missing' if name not in sample_input else type(value).__name__})")
    if len(value) > MAX_TEXT_CHARS:
        raise BadInputError(f"input.{name} has {len(value)} characters, more than {MAX_TEXT_CHARS}")
    return value


def _features(target: ModelTarget, sample_input: dict[str, Any]) -> tuple[float, ...]:
    values = sample_input.get("features")
    if not isinstance(values, list) or not values:
        raise BadInputError("input.features must be a non-empty list of numbers")
    if len(values) > MAX_FEATURES:
        raise BadInputError(f"input.features has {len(values)} values, more than {MAX_FEATURES}")
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) for v in values):
        raise BadInputError("input.features must hold finite numbers only")
    expected = target.spec.get("n_features")
    if isinstance(expected, int) and len(values) != expected:
        raise BadInputError(f"input.features has {len(values)} values; model {target.name!r} takes {expected}")
    return tuple(float(v) for v in values)


def candidates_of(sample_input: dict[str, Any]) -> list[tuple[str, str]]:
    """The ``(id, text)`` of each of the sample's candidates, in order.

    Raises:
        BadInputError: ``input.candidates`` is not a list of 1 to :data:`MAX_CANDIDATES` objects with a string
            ``id`` (distinct) and a string ``text``, or the texts are too long.
    """
    raw = sample_input.get("candidates")
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_CANDIDATES:
        raise BadInputError(f"input.candidates must be a list of 1 to {MAX_CANDIDATES} candidates")
    out: list[tuple[str, str]] = []
    total = 0
    for i, c in enumerate(raw):
        if not isinstance(c, dict) or not isinstance(c.get("id"), str) or not isinstance(c.get("text"), str):
            raise BadInputError(f"input.candidates[{i}] must be an object with a string 'id' and a string 'text'")
        total += len(c["text"])
        out.append((c["id"], c["text"]))
    if len({cid for cid, _ in out}) != len(out):
        raise BadInputError("input.candidates: the ids must be distinct")
    if total > MAX_CANDIDATE_CHARS:
        raise BadInputError(f"input.candidates: {total} characters of text, more than {MAX_CANDIDATE_CHARS}")
    return out


def build_request(target: ModelTarget, sample_input: dict[str, Any], timeout_s: float) -> PredictionRequest:
    """The :class:`PredictionRequest` of one sample for a model of ``target.kind``.

    Raises:
        BadInputError: the input lacks what the kind needs, or it is out of bounds (the message names the field);
            also for a generation model (which takes prompts, not predictions).
    """
    kind = ModelKind(target.kind)
    if kind is ModelKind.classification:
        if classification_input(target) == "features":
            return PredictionRequest(target, timeout_s, features=_features(target, sample_input))
        return PredictionRequest(target, timeout_s, text=_text_field(sample_input, "text"))
    if kind in (ModelKind.ranking, ModelKind.embedding):
        query = _text_field(sample_input, "query")
        return PredictionRequest(target, timeout_s, query=query, candidates=tuple(t for _, t in candidates_of(sample_input)))
    raise BadInputError(f"model {target.name!r} is a {kind.value} model: it takes a prompt, not a prediction request")


def _preview(text: str) -> str:
    return text if len(text) <= PROMPT_PREVIEW_CHARS else text[:PROMPT_PREVIEW_CHARS] + "…"


def render_input(request: PredictionRequest) -> str:
    """A short rendering of what the model was given, for ``OutputGenerated.prompt``: the text; ``features:
    [first 8 values, …] (n values)``; ``query: <query>`` and the number of candidates."""
    if request.features is not None:
        head = ", ".join(f"{v:g}" for v in request.features[:8])
        more = ", …" if len(request.features) > 8 else ""
        return f"features: [{head}{more}] ({len(request.features)} values)"
    if request.query is not None:
        return _preview(f"query: {request.query}") + f"\n({len(request.candidates)} candidates)"
    return _preview(request.text or "")


def to_prediction(target: ModelTarget, sample_input: dict[str, Any], out: PredictionOutput) -> tuple[Prediction, str]:
    """The :class:`Prediction` and the ``output`` text of a model's answer to one sample.

    Raises:
        BadOutputError: a classifier without ``spec.class_names``, with probabilities of another length, or with a
            label index out of range; a ranker without one score per candidate.
    """
    kind = ModelKind(target.kind)
    if kind is ModelKind.classification:
        names = target.spec.get("class_names")
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            raise BadOutputError(f"model {target.name!r} has no spec.class_names: its label index cannot be named")
        proba, index = out.probabilities, out.label_index
        if proba is None or index is None:
            raise BadOutputError(f"model {target.name!r} answered without probabilities and label")
        if len(proba) != len(names):
            raise BadOutputError(f"model {target.name!r} gave {len(proba)} probabilities for {len(names)} class names")
        if not 0 <= index < len(names):
            raise BadOutputError(f"model {target.name!r} gave label index {index}; it has {len(names)} classes")
        label = names[index]
        return Prediction(label=label, probabilities=dict(zip(names, proba, strict=True))), label
    ids = [cid for cid, _ in candidates_of(sample_input)]
    scores = out.scores
    if scores is None or len(scores) != len(ids):
        raise BadOutputError(
            f"model {target.name!r} gave {0 if scores is None else len(scores)} scores for {len(ids)} candidates"
        )
    order = sorted(range(len(ids)), key=lambda i: -scores[i])  # stable: ties keep the candidates' order
    ranking = [ids[i] for i in order]
    return Prediction(ranking=ranking, scores=list(scores)), ranking[0]
