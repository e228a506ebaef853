"""Tests for deploy/model-server (real Triton via PyTriton on CPU) and the built-in dataset loaders."""
