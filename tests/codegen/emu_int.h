/*
 * emu_int.h — what emu.c shares with the files of host models beside it
 * (emu_wgmma.c): the thread's identity, failures, the barriers that notice
 * divergence, and where shared memory lies. Not for test drivers (emu.h).
 */
#ifndef PRECC_EMU_INT_H
#define PRECC_EMU_INT_H

#include <pthread.h>
#include <stdint.h>

enum { EMU_NSLOT = 65 };   /* emu.c's NSLOT: MAXCOOP CTAs + the sequential one */

/* thread index in the CTA, and the CTA's slot of per-CTA state */
extern __thread unsigned my_tid, my_slot;

/* One check failure (counted; the first message kept with its CTA and thread). */
void emu_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

typedef struct Bar {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int n, arrived, exited, site, bad;
	unsigned gen;
	const char *what;
	unsigned *clock;      /* racecheck's epochs: each completion takes the next
	                         value of *clock (the CTA's) into epoch; NULL: none */
	unsigned epoch;
} Bar;
/* 0 once all n threads came (site < 0: any site); -1 when broken */
int bar_wait(Bar *b, int site);
/* per CTA slot, per warpgroup: the 128 threads of warps 4g..4g+3 */
extern Bar wg_bar[EMU_NSLOT][8];

/* u in emulated shared memory: its slot, array, offset */
int shared_loc(uintptr_t u, unsigned *s, unsigned *id, uint64_t *off);
/* this CTA's shared memory (all arrays, contiguous) and array id's declared size */
uint8_t *emu_smem_base(uint64_t *size);
uint64_t emu_smem_declared(unsigned id);
/* memcheck + racecheck of one access (emu.c); flags 0: load */
void *precc_emu_check(void *p, uint64_t size, uint32_t align, uint32_t flags);

/* emu_wgmma.c: per-CTA reset at launch, and per thread at kernel exit */
void emu_wgmma_reset(unsigned slot);
void emu_wgmma_leave(void);

/* the core host ABI (emu.c) */
uint32_t precc_emu_sreg(uint32_t which);
void precc_emu_barrier(uint32_t site);
void precc_emu_bar_named(uint32_t id, uint32_t count);
void *precc_emu_shared(uint32_t id, uint64_t bytes);

/* threads of the running CTA */
int emu_cta_threads(void);
unsigned emu_ctaid_x(void);   /* the running thread's CTA */
/* bytes [p, p+n) of this CTA's shared memory were written by the async
 * proxy (TMA): racecheck's shadow of them starts clean */
void emu_shared_async(void *p, uint64_t n);
/* racecheck's epochs: the CTA clock's next value; this thread's epoch */
unsigned emu_epoch_next(void);
void emu_epoch_take(unsigned e);
/* emu_tma.c: per-CTA reset at launch, and per thread at kernel exit */
void emu_tma_reset(unsigned slot);
void emu_tma_leave(void);

/* the host ABI (TEAM.md / docs/codegen.md) */
void precc_emu_mbar_init(void *bar, uint32_t count);
void precc_emu_fence_mbar_init(void);
void precc_emu_fence_proxy_async(void);
void precc_emu_mbar_arrive(void *bar);
void precc_emu_mbar_arrive_expect_tx(void *bar, uint32_t bytes);
uint32_t precc_emu_mbar_try_wait(void *bar, uint32_t parity);
void precc_emu_tma_load_2d(void *dst, const void *tmap, int32_t c0, int32_t c1, void *bar);
void precc_emu_tma_store_2d(const void *tmap, int32_t c0, int32_t c1, const void *src);
void precc_emu_bulk_commit(void);
void precc_emu_bulk_wait_read(uint32_t n);
void precc_emu_stmatrix(uint32_t trans, void *row, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3);
/* emu.c: the async proxy's view of shared memory (emu_tma.c's TMA store) */
void emu_shared_fence_async(void);
int emu_shared_unfenced(const void *p, uint64_t n, unsigned *thread, uint64_t *at);
void emu_shared_bulk_read(const void *p, uint64_t n, int on);
void precc_emu_wgmma_fence(void);
void precc_emu_wgmma_commit(void);
void precc_emu_wgmma_wait(uint32_t n);
void precc_emu_wgmma(uint32_t n, uint32_t fa, uint32_t fb, uint32_t trans, uint64_t desc_a,
                     uint64_t desc_b, float *d, uint32_t scale_d);
void precc_emu_setmaxnreg(uint32_t inc, uint32_t regs);

#endif
