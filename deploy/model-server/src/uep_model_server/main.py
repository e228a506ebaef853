"""``uep-model-server``: a real Triton Inference Server (PyTriton, CPU) serving uep's built-in models.

Usage::

    uep-model-server [--host 127.0.0.1] [--http-port 8000] [--grpc-port 8001] [--metrics-port 8002]
                     [--models smollm2,oracle,bench_echo,mmlu_topic] [--log-level INFO]

Every flag falls back to an environment variable: ``UEP_TRITON_HOST``, ``UEP_TRITON_HTTP_PORT``,
``UEP_TRITON_GRPC_PORT``, ``UEP_TRITON_METRICS_PORT``, ``UEP_TRITON_MODELS``, ``UEP_LOG_LEVEL``; also
``UEP_TRITON_STARTUP_TIMEOUT_S`` (default 300 s) and ``UEP_TRITON_LOG_FILE`` (tritonserver's own log).

``--models`` takes short names or Triton names: ``smollm2`` (``smollm2_135m_instruct``), ``oracle``
(``uep_oracle``), ``bench_echo`` (``uep_bench_echo``), ``judge`` (``uep_judge``) and ``judge_first``
(``uep_judge_first``), the deterministic judges of :mod:`uep_model_server.judge_stub`. These share the tensor contract
in :mod:`uep_model_server.io`. Models of the other contracts bind themselves (their ``bind(triton, name)``):
``mmlu_topic`` (``uep_mmlu_topic``) and ``breast_cancer`` (``uep_breast_cancer``), scikit-learn classifiers
(:mod:`uep_model_server.classifiers`); ``e5_rank`` (``uep_e5_rank``) and ``e5_embed`` (``uep_e5_embed``), the e5
ranker and embedder (:mod:`uep_model_server.ranker`); ``vllm_echo`` (``uep_vllm_echo``) and ``trtllm_echo``
(``uep_trtllm_echo``), stand-ins speaking the vLLM and TensorRT-LLM contracts
(:mod:`uep_model_server.contract_standins`).

Lifetime: models are loaded, bound and Triton started; the server is ready once
``GET /v2/health/ready`` returns 200. SIGTERM or SIGINT stops Triton cleanly (``triton.stop()``) and
exits 0. Exit 1 if start-up fails, times out, or Triton dies; exit 2 on bad arguments. Logs go to stderr.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import sysconfig
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from .io import TextModel

LOGGER = logging.getLogger("uep_model_server")

DEFAULT_MODELS = "smollm2,oracle,bench_echo,judge,judge_first,mmlu_topic,breast_cancer,e5_rank,e5_embed,vllm_echo,trtllm_echo"
MODEL_ALIASES = {
    "smollm2": "smollm2_135m_instruct",
    "oracle": "uep_oracle",
    "bench_echo": "uep_bench_echo",
    "judge": "uep_judge",
    "judge_first": "uep_judge_first",
    "mmlu_topic": "uep_mmlu_topic",
    "breast_cancer": "uep_breast_cancer",
    "e5_rank": "uep_e5_rank",
    "e5_embed": "uep_e5_embed",
    "vllm_echo": "uep_vllm_echo",
    "trtllm_echo": "uep_trtllm_echo",
}
"""Short name -> Triton model name."""


class _Shutdown(SystemExit):
    """Raised in the main thread by the signal handler to leave whatever it is blocked in.

    A SystemExit subclass: generic ``except Exception`` blocks do not swallow it, and gevent (used by
    tritonclient.http inside PyTriton's start-up wait) re-raises it in the main greenlet instead of
    printing it as an error.
    """


def resolve_models(spec: str) -> list[str]:
    """Turn a comma-separated list of short or Triton names into unique Triton model names (in order).

    Raises:
        ValueError: an unknown name, or an empty list.
    """
    known = set(MODEL_ALIASES.values())
    names: list[str] = []
    for raw in spec.split(","):
        name = raw.strip()
        if not name:
            continue
        triton_name = MODEL_ALIASES.get(name, name)
        if triton_name not in known:
            choices = ", ".join(f"{k} ({v})" for k, v in MODEL_ALIASES.items())
            raise ValueError(f"unknown model {name!r}; choose from {choices}")
        if triton_name not in names:
            names.append(triton_name)
    if not names:
        raise ValueError("no models selected")
    return names


def ensure_libpython_on_ld_path() -> str:
    """Prepend this interpreter's ``LIBDIR`` to ``LD_LIBRARY_PATH`` (must run before ``Triton()``).

    PyTriton's python-backend stub links ``libpython3.X.so``; tritonserver inherits ``os.environ``, so this
    makes the stub load the SAME libpython as this interpreter. Without it, model loading fails or hangs.
    Returns the directory added (empty if unknown).
    """
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    current = os.environ.get("LD_LIBRARY_PATH", "")
    if libdir and libdir not in current.split(":"):
        os.environ["LD_LIBRARY_PATH"] = libdir + (":" + current if current else "")
    return libdir


def _env_port(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    return int(raw) if raw else default


def build_parser() -> argparse.ArgumentParser:
    """The CLI parser (defaults come from the ``UEP_TRITON_*`` environment variables)."""
    parser = argparse.ArgumentParser(
        prog="uep-model-server",
        description="Serve uep's built-in models (SmolLM2, oracle, classifiers, e5 ranker, …) through a real Triton on CPU.",
    )
    parser.add_argument(
        "--host",
        default=os.environ.get("UEP_TRITON_HOST", "127.0.0.1"),
        help="address for HTTP, gRPC and metrics (default 127.0.0.1; env UEP_TRITON_HOST)",
    )
    parser.add_argument(
        "--http-port",
        type=int,
        default=_env_port("UEP_TRITON_HTTP_PORT", 8000),
        help="HTTP port (default 8000; env UEP_TRITON_HTTP_PORT)",
    )
    parser.add_argument(
        "--grpc-port",
        type=int,
        default=_env_port("UEP_TRITON_GRPC_PORT", 8001),
        help="gRPC port (default 8001; env UEP_TRITON_GRPC_PORT)",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=_env_port("UEP_TRITON_METRICS_PORT", 8002),
        help="Prometheus metrics port (default 8002; env UEP_TRITON_METRICS_PORT)",
    )
    parser.add_argument(
        "--models",
        default=os.environ.get("UEP_TRITON_MODELS", DEFAULT_MODELS),
        help=f"comma-separated models (default {DEFAULT_MODELS}; env UEP_TRITON_MODELS)",
    )
    parser.add_argument(
        "--startup-timeout",
        type=float,
        default=float(os.environ.get("UEP_TRITON_STARTUP_TIMEOUT_S", "300")),
        help="give up if not ready after this many seconds (default 300)",
    )
    parser.add_argument(
        "--log-level", default=os.environ.get("UEP_LOG_LEVEL", "INFO"), help="Python log level (default INFO; env UEP_LOG_LEVEL)"
    )
    return parser


def _model_factories() -> dict[str, Callable[[], object]]:
    def smollm2() -> object:
        from .llm import SmolLM2

        return SmolLM2()

    def oracle() -> object:
        from .oracle import Oracle

        return Oracle()

    def bench_echo() -> object:
        from .bench_echo import BenchEcho

        return BenchEcho()

    def judge(personality: str) -> Callable[[], object]:
        def make() -> object:
            from .judge_stub import DeterministicJudge

            return DeterministicJudge(personality)

        return make

    def classifier(name: str) -> Callable[[], object]:
        def make() -> object:
            from . import classifiers

            return getattr(classifiers, name)()

        return make

    def e5(name: str) -> Callable[[], object]:
        def make() -> object:
            from . import ranker

            return getattr(ranker, name)()

        return make

    def standin(name: str) -> Callable[[], object]:
        def make() -> object:
            from . import contract_standins

            return getattr(contract_standins, name)()

        return make

    return {
        "smollm2_135m_instruct": smollm2,
        "uep_oracle": oracle,
        "uep_bench_echo": bench_echo,
        "uep_judge": judge("consistent"),
        "uep_judge_first": judge("first"),
        "uep_mmlu_topic": classifier("MmluTopicClassifier"),
        "uep_breast_cancer": classifier("BreastCancerClassifier"),
        "uep_e5_rank": e5("E5Ranker"),
        "uep_e5_embed": e5("E5Embedder"),
        "uep_vllm_echo": standin("VllmEcho"),
        "uep_trtllm_echo": standin("TrtllmEcho"),
    }


def serve(args: argparse.Namespace, model_names: list[str]) -> int:
    """Load the models, start Triton, block until a signal or Triton's death; always stop Triton.

    Returns the process exit code (0: stopped by signal; 1: failure).
    """
    from pytriton.triton import Triton, TritonConfig

    from .io import bind_text_model

    state = {"stopping": False, "reason": "signal"}

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        if state["stopping"]:
            LOGGER.info("%s received again; already stopping", signal.Signals(signum).name)
            return
        state["stopping"] = True
        LOGGER.info("%s received; stopping", signal.Signals(signum).name)
        raise _Shutdown()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    def on_startup_timeout() -> None:
        state["reason"] = "startup-timeout"
        LOGGER.error("not ready after %.0f s; giving up (check the tritonserver log)", args.startup_timeout)
        os.kill(os.getpid(), signal.SIGTERM)

    started = time.monotonic()
    watchdog = threading.Timer(args.startup_timeout, on_startup_timeout)
    watchdog.daemon = True
    watchdog.start()
    triton = None
    models: list[object] = []
    try:
        libdir = ensure_libpython_on_ld_path()
        LOGGER.debug("LD_LIBRARY_PATH starts with %s", libdir)
        factories = _model_factories()
        loaded = []
        for name in model_names:
            t0 = time.monotonic()
            model = factories[name]()
            models.append(model)
            loaded.append((name, model))
            LOGGER.info("model %s loaded in %.2f s", name, time.monotonic() - t0)
        log_file = os.environ.get("UEP_TRITON_LOG_FILE", "").strip()
        config = TritonConfig(
            http_address=args.host,
            http_port=args.http_port,
            grpc_address=args.host,
            grpc_port=args.grpc_port,
            metrics_address=args.host,
            metrics_port=args.metrics_port,
            log_verbose=0,
            log_file=Path(log_file) if log_file else None,
        )
        triton = Triton(config=config)
        for name, model in loaded:
            bind = getattr(model, "bind", None)
            if bind is not None:  # a model of another contract than the text one binds itself
                bind(triton, name)
            else:
                bind_text_model(triton, name, cast("TextModel", model))
        LOGGER.info(
            "starting tritonserver (http %s:%d, grpc %s:%d, metrics %s:%d)",
            args.host,
            args.http_port,
            args.host,
            args.grpc_port,
            args.host,
            args.metrics_port,
        )
        triton.run()
        for _, model in loaded:
            wait_ready = getattr(model, "wait_ready", None)
            if wait_ready is not None:  # a model that trains in the background while Triton starts
                wait_ready()
        watchdog.cancel()
        LOGGER.info(
            "READY in %.1f s: models %s; http://%s:%d  grpc %s:%d  metrics http://%s:%d/metrics",
            time.monotonic() - started,
            ",".join(model_names),
            args.host,
            args.http_port,
            args.host,
            args.grpc_port,
            args.host,
            args.metrics_port,
        )
        while True:
            time.sleep(1.0)
            if not triton.is_alive():
                LOGGER.error("tritonserver or a model backend died; exiting")
                return 1
    except _Shutdown:
        return 1 if state["reason"] == "startup-timeout" else 0
    except Exception:
        LOGGER.exception("model server failed")
        return 1
    finally:
        state["stopping"] = True
        watchdog.cancel()
        if triton is not None:
            t0 = time.monotonic()
            try:
                triton.stop()
                LOGGER.info("tritonserver stopped in %.1f s", time.monotonic() - t0)
            except Exception:
                LOGGER.exception("error while stopping tritonserver")
        for model in models:
            close = getattr(model, "close", None)
            if close is not None:
                close()


def main(argv: list[str] | None = None) -> int:
    """Console entry point ``uep-model-server``; returns the exit code (see the module docstring)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    # PyTriton print()s tritonserver's own log lines to stdout; this process has no other use for stdout,
    # so send everything to stderr (UEP_TRITON_LOG_FILE moves tritonserver's log to a file instead).
    sys.stdout = sys.stderr
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        model_names = resolve_models(args.models)
    except ValueError as exc:
        parser.error(str(exc))
    for port_name in ("http_port", "grpc_port", "metrics_port"):
        port = getattr(args, port_name)
        if not 0 < port < 65536:
            parser.error(f"--{port_name.replace('_', '-')} must be 1..65535, got {port}")
    return serve(args, model_names)


if __name__ == "__main__":
    sys.exit(main())
