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
	/* cluster launches: the vector clocks its arrivals release (pend) and
	 * its last completion gave its waiters (done); NULL: none */
	uint32_t *vc_pend, *vc_done;
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
uint64_t emu_smem_declared_at(unsigned s, unsigned id);   /* of CTA slot s */
/* memcheck + racecheck of one access (emu.c); flags 0: load */
void *precc_emu_check(void *p, uint64_t size, uint32_t align, uint32_t flags);

/* emu_wgmma.c: per-CTA reset at launch, and per thread at kernel exit */
void emu_wgmma_reset(unsigned slot);
void emu_wgmma_leave(void);

/* the core host ABI (emu.c) */
uint32_t precc_emu_sreg(uint32_t which);
void precc_emu_barrier(uint32_t site);
void precc_emu_bar_named(uint32_t id, uint32_t count);
void precc_emu_warp_sync(void);
void *precc_emu_shared(uint32_t id, uint64_t bytes);

/* threads of the running CTA */
int emu_cta_threads(void);
unsigned emu_ctaid_x(void);   /* the running thread's CTA */
/* bytes [p, p+n) of this CTA's shared memory were written by the async
 * proxy (TMA): racecheck's shadow of them starts clean */
void emu_shared_async(void *p, uint64_t n);
/* racecheck's epochs: the CTA clock's next value; this thread's epoch */
unsigned emu_epoch_next(void);
unsigned emu_epoch_next_at(unsigned s);   /* CTA slot s's clock */
void emu_epoch_take(unsigned e);
/* emu_tma.c: per-CTA reset at launch, and per thread at kernel exit */
void emu_tma_reset(unsigned slot);
void emu_tma_leave(void);

/* ---- clusters (emu.c) ----
 * Happens-before across the CTAs of a cluster (and the threads of one
 * sm_90a GEMM CTA: test_emu) is tracked with vector clocks over the
 * cluster's threads (entry rank * threads + tid): a thread's clock ticks
 * at each release (a barrier arrival, an mbarrier arrival, bar.warp.sync);
 * the sync object joins what arrives and its waiters take it. After the
 * threads, one entry per mbarrier of each CTA (emu_vc_threads + rank *
 * EMU_MAXBAR + index): the phases it has completed, which a completion
 * publishes with the phase, so that a TMA write's landing is known to
 * whoever is ordered after a wait for it, directly or not. */
enum { EMU_MAXBAR = 64 };
extern unsigned emu_vc_n;            /* entries of a clock; 0: no vector clocks */
extern unsigned emu_vc_threads;      /* the cluster's threads: the first entries */
extern __thread uint32_t *my_vc;
extern __thread unsigned my_gid;
void emu_vc_release(uint32_t *into); /* join this thread's clock into `into`, then tick */
void emu_vc_acquire(const uint32_t *from);
/* the CTAs of this thread's cluster: their number, the slot of rank r
 * (-1: none), the rank of slot s (-1: not in this cluster) */
unsigned emu_cluster_size(void);
int emu_cluster_slot(unsigned rank);
int emu_cluster_rank(unsigned s);
/* This thread touches CTA slot s's shared memory (s a peer): 0 and a
 * failure when s has exited; else the access is remembered until a
 * cluster barrier orders it before s's exit. */
int emu_remote_touch(unsigned s, const char *what);
/* the cluster barrier completions this thread waited for, and the first
 * completion that will order its accesses from now on */
unsigned emu_cluster_waited(void);
/* threads of slot s blocked in barrier.cluster.wait */
int emu_cluster_waiting(unsigned s);
unsigned emu_cluster_q(void);
/* racecheck of the async proxy's writes into shared memory in a cluster
 * launch: the n bytes at p (a CTA's shared memory) get a TMA copy's data that
 * completes phase `phase` of the mbarrier with index `bar` of slot s. Every
 * thread that read those bytes since their last such write must have
 * released its reads to the issuing thread (an mbarrier arrival after the
 * read that the issuer waited for: the empty barrier); each later read
 * must be ordered after that phase's completion (its barrier's entry of
 * the clock). The index is the barrier's in the table of its CTA
 * (emu_tma.c). */
void emu_async_write(void *p, uint64_t n, int bar, uint32_t phase);

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
/* clusters: barrier.cluster.arrive (at call site `site`) and .wait,
 * mapa.shared::cluster, mbarrier.arrive.release.cluster.shared::cluster
 * on a barrier of this CTA or (an address from mapa) a peer's, and
 * cp.async.bulk.tensor.2d.shared::cluster...multicast::cluster */
void precc_emu_cluster_arrive(uint32_t site);
void precc_emu_cluster_wait(void);
void *precc_emu_mapa(void *p, uint32_t rank);
void precc_emu_mbar_arrive_cluster(void *bar);
void precc_emu_tma_load_2d_mc(void *dst, const void *tmap, int32_t c0, int32_t c1, void *bar,
                              uint32_t mask);

#endif
