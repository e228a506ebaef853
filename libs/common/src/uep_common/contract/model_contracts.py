"""The model contracts: which tensors (or API) a registered model of each kind speaks, in one table.

A contract is keyed by ``(kind, contract)``: the model's :class:`~uep_common.contract.events.ModelKind` and the name of
its tensor or API contract (``ModelTarget.contract``, the registry's ``models.contract``). The inference
service builds its requests from these names; the gateway checks a Triton model's KServe v2 metadata against
them when the model is registered (:func:`check_metadata`). The user-facing description is docs/models.md.

Shapes are per request row, without the batch dimension: a batching Triton model (``max_batch_size`` > 0)
reports one more leading dimension, ``-1``, in its metadata, which :func:`check_metadata` strips. ``-1`` in a
contract shape, or in the model's, matches any size. A dimension given as a string is read from the model's
``spec``: ``"n_classes"`` = ``len(spec["class_names"])``, ``"n_features"`` = ``spec["n_features"]``,
``"dimension"`` = ``spec["dimension"]``.

``optional``: an input the model need not declare (the platform sends it only to a model that declares it);
an output the platform reads only when the model has it. Datatypes are Triton's names (``BYTES``, ``BOOL``,
``INT32``, ``INT64``, ``FP32``; the KServe v2 protocol's tensor data types).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from uep_common.contract.events import Backend, ModelKind

Dim = int | str
"""A contract dimension: a size, ``-1`` (any), or the name of a spec value (``n_classes``, ``n_features``, ``dimension``)."""


@dataclass(frozen=True)
class TensorSpec:
    """One input or output tensor of a contract: its name, Triton datatype, per-row shape and whether it may be absent."""

    name: str
    datatype: str
    shape: tuple[Dim, ...]
    optional: bool = False


@dataclass(frozen=True)
class Contract:
    """What a model of one ``(kind, contract)`` takes and gives, and through which backend it is reached.

    ``inputs``/``outputs`` are empty for an API contract (``openai``): the backend speaks HTTP, not tensors.
    ``spec_keys``: the spec values a model of this contract must declare (checked by the registry).
    """

    kind: ModelKind
    name: str
    backend: Backend
    inputs: tuple[TensorSpec, ...] = ()
    outputs: tuple[TensorSpec, ...] = ()
    spec_keys: tuple[str, ...] = ()
    summary: str = ""

    def input(self, name: str) -> TensorSpec:
        """The input tensor called ``name``; raises ``KeyError``."""
        return _named(self.inputs, name)

    def output(self, name: str) -> TensorSpec:
        """The output tensor called ``name``; raises ``KeyError``."""
        return _named(self.outputs, name)


def _named(tensors: tuple[TensorSpec, ...], name: str) -> TensorSpec:
    for t in tensors:
        if t.name == name:
            return t
    raise KeyError(name)


# generation/uep: the platform's own contract (deploy/model-server/src/uep_model_server/io.py); the inference
# service always sends the five inputs, so a model must declare them (its config may mark them optional).
UEP_GENERATION_INPUTS = (
    TensorSpec("text_input", "BYTES", (1,)),
    TensorSpec("max_tokens", "INT32", (1,)),
    TensorSpec("temperature", "FP32", (1,)),
    TensorSpec("stop", "BYTES", (1,)),
    TensorSpec("chat", "INT32", (1,)),
    TensorSpec("continuation", "BYTES", (1,), optional=True),
    TensorSpec("json_schema", "BYTES", (1,), optional=True),
)
UEP_GENERATION_OUTPUTS = (
    TensorSpec("text_output", "BYTES", (1,)),
    TensorSpec("prompt_tokens", "INT32", (1,)),
    TensorSpec("completion_tokens", "INT32", (1,)),
    TensorSpec("logprob", "FP32", (1,), optional=True),
    TensorSpec("is_greedy", "INT32", (1,), optional=True),
)

CLASSIFICATION_OUTPUTS = (
    TensorSpec("probabilities", "FP32", ("n_classes",)),
    TensorSpec("label", "INT64", (1,)),
)

_ALL: tuple[Contract, ...] = (
    Contract(
        ModelKind.generation,
        "uep",
        Backend.triton,
        UEP_GENERATION_INPUTS,
        UEP_GENERATION_OUTPUTS,
        summary="The platform's Triton contract (the local model server's).",
    ),
    Contract(
        ModelKind.generation,
        "vllm",
        Backend.triton,
        (
            TensorSpec("text_input", "BYTES", (1,)),
            TensorSpec("stream", "BOOL", (1,), optional=True),
            TensorSpec("sampling_parameters", "BYTES", (1,)),
            TensorSpec("exclude_input_in_output", "BOOL", (1,)),
        ),
        (TensorSpec("text_output", "BYTES", (-1,)),),
        summary="Triton's vLLM backend (max_batch_size 0: no batch dimension).",
    ),
    Contract(
        ModelKind.generation,
        "trtllm",
        Backend.triton,
        (
            TensorSpec("text_input", "BYTES", (1,)),
            TensorSpec("max_tokens", "INT32", (1,)),
            TensorSpec("stop_words", "BYTES", (-1,), optional=True),
            TensorSpec("bad_words", "BYTES", (-1,), optional=True),
            TensorSpec("temperature", "FP32", (1,), optional=True),
            TensorSpec("guided_decoding_guide_type", "BYTES", (1,), optional=True),
            TensorSpec("guided_decoding_guide", "BYTES", (1,), optional=True),
        ),
        (TensorSpec("text_output", "BYTES", (-1,)),),
        summary="The TensorRT-LLM backend's ensemble model.",
    ),
    Contract(
        ModelKind.generation,
        "openai",
        Backend.openai_compatible,
        summary="An OpenAI-compatible HTTP API (/v1/completions, /v1/chat/completions).",
    ),
    Contract(
        ModelKind.classification,
        "text",
        Backend.triton,
        (TensorSpec("text", "BYTES", (1,)),),
        CLASSIFICATION_OUTPUTS,
        spec_keys=("class_names",),
        summary="Text in; one probability per class and the class index out.",
    ),
    Contract(
        ModelKind.classification,
        "features",
        Backend.triton,
        (TensorSpec("features", "FP32", ("n_features",)),),
        CLASSIFICATION_OUTPUTS,
        spec_keys=("class_names", "n_features"),
        summary="A feature vector in; one probability per class and the class index out.",
    ),
    Contract(
        ModelKind.ranking,
        "uep",
        Backend.triton,
        (TensorSpec("query", "BYTES", (1,)), TensorSpec("candidates", "BYTES", (-1,))),
        (TensorSpec("scores", "FP32", (-1,)),),
        summary="A query and candidate texts in; one score per candidate out (higher = better).",
    ),
    Contract(
        ModelKind.embedding,
        "uep",
        Backend.triton,
        (TensorSpec("text", "BYTES", (1,)),),
        (TensorSpec("embedding", "FP32", ("dimension",)),),
        spec_keys=("dimension",),
        summary="Text in; a vector of spec.dimension floats out.",
    ),
)

CONTRACTS: dict[tuple[ModelKind, str], Contract] = {(c.kind, c.name): c for c in _ALL}
"""Every contract by ``(kind, contract name)``."""

DEFAULT_CONTRACT: dict[tuple[ModelKind, Backend], str] = {
    (ModelKind.generation, Backend.triton): "uep",
    (ModelKind.generation, Backend.openai_compatible): "openai",
    (ModelKind.classification, Backend.triton): "text",
    (ModelKind.ranking, Backend.triton): "uep",
    (ModelKind.embedding, Backend.triton): "uep",
}
"""The contract a registration that names none gets, by kind and backend."""


def contract_for(kind: ModelKind | str, contract: str) -> Contract | None:
    """The contract ``(kind, contract)``, or ``None`` when there is no such combination."""
    try:
        return CONTRACTS.get((ModelKind(kind), contract))
    except ValueError:
        return None


def contract_names(kind: ModelKind | str) -> list[str]:
    """The contract names a model of ``kind`` may speak (sorted); empty for an unknown kind."""
    return sorted(name for k, name in CONTRACTS if k.value == str(kind))


def resolve_dim(dim: Dim, spec: Mapping[str, Any]) -> int:
    """A contract dimension as a size: an int as is (``-1`` = any), a spec name read from ``spec``
    (``n_classes`` = ``len(spec["class_names"])``); ``-1`` when the spec lacks it."""
    if isinstance(dim, int):
        return dim
    if dim == "n_classes":
        names = spec.get("class_names")
        return len(names) if isinstance(names, list) else -1
    value = spec.get(dim)
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


MAX_DIM_DIGITS = 18
"""A metadata dimension is an int64 (KServe v2): at most 18 digits, as an int or a decimal string."""


def _dim(value: Any) -> int | None:
    """A dimension of a model's metadata shape as an int: an int (not a bool) or a string of ASCII digits
    with an optional minus sign (Triton's HTTP metadata sends int64 as either); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if abs(value) < 10**MAX_DIM_DIGITS else None
    if isinstance(value, str) and re.fullmatch(rf"-?[0-9]{{1,{MAX_DIM_DIGITS}}}", value):
        return int(value)
    return None


def _shape_problem(want: tuple[Dim, ...], got: list[Any], spec: Mapping[str, Any], batched: bool | None) -> str | None:
    """Why a model's metadata shape ``got`` (dimensions checked by :func:`_dim`) does not match the contract
    shape ``want``, or ``None``."""
    dims = [int(d) for d in (_dim(g) for g in got) if d is not None]
    expected = [resolve_dim(d, spec) for d in want]
    # a batching model reports a leading -1 (the batch); strip it when the lengths say so
    if batched is True or (batched is None and len(dims) == len(expected) + 1 and dims[:1] == [-1]):
        if not dims or dims[0] != -1:
            return f"shape {dims}: expected a leading batch dimension -1"
        dims = dims[1:]
    if len(dims) != len(expected):
        return f"shape {dims}: expected {expected} (-1 = any)"
    for i, (g, e) in enumerate(zip(dims, expected, strict=True)):
        if g != -1 and e != -1 and g != e:
            named = f" ({want[i]} = {e})" if isinstance(want[i], str) else ""
            return f"shape {dims}: dimension {i} is {g}, expected {e}{named}"
    return None


def _tensors(metadata: Mapping[str, Any], key: str) -> dict[str, Mapping[str, Any]]:
    items = metadata.get(key)
    if not isinstance(items, list):
        return {}
    return {str(t["name"]): t for t in items if isinstance(t, Mapping) and "name" in t}


def check_metadata(
    kind: ModelKind | str,
    contract: str,
    spec: Mapping[str, Any],
    metadata: Mapping[str, Any],
    config: Mapping[str, Any] | None = None,
) -> list[str]:
    """Problems of a Triton model's KServe v2 metadata against the contract ``(kind, contract)``; empty = it fits.

    ``metadata``: the body of ``GET /v2/models/{name}[/versions/{v}]`` (``inputs``/``outputs``: lists of
    ``{"name", "datatype", "shape"}``). ``config`` (optional): the body of ``GET /v2/models/{name}/config``;
    with it the batch dimension is known from ``max_batch_size`` and a model input the contract does not send
    is a problem unless the config marks it ``optional``. Each problem names its tensor:
    ``"tensor 'probabilities': shape [3]: dimension 0 is 3, expected 4 (n_classes = 4)"``.
    An unknown ``(kind, contract)`` is one problem naming it.
    """
    found = contract_for(kind, contract)
    if found is None:
        return [f"no contract {contract!r} for kind {str(kind)!r}"]
    batched: bool | None = None
    if config is not None and _dim(config.get("max_batch_size")) is not None:
        batched = int(config["max_batch_size"]) > 0
    problems: list[str] = []
    for role, want_list, got in (
        ("input", found.inputs, _tensors(metadata, "inputs")),
        ("output", found.outputs, _tensors(metadata, "outputs")),
    ):
        for want in want_list:
            tensor = got.get(want.name)
            if tensor is None:
                if not want.optional:
                    problems.append(f"tensor {want.name!r}: the model has no {role} {want.name!r} ({want.datatype})")
                continue
            datatype = str(tensor.get("datatype", ""))
            if datatype.upper() != want.datatype:
                problems.append(f"tensor {want.name!r}: datatype {datatype}, expected {want.datatype}")
            shape = tensor.get("shape")
            if not isinstance(shape, list) or len(shape) > 64 or any(_dim(d) is None for d in shape):
                problems.append(f"tensor {want.name!r}: no shape of int64 dimensions in the metadata")
                continue
            why = _shape_problem(want.shape, shape, spec, batched)
            if why:
                problems.append(f"tensor {want.name!r}: {why}")
    if config is not None:
        known = {t.name for t in found.inputs}
        listed = config.get("input")
        cfg_inputs = {str(t.get("name")): t for t in (listed if isinstance(listed, list) else []) if isinstance(t, Mapping)}
        for name in _tensors(metadata, "inputs"):
            if name not in known and cfg_inputs.get(name, {}).get("optional") is not True:
                problems.append(f"tensor {name!r}: the model requires input {name!r}, which contract {contract!r} does not send")
    return problems
