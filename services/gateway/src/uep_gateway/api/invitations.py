"""Invitations: how an existing user joins a tenant. A tenant admin invites a username with a role; the user
signed in under that name sees the invitation and accepts or declines it. No account is ever attached to a
tenant without its own consent.

Inviting answers alike for every name, whether a user of that name exists or not (202 with the invitation):
the row is stored by username, and only the user who signs in under that name may read and answer it. So the
routes neither tell a tenant admin which usernames exist nor let it pull any account (a site admin's
included) into its tenant. A user gets an account from a site admin (``POST /v1/members``) or an identity
provider.

Owner and role check: the tenant's side (``/v1/invitations``) is the inviting tenant's, for its admins, read
and written through the tenant-scoped session (row-level security on ``member_invitations``), and another
tenant's invitation is a 404. The user's side (``/v1/auth/invitations``) is the signed-in user's own
(:data:`uep_gateway.access.SELF`: a session, never an API key, in no tenant's name), reads only rows addressed
to its username, and answers 404 for any other, whoever's it is; the audit log records an answer in the
inviting tenant's name.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from fastapi import APIRouter, Depends, Request, Response
from sqlalchemy import delete, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.tables.identity import MemberInvitation, Membership, User
from uep_common.tables.models import Tenant
from uep_gateway.auth import Principal, SignedInUser, current_principal, forget_all, signed_in_user
from uep_gateway.deps import db_session, unscoped_session
from uep_gateway.errors import FieldError
from uep_gateway.identity_schemas import InvitationCreate, InvitationView, MyInvitation, TenantRef, TenantRole
from uep_gateway.validation import NUL_CHECK

router = APIRouter(tags=["identity"], dependencies=NUL_CHECK)

INVITATION_LOC = ("path", "invitation_id")


def _view(row: MemberInvitation) -> InvitationView:
    return InvitationView(
        id=row.id,
        username=row.username,
        role=row.role,
        invited_by=row.invited_by,
        created_at=row.created_at,
        expires_at=row.expires_at,
    )


def _unknown(invitation_id: uuid.UUID) -> FieldError:
    return FieldError("not_found", INVITATION_LOC, f"no pending invitation {invitation_id}", "not_found")


# --------------------------------------------------------------------------------------------- the tenant's side
@router.post("/v1/invitations", status_code=202, response_model=InvitationView)
async def invite_member(
    body: InvitationCreate,
    request: Request,
    principal: Principal = Depends(current_principal),
    session: AsyncSession = Depends(db_session),
) -> InvitationView:
    """Invite ``username`` into the caller's tenant with ``role``: 202 with the pending invitation, the same
    answer whether a user of that name exists or not (nothing is attached until that user accepts). Inviting
    a name again renews its invitation with the new role. 409 naming ``username`` for a member of this tenant
    already; 409 ``too_many_invitations`` past ``UEP_MAX_PENDING_INVITATIONS`` pending ones."""
    settings = request.app.state.settings
    now = datetime.now(UTC)
    member = await session.scalar(
        select(Membership.id)
        .join(User, User.id == Membership.user_id)
        .where(User.username == body.username, Membership.tenant_id == principal.tenant.id)
    )
    if member is not None:
        raise FieldError("conflict", ("body", "username"), f"{body.username!r} is already a member of this tenant", "conflict")
    await session.execute(
        delete(MemberInvitation).where(MemberInvitation.tenant_id == principal.tenant.id, MemberInvitation.expires_at <= now)
    )
    pending = await session.scalar(
        select(func.count()).select_from(MemberInvitation).where(MemberInvitation.tenant_id == principal.tenant.id)
    )
    if (pending or 0) >= settings.max_pending_invitations:
        raise FieldError(
            "conflict",
            ("body", "username"),
            f"this tenant has {settings.max_pending_invitations} pending invitations: withdraw some first",
            "too_many_invitations",
        )
    values = {
        "role": body.role,
        "invited_by": principal.name,
        "created_at": now,
        "expires_at": now + timedelta(seconds=settings.invitation_ttl_s),
    }
    stmt = insert(MemberInvitation).values(id=uuid.uuid4(), tenant_id=principal.tenant.id, username=body.username, **values)
    stmt = stmt.on_conflict_do_update(constraint="uq_member_invitations_tenant_username", set_=values)
    row_id = (await session.execute(stmt.returning(MemberInvitation.id))).scalar_one()
    await session.commit()
    row = await session.get(MemberInvitation, row_id)
    assert row is not None
    return _view(row)


@router.get("/v1/invitations", response_model=list[InvitationView])
async def list_invitations(
    principal: Principal = Depends(current_principal), session: AsyncSession = Depends(db_session)
) -> list[InvitationView]:
    """The caller's tenant's pending invitations (not yet expired), newest first."""
    rows = await session.scalars(
        select(MemberInvitation)
        .where(MemberInvitation.tenant_id == principal.tenant.id, MemberInvitation.expires_at > datetime.now(UTC))
        .order_by(MemberInvitation.created_at.desc(), MemberInvitation.id)
    )
    return [_view(r) for r in rows]


@router.delete("/v1/invitations/{invitation_id}", status_code=204)
async def withdraw_invitation(
    invitation_id: uuid.UUID,
    principal: Principal = Depends(current_principal),
    session: AsyncSession = Depends(db_session),
) -> Response:
    """Withdraw a pending invitation of the caller's tenant; another tenant's or an unknown one: 404 naming
    ``invitation_id``."""
    gone = await session.execute(
        delete(MemberInvitation)
        .where(MemberInvitation.id == invitation_id, MemberInvitation.tenant_id == principal.tenant.id)
        .returning(MemberInvitation.id)
    )
    if gone.first() is None:
        raise _unknown(invitation_id)
    await session.commit()
    return Response(status_code=204)


# --------------------------------------------------------------------------------------------- the user's side
@router.get("/v1/auth/invitations", response_model=list[MyInvitation])
async def list_my_invitations(
    user: SignedInUser = Depends(signed_in_user), session: AsyncSession = Depends(unscoped_session)
) -> list[MyInvitation]:
    """The pending invitations addressed to the signed-in user (also one of no tenant yet), newest first."""
    rows = await session.execute(
        select(MemberInvitation, Tenant)
        .join(Tenant, Tenant.id == MemberInvitation.tenant_id)
        .where(MemberInvitation.username == user.username, MemberInvitation.expires_at > datetime.now(UTC))
        .order_by(MemberInvitation.created_at.desc(), MemberInvitation.id)
    )
    return [
        MyInvitation(
            id=inv.id,
            tenant=TenantRef(slug=t.slug, name=t.name),
            role=inv.role,
            invited_by=inv.invited_by,
            expires_at=inv.expires_at,
        )
        for inv, t in rows.all()
    ]


async def _mine(session: AsyncSession, user: SignedInUser, invitation_id: uuid.UUID) -> tuple[MemberInvitation, Tenant]:
    """The pending invitation ``invitation_id`` addressed to ``user`` (locked); 404 naming it otherwise."""
    row = (
        await session.execute(
            select(MemberInvitation, Tenant)
            .join(Tenant, Tenant.id == MemberInvitation.tenant_id)
            .where(
                MemberInvitation.id == invitation_id,
                MemberInvitation.username == user.username,
                MemberInvitation.expires_at > datetime.now(UTC),
            )
            .with_for_update(of=MemberInvitation)
        )
    ).first()
    if row is None:
        raise _unknown(invitation_id)
    return row[0], row[1]


def _answered_for(request: Request, user: SignedInUser, tenant: Tenant, role: str) -> None:
    """Record the answer in the audit log in the inviting tenant's name (its admins see who joined)."""
    request.state.principal = Principal(
        tenant=tenant, role=role, kind="user", name=user.name, user_id=user.user_id, session_id=user.session_id
    )


