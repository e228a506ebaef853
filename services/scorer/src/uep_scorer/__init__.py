"""The scorer service: each generated output scored by its benchmark's metric (code in a sandbox), or handed
to the judge for judge-type benchmarks; see :mod:`uep_scorer.service`."""
