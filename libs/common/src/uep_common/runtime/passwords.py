"""Password hashing: argon2id through ``argon2-cffi`` (RFC 9106's recommended algorithm; the library's
defaults: time cost 3, 64 MiB, 4 lanes), with the rules a password must meet."""

from __future__ import annotations

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

_hasher = PasswordHasher()
MIN_LENGTH = 12
MAX_LENGTH = 1024
# A verification against this hash costs the same as a real one, so an unknown username takes as long as a
# wrong password.
_DUMMY_HASH = _hasher.hash("uep-no-such-user-password")


def password_problem(password: str) -> str | None:
    """Why ``password`` is not acceptable (fewer than 12 or more than 1024 characters, or a NUL), else None."""
    if len(password) < MIN_LENGTH:
        return f"a password needs at least {MIN_LENGTH} characters"
    if len(password) > MAX_LENGTH:
        return f"a password has at most {MAX_LENGTH} characters"
    if "\x00" in password:
        return "a password may not contain NUL"
    return None


def hash_password(password: str) -> str:
    """The argon2id PHC string of ``password`` (about 50 ms of CPU). Raises ValueError for an unacceptable one."""
    problem = password_problem(password)
    if problem:
        raise ValueError(problem)
    return _hasher.hash(password)


def verify_password(password_hash: str | None, password: str) -> bool:
    """True when ``password`` matches ``password_hash``; a missing hash (a user without a password) still
    costs one verification and gives False."""
    try:
        return _hasher.verify(password_hash or _DUMMY_HASH, password[:MAX_LENGTH]) and password_hash is not None
    except (VerificationError, InvalidHashError):
        return False


def needs_rehash(password_hash: str) -> bool:
    """True when the hash was made with other parameters than today's (rehash at the next sign-in)."""
    return _hasher.check_needs_rehash(password_hash)
