#!/bin/sh
# m_variant_test.sh PRECC PRECC_RUN ROOT FAKE_LIB — a GEMM's two tiles
# (passes/schedule.c): current_tensorwise x tiny on sm_90 gives each fprop
# and dgrad GEMM a 64x64 kernel and, for M >= 128 ceil(132 / ceil(N/128)),
# the same GEMM on 128x128 tiles (manifest "m_variant"). On the fake
# driver and on the cpu backend the run launches the 64x64 kernel below
# that M and the 128x128 one from it; the generated launcher branches the
# same way; a manifest whose m_variant names no kernel does not load. M of
# 144 and m_min + 32 leave the last tile row partial: the fake driver
# checks every launch's grid against the manifest (fake_launch.c), so a
# grid that rounds down fails here.
set -u
precc=$1 run=$2 root=$3 lib=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=1; }
PRECC_CACHE_DIR=$tmp/cache PRECC_PTXAS=/nonexistent "$precc" build \
	"$root/recipes/current_tensorwise.lua" --model "$root/recipes/models/tiny.lua" \
	--target sm_90 -o "$tmp/a" >"$tmp/log" 2>&1 ||
	{ echo "FAIL: precc build: $(tail -1 "$tmp/log")"; exit 1; }
# the q_proj fprop GEMM (N = 256: 2 column tiles, 66 rows of them fill 132 SMs)
python3 - "$tmp/a/manifest.json" >"$tmp/names" <<'PY' || { echo "FAIL: manifest"; exit 1; }
import json, sys
m = json.load(open(sys.argv[1]))
kern = {k["name"]: k for k in m["kernels"]}
layer = [l for l in m["layers"] if l["fqn"].endswith("layers.0.self_attn.q_proj")][0]
steps = m["layer_classes"][layer["class"]]["steps"]
fprop = [s["kernel"] for s in steps
         if s.get("gemm") == "fprop" and kern[s["kernel"]]["shape"] == "gemm"][0]
v = kern[fprop]["m_variant"]
big = kern[v["kernel"]]
assert kern[fprop]["threads"] == 128 and kern[fprop]["grid"]["tile_rows"] == 64, kern[fprop]
assert big["threads"] == 256 and big["grid"]["tile_rows"] == 128 and "m_variant" not in big, big
print(fprop, v["kernel"], v["m_min"])
PY
read small large mmin <"$tmp/names"
export FAKE_CUDA_MANIFEST="$tmp/a"
[ "$mmin" = 8448 ] || fail "m_min $mmin, want 128 x ceil(132 / 2) = 8448"
for backend in cuda cpu; do
	for m in 128 144 $((mmin - 128)) $mmin $((mmin + 32)); do
		PRECC_LIBCUDA=$lib "$run" "$tmp/a" --backend $backend --layer layers.0.self_attn.q_proj \
			--m $m >"$tmp/out" 2>&1 || { fail "$backend M=$m: exit $?"; sed 's/^/    /' "$tmp/out" | tail -5; continue; }
		if [ $m -lt $mmin ]; then want=$small not=$large; else want=$large not=$small; fi
		grep -q "^$want  *gemm  *[1-9]" "$tmp/out" || fail "$backend M=$m: $want not launched"
		! grep -q "^$not " "$tmp/out" || fail "$backend M=$m: $not launched"
	done
done
grep -q "if (m >= $mmin)" "$tmp/a/precc_kernels.c" &&
	grep -q "return precc_$large(" "$tmp/a/precc_kernels.c" ||
	fail "precc_kernels.c: precc_$small does not hand M >= $mmin to precc_$large"
sed "s/\"kernel\":	\"$large\"/\"kernel\":	\"k_0000000000000bad\"/" "$tmp/a/manifest.json" >"$tmp/m.json"
mkdir "$tmp/b" && cp "$tmp"/a/*.ptx "$tmp/b/" && mv "$tmp/m.json" "$tmp/b/manifest.json"
"$run" "$tmp/b" --backend cpu --m 128 >"$tmp/out" 2>&1 && fail "a dangling m_variant loaded"
grep -q "m_variant: kernel 'k_0000000000000bad' is not in 'kernels'" "$tmp/out" ||
	{ fail "no error naming the dangling m_variant"; sed 's/^/    /' "$tmp/out" | head -3; }
[ $fails -eq 0 ] && echo "ok: GEMMs launch their 64x64 kernel below M = $mmin and the 128x128 one from it"
exit $fails
