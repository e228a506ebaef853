"""The reporter service: scores stored as the record of each item, progress, summaries, reports (JSON, HTML,
PDF), leaderboards and retention; see :mod:`uep_reporter.service`."""
