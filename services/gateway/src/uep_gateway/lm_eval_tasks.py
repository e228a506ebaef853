"""Import an lm-evaluation-harness task YAML over uploaded documents: the task's own prompt, target, choices,
delimiters, metrics and filter become a benchmark of ours, so a task moves without being rewritten.

What each key means is lm-eval's (``lm_eval.api.task.ConfigurableTask``, ``docs/task_guide.md``):

- ``doc_to_text``, ``doc_to_target``, ``doc_to_choice``: a document field's name, a Jinja template over the
  document (rendered here in the bounded sandbox of :mod:`uep_common.prompting.templating`), or a literal (an
  index for the target, a list for the choices). A template's rendered choices are read as a Python literal
  list (:func:`ast.literal_eval`), a rendered target of digits as an index, as lm-eval does.
- ``output_type``: ``generate_until`` (default; scored by ``exact_match``, or by ``regex_match`` under a
  regex filter) or ``multiple_choice`` (scored by the log-likelihood of each choice: our
  ``loglik_multiple_choice``, lm-eval's ``acc``/``acc_norm``).
- ``target_delimiter`` (default ``" "``) between the context and the answer, ``fewshot_delimiter`` (default
  ``"\\n\\n"``) after each demonstration, ``description`` before everything, ``num_fewshot`` demonstrations.
- ``generation_kwargs``: ``until`` (stop sequences), ``max_gen_toks``; greedy decoding only.
- ``metric_list``: ``exact_match`` (with ``ignore_case``, ``ignore_punctuation``, ``regexes_to_ignore``) for
  generation, ``acc``/``acc_norm`` for multiple choice; aggregation ``mean``.
- ``filter_list``: one pipeline of ``regex`` (``regex_pattern``, first match), ``take_first``, ``lowercase``.

Where the documents come from (``dataset_path``, ``dataset_name``, ``dataset_kwargs``, the ``*_split`` keys)
and bookkeeping (``task``, ``tag``, ``metadata``, ``should_decontaminate``,
``doc_to_decontamination_query``) are read and left aside: the documents are the uploaded file. Demonstrations
are the benchmark's first documents (as every benchmark of ours takes them), not a seeded draw from a
``fewshot_split``. Any other key, or a value outside the above, is a problem naming the key
(``["body", "task", key, ...]``), so nothing is imported with a meaning silently changed. How each document
becomes a row: :mod:`uep_gateway.lm_eval_docs`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import yaml

from uep_gateway.uploads import UploadInvalid, UploadProblem

TASK_LOC = ("body", "task")
MAX_TASK_BYTES = 65_536
HANDLED_KEYS = frozenset(
    {
        "output_type",
        "doc_to_text",
        "doc_to_target",
        "doc_to_choice",
        "target_delimiter",
        "fewshot_delimiter",
        "description",
        "num_fewshot",
        "generation_kwargs",
        "metric_list",
        "filter_list",
    }
)
SET_ASIDE_KEYS = frozenset(
    {
        "task",
        "tag",
        "dataset_path",
        "dataset_name",
        "dataset_kwargs",
        "training_split",
        "validation_split",
        "test_split",
        "fewshot_split",
        "metadata",
        "should_decontaminate",
        "doc_to_decontamination_query",
    }
)
OUTPUT_TYPES = ("generate_until", "multiple_choice")
GENERATE_METRICS = {"exact_match"}
CHOICE_METRICS = {"acc", "acc_norm"}
EXACT_MATCH_KWARGS = {"ignore_case", "ignore_punctuation", "regexes_to_ignore"}
METRIC_ENTRY_KEYS = {"metric", "aggregation", "higher_is_better"}
FILTER_FUNCTIONS = {"regex", "take_first", "lowercase"}


class _FunctionRef:
    """A ``!function module.name`` tag: Python code of the task's, which is never run here."""

    def __init__(self, ref: str) -> None:
        self.ref = ref


