"""One seccomp deny-list for both backends: BPF for bubblewrap, a JSON profile for Docker.

:data:`DENIED_SYSCALLS` names the system calls that reach the kernel's attack surface
without helping ordinary Python code: module loading, mounts and namespaces, ptrace and
cross-process memory access, BPF, perf, keyrings, io_uring, userfaultfd, clock and swap
changes. They fail with EPERM (a clean ``PermissionError``) rather than killing the
process; so does ``clone`` with a namespace flag, and ``clone3`` fails with ENOSYS.

- **bubblewrap** (``bwrap --seccomp FD``) loads a compiled filter, an array of ``struct
  sock_filter``, built here by hand (:func:`deny_list_program`) for x86_64 and aarch64,
  chosen by ``platform.machine()``. Elsewhere there is none: :func:`missing_filter_warning`
  says so (the backend logs it at start, ``dagwright doctor`` reports it); the namespaces,
  rlimits and cgroups still apply.
- **docker** gets the same list as a JSON profile for the engine (:func:`docker_profile`),
  passed with ``security_opt``; the daemon's libseccomp resolves the names for each
  architecture, so no number table is needed there.

Rejected: libseccomp through its Python binding (a C library and a binding that are not
wheels on PyPI, for a program this small); the engine's default profile as the base of the
Docker one (an allow-list of some 350 calls that the engine does not expose through its
API, so it would have to be copied here and kept in step with new kernels, glibc and
engines; the one Debian 12's engine applies lets io_uring through, and ptrace and
``process_vm_*`` since kernel 4.8). What the engine's allow-list refuses beyond this list
either needs a capability the container does not have, or is a system call newer than
the list: that last is the price of a deny-list, the same for both backends.
"""

from __future__ import annotations

import errno
import platform
import struct
from dataclasses import dataclass
from typing import Any

DENIED_SYSCALLS: tuple[str, ...] = (
    "ptrace",
    "syslog",
    "uselib",
    "personality",
    "ustat",
    "sysfs",
    "vhangup",
    "pivot_root",
    "_sysctl",
    "adjtimex",
    "acct",
    "settimeofday",
    "mount",
    "umount2",
    "swapon",
    "swapoff",
    "reboot",
    "sethostname",
    "setdomainname",
    "iopl",
    "ioperm",
    "create_module",
    "init_module",
    "delete_module",
    "get_kernel_syms",
    "query_module",
    "quotactl",
    "nfsservctl",
    "lookup_dcookie",
    "clock_settime",
    "kexec_load",
    "add_key",
    "request_key",
    "keyctl",
    "unshare",
    "perf_event_open",
    "fanotify_init",
    "name_to_handle_at",
    "open_by_handle_at",
    "clock_adjtime",
    "setns",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "finit_module",
    "kexec_file_load",
    "bpf",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "pidfd_getfd",
    "mount_setattr",
    "quotactl_fd",
)
"""Refused with EPERM by both backends."""

NAMESPACE_FLAGS: tuple[int, ...] = (
    0x80,  # CLONE_NEWTIME
    0x20000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
)
"""The clone(2) flags that create a namespace: refused by both backends."""
CLONE_NAMESPACE_FLAGS = sum(NAMESPACE_FLAGS)  # distinct bits: their sum is their union


@dataclass(frozen=True)
class Architecture:
    """What a filter must know of one architecture: its audit id and its numbers."""

    name: str
    audit_arch: int  # seccomp_data.arch of its native system calls
    denied: dict[str, int]  # the numbers of the DENIED_SYSCALLS it has
    clone: int
    clone3: int
    # x86_64 also accepts x32 calls (number | 0x40000000): the filter refuses them all.
    x32_bit: int | None = None


# Since Linux 5.1 (424, pidfd_send_signal), a new system call has the same number on every
# architecture: these are written once and shared by the tables below.
UNIFIED_NUMBERS: dict[str, int] = {
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "pidfd_getfd": 438,
    "mount_setattr": 442,
    "quotactl_fd": 443,
}

