#!/usr/bin/env python3
"""cubin_text_diff.py [--map SPEC]... OLD.cubin NEW.cubin — whether each kernel's machine code (its
.text.<name> section) is byte for byte the same in two cubins (nvcc -cubin), for the kernels both have;
lists the kernels only one has. Kernels are matched by function name and template arguments (the
parameter list may differ: a parameter the code never reads leaves it alone), a trailing defaulted
`false` argument in NEW matching its absence in OLD (a template switch added with default false).

--map OLD[=NEW]:I,J,...  OLD's kernels named OLD are compared with NEW's kernel NEW (default: the same
  name) whose template arguments are OLD's arguments number I, J, ... (from 0), in that order: a template
  parameter removed (leave its index out), reordered or a kernel renamed. An index may also be a literal
  argument in mangled form (b0, b1, i4) for a parameter added in NEW. Example, the pingpong switch
  (argument 8 of twelve) removed: --map sm90_gemm_kernel:0,1,2,3,4,5,6,7,9,10,11

Why: changes that did not touch the fp8 kernels at run time have made them 5-15% slower by moving
ptxas's schedule, so a change meant to leave a kernel alone should leave its code identical. No CUDA
tools needed (ELF64 parsed here)."""
import re
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


# A kernel template's mangled name: _Z <length> <name> I <arguments> E ...; arguments of the form
# L <type> <value> E (int and bool literals: all this library's kernels take).
MANGLED = re.compile(r"_Z(\d+)")
ARG = re.compile(r"L([a-z])(n?\d+)E")


def split_name(mangled):
    """mangled name -> (function name, tuple of template arguments such as 'i128', 'b0'), or None."""
    m = MANGLED.match(mangled)
    if not m:
        return None
    i = m.end()
    name = mangled[i:i + int(m.group(1))]
    i += int(m.group(1))
    if mangled[i:i + 1] != "I":
        return None
    i += 1
    args = []
    while True:
        a = ARG.match(mangled, i)
        if not a:
            break
        args.append(a.group(1) + a.group(2))
        i = a.end()
    if mangled[i:i + 1] != "E":
        return None
    return name, tuple(args)


def keyed(sections, maps=None, strip_false=False):
    """mangled name -> code becomes (name, template arguments) -> code (the whole name where it does not
    parse). maps: function name -> (new name, index list) applied to the arguments."""
    out = {}
    for mangled, code in sections.items():
        k = split_name(mangled)
        if k is None:
            out[(mangled, ())] = code
            continue
        name, args = k
        if maps and name in maps:
            new, idx = maps[name]
            args = tuple(args[j] if isinstance(j, int) else j for j in idx)
            name = new
        if strip_false and args and args[-1] == "b0":
            args = args[:-1]
        if (name, args) in out:
            sys.exit("%s and another kernel have the same key %s: a --map that drops a varying argument?"
                     % (mangled, show((name, args))))
        out[(name, args)] = code
    return out


def parse_map(spec):
    m = re.fullmatch(r"(\w+)(?:=(\w+))?:([\w,]+)", spec)
    if not m:
        sys.exit("--map %r: expected OLD[=NEW]:I,J,... (see --help)" % spec)
    idx = [int(x) if x.isdigit() else x for x in m.group(3).split(",")]
    return m.group(1), (m.group(2) or m.group(1), idx)


def show(k):
    return "%s<%s>" % (k[0], ",".join(k[1])) if k[1] else k[0]


def main():
    argv, maps = sys.argv[1:], {}
    while argv and argv[0] == "--map":
        if len(argv) < 2:
            sys.exit(__doc__)
        old, m = parse_map(argv[1])
        maps[old] = m
        argv = argv[2:]
    if len(argv) != 2 or argv[0].startswith("-"):
        sys.exit(__doc__)
    a = keyed(text_sections(argv[0]), maps)
    b = keyed(text_sections(argv[1]))
    if not set(a) & set(b):  # a template switch added: try NEW without its trailing false
        b = keyed(text_sections(argv[1]), strip_false=True)
    same = [k for k in a if k in b and a[k] == b[k]]
    diff = [k for k in a if k in b and a[k] != b[k]]
    for k in sorted(diff):
        print("DIFFERENT %s (%d -> %d bytes)" % (show(k), len(a[k]), len(b[k])))
    for k in sorted(set(a) - set(b)):
        print("only in %s: %s" % (argv[0], show(k)))
    for k in sorted(set(b) - set(a)):
        print("only in %s: %s" % (argv[1], show(k)))
    print("%d kernels identical, %d different, %d only in the first, %d only in the second"
          % (len(same), len(diff), len(set(a) - set(b)), len(set(b) - set(a))))
    return 1 if diff or set(a) ^ set(b) else 0


if __name__ == "__main__":
    sys.exit(main())
