"""Client-side batching of Triton calls: concurrent one-row requests to one model go out as one multi-row call.

Every request of the ``uep`` generation contract and of the classification contracts is one row with a
leading batch dimension of 1. When several items of one model are at the backend at once (each holding its own
capacity slot, so the model's capacity bound is unchanged), their rows are stacked along that dimension and
sent in one ``infer`` call of at most the model's ``max_batch_size`` rows (its Triton model configuration, read
once per model); each item then reads its own row of the answer. This is what Triton's dynamic batcher does on
the server side, moved before the network hop: one gRPC request, one request object in Triton and one
serialisation instead of one per item. Nothing waits for a batch to fill: the rows that arrive in the same turn
of the event loop are sent together, so a lone item goes out at once, alone.

Requests are stacked only when they are alike: same model and version, same input names, datatypes and
per-row shapes, same outputs asked for (:func:`signature`); a multi-row call has the shortest timeout of its
rows. A multi-row call that fails with a transient
error (the server is unavailable, the deadline passed) fails every row with it, and each item's own retries
follow; any other error sends each row again alone, so one row the model refuses fails only its own item.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from uep_inference.backends.base import BackendError
from uep_inference.backends.triton_contracts import Tensor

log = logging.getLogger(__name__)

Send = Callable[[Sequence[Tensor], Sequence[str], float], Awaitable[Any]]
"""One ``infer`` call: ``(inputs, outputs, timeout_s)`` → the tritonclient result (``as_numpy(name)``);
raises :class:`BackendError`."""

RETRY_ALONE_NOT = frozenset({"triton_unavailable", "timeout"})
"""Error kinds of a multi-row call that every row shares (each item's retries follow); after any other error
each row is sent again alone."""


def signature(inputs: Sequence[Tensor], outputs: Sequence[str]) -> tuple[Hashable, ...]:
    """What two one-row requests must share to be stacked: each input's name, datatype and shape after the
    batch dimension, and the outputs asked for (in order)."""
    return (tuple((t.name, t.datatype, tuple(t.value.shape[1:])) for t in inputs), tuple(outputs))


class RowResult:
    """Row ``row`` of a multi-row answer, read like a one-row one: ``as_numpy(name)`` is that output's
    ``[row : row + 1]`` slice (batch dimension 1), None when the answer lacks it."""

    def __init__(self, result: Any, row: int) -> None:
        self._result = result
        self._row = row

    def as_numpy(self, name: str) -> Any:
        """The output ``name`` of this row, shape ``(1, …)``, or None."""
        values = self._result.as_numpy(name)
        return None if values is None else np.asarray(values)[self._row : self._row + 1]


@dataclass
class _Row:
    inputs: Sequence[Tensor]
    timeout_s: float
    future: asyncio.Future[Any]


@dataclass
class _Queue:
    rows: list[_Row] = field(default_factory=list)
    scheduled: bool = False


class RowBatcher:
    """Stacks concurrent one-row calls of one model (see the module docstring).

    ``infer(key, max_rows, inputs, outputs, timeout_s, send)`` returns what ``send`` returned for a lone row,
    or a :class:`RowResult` of the shared answer; ``key`` names the model (endpoint, name, version) and is
    combined with :func:`signature`; ``max_rows`` ≤ 1 sends at once, alone. The calls sent and the rows they
    carried are counted in :attr:`calls` and :attr:`rows` (rows / calls = the mean batch size), and each call's
    rows are given to ``observe``.
    """

    def __init__(self, observe: Callable[[int], None] | None = None) -> None:
        self._queues: dict[tuple[Hashable, ...], _Queue] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._observe = observe
        self.calls = 0
        self.rows = 0

    def _count(self, rows: int) -> None:
        self.calls += 1
        self.rows += rows
        if self._observe is not None:
            self._observe(rows)

    async def infer(
        self,
        key: Hashable,
        max_rows: int,
        inputs: Sequence[Tensor],
        outputs: Sequence[str],
        timeout_s: float,
        send: Send,
    ) -> Any:
        """The answer to one row (see the class docstring). Raises :class:`BackendError`."""
        if max_rows <= 1 or any(t.value.ndim == 0 or t.value.shape[0] != 1 for t in inputs):
            self._count(1)
            return await send(inputs, outputs, timeout_s)
        qkey = (key, signature(inputs, outputs))
        queue = self._queues.setdefault(qkey, _Queue())
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        queue.rows.append(_Row(inputs, timeout_s, future))
        if len(queue.rows) >= max_rows:
            self._flush(qkey, max_rows, outputs, send)
        elif not queue.scheduled:
            queue.scheduled = True
            asyncio.get_running_loop().call_soon(self._flush, qkey, max_rows, outputs, send)
        return await future

    def _flush(self, qkey: tuple[Hashable, ...], max_rows: int, outputs: Sequence[str], send: Send) -> None:
        queue = self._queues.get(qkey)
        if queue is None:
            return
        queue.scheduled = False
        while queue.rows:
            batch, queue.rows = queue.rows[:max_rows], queue.rows[max_rows:]
            task = asyncio.create_task(self._send(batch, outputs, send))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        del self._queues[qkey]

    async def _send(self, batch: list[_Row], outputs: Sequence[str], send: Send) -> None:
        batch = [r for r in batch if not r.future.done()]  # a caller that gave up (its timeout) is left out
        if not batch:
            return
        if len(batch) == 1:
            await self._alone(batch[0], outputs, send)
            return
        stacked = [
            Tensor(t.name, t.datatype, np.concatenate([r.inputs[i].value for r in batch], axis=0))
            for i, t in enumerate(batch[0].inputs)
        ]
        self._count(len(batch))
        try:
            result = await send(stacked, outputs, min(r.timeout_s for r in batch))
            for name in outputs:
                values = result.as_numpy(name)
                if values is not None and np.asarray(values).shape[:1] != (len(batch),):
                    raise BackendError(
                        "triton_bad_response",
                        f"the model answered {name!r} for {np.asarray(values).shape[:1]} rows of {len(batch)}",
                    )
        except BackendError as err:
            if err.kind in RETRY_ALONE_NOT:
                for r in batch:
                    if not r.future.done():
                        r.future.set_exception(err)
                return
            log.info("a %d-row call failed (%s); each row is sent alone", len(batch), err.kind)
            await asyncio.gather(*(self._alone(r, outputs, send) for r in batch))
            return
        except BaseException as exc:  # cancelled at shutdown, or a bug: no caller is left waiting
            for r in batch:
                if not r.future.done():
                    if isinstance(exc, Exception):
                        r.future.set_exception(exc)
                    else:
                        r.future.cancel()
            raise
        for row, r in enumerate(batch):
            if not r.future.done():
                r.future.set_result(RowResult(result, row))

    async def _alone(self, row: _Row, outputs: Sequence[str], send: Send) -> None:
        self._count(1)
        try:
            result = await send(row.inputs, outputs, row.timeout_s)
        except Exception as exc:  # noqa: BLE001 - the caller's error, whatever it is: handed to the caller
            if not row.future.done():
                row.future.set_exception(exc)
            return
        except BaseException:  # cancelled at shutdown: the caller is cancelled too
            if not row.future.done():
                row.future.cancel()
            raise
        if not row.future.done():
            row.future.set_result(result)
