"""Log-likelihood items: which continuations a sample asks for, and the output text they become.

A benchmark whose prompt has a ``loglik`` block (:class:`uep_common.contract.events.LoglikSpec`) is scored the way
lm-evaluation-harness scores ``output_type: multiple_choice`` tasks: the rendered prompt is the context, each
choice preceded by the target delimiter is a continuation, and the model returns the summed log-probability
of each (:meth:`uep_inference.backends.base.ModelBackend.loglikelihood`). The scorer's
``loglik_multiple_choice`` metric reads the output written here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from uep_common.contract.events import LoglikSpec
from uep_inference.backends.base import Loglik

MAX_CHOICES = 32
"""Continuations one sample may ask for (each is one model evaluation of context + continuation)."""


def loglik_continuations(spec: LoglikSpec, sample_input: dict[str, Any]) -> tuple[str, ...]:
    """The continuations of one sample: ``spec.target_delimiter`` + each choice, choices being
    ``spec.choices`` or the list in the sample's input field ``spec.choices_field``.

    Raises:
        ValueError: the field is missing, not a list of 1 to :data:`MAX_CHOICES` non-empty strings.
    """
    choices: Any = spec.choices if spec.choices is not None else sample_input.get(spec.choices_field or "")
    if spec.choices is None and spec.choices_field not in sample_input:
        raise ValueError(f"the sample has no input field {spec.choices_field!r} (the log-likelihood choices)")
    if not isinstance(choices, list) or not 1 <= len(choices) <= MAX_CHOICES:
        raise ValueError(f"the log-likelihood choices must be a list of 1 to {MAX_CHOICES} strings")
    if any(not isinstance(c, str) or not c for c in choices):
        raise ValueError("every log-likelihood choice must be a non-empty string")
    return tuple(spec.target_delimiter + c for c in choices)


def loglik_output(logliks: Sequence[Loglik]) -> str:
    """The output text of a log-likelihood item: JSON ``{"logprobs": [float], "n_tokens": [int],
    "is_greedy": [bool]}``, one entry per choice in order (what ``loglik_multiple_choice`` scores)."""
    return json.dumps(
        {
            "logprobs": [x.logprob for x in logliks],
            "n_tokens": [x.n_tokens for x in logliks],
            "is_greedy": [x.is_greedy for x in logliks],
        }
    )