class _TaskLoader(yaml.SafeLoader):
    """PyYAML's safe loader that reads lm-eval's ``!function`` tag as a :class:`_FunctionRef`."""


def _function_ref(loader: yaml.SafeLoader, node: yaml.Node) -> _FunctionRef:
    return _FunctionRef(str(node.value) if isinstance(node, yaml.ScalarNode) else "?")


_TaskLoader.add_constructor("!function", _function_ref)


def _problem(msg: str, kind: str, *loc: Any) -> UploadProblem:
    return UploadProblem([*TASK_LOC, *map(str, loc)], msg, kind)


@dataclass
class LmEvalTask:
    """A parsed task: ``name`` (its ``task``), what renders each document, and the benchmark spec fields."""

    name: str
    output_type: str
    doc_to_text: Any
    doc_to_target: Any
    doc_to_choice: Any
    target_delimiter: str = " "
    fewshot_delimiter: str = "\n\n"
    description: str = ""
    num_fewshot: int = 0
    stop: list[str] = field(default_factory=list)
    max_tokens: int | None = None
    metric: dict[str, Any] = field(default_factory=dict)

    def template(self) -> str:
        """Our prompt template: the description, each demonstration's text, delimiter, answer and few-shot
        delimiter, then the document's text (pre-rendered into the input field ``text``)."""
        answer = (
            "ex.reference.choices[ex.reference.gold]"
            if self.output_type == "multiple_choice"
            else "(ex.reference.answer if ex.reference.answer is defined else ex.reference.answers[0])"
        )
        lit = json.dumps
        return (
            f"{{{{ {lit(self.description)} }}}}{{% for ex in fewshot %}}{{{{ ex.input.text }}}}"
            f"{{{{ {lit(self.target_delimiter)} }}}}{{{{ {answer} }}}}{{{{ {lit(self.fewshot_delimiter)} }}}}"
            "{% endfor %}{{ text }}"
        )

    def spec(self, slug: str, name: str | None) -> dict[str, Any]:
        """The ``BenchmarkSpec`` (JSON object) of the imported task."""
        prompt: dict[str, Any] = {"template": self.template(), "stop": self.stop, "fewshot_k": self.num_fewshot}
        if self.max_tokens is not None:
            prompt["max_tokens"] = self.max_tokens
        if self.output_type == "multiple_choice":
            prompt["loglik"] = {"choices_field": "choices", "target_delimiter": self.target_delimiter}
        return {
            "slug": slug,
            "name": name or self.name,
            "prompt": prompt,
            "metric": self.metric,
            "source": f"lm-evaluation-harness task {self.name}",
        }


def _string(raw: dict[str, Any], key: str, default: str, problems: list[UploadProblem]) -> str:
    value = raw.get(key, default)
    if not isinstance(value, str):
        problems.append(_problem(f"{key} must be a string", "bad_value", key))
        return default
    return value


def _generation(raw: dict[str, Any], task: LmEvalTask, problems: list[UploadProblem]) -> None:
    kwargs = raw.get("generation_kwargs") or {}
    if not isinstance(kwargs, dict):
        problems.append(_problem("generation_kwargs must be a mapping", "bad_value", "generation_kwargs"))
        return
    for key, value in kwargs.items():
        loc = ("generation_kwargs", key)
        if key == "until":
            stops = [value] if isinstance(value, str) else value
            if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
                problems.append(_problem("until must be a string or a list of strings", "bad_value", *loc))
            else:
                task.stop = stops
        elif key == "max_gen_toks":
            if type(value) is not int or value < 1:
                problems.append(_problem("max_gen_toks must be a positive integer", "bad_value", *loc))
            else:
                task.max_tokens = value
        elif (key == "do_sample" and value is False) or (key == "temperature" and value in (0, 0.0)):
            continue  # greedy decoding, which is what the models are asked for
        else:
            problems.append(
                _problem(f"generation_kwargs {key}: {value!r} is not supported (greedy only)", "unsupported_key", *loc)
            )


