"""Prompts: the sandboxed Jinja2 templating of user-supplied templates (:mod:`.templating`), prompt rendering
(:mod:`.prompts`) and the choice of few-shot demonstrations (:mod:`.fewshot`).

May import :mod:`uep_common.runtime`, :mod:`uep_common.tables` and :mod:`uep_common.contract`."""
