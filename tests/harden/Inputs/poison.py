#!/usr/bin/env python3
"""poison.py CACHE MODE [KEYFILE]: edit the entries of a precc kernel cache
the way a writer to a shared PRECC_CACHE_DIR could, and reseal them. With
KEYFILE (a holder of the cache key): HMAC-SHA256 by Python's hmac/hashlib,
an implementation independent of precc's (libcrypto), so an entry precc
accepts after this proves the two agree. Without: the old unkeyed FNV-1a
seal of format 1 (all a writer without the key can do). Header layout:
driver/cache.c. MODE:
  name      the build entry's first job name becomes a path out of -o
  nparams   every kernel entry says nparams = 100000
  value     every kernel entry's first param names value 99999
  ptx       every kernel entry's PTX gets a comment line (a well-formed edit
            that only the MAC can catch)
  cubin     every kernel entry's cubin is cut to its first 64 bytes (the
            ELF header: what ptxas leaves on a full disk)
  nobuild   the build entry is removed (so kernel entries are read one by one)
  verify    no edit: check every entry's MAC against KEYFILE, print the count
"""
import glob, hashlib, hmac, os, struct, sys

MACAT = 32
HDR = MACAT + 32
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


def mac(key, hdr, p):
    return hmac.new(key, bytes(hdr[:MACAT]) + bytes(p), hashlib.sha256).digest()


def seal(path, hdr, p):
    struct.pack_into("<Q", hdr, 24, len(p))
    if key is not None:
        hdr[MACAT:HDR] = mac(key, hdr, p)
    else:
        hdr[MACAT:HDR] = struct.pack("<Q", fnv1a(p)) + b"\0" * 24
    open(path, "wb").write(bytes(hdr) + bytes(p))


cache, mode = sys.argv[1], sys.argv[2]
key = open(sys.argv[3], "rb").read() if len(sys.argv) > 3 else None
done = 0
for path, hdr, p in entries(cache):
    if mode == "verify":
        assert hdr[:8] == b"PRECCKC1" and struct.unpack_from("<I", hdr, 8)[0] == 3, path
        assert struct.unpack_from("<Q", hdr, 24)[0] == len(p), path
        if hmac.compare_digest(mac(key, hdr, p), bytes(hdr[MACAT:HDR])):
            done += 1
        else:
            print("MAC differs:", path)
        continue
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
    elif mode == "ptx":
        # payload: u32 size, CodegenKernel, i32 regs, i32 spills, u64 ptx length, ptx
        (isz,) = struct.unpack_from("<I", p, 0)
        at = 4 + isz + 8
        (n,) = struct.unpack_from("<Q", p, at)
        extra = b"// poisoned\n"
        p[at:at + 8] = struct.pack("<Q", n + len(extra))
        p[at + 8:at + 8] = extra
    elif mode == "cubin":
        (isz,) = struct.unpack_from("<I", p, 0)
        at = 4 + isz + 8
        (n,) = struct.unpack_from("<Q", p, at)
        at += 8 + n
        (n,) = struct.unpack_from("<Q", p, at)
        if n <= 64:
            continue
        p[at:] = struct.pack("<Q", 64) + p[at + 8:at + 8 + 64]
    else:
        continue
    seal(path, hdr, p)
    done += 1
print("verified" if mode == "verify" else "poisoned", done)
