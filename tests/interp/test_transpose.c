/*
 * test_transpose.c — precc_transpose against the element-by-element
 * definition, for 1, 2, 4 and 8-byte elements and shapes that are and are
 * not multiples of the 8x8 / 4x4 squares and 32-element tiles.
 */
#include "check.h"

int
main(void)
{
	static const long dims[] = { 1, 3, 4, 7, 8, 9, 31, 32, 33, 64, 100, 257 };
	enum { ND = sizeof dims / sizeof dims[0] };
	uint64_t s = 12345;

	for (size_t es = 1; es <= 8; es *= 2)
		for (int a = 0; a < ND; a++)
			for (int b = 0; b < ND; b++) {
				long rows = dims[a], cols = dims[b];
				size_t n = (size_t)rows * (size_t)cols;
				uint8_t *x = malloc(n * es), *y = malloc(n * es);
				for (size_t i = 0; i < n * es; i++) {
					s = s * 6364136223846793005ull + 1442695040888963407ull;
					x[i] = (uint8_t)(s >> 56);
				}
				CHECK_OK(precc_transpose(x, es, rows, cols, y));
				long bad = 0;
				for (long r = 0; r < rows; r++)
					for (long c = 0; c < cols; c++)
						bad += memcmp(y + ((size_t)c * rows + r) * es,
						              x + ((size_t)r * cols + c) * es, es) != 0;
				if (bad)
					fprintf(stderr, "transpose %zu-byte [%ld, %ld]: %ld wrong\n", es,
					        rows, cols, bad);
				CHECK(bad == 0);
				free(x);
				free(y);
			}
	if (failures) {
		fprintf(stderr, "transpose: %d failure(s)\n", failures);
		return 1;
	}
	printf("transpose: ok\n");
	return 0;
}
