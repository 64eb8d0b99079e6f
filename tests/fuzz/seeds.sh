#!/bin/sh
# seeds.sh SRC BUILD FUZZ_BUILD: the seed corpora, generated from the
# project's own inputs and outputs into FUZZ_BUILD/corpus/<fuzzer>/ (not
# committed). BUILD holds a normal build (precc, precc-run) used to make
# manifests and IR; FUZZ_BUILD the fuzzers (fuzz_state writes its seed).
set -eu
src=$1 build=$2 fb=$3
c=$fb/corpus
mkdir -p $c/fuzz_ir $c/fuzz_manifest_cpu $c/fuzz_manifest_fake $c/fuzz_state \
         $c/fuzz_config $c/fuzz_model_lua $c/fuzz_recipe
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# IR: hand-written kernels and tests, and what precc ir prints for recipes
cp $src/tests/codegen/kernels/*.ir $c/fuzz_ir/
for f in $src/tests/codegen/bad/*.ir; do cp "$f" $c/fuzz_ir/bad_$(basename "$f"); done
for f in $src/tests/lit/ir/*.ir $src/tests/lit/passes/*.ir; do
	[ -f "$f" ] && cp "$f" $c/fuzz_ir/lit_$(basename "$f")
done
for r in bf16 current_tensorwise te_delayed_hybrid rowwise mxfp8 nvfp4 deepseek_v3; do
	$build/precc ir $src/recipes/$r.lua --model $src/tests/fuzz/seed_model.lua \
		> $c/fuzz_ir/recipe_$r.ir 2>/dev/null || rm -f $c/fuzz_ir/recipe_$r.ir
done

# manifests: the runtime tests' plan and what precc build writes
cp $src/tests/runtime/Inputs/plan/manifest.json $c/fuzz_manifest_cpu/plan.json
for r in current_tensorwise te_delayed_hybrid rowwise mxfp8 nvfp4; do
	PRECC_PTXAS=/nonexistent PRECC_CACHE_DIR=$tmp/cache PRECC_CACHE_KEY=$tmp/cache.key $build/precc build \
		$src/recipes/$r.lua --model $src/tests/fuzz/seed_model.lua -o $tmp/$r 2>/dev/null &&
		cp $tmp/$r/manifest.json $c/fuzz_manifest_cpu/build_$r.json
done
cp $c/fuzz_manifest_cpu/* $c/fuzz_manifest_fake/

# the state file: one valid file of the harness's own state
PRECC_FUZZ_SEED=$c/fuzz_state/valid.pst $fb/tests/fuzz/fuzz_state

# model files and recipes
cp $src/recipes/models/*.json $c/fuzz_config/
for f in $src/tests/lit/Inputs/model_*.json; do cp "$f" $c/fuzz_config/; done
cp $src/tests/lit/Inputs/model_hfdir/config.json $c/fuzz_config/hfdir.json
cp $src/recipes/models/*.lua $c/fuzz_model_lua/
for f in $src/tests/lit/Inputs/model_*.lua; do cp "$f" $c/fuzz_model_lua/; done
cp $src/recipes/*.lua $c/fuzz_recipe/
for f in $src/tests/lit/Inputs/recipe_*.lua $src/tests/lit/Inputs/check_*.lua; do
	cp "$f" $c/fuzz_recipe/
done
# names that must stay data (issue 30): hostile to C comments, control
# characters, not UTF-8 (a raw byte in a config), and a manifest that holds them
for f in $src/tests/lit/Inputs/names_*.lua; do
	case $f in
	*model*) cp "$f" $c/fuzz_model_lua/ ;;
	*) cp "$f" $c/fuzz_recipe/ ;;
	esac
done
cp $src/tests/lit/Inputs/names_*.json $c/fuzz_config/
sed "s|org/m|org/$(printf '\351')m|" $src/tests/lit/Inputs/names_hostile.json \
	> $c/fuzz_config/names_latin1.json
PRECC_PTXAS=/nonexistent PRECC_CACHE_DIR=$tmp/cache PRECC_CACHE_KEY=$tmp/cache.key $build/precc build \
	$src/tests/lit/Inputs/names_hostile.lua --model $src/tests/lit/Inputs/names_hostile.json \
	--target sm_89 -o $tmp/names 2>/dev/null &&
	cp $tmp/names/manifest.json $c/fuzz_manifest_cpu/build_names.json &&
	cp $tmp/names/manifest.json $c/fuzz_manifest_fake/build_names.json
# the suite's deliberate runaways (each runs to a 5 s limit) would only
# slow the fuzzers down: they stay in the lit tests
rm -f $c/fuzz_recipe/recipe_pcall_loop.lua $c/fuzz_recipe/recipe_predicate_loop.lua \
      $c/fuzz_recipe/recipe_table_bomb.lua $c/fuzz_model_lua/model_loop.lua \
      $c/fuzz_recipe/recipe_slow_pattern.lua $c/fuzz_recipe/recipe_slow_predicate.lua \
      $c/fuzz_recipe/recipe_chunk_runaway.lua
for d in $c/*; do echo "seeds: $(basename $d): $(ls $d | wc -l) files"; done
