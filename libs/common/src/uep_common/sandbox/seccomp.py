"""The sandbox's seccomp filter, compiled to classic BPF by libseccomp for bwrap's ``--seccomp FD``.

Binding: ``pyseccomp`` (PyPI, a small pure-Python ctypes binding, API-compatible with libseccomp's own Python
bindings) over Debian's ``libseccomp2``. Chosen over Debian's ``python3-seccomp`` because that package is built
for the system interpreter only, so the scorer's own interpreter (a venv, or ``/usr/local`` in the image) could
not import it; the filter logic itself is libseccomp's, maintained by its upstream and Debian, and pyseccomp
only forwards calls to it. The filter is compiled once per process and the same bytes are given to every
sandbox.

Policy: default allow (a deny list; the namespaces, the unprivileged uid and no_new_privs are the main
boundary, this narrows the kernel surface behind it). Denied with ``EPERM``: ``ptrace``,
``process_vm_readv``/``process_vm_writev``, ``setns``, ``unshare``, ``mount``/``umount2``/``pivot_root``
and the new mount API (``open_tree``, ``move_mount``, ``fsopen``, ``fsconfig``, ``fsmount``, ``fspick``,
``mount_setattr``), ``chroot``, ``keyctl``/``add_key``/``request_key``, ``bpf``, ``perf_event_open``,
``kexec_load``/``kexec_file_load``, ``init_module``/``finit_module``/``delete_module``, ``userfaultfd``,
``personality``, ``io_uring_setup``/``io_uring_enter``/``io_uring_register``, ``name_to_handle_at``/
``open_by_handle_at``, ``swapon``/``swapoff``, ``reboot``, ``syslog``, ``acct``, ``quotactl``,
``settimeofday``/``clock_settime``/``clock_adjtime``/``adjtimex``, ``iopl``/``ioperm``, ``vhangup``,
``lookup_dcookie``, ``pidfd_getfd``; ``clone`` with any ``CLONE_NEW*`` flag; ``ioctl(TIOCSTI)`` (typing into a
terminal). ``clone3`` fails with ``ENOSYS`` (its flags sit in memory a filter cannot read; glibc then falls
back to ``clone``, which is checked). Syscalls of another architecture (x86 ``int 0x80``, x32) kill the
process (libseccomp's default for a foreign architecture).
"""

from __future__ import annotations

import errno
import functools
import os
import tempfile

DENIED = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "setns",
    "unshare",
    "mount",
    "umount2",
    "pivot_root",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "chroot",
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "userfaultfd",
    "personality",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "name_to_handle_at",
    "open_by_handle_at",
    "swapon",
    "swapoff",
    "reboot",
    "syslog",
    "acct",
    "quotactl",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "iopl",
    "ioperm",
    "vhangup",
    "lookup_dcookie",
    "pidfd_getfd",
)
"""Syscalls that fail with EPERM inside the sandbox."""

CLONE_NAMESPACE_FLAGS = (
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
    0x00000080,  # CLONE_NEWTIME
)
"""``clone`` flags that would create a namespace; any of them makes ``clone`` fail with EPERM."""

_TIOCSTI = 0x5412


@functools.lru_cache(maxsize=1)
def compiled_filter() -> bytes:
    """The filter as classic BPF bytes (``struct sock_filter`` array, native byte order), ready for bwrap.

    Raises:
        OSError: libseccomp is missing (``pyseccomp`` cannot load ``libseccomp.so.2``) or rejected a rule.
    """
    try:
        import pyseccomp as sc
    except (ImportError, OSError, AttributeError) as exc:  # the binding raises at import if the .so is absent
        raise OSError(f"libseccomp unavailable: {exc}") from exc

    flt = sc.SyscallFilter(sc.ALLOW)
    eperm = sc.ERRNO(errno.EPERM)
    for name in DENIED:
        try:
            flt.add_rule(eperm, name)
        except OSError as exc:
            if exc.errno not in (errno.EFAULT, errno.EINVAL, errno.EDOM):  # unknown on this architecture
                raise
    flt.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    for flag in CLONE_NAMESPACE_FLAGS:
        flt.add_rule(eperm, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    flt.add_rule(eperm, "ioctl", sc.Arg(1, sc.MASKED_EQ, 0xFFFFFFFF, _TIOCSTI))
    with tempfile.TemporaryFile() as f:
        flt.export_bpf(f)
        f.seek(0)
        data = f.read()
    if not data or len(data) % 8:
        raise OSError(f"libseccomp exported {len(data)} bytes, not a BPF program")
    return data


def filter_fd() -> int:
    """A new pipe read end holding :func:`compiled_filter` (bwrap reads it to EOF); the caller closes it.

    Raises:
        OSError: as :func:`compiled_filter`, or the pipe could not be made.
    """
    data = compiled_filter()
    r, w = os.pipe()
    try:
        if len(data) > 60000:  # a pipe holds 64 KiB; a larger program would need a writer thread
            raise OSError(f"seccomp program of {len(data)} bytes does not fit in a pipe")
        os.write(w, data)
    except OSError:
        os.close(r)
        raise
    finally:
        os.close(w)
    return r
