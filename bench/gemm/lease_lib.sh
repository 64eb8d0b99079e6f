# bench/gemm/lease_lib.sh — what lease_gemm.sh and lease_grouped.sh share,
# sourced by both (POSIX sh; needs ROOT, PRECC, ART, RECIPES set and the
# working directory at the repository root).

# lease_build NAME MODEL: precc builds every recipe of $RECIPES ("name:tol"
# words) for MODEL at sm_90a into $ART/<recipe>, logs beside it; NAME
# prefixes the messages
lease_build() {
	[ -x "$PRECC" ] || { echo "$1: no precc at $PRECC"; return 1; }
	mkdir -p "$ART" || return 1
	for rt in $RECIPES; do
		r=${rt%%:*}
		rm -rf "${ART:?}/$r"
		"$PRECC" build "recipes/$r.lua" --model "$2" --target sm_90a -o "$ART/$r" \
			>"$ART/$r.build.log" 2>&1 || { echo "$1: $r does not build:"; tail -3 "$ART/$r.build.log"; return 1; }
		echo "built $ART/$r"
	done
}

# lease_audit NAME: the SASS audit of $ART's recipes into $ART/audit.json
# (before tests/gpu/slim.py drops the PTX; the cubins stay)
lease_audit() {
	dirs=
	for rt in $RECIPES; do dirs="$dirs $ART/${rt%%:*}"; done
	python3 bench/sass_audit.py --dirs "$dirs" --json "$ART/audit.json" >"$ART/audit.log" 2>&1
	[ -s "$ART/audit.json" ] || { echo "$1: no SASS audit: $(tail -1 "$ART/audit.log")"; return 1; }
}

# lease_machine FILE: the card, driver, clocks, torch, commit and date,
# printed and kept in FILE
lease_machine() {
	{
		echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
		echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
		nvidia-smi --query-gpu=name,driver_version,compute_cap,clocks.max.sm,clocks.sm,power.limit,temperature.gpu \
			--format=csv 2>&1
		python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
	} | tee "$1"
}

# lease_cuda_torch: whether python3 has torch with a CUDA device
lease_cuda_torch() {
	python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null
}
