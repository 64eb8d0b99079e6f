/*
 * interp/philox.c — Philox-4x32-10, the counter-based generator behind stochastic
 * rounding (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy
 * as 1, 2, 3", SC'11; constants and round function as in Random123's
 * philox.h). GPU kernels compute the same function, so SR is reproducible
 * across devices: docs/interpreter.md lists which word carries what.
 */
#include <stdint.h>

#include "precc/interp.h"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u  /* golden ratio */
#define PHILOX_W1 0xBB67AE85u  /* sqrt(3) - 1 */

static inline void
philox_round(uint32_t c[4], const uint32_t k[2])
{
	uint64_t p0 = (uint64_t)PHILOX_M0 * c[0];
	uint64_t p1 = (uint64_t)PHILOX_M1 * c[2];
	uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
	uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;

	c[0] = hi1 ^ c[1] ^ k[0];
	c[1] = lo1;
	c[2] = hi0 ^ c[3] ^ k[1];
	c[3] = lo0;
}

void
precc_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2],
                    uint32_t out[4])
{
	uint32_t c[4] = { ctr[0], ctr[1], ctr[2], ctr[3] };
	uint32_t k[2] = { key[0], key[1] };
	int r;

	for (r = 0; r < 10; r++) {
		if (r > 0) {
			k[0] += PHILOX_W0;
			k[1] += PHILOX_W1;
		}
		philox_round(c, k);
	}
	out[0] = c[0];
	out[1] = c[1];
	out[2] = c[2];
	out[3] = c[3];
}

uint32_t
precc_sr_bits(uint64_t seed, uint32_t stream, uint64_t i)
{
	uint32_t ctr[4] = { (uint32_t)(i >> 2), (uint32_t)(i >> 34), stream, 0 };
	uint32_t key[2] = { (uint32_t)seed, (uint32_t)(seed >> 32) };
	uint32_t out[4];

	precc_philox4x32_10(ctr, key, out);
	return out[i & 3];
}

uint32_t
precc_sr_bits16(uint64_t seed, uint32_t stream, uint64_t i)
{
	uint32_t ctr[4] = { (uint32_t)(i >> 3), (uint32_t)(i >> 35), stream, 0 };
	uint32_t key[2] = { (uint32_t)seed, (uint32_t)(seed >> 32) };
	uint32_t out[4];

	precc_philox4x32_10(ctr, key, out);
	return out[(i >> 1) & 3] >> (16 * (i & 1)) & 0xffff;
}
