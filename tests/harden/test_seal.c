/*
 * test_seal.c — the kernel cache's seal (driver/cache_key.c) against RFC
 * 4231's HMAC-SHA256 test cases 1, 2, 6 and 7 (keys shorter than, and
 * longer than, SHA-256's 64-byte block), each message split into a || b at
 * every offset (cache_mac MACs the header and the payload as two parts).
 */
#include <stdio.h>
#include <string.h>
#include "cache.h"

static int fails, checks;

static void
hex(const unsigned char *b, char *out)
{
	for (int i = 0; i < CACHE_MAC_BYTES; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

static void
rfc4231(int tc, const unsigned char *key, size_t keylen, const char *data, const char *want)
{
	size_t n = strlen(data);
	unsigned char mac[CACHE_MAC_BYTES], first[CACHE_MAC_BYTES];
	char got[2 * CACHE_MAC_BYTES + 1];

	for (size_t cut = 0; cut <= n; cut++) {
		checks++;
		if (cache_mac(key, keylen, data, cut, data + cut, n - cut, mac)) {
			fails++;
			fprintf(stderr, "%s:%d: FAIL: RFC 4231 case %d: cache_mac failed\n", __FILE__, __LINE__, tc);
			return;
		}
		hex(mac, got);
		if (strcmp(got, want)) {
			fails++;
			fprintf(stderr, "%s:%d: FAIL: RFC 4231 case %d (split at %zu): %s, want %s\n",
			        __FILE__, __LINE__, tc, cut, got, want);
			return;
		}
		if (cut == 0)
			memcpy(first, mac, sizeof mac);
		checks++;
		if (!cache_mac_equal(mac, first)) {
			fails++;
			fprintf(stderr, "%s:%d: FAIL: cache_mac_equal\n", __FILE__, __LINE__);
		}
	}
	mac[0] ^= 1;
	checks++;
	if (cache_mac_equal(mac, first)) {
		fails++;
		fprintf(stderr, "%s:%d: FAIL: cache_mac_equal took a changed MAC\n", __FILE__, __LINE__);
	}
}

int
main(void)
{
	unsigned char k1[20], k6[131];

	memset(k1, 0x0b, sizeof k1);
	memset(k6, 0xaa, sizeof k6);
	rfc4231(1, k1, sizeof k1, "Hi There",
	        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
	rfc4231(2, (const unsigned char *)"Jefe", 4, "what do ya want for nothing?",
	        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
	rfc4231(6, k6, sizeof k6, "Test Using Larger Than Block-Size Key - Hash Key First",
	        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
	rfc4231(7, k6, sizeof k6, "This is a test using a larger than block-size key and a larger "
	        "than block-size data. The key needs to be hashed before being used by the HMAC "
	        "algorithm.",
	        "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
	printf("test_seal: %d/%d checks passed\n", checks - fails, checks);
	return fails != 0;
}
