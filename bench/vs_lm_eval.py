"""bench/vs_lm_eval: uep and lm-evaluation-harness on the engine users get, the same items, and how
discriminating those items are.

``make bench-lm-eval`` (``.venv/bin/python bench/vs_lm_eval.py``):

1. installs ``lm-eval[api]==0.4.13`` (and, for the second engine below, ``llama-cpp-python[server]==0.3.36``)
   into their own cached virtual environment, ``.cache/lm-eval-venv`` (git-ignored; never the workspace's
   ``.venv``);
2. starts the served model: ``uep-model-server --models smollm2`` (Triton, the embedded llama.cpp build, the
   model every uep evaluation calls) on free ports;
3. writes the items as local JSONL files with lm-eval task YAMLs over them: a stratified MMLU sample (the
   57 subjects in turn, the i-th item of each), HellaSwag and TruthfulQA MC1 (multi-token choices: whole
   answers after lm-eval's six-question preamble), in lm-eval's own ``doc_to_text``/``doc_to_choice``,
   ``acc`` and ``acc_norm``; optionally GSM8K (uep's prompt, greedy, 256 tokens, lm-eval's ``strict-match``
   and ``flexible-extract`` filters);
4. runs uep's inference and scoring path (``generate_output`` with the ``triton`` backend, then the scorer's
   metric: the code every item runs in the pipeline, without the broker and the database, whose overhead
   bench/pipeline_overhead measures) and lm-eval through ``bench/lm_eval_triton.py`` (lm-eval's model
   ``uep-triton``, a thin adapter sending lm-eval's requests to the same Triton model) with the same
   concurrency;
5. prints per task: per-item agreement of the predicted choice (``acc`` and ``acc_norm``) or verdict (GSM8K),
   each tool's aggregate and their difference, the items that differ; how discriminating the items are: the
   number of distinct predicted choices, the share of items within 0.5 nats (``acc``) or 0.01 nats per
   character (``acc_norm``) of a flip (the top two choices' margin), and the maximum |Δ log-likelihood| of a
   choice between the two tools; and the wall-time ratio uep / lm-eval.

Targets (one engine, two harnesses): 100 % per-item agreement, aggregate difference 0.0 points, maximum
|Δ log-likelihood| per choice ≤ 1e-3.

``--engine llama-cpp-python`` replaces the served model by an OpenAI-compatible completions server over the
same GGUF (``serve`` below, in the lm-eval environment: llama-cpp-python with ``logits_all``,
``/v1/completions`` with ``echo`` + ``logprobs``, greedy generation with stop strings, and the remote-tokenizer
endpoints lm-eval's ``tokenizer_backend=remote`` reads), called by lm-eval's ``local-completions`` and by
uep's ``openai_compatible`` backend. ``--cross-engine`` also runs lm-eval on that second engine and compares
it with uep on the served model: agreement and near-tie share across engines, reported, not a target.

Options: ``--mmlu N`` (default 500), ``--hellaswag N`` (100, the packaged sample), ``--truthfulqa N`` (100,
the packaged sample), ``--gsm8k N`` (0), ``--concurrency C`` (1), ``--port`` (18731, the second engine's),
``--defaults`` (also each tool at its default concurrency: uep's inference replica's calls in flight,
lm-eval's ``num_concurrent`` 1).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache"
VENV = CACHE / "lm-eval-venv"
WORK = CACHE / "bench-lm-eval"
REQUIREMENTS = ("lm-eval[api]==0.4.13", "llama-cpp-python[server]==0.3.36")
MODEL = "smollm2"
SERVED_MODEL = "smollm2_135m_instruct"


# ---------------------------------------------------------------------------------------------- the endpoint


def serve(port: int, model_path: str, n_threads: int) -> None:
    """The OpenAI-compatible completions server both tools call (module docstring, step 2). Runs in the
    lm-eval environment: imports llama_cpp, fastapi and uvicorn only."""
    import threading

    import numpy as np
    import uvicorn
    from fastapi import FastAPI, Request
    from llama_cpp import Llama

    # The handlers' annotations are strings (``from __future__ import annotations``), which FastAPI resolves in
    # this module's globals: Request must be found there, or it is taken for a query parameter.
    globals()["Request"] = Request
    llm = Llama(model_path=model_path, n_ctx=2048, n_batch=512, n_threads=n_threads, logits_all=True, verbose=False)
    lock = threading.Lock()
    bos = llm.token_bos()
    add_bos = bool(llm.tokenize(b"a", add_bos=True)[:1] == [bos])
    app = FastAPI()

    def tokenize(text: str, special_bos: bool) -> list[int]:
        return llm.tokenize(text.encode("utf-8"), add_bos=special_bos, special=True) if text else []

    def text_of(tokens: list[int]) -> str:
        return llm.detokenize(tokens).decode("utf-8", errors="ignore")

    def evaluate(tokens: list[int]) -> np.ndarray:
        """Log-softmax rows for positions 0..len-1 (row i predicts token i+1), reusing the evaluated prefix."""
        common = 0
        for a, b in zip(llm._input_ids[: llm.n_tokens].tolist(), tokens, strict=False):
            if a != b:
                break
            common += 1
        llm.n_tokens = min(common, len(tokens) - 1)
        llm.eval(tokens[llm.n_tokens :])
        rows = np.asarray(llm.scores[: len(tokens)], dtype=np.float64)
        top = rows.max(axis=1, keepdims=True)
        return rows - top - np.log(np.exp(rows - top).sum(axis=1, keepdims=True))

    def echo_choice(tokens: list[int], k: int, index: int) -> dict[str, Any]:
        with lock:
            logp = evaluate(tokens)
        generated = int(np.argmax(logp[-1]))
        shown = tokens[1:] if tokens and tokens[0] == bos and add_bos else tokens
        start = len(tokens) - len(shown)
        all_tokens = [*shown, generated]
        strs, offsets, values, tops = [], [], [], []
        for j, tok in enumerate(all_tokens):
            pos = start + j  # position of the token in ``tokens`` (+ the generated one at the end)
            strs.append(text_of([tok]))
            offsets.append(len(text_of(all_tokens[:j])))
            if pos == 0:
                values.append(None)
                tops.append(None)
                continue
            row = logp[pos - 1]
            best = np.argsort(-row)[: max(k, 1)]
            top = {text_of([int(i)]): float(row[i]) for i in best}
            top[strs[-1]] = float(row[tok])
            values.append(float(row[tok]))
            tops.append(top)
        return {
            "index": index,
            "text": text_of(all_tokens),
            "finish_reason": "length",
            "logprobs": {"tokens": strs, "token_logprobs": values, "top_logprobs": tops, "text_offset": offsets},
        }

    def generate_choice(tokens: list[int], max_tokens: int, stop: list[str], index: int) -> dict[str, Any]:
        with lock:
            out = llm.create_completion(tokens, max_tokens=max_tokens, temperature=0.0, stop=stop or None)
        return {"index": index, "text": out["choices"][0]["text"], "finish_reason": out["choices"][0]["finish_reason"]}

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": MODEL, "object": "model"}]}

    @app.get("/tokenizer_info")
    def tokenizer_info() -> dict[str, Any]:
        eos = text_of([llm.token_eos()]) if llm.token_eos() >= 0 else None
        return {"eos_token": eos, "bos_token": text_of([bos]) if add_bos else None, "pad_token": None}

    @app.post("/tokenize")
    async def tokenize_route(request: Request) -> dict[str, Any]:
        body = await request.json()
        return {"tokens": tokenize(body.get("prompt", ""), bool(body.get("add_special_tokens", False)) and add_bos)}

    @app.post("/detokenize")
    async def detokenize_route(request: Request) -> dict[str, Any]:
        return {"prompt": text_of(list((await request.json()).get("tokens", [])))}

    @app.post("/v1/completions")
    async def completions(request: Request) -> dict[str, Any]:
        body = await request.json()
        prompt = body.get("prompt", "")
        if isinstance(prompt, str) or (isinstance(prompt, list) and prompt and isinstance(prompt[0], int)):
            prompt = [prompt]
        choices = []
        for i, p in enumerate(prompt):
            tokens = tokenize(p, add_bos) if isinstance(p, str) else [int(t) for t in p]
            if body.get("echo") and body.get("logprobs") is not None:
                choice = await asyncio.to_thread(echo_choice, tokens, int(body["logprobs"]), i)
            else:
                stop = body.get("stop") or []
                stop = [stop] if isinstance(stop, str) else list(stop)
                choice = await asyncio.to_thread(generate_choice, tokens, int(body.get("max_tokens") or 16), stop, i)
            choices.append(choice)
        return {"object": "text_completion", "model": MODEL, "choices": choices, "usage": {}}

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


# ---------------------------------------------------------------------------------------------- set-up


LLAMA_CMAKE_ARGS = "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
"""llama-cpp-python's build: portable AVX2 kernels. A native build on a CPU with AMX (``-march=native`` turns
on ggml's AMX and AVX-512 paths) died of a general protection fault in ``libggml-cpu`` at the first
evaluation on these machines."""


def ensure_venv(second_engine: bool) -> Path:
    """The lm-eval environment: ``lm-eval[api]``, and llama-cpp-python (a build from source: tens of minutes
    on 2 busy cores) only when ``second_engine`` asks for it. Each part is installed once and reused while its
    marker file names the same requirement (and build)."""
    python = VENV / "bin" / "python"
    uv = ROOT / ".tools" / "bin" / "uv"
    parts = [(REQUIREMENTS[0], "", {})]
    if second_engine:
        parts.append((REQUIREMENTS[1], f"CMAKE_ARGS={LLAMA_CMAKE_ARGS}", {"CMAKE_ARGS": LLAMA_CMAKE_ARGS}))
    for requirement, build, extra_env in parts:
        marker = VENV / f"uep-installed-{requirement.split('[')[0].split('=')[0]}.txt"
        wanted = f"{requirement}\n{build}"
        if marker.is_file() and marker.read_text() == wanted and python.exists():
            continue
        started = time.perf_counter()
        print(f"installing {requirement} into {VENV}", flush=True)
        # --no-config: the workspace's own uv settings (its numpy<2 constraint for nvidia-pytriton) are not lm-eval's
        subprocess.run([str(uv), "venv", "-q", "--no-config", "--allow-existing", str(VENV), "--python", "3.11"], check=True)
        rebuild = ["--reinstall-package", "llama-cpp-python", "--no-cache"] if build else []
        subprocess.run(
            [str(uv), "pip", "install", "-q", "--no-config", *rebuild, "--python", str(python), requirement],
            check=True,
            env={**os.environ, **extra_env},
        )
        marker.write_text(wanted)
        print(f"installed in {time.perf_counter() - started:.0f} s", flush=True)
    return python


def start_server(python: Path, port: int, threads: int) -> subprocess.Popen[bytes]:
    """Start :func:`serve` in the lm-eval environment; returns once ``/v1/models`` answers."""
    from uep_model_server.llm import gguf_path

    WORK.mkdir(parents=True, exist_ok=True)
    log = (WORK / "server.log").open("wb")
    cmd = [str(python), __file__, "serve", "--port", str(port), "--model-path", str(gguf_path()), "--threads", str(threads)]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the endpoint exited with {proc.returncode}: see {WORK / 'server.log'}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2):
                return proc
        except OSError:
            time.sleep(0.5)
    proc.terminate()
    raise SystemExit("the endpoint did not answer within 120 s")


# ---------------------------------------------------------------------------------------------- the items

MMLU_YAML = """task: uep_mmlu
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "The following are multiple choice questions (with answers) about {{{{subject.replace('_', ' ')}}}}.\\n\\n{{{{question.strip()}}}}\\nA. {{{{choices[0]}}}}\\nB. {{{{choices[1]}}}}\\nC. {{{{choices[2]}}}}\\nD. {{{{choices[3]}}}}\\nAnswer:"
doc_to_choice: ["A", "B", "C", "D"]
doc_to_target: answer
metric_list:
  - metric: acc
  - metric: acc_norm
