"""Inference starts the records of one fetch in the order they were published (uep_inference.service.
in_publication_order): a fetch groups records by partition, and the workers take a model's slots in the order
they start."""

from __future__ import annotations

from uep_common.runtime.consuming import Received
from uep_inference.service import in_publication_order


def _rec(name: str, ts: int | None) -> Received:
    return Received(event=name, body=b"", headers={}, timestamp_ms=ts)


def test_a_fetch_is_started_in_publication_order_across_partitions():
    # as a fetch hands them over: partition 0 (an evaluation leased in two passes), then partition 1 (an urgent
    # evaluation leased in between)
    fetched = [_rec("p0-a", 1000), _rec("p0-b", 1000), _rec("p0-c", 1040), _rec("p1-a", 1020), _rec("p1-b", 1020)]
    assert [r.event for r in in_publication_order(fetched)] == ["p0-a", "p0-b", "p1-a", "p1-b", "p0-c"]


def test_ties_and_records_without_a_timestamp_keep_their_order():
    fetched = [_rec("x", 5), _rec("y", None), _rec("z", 5), _rec("w", None)]
    assert [r.event for r in in_publication_order(fetched)] == ["y", "w", "x", "z"]
