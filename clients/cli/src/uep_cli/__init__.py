"""``uep``: the command line client of the platform. It speaks only the public REST API (``/v1``), so it
works against any gateway it can reach; see :mod:`uep_cli.main` for the commands and their exit codes."""
