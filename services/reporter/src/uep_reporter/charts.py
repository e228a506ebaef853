"""Re-export of :mod:`uep_common.charts` (the charts live in libs/common: the gateway draws leaderboard radars too)."""

from uep_common.charts import *  # noqa: F403
from uep_common.charts import radar_svg, trend_svg  # noqa: F401
