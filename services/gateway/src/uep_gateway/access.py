"""The role matrix: every route's operation id, who may call it, and its rate-limit class — written once.

Each entry of :data:`ROUTES` is keyed by ``(method, path template)``. :func:`operation_id` gives FastAPI the
entry's stable ``operationId`` (a route without an entry makes the app fail to build), and :func:`authorize`
— a dependency of every route — lets a call through only when the caller's role is in the entry's set. The
isolation suite (``tests/identity``) reads this table to know what each role should get.

Role sets: ``PUBLIC`` (no principal), ``ANY`` (any signed-in principal), ``READ`` (viewer, builder, admin),
``BUILD`` (builder, admin), ``ADMIN`` (admin), ``ANNOTATE`` (annotator, builder, admin), ``TASKS`` (READ +
annotator), ``SITE`` (a site admin that sends ``X-UEP-Site-Admin: true``) and ``SELF`` (a signed-in user
answering for itself, in no tenant's name: its invitations; API keys are refused).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from fastapi import Request

from uep_gateway.auth import principal_of, signed_in_user
from uep_gateway.errors import FieldError

if TYPE_CHECKING:
    from fastapi.routing import APIRoute

PUBLIC: frozenset[str] = frozenset()
ANY = frozenset({"viewer", "builder", "admin", "annotator"})
READ = frozenset({"viewer", "builder", "admin"})
BUILD = frozenset({"builder", "admin"})
ADMIN = frozenset({"admin"})
ANNOTATE = frozenset({"annotator", "builder", "admin"})
TASKS = READ | {"annotator"}
SITE = frozenset({"site"})
SELF = frozenset({"self"})


@dataclass(frozen=True)
class Access:
    """One route's entry: ``op`` (operationId), ``roles`` (one of the sets above), ``limit`` (rate-limit
    class: ``read``, ``write``, ``upload`` or ``auth``) and ``audited`` (state-changing: written to the
    audit log)."""

    op: str
    roles: frozenset[str]
    limit: str = "read"
    audited: bool = False

    @property
    def public(self) -> bool:
        """True for routes that need no principal."""
        return not self.roles


def _r(op: str, roles: frozenset[str]) -> Access:
    return Access(op, roles, "read", False)


def _w(op: str, roles: frozenset[str], limit: str = "write") -> Access:
    return Access(op, roles, limit, True)


E = "/v1/evaluations/{evaluation_id}"
T = "/v1/annotation-tasks/{task_id}"
M = "/v1/models/{model_ref}"
ROUTES: dict[tuple[str, str], Access] = {
    ("GET", "/healthz"): _r("healthz", PUBLIC),
    ("GET", "/readyz"): _r("readyz", PUBLIC),
    # identity
    ("POST", "/v1/auth/login"): _w("login", PUBLIC, "auth"),
    ("POST", "/v1/auth/logout"): _w("logout", ANY),
    ("GET", "/v1/auth/me"): _r("whoAmI", ANY),
    ("POST", "/v1/auth/password"): _w("changePassword", ANY, "auth"),
    ("GET", "/v1/members"): _r("listMembers", ADMIN),
    ("POST", "/v1/members"): _w("addMember", SITE),
    ("GET", "/v1/invitations"): _r("listInvitations", ADMIN),
    ("POST", "/v1/invitations"): _w("inviteMember", ADMIN),
    ("DELETE", "/v1/invitations/{invitation_id}"): _w("withdrawInvitation", ADMIN),
    ("GET", "/v1/auth/invitations"): _r("listMyInvitations", SELF),
    ("POST", "/v1/auth/invitations/{invitation_id}/accept"): _w("acceptInvitation", SELF),
    ("POST", "/v1/auth/invitations/{invitation_id}/decline"): _w("declineInvitation", SELF),
    ("PATCH", "/v1/members/{user_id}"): _w("updateMember", ADMIN),
    ("DELETE", "/v1/members/{user_id}"): _w("removeMember", ADMIN),
    ("GET", "/v1/api-keys"): _r("listApiKeys", ADMIN),
    ("POST", "/v1/api-keys"): _w("createApiKey", ADMIN),
    ("DELETE", "/v1/api-keys/{key_id}"): _w("revokeApiKey", ADMIN),
    ("GET", "/v1/audit"): _r("listAuditEntries", ADMIN),
    ("GET", "/v1/tenants"): _r("listTenants", SITE),
    ("POST", "/v1/tenants"): _w("createTenant", SITE),
    # evaluations
    ("POST", "/v1/evaluations"): _w("createEvaluation", BUILD),
    ("GET", "/v1/evaluations"): _r("listEvaluations", READ),
    ("POST", "/v1/evaluations/estimate"): _r("estimateEvaluation", READ),
    ("GET", E): _r("getEvaluation", READ),
    ("GET", E + "/results"): _r("listResults", READ),
    ("POST", E + "/cancel"): _w("cancelEvaluation", BUILD),
    ("POST", E + "/stop"): _w("stopEvaluation", BUILD),
    ("POST", E + "/retry"): _w("retryEvaluation", BUILD),
    ("POST", E + "/rescore"): _w("createRescore", BUILD),
    ("GET", E + "/rescores/{rescore_id}"): _r("getRescore", READ),
    ("GET", E + "/budget"): _r("getEvaluationBudget", READ),
    ("POST", E + "/pin"): _w("pinEvaluation", BUILD),
    ("DELETE", E + "/pin"): _w("unpinEvaluation", BUILD),
    ("GET", E + "/compare"): _r("compareWithBaseline", READ),
    ("GET", "/v1/experiments/{experiment_id}"): _r("getExperiment", READ),
    ("GET", "/v1/batches/{batch_id}"): _r("getBatch", READ),
    ("POST", E + "/reports"): _w("createReport", BUILD),
    ("GET", E + "/reports"): _r("listReports", READ),
    ("GET", E + "/reports/{report_id}"): _r("getReport", READ),
    ("GET", E + "/report.{fmt}"): _r("getReportFile", READ),
    # catalogue
    ("GET", "/v1/benchmarks"): _r("listBenchmarks", READ),
    ("POST", "/v1/benchmarks"): _w("uploadBenchmark", BUILD, "upload"),
    ("GET", "/v1/benchmarks/{ref}/samples"): _r("previewSamples", READ),
    # the model registry
    ("GET", "/v1/models"): _r("listModels", READ),
    ("POST", "/v1/models"): _w("registerModel", BUILD),
    ("GET", M): _r("getModel", READ),
    ("PATCH", M): _w("updateModel", BUILD),
    ("DELETE", M): _w("deleteModel", BUILD),
    ("POST", M + "/deactivate"): _w("deactivateModel", BUILD),
    ("POST", M + "/reactivate"): _w("reactivateModel", BUILD),
    ("GET", "/v1/metrics"): _r("listMetrics", READ),
    # schedules
    ("POST", "/v1/schedules"): _w("createSchedule", BUILD),
    ("GET", "/v1/schedules"): _r("listSchedules", READ),
    ("GET", "/v1/schedules/{schedule_id}"): _r("getSchedule", READ),
    ("DELETE", "/v1/schedules/{schedule_id}"): _w("deleteSchedule", BUILD),
    # budgets
    ("GET", "/v1/caps"): _r("listCaps", READ),
    ("PUT", "/v1/caps/site/evaluation"): _w("putSiteEvaluationCap", SITE),
    ("PUT", "/v1/caps/tenant/day"): _w("putTenantDayCap", BUILD),
    ("GET", "/v1/caps/tenant/limits"): _r("getTenantLimits", READ),
    ("PUT", "/v1/caps/tenant/limits"): _w("putTenantLimits", SITE),
    ("PUT", "/v1/caps/benchmarks/{slug}"): _w("putBenchmarkCap", BUILD),
    ("PUT", "/v1/caps/evaluations/{evaluation_id}"): _w("putEvaluationCap", BUILD),
    ("GET", "/v1/costs/models"): _r("listModelCosts", READ),
    ("PUT", "/v1/costs/models/{model}"): _w("putModelCost", SITE),
    ("GET", "/v1/costs/benchmarks/{slug}"): _r("getBenchmarkCost", READ),
    ("PUT", "/v1/costs/benchmarks/{slug}"): _w("putBenchmarkCost", SITE),
    ("GET", "/v1/spend"): _r("getSpend", READ),
    # lifecycle
    ("GET", "/v1/dead-letters"): _r("listDeadLetters", READ),
    ("GET", "/v1/dead-letters/{dead_letter_id}"): _r("getDeadLetter", READ),
    ("POST", "/v1/dead-letters/{dead_letter_id}/redrive"): _w("redriveDeadLetter", BUILD),
    # judges
    ("GET", "/v1/judges/diagnostics"): _r("getJudgeDiagnostics", READ),
    ("GET", "/v1/judges/verdicts"): _r("listJudgeVerdicts", READ),
    ("GET", "/v1/judges/routes"): _r("listHybridRoutes", READ),
    ("GET", "/v1/judges"): _r("listJudges", READ),
    ("GET", "/v1/judges/calibrations"): _r("listJudgeCalibrations", READ),
    ("GET", "/v1/judges/costs"): _r("listJudgeCosts", READ),
    # human evaluation
    ("GET", "/v1/annotators"): _r("listAnnotators", READ),
    ("POST", "/v1/annotators"): _w("createAnnotator", BUILD),
    ("POST", "/v1/annotation-tasks"): _w("createAnnotationTask", BUILD),
    ("GET", "/v1/annotation-tasks"): _r("listAnnotationTasks", TASKS),
    ("GET", T): _r("getAnnotationTask", TASKS),
    ("GET", T + "/next"): _r("getNextAnnotationItem", ANNOTATE),
    ("POST", T + "/annotations"): _w("submitAnnotation", ANNOTATE),
    ("GET", T + "/annotators"): _r("listTaskAnnotators", READ),
    ("GET", T + "/agreement"): _r("getAnnotationAgreement", READ),
    ("GET", T + "/judge-agreement"): _r("getJudgeAgreement", READ),
    ("POST", T + "/calibration"): _w("recordJudgeCalibration", BUILD),
    ("GET", T + "/results"): _r("getAnnotationResults", READ),
    ("GET", "/annotate/{task_id}"): _r("annotationPage", ANNOTATE),
    # the web UI (uep_gateway.ui): shell and shipped files, public (the data behind them is the API's)
    ("GET", "/"): _r("uiRoot", PUBLIC),
    ("GET", "/ui/"): _r("uiShell", PUBLIC),
    ("GET", "/ui/{page:path}"): _r("uiPage", PUBLIC),
    ("GET", "/ui/static/{asset}"): _r("uiAsset", PUBLIC),
    # leaderboards and retention
    ("GET", "/v1/leaderboards"): _r("listLeaderboards", READ),
    ("GET", "/v1/leaderboards/compare"): _r("compareModels", READ),
    ("GET", "/v1/leaderboards/{benchmark}"): _r("getLeaderboard", READ),
    ("GET", "/v1/leaderboards/{benchmark}/history"): _r("getLeaderboardHistory", READ),
    ("POST", "/v1/retention/run"): _w("runRetention", SITE),
    ("GET", "/v1/retention/runs/{run_id}"): _r("getRetentionRun", SITE),
}


def entry(method: str, path: str) -> Access:
    """The matrix entry of ``method`` + ``path`` (a template such as ``/v1/evaluations/{evaluation_id}``).
    Raises LookupError for a route that has none — a new route must be added to :data:`ROUTES`."""
    try:
        return ROUTES[(method.upper(), path)]
    except KeyError:
        raise LookupError(f"{method} {path} has no entry in uep_gateway.access.ROUTES") from None


def operation_id(route: APIRoute) -> str:
    """FastAPI's ``generate_unique_id_function``: the route's ``operationId`` from the matrix."""
    (method,) = route.methods or {"GET"}
    return entry(method, route.path).op


def route_access(request: Request) -> Access:
    """The matrix entry of the route that matched ``request`` (FastAPI puts the route in the scope)."""
    route = request.scope.get("route")
    access: Access | None = getattr(route, "uep_access", None)
    if access is None:
        access = entry(request.method, getattr(route, "path", request.url.path))
    return access


def check_role(access: Access, role: str, site_act: bool) -> None:
    """Raise 403 naming the credential unless a principal of ``role`` (``site_act``: a site admin acting
    explicitly across tenants) may call the route of ``access``."""
    if access.public:
        return
    if access.roles == SITE:
        if not site_act:
            raise FieldError(
                "forbidden",
                ("header", "X-UEP-Site-Admin"),
                f"{access.op} is a site administration call: a site admin must send X-UEP-Site-Admin: true",
                "forbidden",
            )
        return
    if site_act or role in access.roles:
        return
    need = "/".join(sorted(access.roles))
    raise FieldError(
        "forbidden", ("header", "Authorization"), f"{access.op} needs the role {need}; the caller is {role}", "forbidden"
    )


async def authorize(request: Request) -> None:
    """App-wide dependency: resolve the caller (401 when a route needs one and there is none), check the
    matrix (403) and count the call against its rate limits (429). Public routes skip all three; sign-in
    limits its failures itself, per account and per client address (:meth:`uep_gateway.ratelimit.RateLimiter.check_signin`)."""
    access = route_access(request)
    request.state.access = access
    limiter = request.app.state.rate_limiter
    if access.public:
        return
    if access.roles == SELF:
        user = await signed_in_user(request)
        await limiter.check_user(request, user.user_id, access)
        return
    principal = await principal_of(request)
    check_role(access, principal.role, principal.site_act)
    await limiter.check(request, principal, access)