"""
HELLASWAG_YAML = """task: uep_hellaswag
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{query}}}}"
doc_to_choice: "choices"
doc_to_target: gold
metric_list:
  - metric: acc
  - metric: acc_norm
"""
TRUTHFULQA_YAML = """task: uep_truthfulqa
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: {preamble}
doc_to_choice: "{{{{choices}}}}"
doc_to_target: gold
metric_list:
  - metric: acc
  - metric: acc_norm
"""
GSM8K_YAML = """task: uep_gsm8k
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "Solve the following math problem step by step. Write the final answer as a number on the last line, after '#### '.\\n\\nQuestion: {{{{question}}}}\\nAnswer:"
doc_to_target: "{{{{answer}}}}"
generation_kwargs:
  until: ["\\n\\nQuestion:"]
  do_sample: false
  temperature: 0.0
  max_gen_toks: 256
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_case: true
    ignore_punctuation: false
    regexes_to_ignore: [",", "\\\\$", "(?s).*#### ", "\\\\.$"]
filter_list:
  - name: strict-match
    filter:
      - function: regex
        regex_pattern: "#### (\\\\-?[0-9\\\\.\\\\,]+)"
      - function: take_first
  - name: flexible-extract
    filter:
      - function: regex
        group_select: -1
        regex_pattern: "(-?[$0-9.,]{{2,}})|(-?[0-9]+)"
      - function: take_first
