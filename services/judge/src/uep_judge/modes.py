"""Asking judges: one judge call with bounded re-asks (:func:`ask`), rubric/reference grading
(:func:`grade`), pairwise comparison in both orders (:func:`compare`).

Every call, valid or not, is kept in :class:`Verdict.attempts` with its raw text, so an invalid answer is
recorded with what the judge actually said. Every call carries the answer's JSON schema
(:func:`uep_judge.schema.answer_schema`), so that a backend with constrained decoding answers within the
declared scale or label set; every answer is parsed strictly all the same, and an unusable one is re-asked
(bounded by ``max_retries``) whether it came constrained or not.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from uep_common.contract.events import ModelTarget
from uep_common.contract.judge_config import JudgeConfig
from uep_judge.client import Generate, JudgeCallError
from uep_judge.parsing import (
    JudgeParseError,
    PairwiseVerdict,
    RubricVerdict,
    failure_status,
    parse_pairwise,
    parse_rubric,
)
from uep_judge.schema import answer_schema
from uep_judge.templates import JudgeTemplate, pairwise_variables, retry_prompt, rubric_variables


@dataclass(frozen=True)
class Attempt:
    """One judge call: the raw reply (None when the call itself failed), why it was unusable (None = valid),
    ``call_failed`` when the model could not be called, token counts and latency; ``status``: 'valid',
    'invalid' (a verdict off the declared scale or label set), 'unparsed' (no verdict readable) or
    'call_failed'; ``constrained``: the reply was decoded under the answer's JSON schema."""

    raw: str | None
    error: str | None
    call_failed: bool = False
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_ms: float | None = None
    status: str = "valid"
    constrained: bool = False


@dataclass
class Verdict:
    """One judge's answer to one prompt (one order, for pairwise), after its re-asks."""

    judge: ModelTarget
    position: str  # 'AB', 'BA' (pairwise) or '-'
    attempts: list[Attempt] = field(default_factory=list)
    rubric: RubricVerdict | None = None
    pairwise: PairwiseVerdict | None = None

    @property
    def valid(self) -> bool:
        """Whether the last answer parsed and passed the checks."""
        return self.rubric is not None or self.pairwise is not None

    @property
    def rubric_result(self) -> RubricVerdict:
        """The parsed answer of a valid rubric/reference verdict."""
        assert self.rubric is not None, "not a valid rubric verdict"
        return self.rubric

    @property
    def pairwise_result(self) -> PairwiseVerdict:
        """The parsed answer of a valid pairwise verdict."""
        assert self.pairwise is not None, "not a valid pairwise verdict"
        return self.pairwise

    @property
    def raw_text(self) -> str | None:
        """The last raw reply."""
        raws = [a.raw for a in self.attempts if a.raw is not None]
        return raws[-1] if raws else None

    @property
    def error(self) -> str | None:
        """Why the last answer was unusable (None when valid)."""
        return None if self.valid or not self.attempts else self.attempts[-1].error

    @property
    def call_failed(self) -> bool:
        """The judge model could not be called at all (not an answer problem)."""
        return not self.valid and bool(self.attempts) and self.attempts[-1].call_failed

    @property
    def status(self) -> str:
        """'valid', or the last attempt's failure: 'invalid', 'unparsed', 'call_failed' ('unparsed' with no
        attempt at all)."""
        if self.valid:
            return "valid"
        return self.attempts[-1].status if self.attempts else "unparsed"

    @property
    def parse_failures(self) -> int:
        """Replies that came back but were unusable."""
        return sum(1 for a in self.attempts if a.raw is not None and a.error is not None)


