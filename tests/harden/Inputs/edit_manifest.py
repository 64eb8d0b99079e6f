#!/usr/bin/env python3
"""edit_manifest.py SRC DST MODE: copy the artifact directory SRC (the
runtime tests' hand-written plan) to DST and make its manifest say one
thing no reader should take:
  threads   a kernel's "threads" is 1e300 (was converted before its range check)
  lcm       two kernels of one layer with coprime m_multiple near 2^20
  state     a declared state buffer of 2^28 elements
  utf8      an overlong NUL (0xc0 0x80) inside a string
  badutf8   a lone continuation byte inside a string
  big       manifest.json is a sparse file of 300 MiB
  fifo      manifest.json is a FIFO
  link      manifest.json is a symlink to the real one
  kernlink  a kernel's .ptx is a symlink to /dev/zero
  kernfifo  a kernel's .ptx is a FIFO
"""
import json, os, shutil, sys

src, dst, mode = sys.argv[1:4]
shutil.rmtree(dst, ignore_errors=True)
shutil.copytree(src, dst)
man = os.path.join(dst, "manifest.json")
text = open(man, "rb").read()
m = json.loads(text)
first_ptx = m["kernels"][0]["files"]["sm_90a"]["ptx"]

if mode == "threads":
    text = text.replace(b'"threads": 256', b'"threads": 1e300', 1)
elif mode == "lcm":
    names = {s["kernel"] for s in m["layers"][0]["steps"]}
    primes = iter([1048573, 1048571, 1048559, 1048549])
    for k in m["kernels"]:
        if k["name"] in names:
            k["grid"]["m_multiple"] = next(primes)
    text = json.dumps(m, indent=2).encode()
elif mode == "state":
    m["layers"][0]["buffers"].append({"name": "s", "type": "f32[268435456]", "role": "state"})
    text = json.dumps(m, indent=2).encode()
elif mode == "utf8":
    text = text.replace(b'"recipe": {', b'"\xc0\x80recipe": {', 1)
elif mode == "badutf8":
    text = text.replace(b'"recipe": {', b'"re\x80cipe": {', 1)
if mode in ("threads", "lcm", "state", "utf8", "badutf8"):
    open(man, "wb").write(text)
elif mode == "big":
    with open(man, "ab") as f:
        f.truncate(300 << 20)
elif mode == "fifo":
    os.unlink(man)
    os.mkfifo(man)
elif mode == "link":
    os.rename(man, man + ".real")
    os.symlink("manifest.json.real", man)
elif mode in ("kernlink", "kernfifo"):
    p = os.path.join(dst, first_ptx)
    os.unlink(p)
    os.symlink("/dev/zero", p) if mode == "kernlink" else os.mkfifo(p)
else:
    sys.exit("unknown mode " + mode)
