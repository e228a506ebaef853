"""The scheduler service: evaluations admitted, items leased to models by fair queuing and dispatched, budgets
settled, expired leases re-dispatched and scheduled runs created; see :mod:`uep_scheduler.service`."""
