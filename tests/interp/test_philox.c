/*
 * test_philox.c — Philox-4x32-10 against the Random123 known-answer
 * vectors, and the SR bit layout (counter/key words) of precc_sr_bits.
 */
#include "check.h"

int
main(void)
{
	static const uint32_t kat[3][10] = {
		{ 0, 0, 0, 0, 0, 0,
		  0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8 },
		{ 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff,
		  0xffffffff, 0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd },
		{ 0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822,
		  0x299f31d0, 0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1 },
	};
	uint32_t out[4];

	for (int t = 0; t < 3; t++) {
		precc_philox4x32_10(kat[t], kat[t] + 4, out);
		for (int w = 0; w < 4; w++) {
			if (out[w] != kat[t][6 + w])
				fprintf(stderr, "kat %d word %d: got %08x want %08x\n", t,
				        w, out[w], kat[t][6 + w]);
			CHECK(out[w] == kat[t][6 + w]);
		}
	}
	/* element i uses word i&3 of counter {i>>2, i>>34, stream, 0},
	 * key {seed lo, seed hi} */
	uint64_t seed = 0x0123456789abcdefull;
	uint32_t key[2] = { 0x89abcdef, 0x01234567 };
	uint64_t idx[] = { 0, 1, 2, 3, 4, 7, 1000001, (5ull << 34) + 6 };
	for (unsigned t = 0; t < sizeof idx / sizeof idx[0]; t++) {
		uint64_t i = idx[t];
		uint32_t ctr[4] = { (uint32_t)(i >> 2), (uint32_t)(i >> 34), 42, 0 };
		precc_philox4x32_10(ctr, key, out);
		CHECK(precc_sr_bits(seed, 42, i) == out[i & 3]);
	}
	/* e2m1: element i takes half i&1 (low first) of word (i>>1)&3 of
	 * counter {i>>3, i>>35, stream, 0}: 8 elements a call */
	uint64_t idx16[] = { 0, 1, 2, 3, 6, 7, 8, 9, 1000001, (5ull << 35) + 13 };
	for (unsigned t = 0; t < sizeof idx16 / sizeof idx16[0]; t++) {
		uint64_t i = idx16[t];
		uint32_t ctr[4] = { (uint32_t)(i >> 3), (uint32_t)(i >> 35), 42, 0 };
		precc_philox4x32_10(ctr, key, out);
		CHECK(precc_sr_bits16(seed, 42, i) == (i & 1 ? out[(i >> 1) & 3] >> 16
		                                               : out[(i >> 1) & 3] & 0xffff));
	}
	/* stream and seed change the bits */
	CHECK(precc_sr_bits(seed, 1, 5) != precc_sr_bits(seed, 2, 5));
	CHECK(precc_sr_bits(1, 1, 5) != precc_sr_bits(2, 1, 5));
	return finish("philox");
}