def _metrics(raw: dict[str, Any], task: LmEvalTask, problems: list[UploadProblem]) -> dict[str, Any]:
    """The metric entries' options (exact_match's normalisation params); checks each entry."""
    entries = raw.get("metric_list")
    allowed = CHOICE_METRICS if task.output_type == "multiple_choice" else GENERATE_METRICS
    if entries is None:
        return {}
    if not isinstance(entries, list) or not entries:
        problems.append(_problem("metric_list must be a non-empty list", "bad_value", "metric_list"))
        return {}
    params: dict[str, Any] = {}
    for i, entry in enumerate(entries):
        loc = (f"metric_list[{i}]",)
        if not isinstance(entry, dict) or not isinstance(entry.get("metric"), str):
            problems.append(_problem("each metric_list entry is a mapping with a 'metric' name", "bad_value", *loc))
            continue
        if entry["metric"] not in allowed:
            problems.append(
                _problem(
                    f"metric {entry['metric']!r} is not supported for {task.output_type} (supported: {', '.join(sorted(allowed))})",
                    "unsupported_key",
                    *loc,
                    "metric",
                )
            )
        if entry.get("aggregation", "mean") != "mean":
            problems.append(_problem("only the aggregation 'mean' is supported", "unsupported_key", *loc, "aggregation"))
        if entry.get("higher_is_better", True) is not True:
            problems.append(_problem("only higher_is_better: true is supported", "unsupported_key", *loc, "higher_is_better"))
        for key, value in entry.items():
            if key in METRIC_ENTRY_KEYS:
                continue
            if entry["metric"] == "exact_match" and key in EXACT_MATCH_KWARGS:
                params[key] = value
            else:
                problems.append(_problem(f"metric option {key!r} is not supported", "unsupported_key", *loc, key))
    return params


def _filter(raw: dict[str, Any], task: LmEvalTask, problems: list[UploadProblem]) -> tuple[str | None, bool]:
    """``(regex pattern or None, lowercase)`` of the one filter pipeline; checks it."""
    pipelines = raw.get("filter_list")
    if pipelines is None:
        return None, False
    if task.output_type != "generate_until":
        problems.append(_problem("filter_list applies to generate_until tasks only", "unsupported_key", "filter_list"))
        return None, False
    if not isinstance(pipelines, list) or not pipelines:
        problems.append(_problem("filter_list must be a non-empty list", "bad_value", "filter_list"))
        return None, False
    if len(pipelines) > 1:
        problems.append(_problem("only one filter pipeline is supported", "unsupported_key", "filter_list[1]"))
    steps = pipelines[0].get("filter") if isinstance(pipelines[0], dict) else None
    if not isinstance(steps, list):
        problems.append(_problem("a filter pipeline has a 'filter' list", "bad_value", "filter_list[0]", "filter"))
        return None, False
    pattern, lower = None, False
    for j, step in enumerate(steps):
        loc = ("filter_list[0]", f"filter[{j}]")
        fn = step.get("function") if isinstance(step, dict) else None
        if fn not in FILTER_FUNCTIONS:
            problems.append(
                _problem(
                    f"filter function {fn!r} is not supported ({', '.join(sorted(FILTER_FUNCTIONS))})",
                    "unsupported_key",
                    *loc,
                    "function",
                )
            )
            continue
        extra = set(step) - {"function", "regex_pattern", "group_select", "fallback"}
        for key in sorted(extra):
            problems.append(_problem(f"filter option {key!r} is not supported", "unsupported_key", *loc, key))
        if fn == "regex":
            if step.get("group_select", 0) != 0:
                problems.append(
                    _problem("only group_select: 0 (the first match) is supported", "unsupported_key", *loc, "group_select")
                )
            if not isinstance(step.get("regex_pattern"), str):
                problems.append(_problem("regex_pattern must be a string", "bad_value", *loc, "regex_pattern"))
            else:
                pattern = step["regex_pattern"]
        elif fn == "lowercase":
            lower = True
    return pattern, lower