"""


def stratified_mmlu(n: int) -> list[Any]:
    """``n`` MMLU items across its subjects: the subjects in alphabetical order in turn, the i-th item of each
    (file order) in round i, so every subject is represented before any has two items."""
    from uep_common.builtin import datasets

    by_subject: dict[str, list[Any]] = {}
    for item in datasets.load_mmlu_loglik():
        by_subject.setdefault(item.input["subject"], []).append(item)
    picked: list[Any] = []
    rounds = max(len(v) for v in by_subject.values())
    for i in range(rounds):
        for subject in sorted(by_subject):
            if len(picked) < n and i < len(by_subject[subject]):
                picked.append(by_subject[subject][i])
    return picked


def write_tasks(n_mmlu: int, n_hellaswag: int, n_truthfulqa: int, n_gsm8k: int) -> dict[str, list[Any]]:
    """The items (uep's built-in loaders) as JSONL files and task YAMLs under .cache/bench-lm-eval; returns
    the uep items of each task."""
    from uep_common.builtin import catalog, datasets

    mmlu = stratified_mmlu(n_mmlu)
    hellaswag = datasets.load_hellaswag_loglik()[:n_hellaswag]
    truthfulqa = datasets.load_truthfulqa_mc1_loglik()[:n_truthfulqa]
    gsm8k = datasets.load_gsm8k()[:n_gsm8k]
    rows = {
        "uep_mmlu": [
            {
                "question": it.input["question"],
                "choices": it.input["choices"],
                "subject": it.input["subject"],
                "answer": it.reference["gold"],
            }
            for it in mmlu
        ],
        "uep_hellaswag": [
            {"query": it.input["query"], "choices": it.input["choices"], "gold": it.reference["gold"]} for it in hellaswag
        ],
        "uep_truthfulqa": [
            {"question": it.input["question"], "choices": it.input["choices"], "gold": it.reference["gold"]} for it in truthfulqa
        ],
        "uep_gsm8k": [{"question": it.input["question"], "answer": it.reference["solution"]} for it in gsm8k],
    }
    preamble = json.dumps(catalog.TRUTHFULQA_QA_PROMPT + "\n\nQ: {{question}}\nA:")
    tasks = WORK / "tasks"
    tasks.mkdir(parents=True, exist_ok=True)
    for name, yaml in (
        ("uep_mmlu", MMLU_YAML),
        ("uep_hellaswag", HELLASWAG_YAML),
        ("uep_truthfulqa", TRUTHFULQA_YAML),
        ("uep_gsm8k", GSM8K_YAML),
    ):
        data = tasks / f"{name}.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in rows[name]))
        (tasks / f"{name}.yaml").write_text(yaml.format(data=json.dumps(str(data)), preamble=preamble))
    return {"uep_mmlu": mmlu, "uep_hellaswag": hellaswag, "uep_truthfulqa": truthfulqa, "uep_gsm8k": gsm8k}


# ---------------------------------------------------------------------------------------------- the two tools


def run_lm_eval(
    python: Path, model_args: tuple[str, str], tasks: list[str], concurrency: int, label: str
) -> tuple[dict[str, list[dict[str, Any]]], float]:
    """``lm_eval`` on ``tasks`` with ``model_args`` = (``--model``, ``--model_args``): lm-eval's
    ``local-completions`` or, for ``uep-triton``, through bench/lm_eval_triton.py. Returns each task's logged
    samples in document order and the wall time."""
    out = WORK / f"lm-eval-out-{label}"
    model, args = model_args
    entry = [str(Path(__file__).with_name("lm_eval_triton.py"))] if model == "uep-triton" else ["-m", "lm_eval"]
    if model == "local-completions":
        args += f",num_concurrent={concurrency},max_retries=3,timeout=600"
    cmd = [str(python), *entry, "--model", model, "--model_args", args, "--tasks", ",".join(tasks)]
    cmd += ["--include_path", str(WORK / "tasks"), "--log_samples", "--output_path", str(out), "--batch_size", "1"]
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    started = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=(WORK / f"lm-eval-{label}.log").open("w"), stderr=subprocess.STDOUT)
    elapsed = time.perf_counter() - started
    samples: dict[str, list[dict[str, Any]]] = {}
    for task in tasks:
        newest = max(out.rglob(f"samples_{task}_*.jsonl"), key=lambda p: p.stat().st_mtime)
        docs = [json.loads(line) for line in newest.read_text().splitlines() if line.strip()]
        samples[task] = sorted(docs, key=lambda d: d["doc_id"])
    return samples, elapsed


async def run_uep(target: Any, items: dict[str, list[Any]], concurrency: int) -> tuple[dict[str, list[dict[str, Any]]], float]:
    """uep's inference and scoring of every item on ``target`` (a ``ModelTarget``); returns each task's
    per-item metric details (and the model's output) in item order and the wall time."""
    import uuid
    from datetime import UTC, datetime, timedelta

    from uep_common.builtin import catalog
    from uep_common.contract.configs import parse_benchmark_config
    from uep_common.contract.events import SampleDispatched
    from uep_inference.backends import Backends
    from uep_inference.service import generate_output
    from uep_inference.settings import InferenceSettings
    from uep_scorer.metrics import get_metric

    slugs = {
        "uep_mmlu": "mmlu-loglik",
        "uep_hellaswag": "hellaswag-loglik",
        "uep_truthfulqa": "truthfulqa-mc1-loglik",
        "uep_gsm8k": "gsm8k",
    }
    backends = Backends(InferenceSettings())
    sem = asyncio.Semaphore(concurrency)
    results: dict[str, list[dict[str, Any]]] = {}

    async def one(task: str, item: Any) -> dict[str, Any]:
        config = parse_benchmark_config(next(b for b in catalog.BENCHMARKS if b.slug == slugs[task]).config)
        prompt = config.prompt_spec.model_copy(update={"chat": False})  # raw completions, as lm-eval's
        event = SampleDispatched(
            evaluation_id=uuid.uuid4(),
            tenant_id=uuid.uuid4(),
            sample_id=uuid.uuid4(),
            benchmark_id=uuid.uuid4(),
            sample_ordinal=item.ordinal,
            input=item.input,
            prompt=prompt,
            target=target,
            lease_expires_at=datetime.now(UTC) + timedelta(hours=1),
        )
        async with sem:
            out = await generate_output(event, backends, 600.0)
        if out.error is not None or out.output is None:
            return {"error": f"{out.error.type if out.error else 'none'}: {out.error.message if out.error else ''}"}
        assert config.metric is not None
        metric = get_metric(config.metric.name)
        if task == "uep_gsm8k":
            strict = metric.score(out.output, item.reference, {"variant": "strict"}).details
            return {**strict, "output": out.output}
        return {**metric.score(out.output, item.reference, {}).details, "output": out.output}

    started = time.perf_counter()
    try:
        for task, task_items in items.items():
            t0 = time.perf_counter()
            results[task] = list(await asyncio.gather(*(one(task, it) for it in task_items)))
            print(f"  uep {task}: {len(task_items)} items in {time.perf_counter() - t0:.1f} s", flush=True)
    finally:
        await backends.close()
    return results, time.perf_counter() - started


# ---------------------------------------------------------------------------------------------- comparison


NEAR_TIE_NATS = 0.5
"""An item is a near tie for ``acc`` when its top two choices are less than this apart (nats)."""
NEAR_TIE_NATS_PER_CHAR = 0.01
"""... and for ``acc_norm`` when they are less than this apart per character."""
MAX_DELTA_LOGLIK = 1e-3
"""Target: the largest |Δ log-likelihood| of one choice between the two harnesses on one engine (nats)."""


def margin(values: list[float]) -> float:
    """The gap between the best and the second-best value (inf with fewer than two)."""
    top = sorted(values, reverse=True)
    return top[0] - top[1] if len(top) > 1 else float("inf")


def discrimination(name: str, lls: list[list[float]], lengths: list[list[int]], other: list[list[float]] | None) -> float:
    """Print how discriminating a task's items are, from one harness's per-choice log-likelihoods ``lls``
    (and the choices' character ``lengths``): distinct predictions, near-tie shares; with ``other`` (the
    other harness's values, same shape) the largest |Δ| of one choice. Returns that |Δ| (nan without)."""
    n = len(lls)
    preds = [max(range(len(v)), key=v.__getitem__) for v in lls]
    norm = [[x / c for x, c in zip(v, ln, strict=True)] for v, ln in zip(lls, lengths, strict=True)]
    preds_norm = [max(range(len(v)), key=v.__getitem__) for v in norm]
    near = sum(margin(v) < NEAR_TIE_NATS for v in lls) / n
    near_norm = sum(margin(v) < NEAR_TIE_NATS_PER_CHAR for v in norm) / n
    histogram = {i: preds.count(i) for i in sorted(set(preds))}
    delta = float("nan")
    if other is not None:
        delta = max(abs(a - b) for va, vb in zip(lls, other, strict=True) for a, b in zip(va, vb, strict=True))
    print(
        f"{name:24s} distinct predictions {len(histogram)} (acc, by choice index {histogram}; acc_norm "
        f"{len(set(preds_norm))})  near ties: {near:.1%} within {NEAR_TIE_NATS} nats (acc), {near_norm:.1%} within "
        f"{NEAR_TIE_NATS_PER_CHAR} nats/char (acc_norm)  max |Δ loglik| per choice {delta:.2e}"
    )
    return delta


def _ue_lls(ue: list[dict[str, Any]]) -> list[list[float]]:
    return [[float(x) for x in json.loads(r["output"])["logprobs"]] if "output" in r else [] for r in ue]


def compare(
    task: str, lm: list[dict[str, Any]], ue: list[dict[str, Any]], items: list[Any], *, targets: bool = True
) -> list[str]:
    """Print agreement, aggregates, differing items and how discriminating the items are, for one task;
    returns its failed targets (none when ``targets`` is false: two engines, reported only)."""
    failed = []
    if task == "uep_gsm8k":  # lm-eval logs one sample per document and filter
        for key, ue_key, lm_filter in (
            ("strict", "strict_match", "strict-match"),
            ("flexible", "flexible_match", "flexible-extract"),
        ):
            lm_f = [d for d in lm if d.get("filter") == lm_filter]
            lm_v = [float(d["exact_match"]) for d in lm_f]
            ue_v = [float(r[ue_key]) if ue_key in r else float("nan") for r in ue]
            failed += _report(f"{task} {key}", lm_v, ue_v, lm_v, ue_v, lm_f, ue)
        return failed if targets else []
    lm_acc = [float(d["acc"]) for d in lm]
    lm_norm = [float(d["acc_norm"]) for d in lm]
    lm_pred = [int(max(range(len(d["filtered_resps"])), key=lambda i: float(d["filtered_resps"][i][0]))) for d in lm]
    ue_acc = [float(r.get("acc", float("nan"))) for r in ue]
    ue_norm = [float(r.get("acc_norm", float("nan"))) for r in ue]
    ue_pred = [int(r.get("pred", -1)) for r in ue]
    failed += _report(f"{task} acc", lm_pred, ue_pred, lm_acc, ue_acc, lm, ue)
    failed += _report(f"{task} acc_norm", lm_norm, ue_norm, lm_norm, ue_norm, lm, ue)
    lm_lls = [[float(r[0]) for r in d["filtered_resps"]] for d in lm]
    lengths = [[len(c) for c in it.reference["choices"]] for it in items]
    delta = discrimination(task, lm_lls, lengths, _ue_lls(ue))
    if not delta <= MAX_DELTA_LOGLIK:
        failed.append(f"{task}: max |Δ loglik| {delta:.2e} > {MAX_DELTA_LOGLIK:.0e}")
    return failed if targets else []


def _report(
    name: str, lm_key: list[Any], ue_key: list[Any], lm_v: list[float], ue_v: list[float], lm: list[Any], ue: list[Any]
) -> list[str]:
    n = min(len(lm_key), len(ue_key))
    same = [i for i in range(n) if lm_key[i] == ue_key[i]]
    agreement = len(same) / n if n else float("nan")
    lm_mean, ue_mean = sum(lm_v[:n]) / n, sum(ue_v[:n]) / n
    delta = (ue_mean - lm_mean) * 100
    print(f"{name:24s} items {n:4d}  agreement {agreement:7.2%}  lm-eval {lm_mean:.4f}  uep {ue_mean:.4f}  Δ {delta:+.2f} pt")
    for i in (i for i in range(n) if i not in set(same)):
        lm_item = {k: lm[i].get(k) for k in ("doc_id", "filtered_resps", "acc", "acc_norm", "exact_match") if k in lm[i]}
        ue_item = {
            k: ue[i].get(k)
            for k in ("pred", "pred_norm", "acc", "acc_norm", "strict_match", "flexible_match", "error")
            if k in ue[i]
        }
        print(f"    differs: item {i}: lm-eval {json.dumps(lm_item)[:400]}  uep {json.dumps(ue_item)[:400]}")
    failed = []
    if agreement < 1.0:
        failed.append(f"{name}: agreement {agreement:.2%} < 100 %")
    if delta != 0.0:
        failed.append(f"{name}: Δ aggregate {delta:+.2f} pt, not 0.0")
    return failed


# ---------------------------------------------------------------------------------------------- the served model


def start_served(threads: int) -> tuple[subprocess.Popen[bytes], int, int]:
    """``uep-model-server --models smollm2`` on free ports (its own process group); returns the process and
    its HTTP and gRPC ports once the model is ready."""
    import socket

    socks = [socket.socket() for _ in range(3)]
    for sock in socks:
        sock.bind(("127.0.0.1", 0))
    http, grpc, metrics = (sock.getsockname()[1] for sock in socks)
    for sock in socks:
        sock.close()
    WORK.mkdir(parents=True, exist_ok=True)
    cmd = [str(Path(sys.executable).with_name("uep-model-server")), "--models", "smollm2"]
    cmd += ["--http-port", str(http), "--grpc-port", str(grpc), "--metrics-port", str(metrics)]
    env = {**os.environ, "UEP_LLM_THREADS": str(threads)}
    log = (WORK / "model-server.log").open("wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the model server exited with {proc.returncode}: see {WORK / 'model-server.log'}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{http}/v2/models/{SERVED_MODEL}/ready", timeout=2):
                return proc, http, grpc
        except OSError:
            time.sleep(0.5)
    stop(proc)
    raise SystemExit("the model server was not ready within 300 s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group of ``proc``, SIGKILL it after 30 s."""
    import signal

    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def main(argv: list[str] | None = None) -> int:
    """Run the bench (see the module docstring); returns 0 when every target is met, else 1."""
    import uuid

    from uep_common.contract.events import ModelTarget

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    s = sub.add_parser("serve")
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--model-path", required=True)
    s.add_argument("--threads", type=int, default=2)
    parser.add_argument("--mmlu", type=int, default=500)
    parser.add_argument("--hellaswag", type=int, default=100)
    parser.add_argument("--truthfulqa", type=int, default=100)
    parser.add_argument("--gsm8k", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--engine", choices=("served", "llama-cpp-python"), default="served")
    parser.add_argument(
        "--cross-engine",
        action="store_true",
        help="also run lm-eval on llama-cpp-python and compare it with uep on the served model (reported only)",
    )
    parser.add_argument(
        "--defaults",
        action="store_true",
        help="also run uep at its default concurrency (the inference replica's calls in flight) and compare it with "
        "lm-eval at its default (num_concurrent 1)",
    )
    parser.add_argument("--port", type=int, default=18731)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    if args.command == "serve":
        serve(args.port, args.model_path, args.threads)
        return 0
    python = ensure_venv(args.engine == "llama-cpp-python" or args.cross_engine)
    items = write_tasks(args.mmlu, args.hellaswag, args.truthfulqa, args.gsm8k)
    items = {k: v for k, v in items.items() if v}
    print("items: " + ", ".join(f"{k} {len(v)}" for k, v in items.items()), flush=True)
    second_args = (
        "local-completions",
        f"base_url=http://127.0.0.1:{args.port}/v1/completions,model={MODEL},tokenizer_backend=remote",
    )
    processes: list[subprocess.Popen[bytes]] = []
    cross: dict[str, list[dict[str, Any]]] | None = None
    try:
        if args.engine == "served" or args.cross_engine:
            served, http, grpc = start_served(args.threads)
            processes.append(served)
            print(f"served model: Triton {SERVED_MODEL} on 127.0.0.1:{grpc} (gRPC) / {http} (HTTP)", flush=True)
        if args.engine == "llama-cpp-python" or args.cross_engine:
            processes.append(start_server(python, args.port, args.threads))
        if args.engine == "served":
            target = ModelTarget(
                model_id=uuid.uuid4(), name=SERVED_MODEL, backend="triton", endpoint=f"127.0.0.1:{grpc}", max_tokens=256
            )
            lm_args = ("uep-triton", f"base_url=http://127.0.0.1:{http},model={SERVED_MODEL}")
        else:
            target = ModelTarget(
                model_id=uuid.uuid4(),
                name=MODEL,
                backend="openai_compatible",
                endpoint=f"http://127.0.0.1:{args.port}",
                max_tokens=256,
            )
            lm_args = second_args
        print(f"engine {args.engine}, concurrency {args.concurrency}", flush=True)
        ue, ue_s = asyncio.run(run_uep(target, items, args.concurrency))
        lm, lm_s = run_lm_eval(python, lm_args, list(items), args.concurrency, args.engine)
        if args.cross_engine:
            cross = run_lm_eval(python, second_args, list(items), args.concurrency, "llama-cpp-python")[0]
        defaults: tuple[float, float] | None = None
        if args.defaults:
            from uep_inference.settings import InferenceSettings

            uep_default = InferenceSettings().inference_concurrency
            print(f"uep at its default concurrency ({uep_default}), lm-eval at its default (1):", flush=True)
            _, ue_d = asyncio.run(run_uep(target, items, uep_default))
            lm_d = lm_s if args.concurrency == 1 else run_lm_eval(python, lm_args, list(items), 1, args.engine)[1]
            defaults = (ue_d, lm_d)
    finally:
        for proc in processes:
            stop(proc)
    failed = []
    print(f"--- lm-eval and uep on one engine ({args.engine}): targets 100 % agreement, Δ 0.0 pt, max |Δ loglik| <= 1e-3")
    for task in items:
        failed += compare(task, lm[task], ue[task], items[task])
    if cross is not None:
        print("--- lm-eval on llama-cpp-python against uep on the served model (two engines; reported, no target)")
        for task in items:
            compare(task, cross[task], ue[task], items[task], targets=False)
    print(f"wall time: uep {ue_s:.1f} s, lm-eval {lm_s:.1f} s (with its start-up), ratio uep/lm-eval {ue_s / lm_s:.2f}")
    if defaults is not None:
        print(
            f"at each tool's defaults: uep {defaults[0]:.1f} s, lm-eval {defaults[1]:.1f} s, ratio {defaults[0] / defaults[1]:.2f}"
        )
    print("targets met" if not failed else "targets missed:\n  " + "\n  ".join(failed))
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
