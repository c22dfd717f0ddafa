#!/usr/bin/env python3
"""cubin_text_diff.py OLD.cubin NEW.cubin — whether each kernel's machine code (its .text.<name>
section) is byte for byte the same in two cubins (nvcc -cubin), for the kernels both have; lists
the kernels only one has. Kernels are matched by their template arguments (the parameter list may
differ: a parameter the code never reads leaves it alone), a trailing defaulted `false` argument in
NEW matching its absence in OLD (a template switch added with default false). Why: changes that did
not touch the fp8 kernels at run time have made them 5-15% slower by moving ptxas's schedule, so a
change meant to leave a kernel alone should leave its code identical. No CUDA tools needed (ELF64
parsed here)."""
import struct
import sys


def text_sections(path):
    data = open(path, "rb").read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        sys.exit("%s: not an ELF64 file" % path)
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    heads = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = heads[shstrndx]
    names = data[strtab[4]:strtab[4] + strtab[5]]
    out = {}
    for h in heads:
        name = names[h[0]:names.index(b"\0", h[0])].decode()
        if name.startswith(".text."):
            out[name[6:]] = data[h[4]:h[4] + h[5]]
    return out


def by_template_args(sections, strip_false):
    """name -> code becomes template-args -> code (the mangled I...E part; the whole name otherwise)."""
    out = {}
    for name, code in sections.items():
        i, j = name.find("I"), name.find("EEv")
        key = name[i + 1:j + 1] if i >= 0 and j > i else name
        if strip_false and key.endswith("ELb0E"):
            key = key[:-len("Lb0E")]
        out[key] = code
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    a = by_template_args(text_sections(sys.argv[1]), False)
    b = by_template_args(text_sections(sys.argv[2]), False)
    if not set(a) & set(b):  # a template switch added: try NEW without its trailing false
        b = by_template_args(text_sections(sys.argv[2]), True)
    same = [k for k in a if k in b and a[k] == b[k]]
    diff = [k for k in a if k in b and a[k] != b[k]]
    for k in sorted(diff):
        print("DIFFERENT %s (%d -> %d bytes)" % (k, len(a[k]), len(b[k])))
    for k in sorted(set(a) - set(b)):
        print("only in %s: %s" % (sys.argv[1], k))
    for k in sorted(set(b) - set(a)):
        print("only in %s: %s" % (sys.argv[2], k))
    print("%d kernels identical, %d different, %d only in the first, %d only in the second"
          % (len(same), len(diff), len(set(a) - set(b)), len(set(b) - set(a))))
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
