"""RowBatcher: concurrent one-row calls of one model are stacked into multi-row calls, each caller reads its row."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from uep_inference.backends.base import BackendError
from uep_inference.backends.row_batching import RowBatcher, RowResult, signature
from uep_inference.backends.triton_contracts import Tensor


class _Answer:
    def __init__(self, outputs: dict[str, np.ndarray]) -> None:
        self.outputs = outputs

    def as_numpy(self, name: str):
        return self.outputs.get(name)


class _Model:
    """Answers ``double`` = 2 × ``x`` row by row; records the rows of each call; fails rows whose x is ``bad``."""

    def __init__(self, bad: float | None = None, error: str = "triton_error") -> None:
        self.calls: list[list[float]] = []
        self.bad = bad
        self.error = error

    async def send(self, inputs, outputs, timeout_s):
        x = inputs[0].value
        self.calls.append([float(v) for v in x.reshape(-1)])
        await asyncio.sleep(0.001)
        if self.bad is not None and (x == self.bad).any():
            raise BackendError(self.error, "the model refused a row")
        return _Answer({"double": x * 2})


def _row(v: float) -> list[Tensor]:
    return [Tensor("x", "FP32", np.array([[v]], dtype=np.float32))]


async def _all(batcher: RowBatcher, model: _Model, values: list[float], max_rows: int):
    return await asyncio.gather(
        *(batcher.infer("m", max_rows, _row(v), ["double"], 5.0, model.send) for v in values), return_exceptions=True
    )


def _value(answer) -> float:
    return float(np.asarray(answer.as_numpy("double")).reshape(-1)[0])


async def test_concurrent_rows_go_out_in_calls_of_at_most_max_rows_and_each_reads_its_own_row():
    batcher, model = RowBatcher(), _Model()
    answers = await _all(batcher, model, [float(v) for v in range(20)], max_rows=8)
    assert [_value(a) for a in answers] == [2.0 * v for v in range(20)]
    assert model.calls == [[float(v) for v in range(0, 8)], [float(v) for v in range(8, 16)], [16.0, 17.0, 18.0, 19.0]]
    assert (batcher.calls, batcher.rows) == (3, 20)
    assert all(isinstance(a, RowResult) for a in answers)
    assert answers[5].as_numpy("double").shape == (1, 1)  # a row keeps its batch dimension of 1
    assert answers[5].as_numpy("missing") is None


async def test_a_lone_row_and_a_model_without_batching_go_out_alone():
    batcher, model = RowBatcher(), _Model()
    (alone,) = await _all(batcher, model, [3.0], max_rows=8)
    assert _value(alone) == 6.0 and model.calls == [[3.0]]
    model.calls.clear()
    answers = await _all(batcher, model, [1.0, 2.0, 3.0], max_rows=1)
    assert [_value(a) for a in answers] == [2.0, 4.0, 6.0]
    assert model.calls == [[1.0], [2.0], [3.0]]


async def test_a_row_the_model_refuses_fails_only_its_own_item():
    batcher, model = RowBatcher(), _Model(bad=3.0)
    answers = await _all(batcher, model, [1.0, 2.0, 3.0, 4.0], max_rows=8)
    assert [_value(a) for a in answers if not isinstance(a, Exception)] == [2.0, 4.0, 8.0]
    assert isinstance(answers[2], BackendError) and answers[2].kind == "triton_error"
    assert model.calls == [[1.0, 2.0, 3.0, 4.0], [1.0], [2.0], [3.0], [4.0]]  # the shared call, then each alone


async def test_a_transient_failure_of_a_shared_call_is_every_row_s_failure():
    batcher, model = RowBatcher(), _Model(bad=2.0, error="triton_unavailable")
    answers = await _all(batcher, model, [1.0, 2.0, 3.0], max_rows=8)
    assert all(isinstance(a, BackendError) and a.kind == "triton_unavailable" for a in answers)
    assert model.calls == [[1.0, 2.0, 3.0]]  # not sent again alone: each item's own retries follow


async def test_rows_that_differ_in_shape_or_outputs_are_not_stacked():
    wide = [Tensor("x", "FP32", np.array([[1.0, 2.0]], dtype=np.float32))]
    assert signature(_row(1.0), ["double"]) == signature(_row(7.0), ["double"])
    assert signature(_row(1.0), ["double"]) != signature(wide, ["double"])
    assert signature(_row(1.0), ["double"]) != signature(_row(1.0), ["double", "other"])
    batcher, model = RowBatcher(), _Model()
    await asyncio.gather(
        batcher.infer("m", 8, _row(1.0), ["double"], 5.0, model.send),
        batcher.infer("m", 8, wide, ["double"], 5.0, model.send),
        batcher.infer("other model", 8, _row(5.0), ["double"], 5.0, model.send),
    )
    assert sorted(model.calls) == [[1.0], [1.0, 2.0], [5.0]]


async def test_an_answer_with_the_wrong_number_of_rows_fails_each_row_alone_instead():
    class Short(_Model):
        async def send(self, inputs, outputs, timeout_s):
            answer = await super().send(inputs, outputs, timeout_s)
            return _Answer({"double": answer.outputs["double"][:1]})

    batcher, model = RowBatcher(), Short()
    answers = await _all(batcher, model, [1.0, 2.0], max_rows=8)
    assert [_value(a) for a in answers] == [2.0, 4.0]  # each row alone got its own one-row answer
    assert model.calls == [[1.0, 2.0], [1.0], [2.0]]


async def test_a_caller_that_gave_up_is_left_out_of_the_call():
    batcher, model = RowBatcher(), _Model()
    gone = asyncio.ensure_future(batcher.infer("m", 8, _row(9.0), ["double"], 5.0, model.send))
    kept = asyncio.ensure_future(batcher.infer("m", 8, _row(1.0), ["double"], 5.0, model.send))
    await asyncio.sleep(0)  # both are queued
    gone.cancel()
    assert _value(await kept) == 2.0
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert model.calls == [[1.0]]