def _doc_rule(raw: dict[str, Any], key: str, problems: list[UploadProblem]) -> Any:
    value = raw.get(key)
    if isinstance(value, _FunctionRef):
        problems.append(
            _problem(f"{key}: !function {value.ref} (the task's Python code) is not supported", "unsupported_key", key)
        )
        return None
    return value


def parse_task(text: str) -> LmEvalTask:
    """Parse and check an lm-eval task YAML (module docstring for what is supported).

    Raises:
        UploadInvalid: not YAML, over :data:`MAX_TASK_BYTES`, an unsupported key or value (each named under
            ``["body", "task", key, ...]``).
    """
    if len(text.encode()) > MAX_TASK_BYTES:
        raise UploadInvalid([_problem(f"the task YAML is larger than {MAX_TASK_BYTES} bytes", "too_large")])
    try:
        raw = yaml.load(text, Loader=_TaskLoader)
    except yaml.YAMLError as exc:
        raise UploadInvalid([_problem(f"not a YAML task: {exc}"[:500], "bad_yaml")]) from None
    if not isinstance(raw, dict):
        raise UploadInvalid([_problem("the task YAML must be a mapping", "bad_yaml")])
    problems = [
        _problem(f"{key!r} is not supported by the lm-eval import", "unsupported_key", key)
        for key in raw
        if key not in HANDLED_KEYS | SET_ASIDE_KEYS
    ]
    output_type = raw.get("output_type", "generate_until")
    if output_type not in OUTPUT_TYPES:
        problems.append(
            _problem(
                f"output_type {output_type!r} is not supported ({', '.join(OUTPUT_TYPES)})", "unsupported_key", "output_type"
            )
        )
    name = raw.get("task")
    task = LmEvalTask(
        name=name if isinstance(name, str) else "lm-eval task",
        output_type=output_type,
        doc_to_text=_doc_rule(raw, "doc_to_text", problems),
        doc_to_target=_doc_rule(raw, "doc_to_target", problems),
        doc_to_choice=_doc_rule(raw, "doc_to_choice", problems),
        target_delimiter=_string(raw, "target_delimiter", " ", problems),
        fewshot_delimiter=_string(raw, "fewshot_delimiter", "\n\n", problems),
        description=_string(raw, "description", "", problems),
    )
    if not isinstance(task.doc_to_text, str):
        problems.append(_problem("doc_to_text (a field name or a Jinja template) is required", "bad_value", "doc_to_text"))
    if task.doc_to_target is None or not isinstance(task.doc_to_target, str | int):
        problems.append(
            _problem("doc_to_target (a field name, a template or an index) is required", "bad_value", "doc_to_target")
        )
    if output_type == "multiple_choice" and not isinstance(task.doc_to_choice, str | list):
        problems.append(
            _problem("multiple_choice needs doc_to_choice (a field, a template or a list)", "bad_value", "doc_to_choice")
        )
    fewshot = raw.get("num_fewshot", 0)
    if type(fewshot) is not int or not 0 <= fewshot <= 16:
        problems.append(_problem("num_fewshot must be an integer from 0 to 16", "bad_value", "num_fewshot"))
    else:
        task.num_fewshot = fewshot
    _generation(raw, task, problems)
    params = _metrics(raw, task, problems)
    pattern, lower = _filter(raw, task, problems)
    if output_type == "multiple_choice":
        task.metric = {"name": "loglik_multiple_choice", "params": {}}
    else:
        params = {"ignore_whitespace": pattern is not None, **params}
        if lower:
            params["ignore_case"] = True
        task.metric = (
            {"name": "regex_match", "params": {"pattern": pattern, **params}}
            if pattern
            else {"name": "exact_match", "params": params}
        )
    if problems:
        raise UploadInvalid(problems[:20])
    return task
