"""A seccomp deny-list for the bubblewrap backend, compiled to classic BPF by hand.

``bwrap --seccomp FD`` loads a compiled filter (an array of ``struct sock_filter``) just
before it runs the program. The filter lets every system call through except those that
reach the kernel's attack surface without helping ordinary Python code: module loading,
mounts and namespaces, ptrace and cross-process memory access, BPF, perf, keyrings,
io_uring, userfaultfd, clock and swap changes. Those fail with EPERM (a clean
``PermissionError``) rather than killing the process.

Rejected: libseccomp through its Python binding (a C library and a binding that are not
wheels on PyPI, for a program this small); Docker's default profile (an allow-list of
some 350 calls that must track new kernels and glibc versions). Only x86_64 is written
out: on another architecture :func:`deny_list_program` returns None and the caller runs
without this filter (the namespaces, rlimits and cgroups still apply).
"""

from __future__ import annotations

import errno
import platform
import struct

# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6]
_NR_OFFSET = 0
_ARCH_OFFSET = 4
_ARG0_LOW_OFFSET = 16  # low 32 bits of args[0] (little endian)

_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K

_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000

AUDIT_ARCH_X86_64 = 0xC000003E
_X32_SYSCALL_BIT = 0x40000000

# clone(2) flags that create a namespace (CLONE_NEWTIME, NEWNS, NEWCGROUP, NEWUTS,
# NEWIPC, NEWUSER, NEWPID, NEWNET).
CLONE_NAMESPACE_FLAGS = 0x80 | 0x20000 | 0x02000000 | 0x04000000 | 0x08000000
CLONE_NAMESPACE_FLAGS |= 0x10000000 | 0x20000000 | 0x40000000

# x86_64 numbers, from <asm/unistd_64.h>.
DENIED_X86_64: dict[str, int] = {
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
CLONE_X86_64 = 56
# clone3 passes its flags in memory, where a filter cannot look: ENOSYS makes glibc fall
# back to clone(2), whose flags it can check (Docker and Flatpak do the same).
CLONE3_X86_64 = 435


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def _deny(err: int = errno.EPERM) -> bytes:
    return _insn(_RET_K, _RET_ERRNO | err)


def x86_64_program() -> bytes:
    """The deny-list filter for x86_64 (x32 and 32-bit calls are refused outright)."""
    program = [
        _insn(_LD_W_ABS, _ARCH_OFFSET),
        _insn(_JEQ_K, AUDIT_ARCH_X86_64, jt=1),
        _deny(),
        _insn(_LD_W_ABS, _NR_OFFSET),
        _insn(_JGE_K, _X32_SYSCALL_BIT, jf=1),
        _deny(),
        _insn(_JEQ_K, CLONE3_X86_64, jf=1),
        _deny(errno.ENOSYS),
    ]
    for number in sorted(DENIED_X86_64.values()):
        program += [_insn(_JEQ_K, number, jf=1), _deny()]
    program += [
        _insn(_JEQ_K, CLONE_X86_64, jf=3),
        _insn(_LD_W_ABS, _ARG0_LOW_OFFSET),
        _insn(_JSET_K, CLONE_NAMESPACE_FLAGS, jf=1),
        _deny(),
        _insn(_RET_K, _RET_ALLOW),
    ]
    return b"".join(program)


def deny_list_program(machine: str | None = None) -> bytes | None:
    """The compiled filter for this machine's architecture, or None if there is none."""
    if (machine or platform.machine()) in ("x86_64", "AMD64", "amd64"):
        return x86_64_program()
    return None
