"""The rules that change shared records: the evaluation lifecycle (:mod:`.lifecycle`, every status change; retry
and redrive in :mod:`.reruns`), budgets (:mod:`.budget`: creation and dispatch; :mod:`.settlement`; the end of an
exhausted budget in :mod:`.exhaustion`), evaluation creation (:mod:`.creation`), sample selection
(:mod:`.sampling`) and the budget ledger's compaction (:mod:`.ledger_compaction`).

May import every room below it (analytics, registry, prompting, runtime, tables, contract)."""
