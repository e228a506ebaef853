"""``uep-model-server``: uep's built-in models (an LLM on llama.cpp, scikit-learn classifiers and rankers,
deterministic judges and stand-ins) served by a real Triton Inference Server; see :mod:`uep_model_server.main`."""