# From arch/x86/entry/syscalls/syscall_64.tbl (<asm/unistd_64.h>).
X86_64 = Architecture(
    name="x86_64",
    audit_arch=0xC000003E,
    denied={
        "ptrace": 101,
        "syslog": 103,
        "uselib": 134,
        "personality": 135,
        "ustat": 136,
        "sysfs": 139,
        "vhangup": 153,
        "pivot_root": 155,
        "_sysctl": 156,
        "adjtimex": 159,
        "acct": 163,
        "settimeofday": 164,
        "mount": 165,
        "umount2": 166,
        "swapon": 167,
        "swapoff": 168,
        "reboot": 169,
        "sethostname": 170,
        "setdomainname": 171,
        "iopl": 172,
        "ioperm": 173,
        "create_module": 174,
        "init_module": 175,
        "delete_module": 176,
        "get_kernel_syms": 177,
        "query_module": 178,
        "quotactl": 179,
        "nfsservctl": 180,
        "lookup_dcookie": 212,
        "clock_settime": 227,
        "kexec_load": 246,
        "add_key": 248,
        "request_key": 249,
        "keyctl": 250,
        "unshare": 272,
        "perf_event_open": 298,
        "fanotify_init": 300,
        "name_to_handle_at": 303,
        "open_by_handle_at": 304,
        "clock_adjtime": 305,
        "setns": 308,
        "process_vm_readv": 310,
        "process_vm_writev": 311,
        "kcmp": 312,
        "finit_module": 313,
        "kexec_file_load": 320,
        "bpf": 321,
        "userfaultfd": 323,
        **UNIFIED_NUMBERS,
    },
    clone=56,
    clone3=435,
    x32_bit=0x40000000,
)

# From include/uapi/asm-generic/unistd.h, which arm64 uses. It never had the legacy calls
# (uselib, ustat, sysfs, _sysctl, iopl, ioperm, create_module, get_kernel_syms,
# query_module): there is nothing to refuse.
AARCH64 = Architecture(
    name="aarch64",
    audit_arch=0xC00000B7,  # AUDIT_ARCH_AARCH64: EM_AARCH64 (183) | 64-bit | little endian
    denied={
        "lookup_dcookie": 18,
        "umount2": 39,
        "mount": 40,
        "pivot_root": 41,
        "nfsservctl": 42,
        "vhangup": 58,
        "quotactl": 60,
        "acct": 89,
        "personality": 92,
        "unshare": 97,
        "kexec_load": 104,
        "init_module": 105,
        "delete_module": 106,
        "clock_settime": 112,
        "syslog": 116,
        "ptrace": 117,
        "reboot": 142,
        "sethostname": 161,
        "setdomainname": 162,
        "settimeofday": 170,
        "adjtimex": 171,
        "add_key": 217,
        "request_key": 218,
        "keyctl": 219,
        "swapon": 224,
        "swapoff": 225,
        "perf_event_open": 241,
        "fanotify_init": 262,
        "name_to_handle_at": 264,
        "open_by_handle_at": 265,
        "clock_adjtime": 266,
        "setns": 268,
        "process_vm_readv": 270,
        "process_vm_writev": 271,
        "kcmp": 272,
        "finit_module": 273,
        "bpf": 280,
        "userfaultfd": 282,
        "kexec_file_load": 294,
        **UNIFIED_NUMBERS,
    },
    clone=220,
    clone3=435,
)

ARCHITECTURES = {"x86_64": X86_64, "amd64": X86_64, "aarch64": AARCH64, "arm64": AARCH64}
"""By ``platform.machine()`` (lower case: Linux says x86_64/aarch64, some systems amd64/arm64)."""


# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6]
_NR_OFFSET = 0
_ARCH_OFFSET = 4
_ARG0_LOW_OFFSET = 16  # low 32 bits of args[0] (both architectures are little endian)

