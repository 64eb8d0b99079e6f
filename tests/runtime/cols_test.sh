#!/bin/sh
# cols_test.sh PRECC PRECC_RUN ROOT FAKE_LIB — kernels that take their
# columns at run time (codegen's has_cols: quant_rowcol). nvfp4 x tiny has
# five quant_rowcol kernels a target: x at K = 256 and 688, dY at 256, 128
# and 688; they are two PTX a target (x's and dY's), which the manifest's
# kernels share byte for byte, each with its own "cols" and "cols_align".
# On the fake driver every layer's forward and backward at M = 144 (a
# partial tile of rows) passes each kernel its own columns after m: the
# fake checks them against the data param's type (fake_launch.c), so a
# runtime that passes another count fails here; the cpu backend runs the
# same plan. The generated launcher passes the kernel's columns. A manifest
# whose cols is not its data's, or not a multiple of cols_align, does not
# load.
set -u
precc=$1 run=$2 root=$3 lib=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=1; }
PRECC_CACHE_DIR=$tmp/cache PRECC_PTXAS=/nonexistent "$precc" build \
	"$root/recipes/nvfp4.lua" --model "$root/recipes/models/tiny.lua" \
	--target sm_90 -o "$tmp/a" >"$tmp/log" 2>&1 ||
	{ echo "FAIL: precc build: $(tail -1 "$tmp/log")"; exit 1; }
python3 - "$tmp/a" >"$tmp/names" <<'PY' || { echo "FAIL: manifest"; exit 1; }
import json, sys
d = sys.argv[1]
m = json.load(open(d + "/manifest.json"))
rc = [k for k in m["kernels"] if k["shape"] == "quant_rowcol"]
assert len(rc) == 5, [k["name"] for k in rc]
ptx = {}
for k in rc:
    assert k["cols_align"] == 16, k["name"]
    data = [p for p in k["params"] if p["name"] == k["grid"]["data"]][0]
    assert data["type"].endswith(",%d]" % k["cols"]), (k["name"], data["type"], k["cols"])
    text = open(d + "/" + k["files"]["sm_90"]["ptx"]).read()
    ptx.setdefault(text, []).append((k["func"].split(".")[0], k["cols"]))
groups = sorted(sorted(v) for v in ptx.values())
assert groups == [[("dy", 128), ("dy", 256), ("dy", 688)], [("x", 256), ("x", 688)]], groups
assert all(k["shape"] != "quant_rowcol" for k in m["kernels"] if "cols" not in k)
print(rc[0]["name"], rc[0]["cols"])
PY
read name cols <"$tmp/names"
export FAKE_CUDA_MANIFEST="$tmp/a"
for backend in cuda cpu; do
	PRECC_LIBCUDA=$lib "$run" "$tmp/a" --backend $backend --m 144 >"$tmp/out" 2>&1 ||
		{ fail "$backend: exit $?"; sed 's/^/    /' "$tmp/out" | tail -5; continue; }
	n=$(grep -c "^k_[0-9a-f]*  *quant_rowcol  *[1-9]" "$tmp/out")
	[ "$n" = 5 ] || { fail "$backend: $n quant_rowcol kernels launched, want 5"; sed 's/^/    /' "$tmp/out" | head -40; }
done
sed -n "/^int precc_$name(.*)\$/,/^}/p" "$tmp/a/precc_kernels.c" >"$tmp/launcher"
grep -q "int64_t ncols = $cols;" "$tmp/launcher" && grep -q "(void \*)&m, (void \*)&ncols" "$tmp/launcher" ||
	{ fail "precc_kernels.c: precc_$name does not pass its $cols columns after m"; sed 's/^/    /' "$tmp/launcher" | head -30; }
# a manifest that tells the code other columns, or misaligned ones
for bad in "$((cols + 16)):16:is bf16" "$cols:96:not a multiple of its cols_align 96"; do
	c=${bad%%:*} rest=${bad#*:}; a=${rest%%:*} why=${rest#*:}
	rm -rf "$tmp/b" && mkdir "$tmp/b" && cp "$tmp"/a/*.ptx "$tmp/b/"
	python3 - "$tmp/a/manifest.json" "$name" "$c" "$a" >"$tmp/b/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
for k in m["kernels"]:
    if k["name"] == sys.argv[2]:
        k["cols"], k["cols_align"] = int(sys.argv[3]), int(sys.argv[4])
json.dump(m, sys.stdout, indent=1)
PY
	"$run" "$tmp/b" --backend cpu --m 144 >"$tmp/out" 2>&1 && fail "cols $c, cols_align $a loaded"
	grep -q "'$name': cols $c.*$why" "$tmp/out" ||
		{ fail "no error for cols $c, cols_align $a"; sed 's/^/    /' "$tmp/out" | head -3; }
done
[ $fails -eq 0 ] && echo "ok: 5 quant_rowcol kernels from 2 PTX, each launched with its own columns"
exit $fails
