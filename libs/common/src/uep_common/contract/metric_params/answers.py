"""Parameter models of the metrics that read one answer or run a program: ``gsm8k_numeric_exact_match``,
``multiple_choice_letter``, ``loglik_multiple_choice``, ``label_match``, ``ndcg``, ``humaneval_pass_at_1`` and
``pass_at_k`` (rules in the scorer's ``uep_scorer.metrics`` modules)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints, field_validator

from .registry import MetricParams, metric_params

MAX_TIMEOUT_S = 120.0
"""Longest wall-clock limit a HumanEval program may be given, in seconds."""


@metric_params("gsm8k_numeric_exact_match")
class Gsm8kParams(MetricParams):
    """``gsm8k_numeric_exact_match``: which of lm-evaluation-harness's two extractions decides the verdict."""

    variant: Literal["flexible", "flexible-extract", "strict", "strict-match"] = Field(
        "flexible",
        description="'flexible' (the last number of the output) or 'strict' (the number after '####'); "
        "'flexible-extract' and 'strict-match' are lm-evaluation-harness's names for them",
    )

    @property
    def extraction(self) -> Literal["flexible", "strict"]:
        """``variant`` without its lm-evaluation-harness alias."""
        return "strict" if self.variant.startswith("strict") else "flexible"


@metric_params("multiple_choice_letter")
class MultipleChoiceParams(MetricParams):
    """``multiple_choice_letter``: the option letters a model may answer with."""

    choices: str | list[str] = Field(
        "ABCD",
        description="the option letters, distinct A-Z (case-insensitive, at most 26), as a string 'ABCD' or a list ['A', 'B']",
    )

    @field_validator("choices")
    @classmethod
    def _distinct_letters(cls, value: str | list[str]) -> str | list[str]:
        letters = "".join(value).upper()
        if isinstance(value, list) and any(len(v) != 1 for v in value):
            raise ValueError(f"choices given as a list must be single letters, e.g. ['A', 'B']; got {value!r}")
        if not letters or not all("A" <= c <= "Z" for c in letters) or len(set(letters)) != len(letters):
            raise ValueError(f"choices must be distinct letters A-Z, e.g. 'ABCD'; got {value!r}")
        return value

    @property
    def letters(self) -> str:
        """``choices`` as one upper-case string, e.g. ``"ABCD"``."""
        return "".join(self.choices).upper()


@metric_params("loglik_multiple_choice")
class LoglikParams(MetricParams):
    """``loglik_multiple_choice`` takes no parameters (the options and the answer are in the reference)."""


@metric_params("label_match")
class LabelMatchParams(MetricParams):
    """``label_match``: how a label is read from an LLM's text and compared."""

    ignore_case: bool = Field(False, description="compare labels case-insensitively (str.casefold)")
    labels: list[Annotated[str, StringConstraints(max_length=200)]] = Field(
        [],
        max_length=1000,
        description="the class labels searched for in an LLM's text; empty: the benchmark's class_names, else the whole text",
    )


@metric_params("ndcg")
class NdcgParams(MetricParams):
    """``ndcg``: the cut-off of NDCG@k (the benchmark's primary score is ``ndcg@<k>``)."""

    k: int = Field(10, ge=1, description="the cut-off of the score NDCG@k", json_schema_extra={"unit": "documents"})


@metric_params("humaneval_pass_at_1")
class HumanEvalParams(MetricParams):
    """``humaneval_pass_at_1``: the sandbox's time limit for each program."""

    timeout_s: float = Field(
        10.0, gt=0, le=MAX_TIMEOUT_S, description="wall-clock limit per program", json_schema_extra={"unit": "seconds"}
    )


@metric_params("pass_at_k")
class PassAtKParams(MetricParams):
    """``pass_at_k``: the k of the unbiased pass@k estimate (the reference holds n and c)."""

    k: int = Field(1, ge=1, description="the k of pass@k", json_schema_extra={"unit": "samples"})
