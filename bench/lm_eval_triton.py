"""lm-evaluation-harness through a thin adapter onto uep's served model (the Triton model users get).

Run in the lm-eval environment of bench/vs_lm_eval (``.cache/lm-eval-venv``), in place of ``python -m
lm_eval``: ``python bench/lm_eval_triton.py --model uep-triton --model_args
base_url=http://127.0.0.1:8000,model=smollm2_135m_instruct --tasks ...``. It registers the lm-eval model
``uep-triton`` and hands the command line to lm-eval's own ``cli_evaluate``.

The adapter speaks Triton's KServe v2 HTTP/JSON protocol to the model server's text contract
(``deploy/model-server/README.md``):

* ``loglikelihood``: lm-eval's ``(context, continuation)`` strings as rows ``text_input`` + ``continuation``
  (at most 8 rows a call, the model's ``max_batch_size``); the answer's ``logprob`` and ``is_greedy`` are
  lm-eval's ``(ll, is_greedy)``. The server tokenises as lm-eval's ``_encode_pair`` does, so lm-eval's own
  tokenizer is not involved.
* ``generate_until``: ``text_input`` with ``chat`` 0 (raw completion), ``max_tokens`` = ``max_gen_toks``
  (default 256), ``temperature`` 0, ``stop`` = ``until``; the answer's ``text_output``, cut at the first stop
  string as lm-eval does.

Only the standard library is imported besides lm-eval, which runs in its own environment.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from lm_eval.api.model import LM
from lm_eval.api.registry import register_model

ROWS_PER_CALL = 8
"""The served model's ``max_batch_size``."""


@register_model("uep-triton")
class TritonLM(LM):  # type: ignore[misc]
    """lm-eval ``LM`` whose requests go to one model of a Triton server (module docstring).

    Args:
        base_url: the server's HTTP address, e.g. ``http://127.0.0.1:8000``.
        model: the Triton model name (``smollm2_135m_instruct``).
        timeout: seconds per HTTP call.
    """

    def __init__(self, base_url: str, model: str, timeout: float = 600.0, **_: Any) -> None:
        super().__init__()
        self.url = f"{base_url.rstrip('/')}/v2/models/{model}/infer"
        self.timeout = float(timeout)

    def _infer(self, inputs: dict[str, tuple[str, list[Any]]], outputs: list[str]) -> dict[str, list[Any]]:
        """One infer call: ``inputs`` name -> (datatype, one value per row); returns each output's values."""
        rows = len(next(iter(inputs.values()))[1])
        body = {
            "inputs": [{"name": n, "shape": [rows, 1], "datatype": t, "data": v} for n, (t, v) in inputs.items()],
            "outputs": [{"name": n} for n in outputs],
        }
        request = urllib.request.Request(
            self.url, data=json.dumps(body).encode("utf-8"), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=self.timeout) as response:
            answer = json.loads(response.read())
        return {o["name"]: o["data"] for o in answer["outputs"]}

    def loglikelihood(self, requests: list[Any], disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        results: list[tuple[float, bool]] = []
        for start in range(0, len(requests), ROWS_PER_CALL):
            chunk = [r.args for r in requests[start : start + ROWS_PER_CALL]]
            out = self._infer(
                {"text_input": ("BYTES", [c for c, _ in chunk]), "continuation": ("BYTES", [k for _, k in chunk])},
                ["logprob", "is_greedy"],
            )
            results += [(float(lp), bool(g)) for lp, g in zip(out["logprob"], out["is_greedy"], strict=True)]
        return results

    def loglikelihood_rolling(self, requests: list[Any], disable_tqdm: bool = False) -> list[float]:
        raise NotImplementedError("uep-triton scores continuations only (no rolling log-likelihood)")

    def generate_until(self, requests: list[Any], disable_tqdm: bool = False) -> list[str]:
        texts = []
        for request in requests:
            context, kwargs = request.args
            until = kwargs.get("until") or []
            until = [until] if isinstance(until, str) else list(until)
            out = self._infer(
                {
                    "text_input": ("BYTES", [context]),
                    "chat": ("INT32", [0]),
                    "max_tokens": ("INT32", [int(kwargs.get("max_gen_toks", 256))]),
                    "temperature": ("FP32", [0.0]),
                    "stop": ("BYTES", [json.dumps(until)]),
                },
                ["text_output"],
            )
            text = str(out["text_output"][0])
            for stop in until:
                text = text.split(stop)[0]
            texts.append(text)
        return texts


if __name__ == "__main__":
    from lm_eval.__main__ import cli_evaluate

    cli_evaluate()
