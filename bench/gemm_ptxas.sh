#!/bin/sh
# gemm_ptxas.sh [PRECC] [MODEL...]: every GEMM kernel every shipped recipe
# builds for each MODEL (default Llama-3-8B and Llama-3-70B), sm_89 and
# sm_90a: `ptxas -arch=SM -v` of its PTX (registers, spill bytes, shared
# memory) and precc's own ptxas time (--time, a cold build). One markdown
# row per recipe x model x target; with SASS=1, cuobjdump (CUOBJDUMP, or
# cuobjdump on PATH) counts the kernels whose SASS has both LDGSTS and
# LDSM, and with NVDISASM (nvdisasm; pip nvidia-cuda-nvdisasm) the kernels
# whose SASS has HGMMA or QGMMA (wgmma). The wgmma column counts the kernels
# of the sm_90a wgmma family and, in parentheses, ptxas's notes that it
# serialized or fenced their wgmma pipeline (C7508/C7510/C7514/C7515/C7517/
# C7519, or any "Potential Performance Loss: wgmma": must be 0); the
# 128x128 column the mma.sync kernels on the large tile (256 threads:
# passes/schedule.c, a wgrad's own tile or an fprop/dgrad's m_variant).
# RECIPES="a b" limits the recipes (default: every recipes/*.lua),
# TARGETS="sm_90a" the targets (default: sm_89 sm_90a).
set -u
precc=${1:-build/precc}
shift 2>/dev/null || true
models=${*:-recipes/models/llama-3-8b.json tests/lit/Inputs/model_llama3_70b.json}
ptxas=${PRECC_PTXAS:-/usr/local/cuda/bin/ptxas}
cuobjdump=${CUOBJDUMP:-cuobjdump}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

printf '| recipe | model | target | GEMM kernels | wgmma (notes) | 128x128 | registers | spill bytes | smem bytes | ptxas ms min/median/max |'
[ "${SASS:-0}" = 1 ] && printf ' SASS with LDGSTS / LDSM |'
[ -n "${NVDISASM:-}" ] && printf ' SASS with HGMMA/QGMMA |'
echo
printf '| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |'
[ "${SASS:-0}" = 1 ] && printf ' ---: |'
[ -n "${NVDISASM:-}" ] && printf ' ---: |'
echo
for m in $models; do
	mname=$(basename "$m" .json)
	for r in ${RECIPES:-recipes/*.lua}; do
		case $r in */*) ;; *) r=recipes/$r.lua ;; esac
		name=$(basename "$r" .lua)
		rm -rf "$tmp/out"
		PRECC_CACHE_DIR="$tmp/cache" "$precc" build "$r" --model "$m" --target "$(echo ${TARGETS:-sm_89 sm_90a} | tr ' ' ,)" \
			-o "$tmp/out" --time --no-cache > "$tmp/log" 2>&1 || { echo "| $name | $mname | build fails | | | | | | | |"; continue; }
		for sm in ${TARGETS:-sm_89 sm_90a}; do
			grep "^time: k_[0-9a-f]* $sm *gemm " "$tmp/log" > "$tmp/g" || true
			n=$(wc -l < "$tmp/g")
			[ "$n" -gt 0 ] || continue
			: > "$tmp/regs"; : > "$tmp/spill"; : > "$tmp/smem"; : > "$tmp/pt"; sass=0; wg=0; notes=0; gmma=0; big=0
			while read -r _ k _ _ _ _ _ _ pms _; do
				"$ptxas" -arch="$sm" -v -o "$tmp/c.cubin" "$tmp/out/$k.$sm.ptx" > "$tmp/v" 2>&1
				sed -n 's/.*Used \([0-9]*\) registers.*/\1/p' "$tmp/v" >> "$tmp/regs"
				sed -n 's/.* \([0-9]*\) bytes spill stores.*/\1/p' "$tmp/v" >> "$tmp/spill"
				sed -n 's/.*registers, used [0-9]* barriers, \([0-9]*\) bytes smem.*/\1/p;s/.*registers, \([0-9]*\) bytes smem.*/\1/p' "$tmp/v" >> "$tmp/smem"
				echo "$pms" >> "$tmp/pt"
				if grep -q wgmma.mma_async "$tmp/out/$k.$sm.ptx"; then wg=$((wg + 1))
				elif grep -q '^\.maxntid 256,' "$tmp/out/$k.$sm.ptx"; then big=$((big + 1)); fi
				notes=$((notes + $(grep -cE '\(C75(08|10|14|15|17|19)\)|Potential Performance Loss: wgmma' "$tmp/v")))
				if [ -n "${NVDISASM:-}" ]; then
					"$NVDISASM" "$tmp/c.cubin" 2>/dev/null | grep -qE 'HGMMA|QGMMA' && gmma=$((gmma + 1))
				fi
				if [ "${SASS:-0}" = 1 ]; then
					s=$("$cuobjdump" -sass "$tmp/out/$k.$sm.cubin" 2>/dev/null)
					echo "$s" | grep -q LDGSTS && echo "$s" | grep -q LDSM && sass=$((sass + 1))
				fi
			done < "$tmp/g"
			rg="$(sort -n "$tmp/regs" | head -1)–$(sort -n "$tmp/regs" | tail -1)"
			sp=$(awk '{ s += $1 } END { print s + 0 }' "$tmp/spill")
			sm_="$(sort -n "$tmp/smem" | head -1)–$(sort -n "$tmp/smem" | tail -1)"
			pt="$(sort -n "$tmp/pt" | head -1)/$(median < "$tmp/pt")/$(sort -n "$tmp/pt" | tail -1)"
			printf '| %s | %s | %s | %s | %s (%s) | %s | %s | %s | %s | %s |' "$name" "$mname" "$sm" "$n" "$wg" "$notes" "$big" "$rg" "$sp" "$sm_" "$pt"
			[ "${SASS:-0}" = 1 ] && printf ' %s of %s |' "$sass" "$n"
			[ -n "${NVDISASM:-}" ] && printf ' %s of %s |' "$gmma" "$n"
			echo
		done
	done
done
