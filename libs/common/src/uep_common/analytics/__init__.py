"""Numbers from stored results: statistics and intervals (:mod:`.stats`), set-level metrics
(:mod:`.set_metrics`), an evaluation's summary (:mod:`.summary`), A/B comparison (:mod:`.comparison`),
leaderboards (:mod:`.leaderboards`), report fingerprints and charts.

May import the registry, prompting, runtime, tables and contract rooms; never :mod:`uep_common.records`."""
