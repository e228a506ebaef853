"""The database's tables: the declarative base (:mod:`.base`), the core tables (:mod:`.models`), one table module
per area, all of them on one metadata (:mod:`.tables`), and the Alembic migrations. Sessions and engines are
:mod:`uep_common.runtime.session`.

May import :mod:`uep_common.contract` only."""
