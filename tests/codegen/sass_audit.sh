#!/bin/sh
# sass_audit.sh PRECC SRC: the cheap check of bench/sass_audit.py (the full
# audit is `make sass-audit`): current_tensorwise x tiny at sm_90a passes,
# and its parser finds, in every GEMM's SASS, a K loop with >= 1 HGMMA/QGMMA
# per K tile, >= 1 UTMALDG per K tile in the producer loop, no local memory;
# then three hand-written PTX kernels it must fail: one with a local array
# indexed at run time (local memory), one that spills (.maxnreg 24 with 48
# live values), one GEMM on mma.sync (not on wgmma). Exit 77 without ptxas,
# nvdisasm or cuobjdump (which it pip-installs once into BUILD/sass-venv).
set -u
precc=$1 src=$2
ptxas=${PRECC_PTXAS:-/usr/local/cuda/bin/ptxas}
[ -x "$ptxas" ] || ptxas=$(command -v ptxas) || { echo "SKIP: no ptxas"; exit 77; }
export PRECC_PTXAS=$ptxas
# nvdisasm and cuobjdump: $NVDISASM/$CUOBJDUMP, the toolkit, PATH, else
# pip's wheels into BUILD/sass-venv once (the README's test command installs
# what is missing; bench/sass_audit.py looks there through the variables)
venv=$(dirname "$precc")/sass-venv
tool() { ls "$venv"/lib/python*/site-packages/nvidia/*/bin/"$1" 2>/dev/null | head -1; }
if [ -z "${NVDISASM:-}" ] && [ ! -x /usr/local/cuda/bin/nvdisasm ] && ! command -v nvdisasm >/dev/null; then
	if [ -z "$(tool nvdisasm)" ] || [ -z "$(tool cuobjdump)" ]; then
		{ python3 -m venv "$venv" && "$venv/bin/pip" install -q --disable-pip-version-check \
			nvidia-cuda-nvdisasm nvidia-cuda-cuobjdump; } >"$venv.log" 2>&1 ||
			{ echo "SKIP: no nvdisasm/cuobjdump, and pip could not install them: $(tail -1 "$venv.log")"; exit 77; }
	fi
	NVDISASM=$(tool nvdisasm) CUOBJDUMP=$(tool cuobjdump)
	export NVDISASM CUOBJDUMP
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
audit="python3 $src/bench/sass_audit.py"
bad=0

PRECC_CACHE_DIR=$tmp/cache $audit --precc "$precc" --recipes current_tensorwise \
	--models "$src/recipes/models/tiny.lua" --json "$tmp/a.json" >"$tmp/a.log" 2>&1
rc=$?
[ $rc = 77 ] && { cat "$tmp/a.log"; exit 77; }
if [ $rc != 0 ]; then
	echo "FAIL: current_tensorwise x tiny: audit exit $rc"; cat "$tmp/a.log"; bad=1
fi
python3 - "$tmp/a.json" <<'PY' || bad=1
import json, sys
rows = json.load(open(sys.argv[1]))
bad = 0
if len(rows) < 10:
    print("FAIL: %d GEMM kernels, expected 15" % len(rows)); bad = 1
for r in rows:
    kl = r.get("k_loop") or {}
    what = "%s %s" % (r["kernel"], "/".join(r["kinds"]))
    if not r["gmma"] or kl.get("mma", 0) < 1:
        print("FAIL: %s: no K loop with >= 1 GMMA per K tile: %s" % (what, kl)); bad = 1
    if r.get("utmaldg_per_k", 0) < 1:
        print("FAIL: %s: no UTMALDG per K tile" % what); bad = 1
    if r["local"] or r["stack"] or r["ldl"] or r["stl"] or r["spill_bytes"]:
        print("FAIL: %s: local memory or spill" % what); bad = 1
    if not r.get("sched"):
        print("FAIL: %s: no schedule (tile, stages, cluster) found" % what); bad = 1
print("current_tensorwise x tiny: %d GEMM kernels, %d GMMA per K tile (min), loop %d-%d instructions per K tile"
      % (len(rows), min(r["k_loop"]["mma"] for r in rows),
         min(r["k_loop"]["instructions"] for r in rows), max(r["k_loop"]["instructions"] for r in rows)))
sys.exit(bad)
PY

hdr='.version 8.0
.target sm_90a
.address_size 64'
# local memory: a 64-word array indexed by the thread id
cat >"$tmp/local.ptx" <<EOF
$hdr
.visible .entry local_mem(.param .u64 p)
{
	.local .align 4 .b8 buf[256];
	.reg .b32 r<8>;
	.reg .b64 rd<8>;
	mov.u32 r1, %tid.x;
	and.b32 r2, r1, 63;
	shl.b32 r3, r2, 2;
	mov.u64 rd1, buf;
	cvt.u64.u32 rd2, r3;
	add.u64 rd3, rd1, rd2;
	st.local.u32 [rd3], r1;
	xor.b32 r4, r2, 7;
	shl.b32 r5, r4, 2;
	cvt.u64.u32 rd4, r5;
	add.u64 rd5, rd1, rd4;
	ld.local.u32 r6, [rd5];
	ld.param.u64 rd6, [p];
	cvta.to.global.u64 rd7, rd6;
	st.global.u32 [rd7], r6;
	ret;
}
EOF
# a spill: 48 values loaded, all live until a sum in the reverse order,
# under .maxnreg 24
{
	echo "$hdr"
	echo ".visible .entry spill(.param .u64 p) .maxnreg 24"
	echo "{"
	echo "	.reg .f32 f<100>;"
	echo "	.reg .b64 rd<4>;"
	echo "	ld.param.u64 rd1, [p];"
	echo "	cvta.to.global.u64 rd2, rd1;"
	i=0
	while [ $i -lt 48 ]; do echo "	ld.volatile.global.f32 f$i, [rd2+$((i * 4))];"; i=$((i + 1)); done
	echo "	mov.f32 f99, 0f00000000;"
	i=47
	while [ $i -ge 0 ]; do echo "	fma.rn.f32 f99, f99, f$i, f$i;"; i=$((i - 1)); done
	echo "	st.global.f32 [rd2], f99;"
	echo "	ret;"
	echo "}"
} >"$tmp/spill.ptx"
# a GEMM on mma.sync: a K loop of m16n8k16 bf16 mmas
cat >"$tmp/mma.ptx" <<EOF
$hdr
.visible .entry mma_sync(.param .u64 p, .param .u32 k)
{
	.reg .b32 a<4>, b<2>, r<4>;
	.reg .f32 c<4>;
	.reg .b64 rd<4>;
	.reg .pred q;
	ld.param.u64 rd1, [p];
	ld.param.u32 r1, [k];
	cvta.to.global.u64 rd2, rd1;
	mov.f32 c0, 0f00000000;
	mov.f32 c1, 0f00000000;
	mov.f32 c2, 0f00000000;
	mov.f32 c3, 0f00000000;
	mov.u32 r2, 0;
LOOP:
	ld.global.v4.b32 {a0, a1, a2, a3}, [rd2];
	ld.global.v2.b32 {b0, b1}, [rd2+16];
	mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {c0, c1, c2, c3}, {a0, a1, a2, a3}, {b0, b1}, {c0, c1, c2, c3};
	add.u64 rd2, rd2, 32;
	add.u32 r2, r2, 16;
	setp.lt.u32 q, r2, r1;
	@q bra LOOP;
	st.global.v4.f32 [rd1], {c0, c1, c2, c3};
	ret;
}
EOF
for t in local:"local memory":--not-gemm spill:"spill":--not-gemm mma:"not on wgmma":; do
	n=${t%%:*} rest=${t#*:}
	want=${rest%%:*} flag=${rest#*:}
	$audit --cubin "$tmp/$n.cubin" --ptx "$tmp/$n.ptx" $flag >"$tmp/$n.log" 2>&1
	rc=$?
	if [ $rc != 1 ] || ! grep -q "FAIL.*$want" "$tmp/$n.log"; then
		echo "FAIL: $n.ptx: exit $rc, expected 1 and '$want'"; cat "$tmp/$n.log"; bad=1
	else
		echo "$n.ptx: flagged: $(grep -m1 -o "FAIL [^|]*" "$tmp/$n.log")"
	fi
done
[ $bad = 0 ] && echo "sass_audit: ok"
exit $bad
