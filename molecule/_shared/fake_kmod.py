#!/usr/bin/env python3
"""Write a stand-in kernel module that the real kmod tools read: an ELF relocatable object whose
.modinfo section holds version=, name=, vermagic=, optionally followed by an appended module
signature ("~Module signature appended~"), so that `modinfo -k KERNEL nvidia` reports its
version and signer and depmod indexes it. Nothing in it can be loaded.

    fake_kmod.py OUT VERSION KERNEL [SIGNER]

Test helper only (the kernel scenarios use it to play "DKMS built an unsigned module"). Every
byte it writes is below 0x80, so the same bytes can sit in a YAML fixture spec as a string.
"""

import struct
import sys

SIG_MAGIC = b"~Module signature appended~\n"


def _section(name: int, kind: int, flags: int, offset: int, size: int) -> bytes:
    return struct.pack("<IIQQQQIIQQ", name, kind, flags, 0, offset, size, 0, 0, 1, 0)


def module(version: str, kernel: str, signer: str = "") -> bytes:
    names = b"\0.modinfo\0.shstrtab\0"
    info = b"".join(
        f.encode() + b"\0"
        for f in (
            "version=" + version,
            "license=NVIDIA",
            "name=nvidia",
            "vermagic=" + kernel + " SMP mod_unload modversions ",
        )
    )
    info_at, headers_at = 0x100, 0x200  # offsets whose bytes stay below 0x80
    if len(info) > headers_at - info_at:
        raise ValueError("modinfo too long")
    header = (
        b"\x7fELF\x02\x01\x01"
        + b"\0" * 9
        + struct.pack("<HHIQQQIHHHHHH", 1, 0x3E, 1, 0, 0, headers_at, 0, 64, 0, 0, 64, 3, 2)
    )
    out = bytearray(header)
    out += names
    out += b"\0" * (info_at - len(out)) + info
    out += b"\0" * (headers_at - len(out))
    out += b"\0" * 64  # the null section
    out += _section(1, 1, 2, info_at, len(info))  # .modinfo, PROGBITS, ALLOC
    out += _section(10, 3, 0, 64, len(names))  # .shstrtab, STRTAB
    if signer:
        # struct module_signature: algo RSA, hash sha256, id_type X509, signer/key-id lengths,
        # three pad bytes, big-endian signature length; then the magic string.
        key_id, sig = b"GPUFIXFIXTURE", b"gpufix-fixture-signature"
        out += signer.encode() + key_id + sig
        out += struct.pack(">BBBBB3xI", 1, 4, 1, len(signer), len(key_id), len(sig)) + SIG_MAGIC
    data = bytes(out)
    if any(b >= 0x80 for b in data):
        raise ValueError("a byte above 0x7f")
    return data


def main(argv: list) -> int:
    if len(argv) not in (4, 5):
        print("usage: fake_kmod.py OUT VERSION KERNEL [SIGNER]", file=sys.stderr)
        return 2
    with open(argv[1], "wb") as fh:
        fh.write(module(argv[2], argv[3], argv[4] if len(argv) == 5 else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
