"""The judge service: items of LLM-judged and hybrid evaluations scored by judge models (rubric, reference or
pairwise, one or several jurors) through the inference service; see :mod:`uep_judge.service`."""
