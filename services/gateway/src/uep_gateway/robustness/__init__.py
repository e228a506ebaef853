"""Robustness evaluations: the perturbations (:mod:`.perturbations`) and the benchmark of originals and perturbed
items a robustness evaluation runs (:mod:`.derived`)."""
