#!/usr/bin/env python3
"""poison.py CACHE MODE: edit the entries of a precc kernel cache the way a
writer to a shared PRECC_CACHE_DIR could, and reseal them (the FNV-1a seal
has no key). Header layout: driver/cache.c. MODE:
  name      the build entry's first job name becomes a path out of -o
  nparams   every kernel entry says nparams = 100000
  value     every kernel entry's first param names value 99999
  nobuild   the build entry is removed (so kernel entries are read one by one)
"""
import glob, os, struct, sys

HDR = 40
NAME = 24                      # Job.name in driver/build.h
NPARAMS = 4 + 112              # u32 sizeof(CodegenKernel), then offsetof(nparams)


def fnv1a(b):
    h = 0xcbf29ce484222325
    for c in b:
        h = ((h ^ c) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def entries(cache):
    for path in sorted(glob.glob(os.path.join(cache, "kernels", "*.pkc"))):
        data = open(path, "rb").read()
        yield path, bytearray(data[:HDR]), bytearray(data[HDR:])


def is_build(p):
    # a build entry: a count, then records of 12 bytes and a job name
    # "k_<16 hex>"; a kernel entry starts with sizeof(CodegenKernel), and a
    # large PTX (cooperative kernels emit their body three times) can make
    # it long enough to pass the size test alone
    (nk,) = struct.unpack_from("<I", p, 0)
    return nk < 4096 and len(p) >= 4 + nk * (12 + NAME) and p[16:18] == b"k_"


def seal(path, hdr, p):
    struct.pack_into("<QQ", hdr, 24, len(p), fnv1a(p))
    open(path, "wb").write(bytes(hdr) + bytes(p))


cache, mode = sys.argv[1], sys.argv[2]
done = 0
for path, hdr, p in entries(cache):
    if is_build(p):
        if mode == "name":
            name = b"../../../escaped"
            p[4 + 12:4 + 12 + NAME] = name + b"\0" * (NAME - len(name))
            seal(path, hdr, p)
            done += 1
        elif mode == "nobuild":
            os.unlink(path)
            done += 1
        continue
    (np,) = struct.unpack_from("<i", p, NPARAMS)
    assert 1 <= np <= 32, (path, np)   # the offset is right
    if mode == "nparams":
        struct.pack_into("<i", p, NPARAMS, 100000)
    elif mode == "value":
        struct.pack_into("<i", p, NPARAMS + 4, 99999)
    else:
        continue
    seal(path, hdr, p)
    done += 1
print("poisoned", done)
