"""A profile hook for bench/sample_path, loaded by every service the bench starts (``PYTHONPATH`` names this
folder; nothing else loads it). With ``UEP_PATH_TRACE_DIR`` set, ``sys.setprofile`` and ``threading.setprofile``
record the file of each Python function called under ``UEP_PATH_TRACE_ROOT``'s ``libs/`` and ``services/``;
SIGUSR1 forgets what was recorded, SIGUSR2 writes it to ``<UEP_PATH_TRACE_DIR>/<process name>.json`` (the
process name is the file name of the stack's ``UEP_OTEL_CONSOLE_PATH``, ``traces/<name>.jsonl``)."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading

_OUT = os.environ.get("UEP_PATH_TRACE_DIR")
if _OUT:
    _root = os.environ.get("UEP_PATH_TRACE_ROOT", "")
    _ours = (os.path.join(_root, "libs") + os.sep, os.path.join(_root, "services") + os.sep)
    _files: set[str] = set()
    _seen: set[str] = set()

    def _profile(frame, event, arg):  # type: ignore[no-untyped-def]
        if event == "call":
            name = frame.f_code.co_filename
            if name not in _files and name.startswith(_ours) and "/site-packages/" not in name:
                _files.add(name)

    def _forget(signum, frame):  # type: ignore[no-untyped-def]
        _files.clear()

    def _dump(signum, frame):  # type: ignore[no-untyped-def]
        console = os.environ.get("UEP_OTEL_CONSOLE_PATH", "")
        who = os.path.basename(console).removesuffix(".jsonl") or str(os.getpid())
        tmp = os.path.join(_OUT, f".{who}.json")
        with open(tmp, "w") as f:
            json.dump(sorted(_files), f)
        os.replace(tmp, os.path.join(_OUT, f"{who}.json"))

    signal.signal(signal.SIGUSR1, _forget)
    signal.signal(signal.SIGUSR2, _dump)
    sys.setprofile(_profile)
    threading.setprofile(_profile)
