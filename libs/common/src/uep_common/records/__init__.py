"""The rules that change shared records: the evaluation lifecycle (:mod:`.lifecycle`, every status change),
budgets (:mod:`.budget`), evaluation creation (:mod:`.creation`), sample selection (:mod:`.sampling`) and the
budget ledger's compaction (:mod:`.ledger_compaction`).

May import every room below it (analytics, registry, prompting, runtime, tables, contract)."""
