#!/bin/sh
# runtime.install: `cmake --install` into a scratch prefix, then a host
# program built against it with nothing but `pkg-config precc` and cc:
# it links libprecc_rt.so by its soname, opens the cpu backend and loads a
# manifest. Also checks the tools, headers, recipes and that the shared
# library exports only precc_* symbols.
#   install_test.sh BUILD_DIR SOURCE_DIR [HOST_CFLAGS]
# (HOST_CFLAGS: -fsanitize=... when the library itself is sanitized)
set -eu
build=$1 src=$2 hostflags=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log"
p=$tmp/prefix
for f in bin/precc bin/precc-run include/precc/precc_rt.h include/precc/version.h \
         share/precc/recipes/te_delayed_hybrid.lua; do
	[ -e "$p/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
pc=$(find "$p" -name precc.pc)
[ -n "$pc" ] || { echo "FAIL: precc.pc not installed"; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$pc")
[ "$(pkg-config --modversion precc)" = "$(sed -n 's/^#define PRECC_VERSION "\(.*\)"/\1/p' "$p/include/precc/version.h")" ] \
	|| { echo "FAIL: precc.pc and version.h disagree"; exit 1; }
lib=$(pkg-config --variable=libdir precc)
so=$(readelf -d "$lib/libprecc_rt.so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
case $so in libprecc_rt.so.[0-9]*.[0-9]*) ;; *) echo "FAIL: soname '$so'"; exit 1 ;; esac
other=$(nm -D --defined-only "$lib/libprecc_rt.so" | awk '$2 ~ /[TDBR]/ && $3 !~ /^precc_/ {print $3}')
[ -z "$other" ] || { echo "FAIL: libprecc_rt.so exports non-API symbols: $other"; exit 1; }
cat >"$tmp/host.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <precc/precc_rt.h>
#include <precc/version.h>
int main(int argc, char **argv)
{
	char why[256];
	precc_rt *rt = precc_rt_open_backend(PRECC_BACKEND_CPU, why, sizeof why);
	if (!rt) { printf("open: %s\n", precc_rt_last_error()); return 1; }
	if (precc_rt_load(rt, argv[1])) { printf("load: %s\n", precc_rt_last_error()); return 1; }
	precc_artifact_info ai;
	precc_rt_artifact_info(rt, &ai);
	printf("precc %s: %s, %d layers, %d kernels\n", PRECC_VERSION, why, ai.nlayers, ai.nkernels);
	int ok = ai.nlayers > 0 && ai.nkernels > 0 && strcmp(ai.precc_version, PRECC_VERSION) == 0;
	precc_rt_close(rt);
	return ok ? 0 : 1;
}
C
${CC:-cc} -std=c17 $hostflags $(pkg-config --cflags precc) "$tmp/host.c" -o "$tmp/host" $(pkg-config --libs precc)
readelf -d "$tmp/host" | grep -q "NEEDED.*\[$so\]" || { echo "FAIL: host does not need $so"; exit 1; }
PRECC_CACHE_DIR=$tmp/cache "$p/bin/precc" build "$src/recipes/te_delayed_hybrid.lua" --model "$src/recipes/models/tiny.lua" \
	--target sm_90a -o "$tmp/art" >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; exit 1; }
LD_LIBRARY_PATH=$lib "$tmp/host" "$tmp/art"
echo "ok: installed, linked by soname $so through pkg-config, loaded a manifest"
