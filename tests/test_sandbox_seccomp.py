"""The seccomp deny-list: its BPF filters (x86_64, aarch64), the Docker profile made from
the same list, and the warning on a machine with no filter (the doctor's report of it is
in test_doctor.py). No sandbox needed.

The filters are run here by a small classic-BPF interpreter (the five instructions they
use), so the aarch64 one is checked on any host; its numbers are compared with the
kernel's table for arm64 (include/uapi/asm-generic/unistd.h).
"""

from __future__ import annotations

import errno
import logging
import re
import struct
from pathlib import Path

import pytest

from dagwright.sandbox import seccomp
from dagwright.sandbox.seccomp import (
    AARCH64,
    DENIED_SYSCALLS,
    RET_ALLOW,
    RET_ERRNO,
    X86_64,
    Architecture,
    compile_deny_list,
    deny_list_program,
    docker_profile,
    missing_filter_warning,
)

EPERM = RET_ERRNO | errno.EPERM
ENOSYS = RET_ERRNO | errno.ENOSYS
CLONE_NEWUSER = 0x10000000
THREAD_FLAGS = 0x003D0F00  # what glibc's pthread_create passes to clone
ASM_GENERIC = Path("/usr/include/asm-generic/unistd.h")
X86_64_HEADERS = [Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h")]
X86_64_HEADERS.append(Path("/usr/include/asm/unistd_64.h"))
# Never defined for arm64: the kernel has no such calls there.
X86_ONLY = {"uselib", "ustat", "sysfs", "_sysctl", "iopl", "ioperm", "create_module"}
X86_ONLY |= {"get_kernel_syms", "query_module"}


def run_filter(program: bytes, arch: int, nr: int, arg0: int = 0) -> int:
    """What the kernel would do with one call: the filter's return value."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, arg0, 0, 0, 0, 0, 0)
    insns = [struct.unpack_from("<HBBI", program, i) for i in range(0, len(program), 8)]
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        pc += 1
        if code == 0x20:  # ld [k]
            acc = struct.unpack_from("<I", data, k)[0]
        elif code == 0x06:  # ret #k
            return k
        else:
            taken = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code]
            pc += jt if taken else jf


def header_numbers(path: Path) -> dict[str, int]:
    """``#define __NR_name number`` (and asm-generic's ``__NR3264_name``) of a header."""
    pattern = re.compile(r"^#define __NR(?:3264)?_(\w+)\s+(\d+)\s*$", re.MULTILINE)
    return {name: int(number) for name, number in pattern.findall(path.read_text())}


@pytest.mark.parametrize("arch", [X86_64, AARCH64], ids=lambda a: a.name)
def test_each_denied_call_is_refused_and_others_pass(arch: Architecture) -> None:
    program = compile_deny_list(arch)
    for name, number in arch.denied.items():
        assert run_filter(program, arch.audit_arch, number) == EPERM, name
    denied = set(arch.denied.values()) | {arch.clone3}
    for number in set(range(500)) - denied:  # read, write, openat, mmap... and clone
        assert run_filter(program, arch.audit_arch, number) == RET_ALLOW, number
    assert run_filter(program, arch.audit_arch, arch.clone3) == ENOSYS  # glibc falls back
    assert run_filter(program, arch.audit_arch, arch.clone, THREAD_FLAGS) == RET_ALLOW
    assert run_filter(program, arch.audit_arch, arch.clone, CLONE_NEWUSER | 17) == EPERM


def test_calls_of_another_architecture_are_refused() -> None:
    aarch64 = compile_deny_list(AARCH64)
    x86_64 = compile_deny_list(X86_64)
    read = {"x86_64": 0, "aarch64": 63}
    assert run_filter(aarch64, X86_64.audit_arch, read["x86_64"]) == EPERM
    assert run_filter(aarch64, 0x40000028, read["aarch64"]) == EPERM  # 32-bit ARM
    assert run_filter(x86_64, AARCH64.audit_arch, read["aarch64"]) == EPERM
    assert run_filter(x86_64, 0x40000003, read["x86_64"]) == EPERM  # i386
    assert run_filter(x86_64, X86_64.audit_arch, 0x40000000 | 101) == EPERM  # x32 ptrace


def test_aarch64_numbers_are_the_kernels() -> None:
    # A few from the kernel's arm64 table, written out: the check that needs no header.
    kernel = {"ptrace": 117, "process_vm_readv": 270, "bpf": 280, "unshare": 97, "mount": 40}
    kernel |= {"io_uring_setup": 425, "keyctl": 219, "setns": 268, "kexec_file_load": 294}
    assert {name: AARCH64.denied[name] for name in kernel} == kernel
    assert (AARCH64.clone, AARCH64.clone3, AARCH64.audit_arch) == (220, 435, 0xC00000B7)
    assert set(AARCH64.denied) == set(DENIED_SYSCALLS) - X86_ONLY
    if not ASM_GENERIC.exists():
        pytest.skip(f"no {ASM_GENERIC} (linux-libc-dev) to compare every number with")
    table = header_numbers(ASM_GENERIC)
    assert {name: table[name] for name in AARCH64.denied} == AARCH64.denied
    assert (table["clone"], table["clone3"]) == (AARCH64.clone, AARCH64.clone3)
    assert not X86_ONLY & set(table)


def test_x86_64_numbers_are_the_kernels() -> None:
    assert set(X86_64.denied) == set(DENIED_SYSCALLS)
    header = next((path for path in X86_64_HEADERS if path.exists()), None)
    if header is None:
        pytest.skip("no <asm/unistd_64.h> (linux-libc-dev) to compare the numbers with")
    table = header_numbers(header)
    assert {name: table[name] for name in X86_64.denied} == X86_64.denied
    assert (table["clone"], table["clone3"]) == (X86_64.clone, X86_64.clone3)


@pytest.mark.parametrize(
    ("machine", "arch"),
    [("x86_64", X86_64), ("AMD64", X86_64), ("aarch64", AARCH64), ("arm64", AARCH64)],
)
def test_the_filter_is_chosen_by_the_machine(
    monkeypatch: pytest.MonkeyPatch, machine: str, arch: Architecture
) -> None:
    monkeypatch.setattr(seccomp.platform, "machine", lambda: machine)
    assert deny_list_program() == compile_deny_list(arch)
    assert missing_filter_warning() is None


def test_a_machine_without_a_filter_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(seccomp.platform, "machine", lambda: "riscv64")
    assert deny_list_program() is None
    assert missing_filter_warning() == "bubblewrap runs without a seccomp filter on riscv64"


def test_bubblewrap_warns_once_at_start_without_a_filter(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from dagwright.sandbox.bubblewrap import BubblewrapSandbox

    monkeypatch.setattr(seccomp.platform, "machine", lambda: "riscv64")
    with caplog.at_level(logging.WARNING, logger="dagwright.sandbox.bubblewrap"):
        BubblewrapSandbox("/nonexistent/bwrap")
    assert [r.getMessage() for r in caplog.records] == [
        "bubblewrap runs without a seccomp filter on riscv64: only its namespaces, rlimits"
        " and cgroups confine the code"
    ]
    caplog.clear()
    monkeypatch.setattr(seccomp.platform, "machine", lambda: "aarch64")
    BubblewrapSandbox("/nonexistent/bwrap")
    assert not caplog.records


def test_the_docker_profile_is_the_same_deny_list() -> None:
    profile = docker_profile()
    assert profile["defaultAction"] == "SCMP_ACT_ALLOW"
    denied, clone3, *clone = profile["syscalls"]
    assert denied == {"names": list(DENIED_SYSCALLS), "action": "SCMP_ACT_ERRNO", "errnoRet": 1}
    assert {"io_uring_setup", "io_uring_enter", "io_uring_register"} <= set(denied["names"])
    assert {"ptrace", "process_vm_readv", "process_vm_writev"} <= set(denied["names"])
    assert clone3 == {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": errno.ENOSYS}
    flags = [rule["args"][0]["value"] for rule in clone]
    assert sum(flags) == seccomp.CLONE_NAMESPACE_FLAGS and CLONE_NEWUSER in flags
    for rule in clone:
        (arg,) = rule["args"]
        assert (rule["names"], arg["op"]) == (["clone"], "SCMP_CMP_MASKED_EQ")
        assert arg["valueTwo"] == arg["value"]  # denied when that flag is set
    arches = {entry["architecture"] for entry in profile["archMap"]}
    assert arches == {"SCMP_ARCH_X86_64", "SCMP_ARCH_AARCH64"}