async def ask(
    generate: Generate,
    judge: ModelTarget,
    prompt: str,
    parse: Callable[[str], RubricVerdict | PairwiseVerdict],
    max_retries: int,
    max_tokens: int,
    position: str = "-",
    schema: dict[str, Any] | None = None,
) -> Verdict:
    """Ask ``judge`` (with the answer's JSON ``schema`` for constrained decoding, when there is one); re-ask
    up to ``max_retries`` times while the reply is unparsed or invalid, feeding the parse error and the
    previous reply back (``templates/retry``). A failed model call ends the verdict (invalid) at once: the
    inference service already retried transient failures."""
    verdict = Verdict(judge, position)
    current = prompt
    for _ in range(max_retries + 1):
        try:
            gen = await generate(judge, current, max_tokens, schema)
        except JudgeCallError as exc:
            verdict.attempts.append(Attempt(None, f"{exc.kind}: {exc}", call_failed=True, status="call_failed"))
            return verdict
        usage = (gen.prompt_tokens, gen.completion_tokens, gen.latency_ms)
        try:
            parsed = parse(gen.text)
        except JudgeParseError as exc:
            verdict.attempts.append(
                Attempt(gen.text, str(exc), False, *usage, status=failure_status(exc), constrained=gen.constrained)
            )
            current = retry_prompt(prompt, str(exc), gen.text)
            continue
        verdict.attempts.append(Attempt(gen.text, None, False, *usage, constrained=gen.constrained))
        if isinstance(parsed, RubricVerdict):
            verdict.rubric = parsed
        else:
            verdict.pairwise = parsed
        return verdict
    return verdict


async def grade(
    generate: Generate,
    cfg: JudgeConfig,
    template: JudgeTemplate,
    judges: list[ModelTarget],
    question: str,
    answer: str,
    reference: str | None,
) -> list[Verdict]:
    """Rubric or reference-guided grading of ``answer`` by every judge (concurrently): one verdict each."""
    prompt = template.render(**rubric_variables(cfg, question, answer, reference))
    schema = answer_schema(cfg)
    return list(
        await asyncio.gather(
            *(
                ask(generate, j, prompt, lambda text: parse_rubric(text, cfg), cfg.max_retries, cfg.max_tokens, "-", schema)
                for j in judges
            )
        )
    )


OUTCOME = {"AB": {"A": "win", "B": "loss", "tie": "tie"}, "BA": {"A": "loss", "B": "win", "tie": "tie"}}
"""Candidate's outcome from the winner answered in each order ('AB': the candidate's answer is A)."""


@dataclass
class Comparison:
    """One judge's pairwise comparison: both orders, and the candidate's outcome ('win', 'loss', 'tie').
    ``inconsistent``: both orders were answered but disagree (a position-swap inconsistency), and the
    outcome is then a tie. ``valid`` only when both orders were answered validly."""

    judge: ModelTarget
    ab: Verdict
    ba: Verdict

    @property
    def valid(self) -> bool:
        """Whether both orders were answered validly."""
        return self.ab.valid and self.ba.valid

    @property
    def outcomes(self) -> tuple[str | None, str | None]:
        """The candidate's outcome in each order (None where invalid)."""
        return (
            OUTCOME["AB"][self.ab.pairwise_result.winner] if self.ab.valid else None,
            OUTCOME["BA"][self.ba.pairwise_result.winner] if self.ba.valid else None,
        )

    @property
    def inconsistent(self) -> bool:
        """Whether both orders are valid but give the candidate different outcomes (a position-swap inconsistency)."""
        o1, o2 = self.outcomes
        return self.valid and o1 != o2

    @property
    def outcome(self) -> str | None:
        """The candidate's outcome ('win', 'loss', 'tie'): that of both orders when they agree, else 'tie'; None
        unless both orders are valid."""
        if not self.valid:
            return None
        o1, o2 = self.outcomes
        return o1 if o1 == o2 else "tie"


async def compare(
    generate: Generate,
    cfg: JudgeConfig,
    template: JudgeTemplate,
    judges: list[ModelTarget],
    question: str,
    answer: str,
    baseline: str,
    reference: str | None,
) -> list[Comparison]:
    """Pairwise comparison of ``answer`` (the candidate) with ``baseline`` by every judge, in both orders."""
    ab = template.render(**pairwise_variables(question, answer, baseline, reference))
    ba = template.render(**pairwise_variables(question, baseline, answer, reference))
    schema = answer_schema(cfg)
    calls = []
    for j in judges:
        calls.append(ask(generate, j, ab, parse_pairwise, cfg.max_retries, cfg.max_tokens, "AB", schema))
        calls.append(ask(generate, j, ba, parse_pairwise, cfg.max_retries, cfg.max_tokens, "BA", schema))
    done = await asyncio.gather(*calls)
    return [Comparison(j, done[2 * i], done[2 * i + 1]) for i, j in enumerate(judges)]
