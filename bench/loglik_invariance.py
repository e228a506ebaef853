"""bench/loglik_invariance: what exact, path-independent log-likelihoods cost on the embedded SmolLM2.

``.venv/bin/python bench/loglik_invariance.py [--mmlu 20] [--hellaswag 10] [--truthfulqa 10]``

Four llama.cpp servers (xllamacpp, in this process, 2 threads each, the same GGUF) score the same items, item
by item in turn, so that the machine's load falls on all four alike:

* ``before``: flash attention on (llama.cpp's default), an item's context evaluated once and each further
  continuation after a one-token re-decode of its last token (the method the model server used before);
* ``fa-off``: the same method with flash attention off (what the kernel change alone costs);
* ``incremental``: :class:`uep_model_server.loglik.LlamaServerLoglik` with ``incremental``: flash attention
  off, each continuation's context from an empty cache, then one appended token per step;
* ``after``: :class:`~uep_model_server.loglik.LlamaServerLoglik` as served: flash attention off and every
  step from an empty cache.

Prints items/s of each and the ratios, and the largest |Δ log-likelihood| of a choice between ``before``
and ``after`` and between ``before`` and the same ``before`` scored in reverse order (the path dependence
the change removes). Items: the stratified MMLU sample of bench/vs_lm_eval (one-token choices), HellaSwag
and TruthfulQA MC1 (whole-answer choices), their lm-eval prompts.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


def server(flash_attn: bool) -> Any:
    """An in-process llama.cpp server over SmolLM2 (one slot, 2 threads), flash attention on or off."""
    import xllamacpp as xlc

    from uep_model_server.llm import gguf_path

    params = xlc.CommonParams()
    params.model.path = str(gguf_path())
    params.n_parallel, params.n_ctx, params.verbosity = 1, 2048, 1
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = 2
    kind = xlc.llama_flash_attn_type
    params.flash_attn_type = kind.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash_attn else kind.LLAMA_FLASH_ATTN_TYPE_DISABLED
    return xlc.Server(params)


def reuse_method(scorer: Any, pairs: list[tuple[list[int], list[int]]]) -> list[float]:
    """The previous method: every step with ``cache_prompt`` (the slot's cache kept from the previous pair)."""
    out = []
    for context, continuation in pairs:
        prefix, total = list(context), 0.0
        for token in continuation:
            total += scorer.step(prefix, token, fresh=False)[0]
            prefix.append(token)
        out.append(total)
    return out


def items(n_mmlu: int, n_hellaswag: int, n_truthfulqa: int) -> list[list[tuple[str, str]]]:
    """Each item's (context, continuation) pairs, lm-eval's prompts."""
    from uep_common.builtin import catalog, datasets
    from vs_lm_eval import stratified_mmlu

    def mmlu(i: dict[str, Any]) -> str:
        c = i["choices"]
        return (
            f"The following are multiple choice questions (with answers) about {i['subject'].replace('_', ' ')}.\n\n"
            f"{i['question'].strip()}\nA. {c[0]}\nB. {c[1]}\nC. {c[2]}\nD. {c[3]}\nAnswer:"
        )

    out = [[(mmlu(it.input), " " + x) for x in "ABCD"] for it in stratified_mmlu(n_mmlu)]
    out += [[(it.input["query"], " " + e) for e in it.input["choices"]] for it in datasets.load_hellaswag_loglik()[:n_hellaswag]]
    preamble = catalog.TRUTHFULQA_QA_PROMPT + "\n\nQ: {q}\nA:"
    out += [
        [(preamble.format(q=it.input["question"]), " " + c) for c in it.input["choices"]]
        for it in datasets.load_truthfulqa_mc1_loglik()[:n_truthfulqa]
    ]
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the bench (module docstring); always returns 0 (it measures, it sets no target)."""
    from uep_model_server.loglik import LlamaServerLoglik

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mmlu", type=int, default=20)
    parser.add_argument("--hellaswag", type=int, default=10)
    parser.add_argument("--truthfulqa", type=int, default=10)
    args = parser.parse_args(argv)
    work = items(args.mmlu, args.hellaswag, args.truthfulqa)
    names = ("before", "fa-off", "incremental", "after")
    scorers = {n: LlamaServerLoglik(server(n == "before"), 2048, incremental=n == "incremental") for n in names}
    tokenised = [[scorers["after"].encode_pair(c, k) for c, k in item] for item in work]
    seconds = dict.fromkeys(scorers, 0.0)
    values: dict[str, list[float]] = {name: [] for name in scorers}
    for pairs in tokenised:
        for name, scorer in scorers.items():
            started = time.perf_counter()
            if name in ("after", "incremental"):
                values[name] += [scorer.score(c, k)[0] for c, k in pairs]
            else:
                values[name] += reuse_method(scorer, pairs)
            seconds[name] += time.perf_counter() - started
    reverse = reuse_method(scorers["before"], [p for pairs in tokenised for p in pairs][::-1])[::-1]
    n = len(tokenised)
    print(
        f"items {n} ({args.mmlu} MMLU, {args.hellaswag} HellaSwag, {args.truthfulqa} TruthfulQA MC1), pairs {len(values['after'])}"
    )
    for name in scorers:
        print(f"{name:7s} {n / seconds[name]:6.3f} items/s ({seconds[name]:.1f} s)")
    print(
        f"speed / before: after {seconds['before'] / seconds['after']:.2f}, incremental "
        f"{seconds['before'] / seconds['incremental']:.2f}, fa-off {seconds['before'] / seconds['fa-off']:.2f}"
    )
    print(
        f"max |Δ loglik| incremental vs after {max(abs(a - b) for a, b in zip(values['incremental'], values['after'], strict=True)):.4f}"
    )
    print(f"max |Δ loglik| before vs after {max(abs(a - b) for a, b in zip(values['before'], values['after'], strict=True)):.4f}")
    print(
        f"max |Δ loglik| before vs before in reverse order {max(abs(a - b) for a, b in zip(values['before'], reverse, strict=True)):.4f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
