#!/bin/sh
# min_cubin.sh FILE: the smallest cubin precc build accepts from a fake
# ptxas (driver/cache.c, cache_cubin_check): a 64-bit little-endian ELF
# header, e_machine EM_CUDA (190), one null section header at byte 64.
{
	printf '\177ELF\002\001\001'; head -c 11 /dev/zero
	printf '\276\000'; head -c 20 /dev/zero
	printf '\100'; head -c 17 /dev/zero
	printf '\100\000\001\000\000\000'; head -c 64 /dev/zero
} > "$1"
