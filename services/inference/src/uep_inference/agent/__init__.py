"""The agent harness: the platform runs a tool-using model's loop for each item of an ``agent`` benchmark.

:mod:`~uep_inference.agent.registry` holds the tools (a decorator turns a typed function into a tool with a
JSON Schema of its arguments), :mod:`~uep_inference.agent.tools` the shipped ones (``python`` and ``sql`` in
the code sandbox, ``search``, ``submit``), :mod:`~uep_inference.agent.loop` the loop and its limits.
The contract (what a benchmark declares, what a run leaves) is :mod:`uep_common.contract.agents`.
"""
