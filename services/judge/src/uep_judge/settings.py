"""Judge settings (``UEP_*`` environment variables)."""

from uep_common.settings import CommonSettings


class JudgeSettings(CommonSettings):
    """Settings of the judge service."""

    service_name: str = "judge"
