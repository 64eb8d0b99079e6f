#!/bin/sh
# build_scale.sh PRECC [RECIPE] — how precc check and a cold precc build
# grow with the number of linears (issue 13): Llama-3-8B-shaped models of
# 64..512 blocks, then DeepSeek-V2-Lite (5,208 linears) and DeepSeek-V3
# (45,091) shaped MoE models (Lua model files written to a temp dir; the
# HF configs under recipes/models/ give the same linears). Prints
# "name linears check_s build_s" per model; the kernel cache is off, so
# each build is cold, and the build's own cache too (--no-cache).
set -eu
precc=${1:?usage: build_scale.sh PRECC [RECIPE]}
recipe=${2:-$(dirname "$0")/../recipes/current_tensorwise.lua}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

llama() { # blocks
	cat <<LUA
model "llama$1"
for i = 0, $1 - 1 do
	local a, m = "model.layers." .. i .. ".self_attn.", "model.layers." .. i .. ".mlp."
	linear(a .. "q_proj", 4096, 4096) linear(a .. "k_proj", 4096, 1024)
	linear(a .. "v_proj", 4096, 1024) linear(a .. "o_proj", 4096, 4096)
	linear(m .. "gate_proj", 4096, 14336) linear(m .. "up_proj", 4096, 14336)
	linear(m .. "down_proj", 14336, 4096)
end
linear("lm_head", 4096, 128256)
LUA
}

# deepseek NAME LAYERS DENSE EXPERTS SHARED HIDDEN FFN MOE_FFN Q_LORA KV_LORA HEADS VOCAB
deepseek() {
	cat <<LUA
model "$1"
local L, dense, E, S, h, ffn, moe = $2, $3, $4, $5, $6, $7, $8
local ql, kvl, H, vocab = $9, ${10}, ${11}, ${12}
for i = 0, L - 1 do
	local a = "model.layers." .. i .. ".self_attn."
	if ql > 0 then
		linear(a .. "q_a_proj", h, ql) linear(a .. "q_b_proj", ql, H * 192)
	else
		linear(a .. "q_proj", h, H * 192)
	end
	linear(a .. "kv_a_proj_with_mqa", h, kvl + 64)
	linear(a .. "kv_b_proj", kvl, H * 256)
	linear(a .. "o_proj", H * 128, h)
	local m = "model.layers." .. i .. ".mlp."
	if i < dense then
		linear(m .. "gate_proj", h, ffn) linear(m .. "up_proj", h, ffn)
		linear(m .. "down_proj", ffn, h)
	else
		linear(m .. "gate", h, E)
		for e = 0, E - 1 do
			local x = m .. "experts." .. e .. "."
			linear(x .. "gate_proj", h, moe) linear(x .. "up_proj", h, moe)
			linear(x .. "down_proj", moe, h)
		end
		linear(m .. "shared_experts.gate_proj", h, moe * S)
		linear(m .. "shared_experts.up_proj", h, moe * S)
		linear(m .. "shared_experts.down_proj", moe * S, h)
	end
end
linear("lm_head", h, vocab)
LUA
}

for n in 64 128 256 512; do llama $n > "$dir/llama$n.lua"; done
deepseek deepseek-v2-lite 27 1 64 2 2048 10944 1408 0 512 16 102400 > "$dir/deepseek-v2-lite.lua"
deepseek deepseek-v3 61 3 256 1 7168 18432 2048 1536 512 128 129280 > "$dir/deepseek-v3.lua"

secs() { # command... -> wall seconds on stdout, command output dropped
	s=$(date +%s.%N)
	"$@" > /dev/null 2> "$dir/err" || { cat "$dir/err" >&2; exit 1; }
	e=$(date +%s.%N)
	echo "$s $e" | awk '{printf "%.2f", $2 - $1}'
}

echo "model linears check_s build_s"
for m in llama64 llama128 llama256 llama512 deepseek-v2-lite deepseek-v3; do
	n=$("$precc" check "$recipe" --model "$dir/$m.lua" --json | sed -n 's/.*"linears":\([0-9]*\).*/\1/p')
	c=$(secs "$precc" check "$recipe" --model "$dir/$m.lua")
	b=$(secs "$precc" build "$recipe" --model "$dir/$m.lua" --target sm_90a -o "$dir/out" --no-cache)
	echo "$m $n $c $b"
done