_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K

RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def _deny(err: int = errno.EPERM) -> bytes:
    return _insn(_RET_K, RET_ERRNO | err)


def compile_deny_list(arch: Architecture) -> bytes:
    """The filter for ``arch``: calls of any other architecture (32-bit compat, x32) are
    refused outright, since their numbers differ."""
    program = [_insn(_LD_W_ABS, _ARCH_OFFSET), _insn(_JEQ_K, arch.audit_arch, jt=1), _deny()]
    program.append(_insn(_LD_W_ABS, _NR_OFFSET))
    if arch.x32_bit is not None:
        program += [_insn(_JGE_K, arch.x32_bit, jf=1), _deny()]
    # clone3 passes its flags in memory, where a filter cannot look: ENOSYS makes glibc
    # fall back to clone(2), whose flags it can check (Docker and Flatpak do the same).
    program += [_insn(_JEQ_K, arch.clone3, jf=1), _deny(errno.ENOSYS)]
    for number in sorted(arch.denied.values()):
        program += [_insn(_JEQ_K, number, jf=1), _deny()]
    program += [
        _insn(_JEQ_K, arch.clone, jf=3),
        _insn(_LD_W_ABS, _ARG0_LOW_OFFSET),
        _insn(_JSET_K, CLONE_NAMESPACE_FLAGS, jf=1),
        _deny(),
        _insn(_RET_K, RET_ALLOW),
    ]
    return b"".join(program)


def machine_architecture(machine: str | None = None) -> Architecture | None:
    """The architecture of ``machine`` (default: this one) if a filter is written for it."""
    return ARCHITECTURES.get((machine or platform.machine()).lower())


def deny_list_program(machine: str | None = None) -> bytes | None:
    """The compiled filter for this machine's architecture, or None if there is none."""
    arch = machine_architecture(machine)
    return compile_deny_list(arch) if arch is not None else None


def missing_filter_warning(machine: str | None = None) -> str | None:
    """One line saying bubblewrap runs unfiltered on this machine, or None if it does not."""
    machine = machine or platform.machine()
    if machine_architecture(machine) is not None:
        return None
    return f"bubblewrap runs without a seccomp filter on {machine or 'this architecture'}"


# Docker: the same list as a JSON profile.

# The daemon keeps the entry of its own architecture; the sub-architectures make the
# rules cover the 32-bit (and x32) calls too, which reach the same kernel code.
DOCKER_ARCH_MAP = [
    {"architecture": "SCMP_ARCH_X86_64", "subArchitectures": ["SCMP_ARCH_X86", "SCMP_ARCH_X32"]},
    {"architecture": "SCMP_ARCH_AARCH64", "subArchitectures": ["SCMP_ARCH_ARM"]},
]


def docker_profile() -> dict[str, Any]:
    """The deny-list as a Docker seccomp profile (``security_opt=["seccomp=<json>"]``).

    Names a kernel or libseccomp does not know are skipped by the daemon, so the legacy
    x86 calls can stay in the one list. ``clone`` gets a rule per namespace flag: a
    profile can only compare ``arg & mask == value``, and rules of one call are or-ed.
    """
    return {
        "defaultAction": "SCMP_ACT_ALLOW",
        "archMap": DOCKER_ARCH_MAP,
        "syscalls": [
            {"names": list(DENIED_SYSCALLS), "action": "SCMP_ACT_ERRNO", "errnoRet": errno.EPERM},
            {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": errno.ENOSYS},
            *(_clone_flag_rule(flag) for flag in NAMESPACE_FLAGS),
        ],
    }


def _clone_flag_rule(flag: int) -> dict[str, Any]:
    masked = {"index": 0, "value": flag, "valueTwo": flag, "op": "SCMP_CMP_MASKED_EQ"}
    return {
        "names": ["clone"],
        "action": "SCMP_ACT_ERRNO",
        "errnoRet": errno.EPERM,
        "args": [masked],
    }