@router.post("/v1/auth/invitations/{invitation_id}/accept", response_model=TenantRole)
async def accept_invitation(
    invitation_id: uuid.UUID,
    request: Request,
    user: SignedInUser = Depends(signed_in_user),
    session: AsyncSession = Depends(unscoped_session),
) -> TenantRole:
    """Accept an invitation addressed to the signed-in user: it becomes a member of the inviting tenant with
    the invited role (a member already keeps its role) and the invitation is gone. 404 naming
    ``invitation_id`` for one that is not the caller's, expired or answered."""
    inv, tenant = await _mine(session, user, invitation_id)
    stmt = insert(Membership).values(
        id=uuid.uuid4(), user_id=user.user_id, tenant_id=tenant.id, role=inv.role, created_at=datetime.now(UTC)
    )
    await session.execute(stmt.on_conflict_do_nothing(constraint="uq_memberships_user_tenant"))
    role = inv.role
    await session.delete(inv)
    await session.commit()
    forget_all(request)
    _answered_for(request, user, tenant, role)
    return TenantRole(slug=tenant.slug, name=tenant.name, role=role)


@router.post("/v1/auth/invitations/{invitation_id}/decline", status_code=204)
async def decline_invitation(
    invitation_id: uuid.UUID,
    request: Request,
    user: SignedInUser = Depends(signed_in_user),
    session: AsyncSession = Depends(unscoped_session),
) -> Response:
    """Decline an invitation addressed to the signed-in user: it is gone and nothing else changes. 404 naming
    ``invitation_id`` for one that is not the caller's, expired or answered."""
    inv, tenant = await _mine(session, user, invitation_id)
    role = inv.role
    await session.delete(inv)
    await session.commit()
    _answered_for(request, user, tenant, role)
    return Response(status_code=204)
