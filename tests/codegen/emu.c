/*
 * emu.c — the emulated GPU (emu.h). Host-mode kernels (codegen's
 * cg_set_host) call the precc_emu_* functions below instead of NVVM
 * intrinsics and inline PTX; every GPU thread is a pthread. Sequential
 * launches run one CTA at a time on one set of threads; cooperative ones
 * run every CTA at once, as cuLaunchCooperativeKernel guarantees, each
 * with its own shared memory, barriers and warps (slot = CTA).
 *
 * The checks, each what compute-sanitizer's tool of the same name does:
 * memcheck — emu_instrument puts precc_emu_check before every load, store
 * and atomic: the bytes must lie in one registered buffer (a store not in
 * an input) or in the running CTA's own shared array, at the alignment
 * the access claims (what lets NVPTX make it a vector access); racecheck
 * — per byte of shared memory the last writer and the last reader(s)
 * with the barrier epoch: an access of another thread's byte in the same
 * epoch, unless both are reads, is a race; synccheck — a barrier (by call
 * site) or warp collective that some threads reach while others leave the
 * kernel or wait at another barrier. A failed check is recorded, the
 * access goes to a sink, the barrier releases, and the run finishes.
 *
 * cp.async (PTX ISA, "cp.async", "cp.async.commit_group",
 * "cp.async.wait_group"): the source is read and checked when the copy is
 * issued, the destination is marked in flight, and the bytes land in
 * shared memory only when a wait_group of the issuing thread completes
 * the copy's group (all but the N most recent committed groups); they
 * count as that thread's store at that moment, so other threads need a
 * barrier after the wait. Any access of an in-flight byte (a missing or
 * too-weak wait_group) is a race. ldmatrix: every lane's row address must
 * be 16-byte aligned and inside the CTA's shared array; the warp's 32 rows
 * are gathered as the PTX ISA's "ldmatrix" fragment says (and .trans), and
 * each 8-row phase whose rows do not fall in 8 different 16-byte bank
 * groups counts as a bank conflict (emu_ldsm_conflicts). Every other shared
 * load and store is logged by (warp, access site, the thread's count of
 * that site): one warp instruction. When its CTA ends, each instruction's
 * wavefronts are counted as the hardware serves them: 32 banks of 4 bytes,
 * the lanes in phases (all 32 for accesses of up to 4 bytes, 16 for 8,
 * 8 for 16), a phase taking as many wavefronts as the most distinct words
 * any one bank holds; emu_smem_stats gives the wavefronts over one per
 * phase (bank conflicts).
 */
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cg.h"
#include "emu.h"
#include "emu_int.h"
#include "mma_frag.h"
#include "precc/interp.h"

int emu_break;

_Static_assert(64 + 1 == EMU_NSLOT, "emu_int.h");
enum { MAXCOOP = 64, NSLOT = MAXCOOP + 1, SEQ = MAXCOOP, NSHARED = 3,
       MAXTHREADS = 1024 };

/* ---- failures ---------------------------------------------------------- */
static pthread_mutex_t err_mu = PTHREAD_MUTEX_INITIALIZER;
static int nerr;
static char first_err[512];
static long ldsm_conflicts;     /* ldmatrix phases with bank conflicts */
/* shared accesses of the CTAs run (emu_smem_stats) */
static long smem_instrs, smem_waves, smem_extra, smem_conflicted;

__thread unsigned my_tid, my_slot;
static __thread unsigned my_cx, my_cy, my_epoch;
/* clusters (below): the vector clocks' size and this thread's clock */
unsigned emu_vc_n, emu_vc_threads;
__thread uint32_t *my_vc;
__thread unsigned my_gid;
static __thread uint8_t sink[256] __attribute__((aligned(256)));

void
emu_fail(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&err_mu);
	if (nerr++ == 0) {
		int n = snprintf(first_err, sizeof first_err, "CTA (%u,%u) thread %u: ", my_cx, my_cy, my_tid);
		va_start(ap, fmt);
		vsnprintf(first_err + n, sizeof first_err - (size_t)n, fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&err_mu);
}

int
emu_errors(char *msg, size_t n)
{
	pthread_mutex_lock(&err_mu);
	snprintf(msg, n, "%s", first_err);
	int r = nerr;
	pthread_mutex_unlock(&err_mu);
	return r;
}

static void
emu_abort(const char *what)
{
	fprintf(stderr, "test_emu: CTA (%u,%u) thread %u: %s\n", my_cx, my_cy, my_tid, what);
	fflush(stdout);
	abort();
}

/* ---- barriers that notice divergence ----------------------------------- */

static void
bar_init(Bar *b, int n, const char *what)
{
	pthread_mutex_init(&b->mu, NULL);
	pthread_cond_init(&b->cv, NULL);
	b->n = n;
	b->arrived = b->exited = b->site = b->bad = 0;
	b->gen = 0;
	b->what = what;
	b->clock = NULL;
	b->epoch = 0;
	b->vc_pend = b->vc_done = NULL;
}

/* a barrier of a cluster launch carries vector clocks */
static void
bar_vc(Bar *b)
{
	b->vc_pend = calloc(emu_vc_n, sizeof *b->vc_pend);
	b->vc_done = calloc(emu_vc_n, sizeof *b->vc_done);
	if (!b->vc_pend || !b->vc_done)
		abort();
}

static void
bar_destroy(Bar *b)
{
	pthread_mutex_destroy(&b->mu);
	pthread_cond_destroy(&b->cv);
	free(b->vc_pend);
	free(b->vc_done);
	b->vc_pend = b->vc_done = NULL;
}

/* Wait until all n threads arrive at site (site < 0: any). 0, or -1 when
 * the barrier is broken (divergence found: everyone goes on unsynced). */
int
bar_wait(Bar *b, int site)
{
	pthread_mutex_lock(&b->mu);
	if (b->bad) {
		pthread_mutex_unlock(&b->mu);
		return -1;
	}
	if (b->arrived == 0)
		b->site = site;
	else if (site != b->site) {
		emu_fail("synccheck: divergent %s: threads wait at call sites %d and %d", b->what,
		         b->site, site);
		b->bad = 1;
		pthread_cond_broadcast(&b->cv);
		pthread_mutex_unlock(&b->mu);
		return -1;
	}
	int vc = b->vc_pend && my_vc;
	if (vc)
		emu_vc_release(b->vc_pend);
	if (++b->arrived + b->exited == b->n) {
		if (b->exited) {
			emu_fail("synccheck: %s reached by %d of %d threads (the others left the kernel)",
			         b->what, b->arrived, b->n);
			b->bad = 1;
		}
		b->arrived = 0;
		b->gen++;
		if (b->clock)
			b->epoch = __atomic_add_fetch(b->clock, 1, __ATOMIC_RELAXED);
		if (b->vc_pend) {
			memcpy(b->vc_done, b->vc_pend, emu_vc_n * sizeof *b->vc_done);
			memset(b->vc_pend, 0, emu_vc_n * sizeof *b->vc_pend);
		}
		if (vc)
			emu_vc_acquire(b->vc_done);
		pthread_cond_broadcast(&b->cv);
		pthread_mutex_unlock(&b->mu);
		return b->bad ? -1 : 0;
	}
	unsigned gen = b->gen;
	while (gen == b->gen && !b->bad)
		pthread_cond_wait(&b->cv, &b->mu);
	int r = b->bad ? -1 : 0;
	if (vc && !r)
		emu_vc_acquire(b->vc_done);
	pthread_mutex_unlock(&b->mu);
	return r;
}

static void
bar_exit(Bar *b)
{
	pthread_mutex_lock(&b->mu);
	if (++b->exited < b->n && b->arrived && b->arrived + b->exited == b->n && !b->bad) {
		emu_fail("synccheck: %s reached by %d of %d threads (the others left the kernel)",
		         b->what, b->arrived, b->n);
		b->bad = 1;
		pthread_cond_broadcast(&b->cv);
	}
	pthread_mutex_unlock(&b->mu);
}

/* ---- per-CTA state: barriers, warp exchange slots, shared memory -------- */
/* warp_bar: the warp collectives that order no memory (shfl.sync,
 * mma.sync); wsync_bar: bar.warp.sync, which does (vector clocks) */
static Bar cta_bar[NSLOT], warp_bar[NSLOT][32], wsync_bar[NSLOT][32];
Bar wg_bar[EMU_NSLOT][8];   /* warpgroup collectives (emu_wgmma.c) */
/* racecheck's epoch clock per CTA: a thread's epoch is the completion of
 * the last barrier it passed (bar.sync 0, or a named barrier of its
 * warpgroup), numbered CTA-wide, so that two threads share an epoch only
 * when the same barrier released them both */
static unsigned epoch_clock[NSLOT];
/* the warpgroup that uses named barrier id (+1; 0: none yet) */
static unsigned named_owner[NSLOT][16];
static uint32_t xchg[NSLOT][MAXTHREADS];
/* 1024-aligned: wgmma swizzles address bits 4-9 (emu_wgmma.c) */
/* A CTA's shared memory is one 512 KiB block holding the arrays at
 * arr_at[id]: array 0 up to EMU_SMEM_ARRAY0 (dynamic shared memory, the
 * sm_90a GEMM's ring) in its first 256 KiB (wgmma descriptors name a byte
 * by its low 18 address bits: emu_wgmma.c), arrays 1 and 2 up to 40 KiB
 * each after it. */
enum { SLOT_BYTES = 512 * 1024 };
static const uint32_t arr_at[NSHARED + 1] = {0, EMU_SMEM_ARRAY0, EMU_SMEM_ARRAY0 + 40 * 1024,
                                             SLOT_BYTES};
static uint8_t smem[NSLOT][SLOT_BYTES] __attribute__((aligned(1024)));
#define SM(s, id) (&smem[s][arr_at[id]])
static uint64_t smem_bytes[NSLOT][NSHARED];   /* the declared size of each array */
static uint64_t smem_used[NSLOT][NSHARED];    /* the most since the last reset */
/* racecheck shadow, per shared byte: (epoch + 1) << 11 | thread; readers'
 * thread MULTI when two or more read in that epoch */
enum { TIDBITS = 11, MULTI = (1 << TIDBITS) - 1 };
static uint32_t shadow_w[NSLOT][SLOT_BYTES], shadow_r[NSLOT][SLOT_BYTES];
#define SHW(s, id) (&shadow_w[s][arr_at[id]])
#define SHR(s, id) (&shadow_r[s][arr_at[id]])
/* per shared byte: 1 + the thread whose cp.async to it is in flight, 0;
 * or BULK_READ | 1 + the thread whose TMA store (cp.async.bulk.tensor
 * global.shared::cta) still reads it (until its wait_group.read) */
static uint16_t inflight_[NSLOT][SLOT_BYTES];
#define INFL(s, id) (&inflight_[s][arr_at[id]])
enum { BULK_READ = 0x8000 };
/* per shared byte: a thread's store (the generic proxy) not yet ordered
 * before the async proxy by a fence.proxy.async of that thread (the
 * writer: racecheck's shadow); a TMA store may not read such a byte (PTX
 * ISA, "Memory Consistency Model: Proxies": generic writes are visible to
 * the async proxy only through a proxy fence) */
static uint8_t unfenced_[NSLOT][SLOT_BYTES];
#define UNF(s, id) (&unfenced_[s][arr_at[id]])

static int nthreads_of[NSLOT];

/* byte `at` of smem: its slot, array and offset in the array */
static void
slot_loc(uintptr_t at, unsigned *s, unsigned *id, uint64_t *off)
{
	uint32_t in = (uint32_t)(at % SLOT_BYTES);

	*s = (unsigned)(at / SLOT_BYTES);
	*id = in < arr_at[1] ? 0 : in < arr_at[2] ? 1 : 2;
	*off = in - arr_at[*id];
}

/* the dynamic shared memory of the next launch (emu_set_dynamic_smem) */
static uint64_t dyn_smem;

void
emu_set_dynamic_smem(uint64_t bytes)
{
	dyn_smem = bytes;
}

/* ---- clusters ---------------------------------------------------------------
 * A cluster launch (emu_set_cluster) runs all CTAs at once, the CTAs of a
 * cluster in consecutive ranks, x fastest (PTX ISA, "Special Registers":
 * %cluster_ctarank). Every launch is a cluster: 1 x 1 when none was set
 * (PTX ISA: "a CTA that is not launched with a cluster is a cluster of one
 * CTA"), so barrier.cluster and the %cluster_* registers work everywhere.
 *
 * What a GPU punishes, checked here: a grid that is not a multiple of the
 * cluster, more than 8 CTAs in a cluster (16 with the non-portable
 * opt-in), a peer's shared memory touched once the peer has exited (any
 * shared::cluster access, remote mbarrier arrival or multicast into a
 * peer must be ordered before the peer's exit by a cluster barrier that
 * both wait for: DeepGEMM and CUTLASS end their cluster kernels with one),
 * barrier.cluster reached by part of the cluster or at two call sites,
 * an arrive twice or a wait with no arrive (synccheck), a remote use of a
 * peer's mbarrier before its init was published (fence.mbarrier_init and
 * a cluster barrier after it), and the async proxy's writes into a stage
 * its readers have not released (emu_async_write). Remote generic loads
 * and stores get memcheck, not racecheck (racecheck's shadow is the
 * owning CTA's, by thread index). */
static unsigned clu_x = 1, clu_y = 1, clu_n = 1;
static int clu_on, clu_np;
static int clu_rank[NSLOT];           /* the slot's rank in its cluster */
static int clu_slot[NSLOT][16];       /* the slot of each rank of the slot's cluster */
static pthread_mutex_t clu_mu = PTHREAD_MUTEX_INITIALIZER;
static int cta_left[NSLOT], cta_gone[NSLOT];  /* threads exited; all exited */
/* the latest cluster-barrier completion a peer's access into the slot's
 * shared memory needs its threads to have waited for (emu_cluster_q) */
static unsigned remote_q[NSLOT];
static const char *remote_what[NSLOT];
static __thread unsigned my_cwaited, my_carrived, my_cgen;

/* barrier.cluster: the threads of every CTA of the cluster, split
 * arrive/wait; held by the slot of rank 0 */
typedef struct CBar {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int n, arrived, exited, site, bad;
	unsigned gen;
	unsigned ep[16];            /* racecheck: each CTA's epoch at the last completion */
	uint32_t *vc_pend, *vc_done;
} CBar;
static CBar cbar[NSLOT];
/* threads of each slot blocked in barrier.cluster.wait (the deadlock
 * check of emu_tma.c counts them); a completion or a break frees them */
static int cwaiting[NSLOT];

int
emu_cluster_waiting(unsigned s)
{
	return __atomic_load_n(&cwaiting[s], __ATOMIC_RELAXED);
}

static void
cbar_release_all(void)
{
	for (unsigned r = 0; r < clu_n; r++)
		__atomic_store_n(&cwaiting[clu_slot[my_slot][r]], 0, __ATOMIC_RELAXED);
}

void
emu_set_cluster(unsigned x, unsigned y, int nonportable)
{
	clu_x = x, clu_y = y, clu_np = nonportable, clu_on = 1;
}

void
emu_vc_release(uint32_t *into)
{
	for (unsigned i = 0; i < emu_vc_n; i++)
		if (into[i] < my_vc[i])
			into[i] = my_vc[i];
	my_vc[my_gid]++;
}

void
emu_vc_acquire(const uint32_t *from)
{
	for (unsigned i = 0; i < emu_vc_n; i++)
		if (my_vc[i] < from[i])
			my_vc[i] = from[i];
}

unsigned
emu_cluster_size(void)
{
	return clu_n;
}

int
emu_cluster_slot(unsigned rank)
{
	return rank < clu_n ? clu_slot[my_slot][rank] : -1;
}

int
emu_cluster_rank(unsigned s)
{
	for (unsigned r = 0; r < clu_n; r++)
		if (clu_slot[my_slot][r] == (int)s)
			return (int)r;
	return -1;
}

unsigned
emu_cluster_waited(void)
{
	return my_cwaited;
}

/* an access now is ordered before the threads that waited for this many
 * completions: the next one, or the one after when this thread already
 * arrived at the next (its arrival released only what came before) */
unsigned
emu_cluster_q(void)
{
	return my_cwaited + 1 + (my_carrived ? 1 : 0);
}

int
emu_remote_touch(unsigned s, const char *what)
{
	pthread_mutex_lock(&clu_mu);
	if (cta_gone[s]) {
		pthread_mutex_unlock(&clu_mu);
		emu_fail("memcheck: %s into the shared memory of cluster CTA rank %d, which has "
		         "exited (end the kernel with a cluster barrier)", what, emu_cluster_rank(s));
		return 0;
	}
	unsigned q = emu_cluster_q();
	if (q > remote_q[s])
		remote_q[s] = q, remote_what[s] = what;
	pthread_mutex_unlock(&clu_mu);
	return 1;
}

/* the last thread of a CTA leaves: every peer's access into its shared
 * memory must be ordered before by a cluster barrier it waited for */
static void
cluster_cta_exit(void)
{
	pthread_mutex_lock(&clu_mu);
	if (++cta_left[my_slot] == nthreads_of[my_slot]) {
		cta_gone[my_slot] = 1;
		if (remote_q[my_slot] > my_cwaited)
			emu_fail("memcheck: a peer's %s into this CTA's shared memory is not ordered "
			         "before the CTA's exit by a cluster barrier (%u waited for, %u needed): "
			         "the peer may touch it after the CTA has gone", remote_what[my_slot],
			         my_cwaited, remote_q[my_slot]);
	}
	pthread_mutex_unlock(&clu_mu);
}

void
precc_emu_cluster_arrive(uint32_t site)
{
	CBar *c = &cbar[clu_slot[my_slot][0]];
	pthread_mutex_lock(&c->mu);
	if (my_carrived) {
		emu_fail("synccheck: barrier.cluster.arrive twice with no barrier.cluster.wait between");
		pthread_mutex_unlock(&c->mu);
		return;
	}
	my_carrived = 1;
	my_cgen = c->gen;
	if (c->bad) {
		pthread_mutex_unlock(&c->mu);
		return;
	}
	if (c->arrived == 0)
		c->site = (int)site;
	else if ((int)site != c->site) {
		emu_fail("synccheck: divergent barrier.cluster: threads of the cluster arrive at call "
		         "sites %d and %u", c->site, site);
		c->bad = 1;
		cbar_release_all();
		pthread_cond_broadcast(&c->cv);
		pthread_mutex_unlock(&c->mu);
		return;
	}
	if (c->vc_pend && my_vc)
		emu_vc_release(c->vc_pend);
	if (++c->arrived + c->exited == c->n) {
		if (c->exited) {
			emu_fail("synccheck: barrier.cluster reached by %d of the cluster's %d threads (the "
			         "others left the kernel)", c->arrived, c->n);
			c->bad = 1;
		}
		c->arrived = 0;
		c->gen++;
		cbar_release_all();
		for (unsigned r = 0; r < clu_n; r++)
			c->ep[r] = __atomic_add_fetch(&epoch_clock[clu_slot[my_slot][r]], 1, __ATOMIC_RELAXED);
		if (c->vc_pend) {
			memcpy(c->vc_done, c->vc_pend, emu_vc_n * sizeof *c->vc_done);
			memset(c->vc_pend, 0, emu_vc_n * sizeof *c->vc_pend);
		}
		pthread_cond_broadcast(&c->cv);
	}
	pthread_mutex_unlock(&c->mu);
}

void
precc_emu_cluster_wait(void)
{
	CBar *c = &cbar[clu_slot[my_slot][0]];
	pthread_mutex_lock(&c->mu);
	if (!my_carrived) {
		emu_fail("synccheck: barrier.cluster.wait with no barrier.cluster.arrive before it");
		pthread_mutex_unlock(&c->mu);
		return;
	}
	if (c->gen == my_cgen && !c->bad)
		__atomic_add_fetch(&cwaiting[my_slot], 1, __ATOMIC_RELAXED);
	/* a cluster barrier that nothing completes (a GPU hangs) is reported
	 * after 60 s and broken, as emu_tma.c's mbarrier waits are */
	struct timespec t0;
	clock_gettime(CLOCK_REALTIME, &t0);
	while (c->gen == my_cgen && !c->bad) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		if (ts.tv_sec - t0.tv_sec > 60) {
			emu_fail("synccheck: barrier.cluster: deadlock: %d of the cluster's %d threads arrived, "
			         "%d left the kernel, in 60 s", c->arrived, c->n, c->exited);
			c->bad = 1;
			cbar_release_all();
			pthread_cond_broadcast(&c->cv);
			break;
		}
		ts.tv_nsec += 50 * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000L)
			ts.tv_sec++, ts.tv_nsec -= 1000000000L;
		pthread_cond_timedwait(&c->cv, &c->mu, &ts);
	}
	if (!c->bad) {
		my_epoch = c->ep[clu_rank[my_slot]];
		if (c->vc_done && my_vc)
			emu_vc_acquire(c->vc_done);
	}
	my_carrived = 0;
	my_cwaited++;
	pthread_mutex_unlock(&c->mu);
}

static void
cbar_exit(void)
{
	CBar *c = &cbar[clu_slot[my_slot][0]];
	pthread_mutex_lock(&c->mu);
	if (my_carrived) {
		emu_fail("synccheck: thread leaves after barrier.cluster.arrive without its "
		         "barrier.cluster.wait");
		if (c->gen == my_cgen && !c->bad)
			c->arrived--;
	}
	if (++c->exited < c->n && c->arrived && c->arrived + c->exited == c->n && !c->bad) {
		emu_fail("synccheck: barrier.cluster reached by %d of the cluster's %d threads (the "
		         "others left the kernel)", c->arrived, c->n);
		c->bad = 1;
		cbar_release_all();
		pthread_cond_broadcast(&c->cv);
	}
	pthread_mutex_unlock(&c->mu);
	my_carrived = my_cwaited = 0;
}

/* mapa.shared::cluster: the same byte of the shared memory of CTA `rank`
 * of the cluster */
void *
precc_emu_mapa(void *p, uint32_t rank)
{
	uintptr_t u = (uintptr_t)p, s0 = (uintptr_t)smem;
	if (u < s0 || u >= s0 + sizeof smem || emu_cluster_rank((unsigned)((u - s0) / SLOT_BYTES)) < 0) {
		emu_fail("mapa: %p is not in the shared memory of this cluster", p);
		return p;
	}
	if (rank >= clu_n) {
		emu_fail("mapa: CTA rank %u outside the cluster of %u", rank, clu_n);
		return p;
	}
	return &smem[clu_slot[my_slot][rank]][(u - s0) % SLOT_BYTES];
}

/* racecheck by vector clocks (a launch with emu_vc_n: clusters, and
 * test_emu's sm_90a GEMMs): per 16 bytes of a slot, the mbarrier phase
 * its last TMA write completes, and the clock of each thread that read it
 * since its last write (TMA or st.shared). A write (emu_async_write, or a
 * generic store: chunk_write) must know every such read through the
 * barriers, mbarrier arrivals and bar.warp.syncs between: a read by lane
 * 5 of a warp whose lane 0 alone arrived on the stage's empty barrier is
 * not known to the producer (PTX ISA, "Memory Consistency Model": a
 * release orders the releasing thread's own accesses; CUDA's __syncwarp
 * orders the lanes' among themselves) */
enum { CHUNK = 16, NCHUNK = SLOT_BYTES / CHUNK };
typedef struct Chunk {
	int16_t bar1;               /* 1 + the mbarrier's index; 0: no TMA write */
	uint32_t phase;
	uint32_t *rc;               /* emu_vc_n: a thread's clock at its last read; 0: none */
	uint16_t *rg;               /* the threads with rc set, nr of them */
	uint32_t nr;
} Chunk;
static Chunk *chunk_[NSLOT];
static pthread_mutex_t chunk_mu[64] = {[0 ... 63] = PTHREAD_MUTEX_INITIALIZER};

static void
async_read(unsigned s, uint64_t off, uint64_t n)
{
	int told = 0;
	for (uint64_t ci = off / CHUNK; ci <= (off + n - 1) / CHUNK; ci++) {
		Chunk *k = &chunk_[s][ci];
		pthread_mutex_lock(&chunk_mu[ci % 64]);
		if (k->bar1 && !told &&
		    my_vc[emu_vc_threads + (unsigned)emu_cluster_rank(s) * EMU_MAXBAR + (unsigned)(k->bar1 - 1)] <= k->phase) {
			emu_fail("racecheck: load of shared byte %llu, which a TMA copy wrote for phase "
			         "%u of mbarrier %d that this thread is not ordered after (no wait for it, "
			         "nor for anything after it; a stage overwritten before its readers "
			         "released it?)",
			         (unsigned long long)(ci * CHUNK), k->phase, k->bar1 - 1);
			told = 1;
		}
		if (!k->rc && (!(k->rc = calloc(emu_vc_n, sizeof *k->rc)) ||
		               !(k->rg = malloc(emu_vc_n * sizeof *k->rg))))
			abort();
		if (!k->rc[my_gid])
			k->rg[k->nr++] = (uint16_t)my_gid;
		k->rc[my_gid] = my_vc[my_gid];
		pthread_mutex_unlock(&chunk_mu[ci % 64]);
	}
}

/* a write of [off, off + n) of slot s by this thread (what: "TMA write",
 * "store"): every read since the chunk's last write must be known to it.
 * bar >= 0: a TMA write completing that mbarrier's phase. */
static void
chunk_write(unsigned s, uint64_t off, uint64_t n, int bar, uint32_t phase, const char *what)
{
	int told = 0;
	unsigned threads = emu_vc_threads / clu_n;
	for (uint64_t ci = off / CHUNK; ci <= (off + n - 1) / CHUNK; ci++) {
		Chunk *k = &chunk_[s][ci];
		pthread_mutex_lock(&chunk_mu[ci % 64]);
		for (uint32_t i = 0; i < k->nr; i++) {
			unsigned g = k->rg[i];
			if (!told && g != my_gid && my_vc[g] < k->rc[g]) {
				emu_fail("racecheck: %s into shared byte %llu of cluster CTA rank %d, which "
				         "thread %u of CTA rank %u read with nothing since that orders its read "
				         "before this write (%s)", what, (unsigned long long)(ci * CHUNK),
				         emu_cluster_rank(s), g % threads, g / threads,
				         bar >= 0 ? "the stage's readers did not release it to the producer: "
				                    "its empty barrier, from every reading lane or after a "
				                    "bar.warp.sync"
				                  : "no barrier, mbarrier or bar.warp.sync between");
				told = 1;
			}
			k->rc[g] = 0;
		}
		k->nr = 0;
		if (bar >= 0) {
			k->bar1 = (int16_t)(bar + 1);
			k->phase = phase;
		}
		pthread_mutex_unlock(&chunk_mu[ci % 64]);
	}
}

void
emu_async_write(void *p, uint64_t n, int bar, uint32_t phase)
{
	uintptr_t u = (uintptr_t)p, s0 = (uintptr_t)smem;
	if (!emu_vc_n || !n || u < s0 || u >= s0 + sizeof smem)
		return;
	chunk_write((unsigned)((u - s0) / SLOT_BYTES), (u - s0) % SLOT_BYTES, n, bar, phase, "TMA write");
}

static void
chunks_free(unsigned s)
{
	for (uint64_t ci = 0; chunk_[s] && ci < NCHUNK; ci++) {
		free(chunk_[s][ci].rc);
		free(chunk_[s][ci].rg);
	}
}

static void
slot_reset(unsigned s, int threads)
{
	nthreads_of[s] = threads;
	bar_init(&cta_bar[s], threads, "bar.sync");
	epoch_clock[s] = 0;
	cta_bar[s].clock = &epoch_clock[s];
	memset(named_owner[s], 0, sizeof named_owner[s]);
	for (int w = 0; w < threads / 32; w++)
	{
		bar_init(&warp_bar[s][w], 32, "warp collective (shfl.sync, mma.sync)");
		bar_init(&wsync_bar[s][w], 32, "bar.warp.sync");
	}
	for (int g = 0; g < threads / 128; g++) {
		bar_init(&wg_bar[s][g], 128, "warpgroup collective (wgmma, setmaxnreg, bar.sync id, 128)");
		wg_bar[s][g].clock = &epoch_clock[s];
	}
	emu_wgmma_reset(s);
	emu_tma_reset(s);
	cta_left[s] = cta_gone[s] = cwaiting[s] = 0;
	remote_q[s] = 0;
	remote_what[s] = NULL;
	if (clu_rank[s] == 0) {
		CBar *c = &cbar[s];
		pthread_mutex_init(&c->mu, NULL);
		pthread_cond_init(&c->cv, NULL);
		c->n = threads * (int)clu_n;
		c->arrived = c->exited = c->site = c->bad = 0;
		c->gen = 0;
		c->vc_pend = emu_vc_n ? calloc(emu_vc_n, sizeof *c->vc_pend) : NULL;
		c->vc_done = emu_vc_n ? calloc(emu_vc_n, sizeof *c->vc_done) : NULL;
	}
	if (emu_vc_n) {
		bar_vc(&cta_bar[s]);
		for (int w = 0; w < threads / 32; w++)
			bar_vc(&wsync_bar[s][w]);
		for (int g = 0; g < threads / 128; g++)
			bar_vc(&wg_bar[s][g]);
		if (!chunk_[s] && !(chunk_[s] = calloc(NCHUNK, sizeof *chunk_[s])))
			abort();
		chunks_free(s);
		memset(chunk_[s], 0, NCHUNK * sizeof *chunk_[s]);
	}
	for (int id = 0; id < NSHARED; id++) {
		memset(SHW(s, id), 0, smem_used[s][id] * sizeof SHW(s, id)[0]);
		memset(SHR(s, id), 0, smem_used[s][id] * sizeof SHR(s, id)[0]);
		memset(INFL(s, id), 0, smem_used[s][id] * sizeof INFL(s, id)[0]);
		memset(UNF(s, id), 0, smem_used[s][id]);
		/* a CTA's shared memory starts undefined on a GPU */
		memset(SM(s, id), 0xa5, smem_used[s][id]);
		smem_bytes[s][id] = smem_used[s][id] = 0;
	}
}

/* ---- shared-memory bank conflicts ------------------------------------------ */
/* One thread's shared access: its site (emu_instrument's count of the
 * access instructions), the how-many-th time the thread ran it, the byte
 * in the CTA's shared memory and the size. */
typedef struct SAcc {
	uint32_t tid, site, inst;
	uint32_t off;
	uint8_t size;
} SAcc;
enum { MAXSITE = 4096,
       SITE_STSM = MAXSITE - 1 };   /* stmatrix's rows: one site for them all (each lane
                                       runs every stmatrix of its warp, in order) */
static __thread uint32_t site_n[MAXSITE];
static __thread SAcc *tlog;
static __thread size_t tlog_n, tlog_cap;
static SAcc *slog[NSLOT];
static size_t slog_n[NSLOT], slog_cap[NSLOT];
static pthread_mutex_t slog_mu = PTHREAD_MUTEX_INITIALIZER;

static void
smem_log(uint32_t site, uint64_t off, uint64_t size)
{
	if (site >= MAXSITE || size > 16)
		return;
	if (tlog_n == tlog_cap) {
		tlog_cap = tlog_cap ? 2 * tlog_cap : 1024;
		tlog = realloc(tlog, tlog_cap * sizeof *tlog);
		if (!tlog)
			abort();
	}
	tlog[tlog_n++] = (SAcc){my_tid, site, site_n[site]++, (uint32_t)off, (uint8_t)size};
}

/* The thread is done: its log joins its CTA's. */
static void
smem_log_flush(void)
{
	pthread_mutex_lock(&slog_mu);
	size_t n = slog_n[my_slot] + tlog_n;
	if (n > slog_cap[my_slot]) {
		slog_cap[my_slot] = n + n / 2;
		slog[my_slot] = realloc(slog[my_slot], slog_cap[my_slot] * sizeof *slog[0]);
		if (!slog[my_slot])
			abort();
	}
	if (tlog_n)
		memcpy(slog[my_slot] + slog_n[my_slot], tlog, tlog_n * sizeof *tlog);
	slog_n[my_slot] = n;
	pthread_mutex_unlock(&slog_mu);
	tlog_n = 0;
	memset(site_n, 0, sizeof site_n);
}

static int
sacc_cmp(const void *a, const void *b)
{
	const SAcc *x = a, *y = b;
	uint32_t wx = x->tid / 32, wy = y->tid / 32;

	if (wx != wy)
		return wx < wy ? -1 : 1;
	if (x->site != y->site)
		return x->site < y->site ? -1 : 1;
	if (x->inst != y->inst)
		return x->inst < y->inst ? -1 : 1;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

/* The wavefronts of one warp instruction: per phase, the most distinct
 * 4-byte words in any one bank. */
static void
smem_instr(const SAcc *a, size_t n)
{
	int lanes = a[0].size <= 4 ? 32 : a[0].size == 8 ? 16 : 8;
	long waves = 0, phases = 0;

	for (int ph = 0; ph < 32 / lanes; ph++) {
		uint32_t word[32][32];
		int nw[32] = {0}, any = 0, most = 0;
		for (size_t i = 0; i < n; i++) {
			int lane = (int)(a[i].tid % 32);
			if (lane / lanes != ph)
				continue;
			any = 1;
			for (uint32_t w = a[i].off / 4; w <= (a[i].off + a[i].size - 1) / 4; w++) {
				int bk = (int)(w % 32), seen = 0;
				for (int j = 0; j < nw[bk]; j++)
					seen |= word[bk][j] == w;
				if (!seen && nw[bk] < 32)
					word[bk][nw[bk]++] = w;
			}
		}
		for (int bk = 0; bk < 32; bk++)
			most = nw[bk] > most ? nw[bk] : most;
		waves += most;
		phases += any;
	}
	__atomic_add_fetch(&smem_instrs, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&smem_waves, waves, __ATOMIC_RELAXED);
	__atomic_add_fetch(&smem_extra, waves - phases, __ATOMIC_RELAXED);
	if (waves > phases)
		__atomic_add_fetch(&smem_conflicted, 1, __ATOMIC_RELAXED);

}

static void
smem_analyse(unsigned s)
{
	SAcc *a = slog[s];
	size_t n = slog_n[s];

	if (!n)      /* a CTA that touched no shared memory (no log: qsort of NULL) */
		return;
	qsort(a, n, sizeof *a, sacc_cmp);
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;
		while (j < n && a[j].tid / 32 == a[i].tid / 32 && a[j].site == a[i].site
		       && a[j].inst == a[i].inst)
			j++;
		smem_instr(a + i, j - i);
		i = j;
	}
	slog_n[s] = 0;
}

void
emu_smem_stats(long *instrs, long *waves, long *extra, long *conflicted)
{
	*instrs = __atomic_load_n(&smem_instrs, __ATOMIC_RELAXED);
	*waves = __atomic_load_n(&smem_waves, __ATOMIC_RELAXED);
	*extra = __atomic_load_n(&smem_extra, __ATOMIC_RELAXED);
	*conflicted = __atomic_load_n(&smem_conflicted, __ATOMIC_RELAXED);
}

static void
slot_destroy(unsigned s, int threads)
{
	smem_analyse(s);
	bar_destroy(&cta_bar[s]);
	if (clu_rank[s] == 0) {
		pthread_mutex_destroy(&cbar[s].mu);
		pthread_cond_destroy(&cbar[s].cv);
		free(cbar[s].vc_pend);
		free(cbar[s].vc_done);
		cbar[s].vc_pend = cbar[s].vc_done = NULL;
	}
	for (int w = 0; w < threads / 32; w++) {
		bar_destroy(&warp_bar[s][w]);
		bar_destroy(&wsync_bar[s][w]);
	}
	for (int g = 0; g < threads / 128; g++)
		bar_destroy(&wg_bar[s][g]);
}

/* ---- the intrinsics ------------------------------------------------------ */
static unsigned launch_gx;   /* nctaid.x */

unsigned
emu_ctaid_x(void)
{
	return my_cx;
}

/* tid.x, ctaid.x, ctaid.y, nctaid.x, cluster_ctarank, cluster_nctarank,
 * clusterid.x, clusterid.y, cluster_ctaid.x, cluster_ctaid.y (codegen/emit.c's
 * order) */
uint32_t
precc_emu_sreg(uint32_t which)
{
	switch (which) {
	case 0: return my_tid;
	case 1: return my_cx;
	case 2: return my_cy;
	case 3: return launch_gx;
	case 4: return (uint32_t)clu_rank[my_slot];
	case 5: return clu_n;
	case 6: return my_cx / clu_x;
	case 7: return my_cy / clu_y;
	case 8: return my_cx % clu_x;
	case 9: return my_cy % clu_y;
	}
	emu_abort("an unknown special register");
	return 0;
}

/* shfl.sync.bfly.b32 d, a, b, c, membermask as the PTX ISA defines it
 * ("Data Movement: shfl.sync"): j = lane ^ b, valid when j <= maxLane with
 * maxLane = (lane & segmask) | (c[4:0] & ~segmask), segmask = c[12:8];
 * an invalid j reads the thread's own a. Every thread of a shuffle must
 * be in membermask, and so must the lane it reads; the warp-wide
 * rendezvous below needs the whole warp, so a partial mask is refused. */
uint32_t
precc_emu_shfl_bfly(uint32_t member, uint32_t v, uint32_t b, uint32_t c)
{
	unsigned w = my_tid / 32, base = w * 32, lane = my_tid % 32;
	unsigned seg = c >> 8 & 31, maxl = (lane & seg) | (c & 31 & ~seg);
	unsigned j = lane ^ (b & 31);

	if (member != 0xffffffffu)
		emu_abort("shfl.sync with a partial membermask (not emulated)");
	if (j > maxl)
		j = lane;
	xchg[my_slot][my_tid] = v;
	bar_wait(&warp_bar[my_slot][w], -1);
	uint32_t r = xchg[my_slot][base + j];
	bar_wait(&warp_bar[my_slot][w], -1);
	return r;
}

/* bar.sync 0 at call site `site` (codegen numbers them in host mode) */
void
precc_emu_barrier(uint32_t site)
{
	if (bar_wait(&cta_bar[my_slot], (int)site) == 0)
		my_epoch = __atomic_load_n(&cta_bar[my_slot].epoch, __ATOMIC_RELAXED);
}

/* bar.warp.sync -1: all 32 lanes meet (synccheck: a lane that left the
 * kernel or waits elsewhere), and order their accesses (vector clocks) */
void
precc_emu_warp_sync(void)
{
	bar_wait(&wsync_bar[my_slot][my_tid / 32], -1);
}

/* bar.sync id, count (PTX ISA, "bar.sync"; CUTLASS's NamedBarrier::sync):
 * modelled for count 128 with the 128 threads of one warpgroup, the one
 * use codegen has (the sm_90a GEMM's epilogue, per consumer warpgroup),
 * at the warpgroup's barrier (a wgmma collective or another id there is
 * divergence). An id that two warpgroups use would, on the GPU, complete
 * with any 128 of their threads: a failure here. */
enum { SITE_NAMED = 1 << 20 };

void
precc_emu_bar_named(uint32_t id, uint32_t count)
{
	unsigned g = my_tid / 128;
	if (id == 0 || id >= 16 || count != 128 || g >= (unsigned)(nthreads_of[my_slot] / 128)) {
		emu_fail("synccheck: bar.sync %u, %u: the emulator models named barriers 1..15 of "
		         "the 128 threads of one warpgroup only", id, count);
		return;
	}
	unsigned want = 0;
	if (!__atomic_compare_exchange_n(&named_owner[my_slot][id], &want, g + 1, 0, __ATOMIC_RELAXED,
	                                 __ATOMIC_RELAXED) && want != g + 1) {
		emu_fail("synccheck: named barrier %u used by warpgroups %u and %u (128 threads: it "
		         "would complete with threads of both)", id, want - 1, g);
		return;
	}
	if (bar_wait(&wg_bar[my_slot][g], SITE_NAMED + (int)id) == 0)
		my_epoch = __atomic_load_n(&wg_bar[my_slot][g].epoch, __ATOMIC_RELAXED);
}

void *
precc_emu_shared(uint32_t id, uint64_t bytes)
{
	if (id >= NSHARED)
		emu_abort("more shared arrays than the emulator holds");
	if (bytes > EMU_SMEM_STATIC && !(id == 0 && bytes <= dyn_smem)) {
		emu_fail("shared array %u of %llu bytes: over the %d bytes of static shared memory "
		         "a CTA may have (%llu of dynamic shared memory declared for array 0)", id,
		         (unsigned long long)bytes, EMU_SMEM_STATIC, (unsigned long long)dyn_smem);
		return sink;
	}
	if (bytes > arr_at[id + 1] - arr_at[id]) {
		emu_fail("shared array %u of %llu bytes: over the emulator's %u for it", id,
		         (unsigned long long)bytes, arr_at[id + 1] - arr_at[id]);
		return sink;
	}
	smem_bytes[my_slot][id] = bytes;
	if (bytes > smem_used[my_slot][id])
		smem_used[my_slot][id] = bytes;
	/* ptxas and the driver count the CTA's static arrays together */
	uint64_t total = 0;
	for (int i = 0; i < NSHARED; i++)
		if (!(i == 0 && dyn_smem))
			total += smem_bytes[my_slot][i];
	if (total > EMU_SMEM_STATIC) {
		emu_fail("static shared arrays of %llu bytes in all (array %u of %llu the last): over "
		         "the %d bytes a CTA may have", (unsigned long long)total, id,
		         (unsigned long long)bytes, EMU_SMEM_STATIC);
		return sink;
	}
	/* the launch: dynamic shared memory starts after the static arrays,
	 * at its own alignment (1024 for the sm_90a GEMM's swizzled ring), and
	 * both together fit the opt-in limit (cuFuncSetAttribute's
	 * MAX_DYNAMIC_SHARED_SIZE_BYTES fails above 227 KiB less the static) */
	if (dyn_smem && total && (total + 1023) / 1024 * 1024 + dyn_smem > EMU_SMEM_ARRAY0) {
		emu_fail("%llu bytes of dynamic shared memory after %llu of static (aligned to 1024): "
		         "over the %d bytes a CTA may have", (unsigned long long)dyn_smem,
		         (unsigned long long)total, EMU_SMEM_ARRAY0);
		return sink;
	}
	return SM(my_slot, id);
}

void
precc_emu_yield(void)
{
	sched_yield();
}

/* ---- cvt: the asm_table rows, read from the PTX text ------------------- */
/* "cvt.RND[.satfinite].DSTx2.SRC $0, $A, $B;" packs operand A in the upper
 * half and B in the lower one (PTX ISA, cvt: "d = {a, b}" with a in the
 * upper bits). The emulator takes formats, saturation and operand order
 * from the string, so a changed string changes what runs. */
typedef struct Cvt {
	int ok;
	precc_format dst, src;
	int sat, hi_arg, lo_arg;   /* operand numbers: $1 and $2 are the call's */
} Cvt;
static Cvt cvt_row[64];

static int
fmt_name(const char *s, size_t n, precc_format *f)
{
	static const struct { const char *n; precc_format f; } t[] = {
		{"e4m3", PRECC_E4M3}, {"e5m2", PRECC_E5M2}, {"bf16", PRECC_BF16},
		{"f16", PRECC_FP16}, {"f32", PRECC_FP32},
	};
	for (size_t i = 0; i < sizeof t / sizeof *t; i++)
		if (strlen(t[i].n) == n && !strncmp(s, t[i].n, n)) {
			*f = t[i].f;
			return 0;
		}
	return -1;
}

void
emu_init(void)
{
	for (int r = 0; r < asm_table_len && r < 64; r++) {
		const char *p = asm_table[r].ptx, *sp = strchr(p, ' ');
		char mn[96], *save = NULL;
		Cvt c = {0};
		if (strncmp(p, "cvt.", 4) || !sp || (size_t)(sp - p) >= sizeof mn)
			continue;
		memcpy(mn, p, (size_t)(sp - p));
		mn[sp - p] = 0;
		/* fields: cvt rnd [satfinite] dst src */
		char *f[6];
		int nf = 0;
		for (char *t = strtok_r(mn, ".", &save); t && nf < 6; t = strtok_r(NULL, ".", &save))
			f[nf++] = t;
		int i = 2;
		if (nf < 4 || strcmp(f[1], "rn"))
			continue;
		if (i < nf && !strcmp(f[i], "satfinite"))
			c.sat = 1, i++;
		if (nf - i != 2)
			continue;
		size_t ld = strlen(f[i]), ls = strlen(f[i + 1]);
		int dx2 = ld > 2 && !strcmp(f[i] + ld - 2, "x2"), sx2 = ls > 2 && !strcmp(f[i + 1] + ls - 2, "x2");
		if (!dx2 || fmt_name(f[i], ld - 2, &c.dst)
		    || fmt_name(f[i + 1], sx2 ? ls - 2 : ls, &c.src))
			continue;
		int a = -1, b = -1;
		if (sx2 ? sscanf(sp, " $0, $%d;", &a) != 1 : sscanf(sp, " $0, $%d, $%d;", &a, &b) != 2)
			continue;
		c.hi_arg = a, c.lo_arg = b;
		c.ok = 1;
		cvt_row[r] = c;
	}
}

static const Cvt *
cvt_of(uint32_t row, int nargs)
{
	const Cvt *c = row < 64 ? &cvt_row[row] : NULL;
	int two = nargs == 2;
	if (!c || !c->ok || (c->src == PRECC_FP32) != two
	    || (two && !((c->hi_arg == 1 && c->lo_arg == 2) || (c->hi_arg == 2 && c->lo_arg == 1)))
	    || (!two && c->hi_arg != 1))
		emu_abort("an asm_table row the emulator cannot read as a cvt");
	return c;
}

/* two floats -> a packed pair (fp8x2 in 16 bits, 16-bit x2 in 32) */
static uint32_t
cvt_pack(uint32_t row, float x1, float x2)
{
	const Cvt *c = cvt_of(row, 2);
	float hi = c->hi_arg == 1 ? x1 : x2, lo = c->hi_arg == 1 ? x2 : x1;
	unsigned bits = (unsigned)precc_interp_elem_bytes(c->dst) * 8;
	return precc_encode(c->dst, hi, PRECC_RNE, c->sat, 0) << bits
	       | precc_encode(c->dst, lo, PRECC_RNE, c->sat, 0);
}

uint16_t
precc_emu_asm2_16(uint32_t row, float x1, float x2)
{
	if (emu_break == 1 && my_tid == 7 && my_cx == 1)
		return 0x5555;
	if (precc_interp_elem_bytes(cvt_of(row, 2)->dst) != 1)
		emu_abort("a 16-bit result from a cvt that packs 32");
	return (uint16_t)cvt_pack(row, x1, x2);
}

uint32_t
precc_emu_asm2_32(uint32_t row, float x1, float x2)
{
	if (precc_interp_elem_bytes(cvt_of(row, 2)->dst) != 2)
		emu_abort("a 32-bit result from a cvt that packs 16");
	return cvt_pack(row, x1, x2);
}

/* fp8x2 -> f16x2: the code in the low byte to the low half */
uint32_t
precc_emu_asm1_32(uint32_t row, uint16_t codes)
{
	const Cvt *c = cvt_of(row, 1);
	if (c->dst != PRECC_FP16 || precc_interp_elem_bytes(c->src) != 1)
		emu_abort("an fp8 decode row that is not f16x2 from fp8x2");
	uint32_t lo = precc_encode(PRECC_FP16, precc_decode(c->src, codes & 0xff), PRECC_RNE, false, 0);
	uint32_t hi = precc_encode(PRECC_FP16, precc_decode(c->src, codes >> 8), PRECC_RNE, false, 0);
	return hi << 16 | lo;
}

/* ---- mma.sync (asm_table rows 7..12) ------------------------------------ */
/* every lane posts its fragments, then computes its own four results from
 * the whole warp's, each a dot product in ascending k with one fp32
 * multiply and one fp32 add per term (never FMA; -std=c17 keeps
 * contraction off). */
static uint32_t mma_slot[NSLOT][32][32][10];

static float
mma_elem(precc_format f, uint32_t word, int pos)
{
	if (f == PRECC_E4M3 || f == PRECC_E5M2)
		return precc_decode(f, word >> (8 * pos) & 0xff);
	return precc_decode(f, word >> (16 * pos) & 0xffff);
}

void
precc_emu_mma(uint32_t row, uint32_t *r)
{
	static const precc_format fa[] = {PRECC_E4M3, PRECC_E4M3, PRECC_E5M2, PRECC_E5M2, PRECC_BF16, PRECC_FP16};
	static const precc_format fb[] = {PRECC_E4M3, PRECC_E5M2, PRECC_E4M3, PRECC_E5M2, PRECC_BF16, PRECC_FP16};
	unsigned w = my_tid / 32, lane = my_tid % 32;
	Bar *wb = &warp_bar[my_slot][w];
	uint32_t (*sl)[10] = mma_slot[my_slot][w];
	int x = (int)row - 7, e = x < 4 ? 4 : 2;
	float d[4];

	if (x < 0 || x > 5)
		emu_abort("an asm_table row that is not an mma");
	memcpy(sl[lane], r, sizeof sl[lane]);
	bar_wait(wb, -1);
	for (int v = 0; v < 4; v++) {
		int i = (int)(lane / 4) + 8 * (v >> 1), j = (int)(lane % 4) * 2 + (v & 1);
		int l, rg, ps;
		float acc;
		memcpy(&acc, &sl[lane][6 + v], 4);
		for (int k = 0; k < 8 * e; k++) {
			mma_frag_a(e, i, k, &l, &rg, &ps);
			float a = mma_elem(fa[x], sl[l][rg], ps);
			mma_frag_b(e, j, k, &l, &rg, &ps);
			float bv = mma_elem(fb[x], sl[l][4 + rg], ps);
			float p = a * bv;
			if (emu_break == 2 && k == 8 * e - 1)
				p = 0;     /* self-test: one product lost */
			acc = acc + p;
		}
		d[v] = acc;
	}
	bar_wait(wb, -1);
	memcpy(&r[6], d, sizeof d);
}

/* ---- memcheck and racecheck ----------------------------------------------- */
typedef struct Region {
	uintptr_t lo, hi;
	int writable;
	const char *name;
} Region;
static Region region[80];
static int nregion;

void
emu_reset(void)
{
	nregion = 0;
	dyn_smem = 0;
	clu_on = clu_np = 0;
	clu_x = clu_y = 1;
	__atomic_store_n(&ldsm_conflicts, 0, __ATOMIC_RELAXED);
	smem_instrs = smem_waves = smem_extra = smem_conflicted = 0;
	pthread_mutex_lock(&err_mu);
	nerr = 0;
	first_err[0] = 0;
	pthread_mutex_unlock(&err_mu);
}

void
emu_region(const void *p, size_t bytes, int writable, const char *name)
{
	if (nregion < (int)(sizeof region / sizeof *region))
		region[nregion++] = (Region){(uintptr_t)p, (uintptr_t)p + bytes, writable, name};
}

enum { CK_STORE = 1, CK_ATOMIC = 2, CK_SITE_SHIFT = 8 /* the access site above */ };
/* per thread and shared array, the bytes [lo, hi) its stores since its
 * last fence.proxy.async may have left unfenced (what the fence scans) */
static __thread uint64_t unf_lo[NSHARED] = {UINT64_MAX, UINT64_MAX, UINT64_MAX}, unf_hi[NSHARED];

static void
race(unsigned s, unsigned id, uint64_t off, uint64_t size, int store)
{
	uint32_t ep = (my_epoch + 1) << TIDBITS, tag = ep | my_tid;

	for (uint64_t i = off; i < off + size; i++) {
		uint32_t *w = &SHW(s, id)[i], *r = &SHR(s, id)[i];
		uint32_t ow = store ? __atomic_exchange_n(w, tag, __ATOMIC_RELAXED)
		                    : __atomic_load_n(w, __ATOMIC_RELAXED);
		uint32_t orr = __atomic_load_n(r, __ATOMIC_RELAXED);
		if ((ow & ~(uint32_t)MULTI) == ep && (ow & MULTI) != my_tid) {
			emu_fail("racecheck: %s of shared array %u byte %llu after thread %u's store, "
			         "no barrier between", store ? "store" : "load", id,
			         (unsigned long long)i, ow & MULTI);
			return;
		}
		if (store && (orr & ~(uint32_t)MULTI) == ep && (orr & MULTI) != my_tid) {
			if ((orr & MULTI) == MULTI)
				emu_fail("racecheck: store to shared array %u byte %llu that other threads "
				         "read, no barrier between", id, (unsigned long long)i);
			else
				emu_fail("racecheck: store to shared array %u byte %llu after thread %u's "
				         "load, no barrier between", id, (unsigned long long)i, orr & MULTI);
			return;
		}
		if (!store)
			__atomic_store_n(r, (orr & ~(uint32_t)MULTI) == ep && (orr & MULTI) != my_tid
			                    ? ep | MULTI : tag, __ATOMIC_RELAXED);
	}
}

void *
precc_emu_check(void *p, uint64_t size, uint32_t align, uint32_t flags)
{
	uintptr_t u = (uintptr_t)p;
	const char *op = flags & CK_ATOMIC ? "atomic" : flags & CK_STORE ? "store" : "load";

	if (size > sizeof sink)
		emu_abort("an access wider than the sink");
	if (align > 1 && u % align) {
		const char *in = "an address";
		unsigned long long at = (unsigned long long)u;
		for (int i = 0; i < nregion; i++)
			if (u >= region[i].lo && u < region[i].hi)
				in = region[i].name, at = (unsigned long long)(u - region[i].lo);
		emu_fail("memcheck: misaligned %llu-byte %s at byte %llu of %%%s (%u-byte alignment "
		         "claimed)", (unsigned long long)size, op, at, in, align);
		return sink;
	}
	uintptr_t s0 = (uintptr_t)smem, s1 = (uintptr_t)smem + sizeof smem;
	if (u >= s0 && u < s1) {
		unsigned s, id;
		uint64_t off;
		slot_loc(u - s0, &s, &id, &off);
		int peer = s != my_slot ? emu_cluster_rank(s) : -1;
		if (s != my_slot && peer < 0) {
			emu_fail("memcheck: %s of the shared memory of a CTA outside this cluster", op);
			return sink;
		}
		if (peer >= 0) {
			/* shared::cluster (an address from mapa): memcheck, no racecheck */
			if (off + size > smem_bytes[s][id]) {
				emu_fail("memcheck: %llu-byte %s at byte %llu of cluster CTA rank %d's shared "
				         "array %u of %llu bytes", (unsigned long long)size, op,
				         (unsigned long long)off, peer, id, (unsigned long long)smem_bytes[s][id]);
				return sink;
			}
			return emu_remote_touch(s, flags & CK_ATOMIC ? "atom.shared::cluster" : flags & CK_STORE
			                        ? "st.shared::cluster" : "ld.shared::cluster") ? p : sink;
		}
		if (off + size > smem_bytes[s][id]) {
			emu_fail("memcheck: %llu-byte %s at byte %llu of shared array %u of %llu bytes",
			         (unsigned long long)size, op, (unsigned long long)off, id,
			         (unsigned long long)smem_bytes[s][id]);
			return sink;
		}
		for (uint64_t i = off; i < off + size; i++)
			if (INFL(s, id)[i]) {
				unsigned v = INFL(s, id)[i];
				if (v & BULK_READ) {
					if (!(flags & (CK_STORE | CK_ATOMIC)))
						continue;     /* reading what a TMA store reads */
					emu_fail("racecheck: %s to shared array %u byte %llu while thread %u's TMA store "
					         "still reads it (no cp.async.bulk.wait_group.read for its group)", op, id,
					         (unsigned long long)i, (v & ~(unsigned)BULK_READ) - 1u);
					return sink;
				}
				emu_fail("racecheck: %s of shared array %u byte %llu while thread %u's cp.async "
				         "to it is in flight (no cp.async.wait_group for its group)", op, id,
				         (unsigned long long)i, v - 1u);
				return sink;
			}
		if (emu_vc_n && !(flags & (CK_STORE | CK_ATOMIC)))
			async_read(s, arr_at[id] + off, size);
		else if (emu_vc_n && !(flags & CK_ATOMIC))
			chunk_write(s, arr_at[id] + off, size, -1, 0, "store");
		if (!(flags & CK_ATOMIC)) {
			race(s, id, off, size, flags & CK_STORE);
			smem_log(flags >> CK_SITE_SHIFT, (uint64_t)(u - s0) % SLOT_BYTES, size);
		}
		if (flags & (CK_STORE | CK_ATOMIC)) {
			memset(&UNF(s, id)[off], 1, size);
			if (unf_lo[id] > off)
				unf_lo[id] = off;
			if (unf_hi[id] < off + size)
				unf_hi[id] = off + size;
		}
		return p;
	}
	for (int i = 0; i < nregion; i++) {
		const Region *r = &region[i];
		if (u < r->lo || u >= r->hi)
			continue;
		if (u + size > r->hi) {
			emu_fail("memcheck: %llu-byte %s at byte %llu of %%%s (%llu bytes): past its end",
			         (unsigned long long)size, op, (unsigned long long)(u - r->lo), r->name,
			         (unsigned long long)(r->hi - r->lo));
			return sink;
		}
		if ((flags & (CK_STORE | CK_ATOMIC)) && !r->writable) {
			emu_fail("memcheck: %s into input %%%s", op, r->name);
			return sink;
		}
		return p;
	}
	const Region *near = NULL;
	for (int i = 0; i < nregion; i++)
		if (u >= region[i].hi && (!near || region[i].hi > near->hi))
			near = &region[i];
	if (near && u - near->hi < (1u << 20))
		emu_fail("memcheck: %llu-byte %s %llu bytes past the end of %%%s (%llu bytes)",
		         (unsigned long long)size, op, (unsigned long long)(u - near->hi), near->name,
		         (unsigned long long)(near->hi - near->lo));
	else
		emu_fail("memcheck: %llu-byte %s at %p, in no buffer", (unsigned long long)size, op, p);
	return sink;
}

int
emu_cta_threads(void)
{
	return nthreads_of[my_slot];
}

/* racecheck's epochs across an mbarrier (emu_tma.c): a phase's completion
 * takes the CTA clock's next value; a thread whose wait sees the phase
 * complete takes it as its epoch, as bar.sync's waiters take the
 * barrier's, so the accesses of the phase's arrivers before their
 * arrival (each tagged with its own earlier epoch) are ordered before the
 * waiter's after its wait */
unsigned
emu_epoch_next(void)
{
	return __atomic_add_fetch(&epoch_clock[my_slot], 1, __ATOMIC_RELAXED);
}

unsigned
emu_epoch_next_at(unsigned s)
{
	return __atomic_add_fetch(&epoch_clock[s], 1, __ATOMIC_RELAXED);
}

void
emu_epoch_take(unsigned e)
{
	my_epoch = e;
}

void
emu_shared_async(void *p, uint64_t n)
{
	unsigned s, id;
	uint64_t off;
	if (!shared_loc((uintptr_t)p, &s, &id, &off))
		return;
	memset(&SHW(s, id)[off], 0, n * sizeof shadow_w[0][0]);
	memset(&SHR(s, id)[off], 0, n * sizeof shadow_r[0][0]);
	memset(&UNF(s, id)[off], 0, n);
}

/* fence.proxy.async by this thread: its stores so far are the async
 * proxy's to see */
void
emu_shared_fence_async(void)
{
	unsigned s = my_slot;
	for (unsigned id = 0; id < NSHARED; id++) {
		uint64_t hi = unf_hi[id] < smem_used[s][id] ? unf_hi[id] : smem_used[s][id];
		for (uint64_t i = unf_lo[id]; i < hi; i++)
			if (UNF(s, id)[i] && (SHW(s, id)[i] & MULTI) == my_tid)
				UNF(s, id)[i] = 0;
		unf_lo[id] = UINT64_MAX, unf_hi[id] = 0;
	}
}

/* Whether any of the n bytes at p holds a store no fence.proxy.async of
 * its thread has ordered yet: 1, the thread and the byte's offset. */
int
emu_shared_unfenced(const void *p, uint64_t n, unsigned *thread, uint64_t *at)
{
	unsigned s, id;
	uint64_t off;
	if (!shared_loc((uintptr_t)p, &s, &id, &off))
		return 0;
	for (uint64_t i = off; i < off + n; i++)
		if (UNF(s, id)[i]) {
			*thread = SHW(s, id)[i] & MULTI;
			*at = i;
			return 1;
		}
	return 0;
}

/* The n bytes at p are (on) or are no longer (!on) read by this thread's
 * TMA store. */
void
emu_shared_bulk_read(const void *p, uint64_t n, int on)
{
	unsigned s, id;
	uint64_t off;
	if (!shared_loc((uintptr_t)p, &s, &id, &off))
		return;
	for (uint64_t i = off; i < off + n; i++)
		INFL(s, id)[i] = on ? (uint16_t)(BULK_READ | (my_tid + 1)) : 0;
}

/* The bytes of this CTA's shared memory: its first byte, its size, and the
 * declared size of array id (emu_int.h). */
uint8_t *
emu_smem_base(uint64_t *size)
{
	*size = sizeof smem[0];
	return (uint8_t *)smem[my_slot];
}

uint64_t
emu_smem_declared(unsigned id)
{
	return id < NSHARED ? smem_bytes[my_slot][id] : 0;
}

uint64_t
emu_smem_declared_at(unsigned s, unsigned id)
{
	return id < NSHARED ? smem_bytes[s][id] : 0;
}

/* Whether u is in the emulated shared memory: its slot, array and offset. */
int
shared_loc(uintptr_t u, unsigned *s, unsigned *id, uint64_t *off)
{
	uintptr_t s0 = (uintptr_t)smem, s1 = (uintptr_t)smem + sizeof smem;
	if (u < s0 || u >= s1)
		return 0;
	slot_loc(u - s0, s, id, off);
	return 1;
}

/* ---- cp.async: per thread, the copies issued and not yet complete ------- */
enum { MAXCP = 64 };
typedef struct Cp {
	unsigned s, id, group;
	uint64_t off;
	uint8_t data[16];
} Cp;
static __thread Cp cpq[MAXCP];
static __thread int ncp;
static __thread unsigned cp_groups;   /* groups committed so far */

void
precc_emu_cp_async(void *dst, const void *src, uint32_t src_size)
{
	unsigned s, id;
	uint64_t off;
	uintptr_t u = (uintptr_t)dst;

	if (src_size > 16) {
		emu_fail("cp.async: src-size %u is more than the 16 bytes copied", src_size);
		return;
	}
	if (!shared_loc(u, &s, &id, &off) || s != my_slot) {
		emu_fail("memcheck: cp.async destination %p not in this CTA's shared memory", dst);
		return;
	}
	if (u % 16) {
		emu_fail("memcheck: misaligned cp.async destination at byte %llu of shared array %u "
		         "(16-byte alignment required)", (unsigned long long)off, id);
		return;
	}
	if (off + 16 > smem_bytes[s][id]) {
		emu_fail("memcheck: 16-byte cp.async at byte %llu of shared array %u of %llu bytes",
		         (unsigned long long)off, id, (unsigned long long)smem_bytes[s][id]);
		return;
	}
	unsigned s2, id2;
	uint64_t off2;
	if (src_size && shared_loc((uintptr_t)src, &s2, &id2, &off2)) {
		emu_fail("memcheck: cp.async.shared.global from shared memory");
		return;
	}
	if (ncp == MAXCP)
		emu_abort("more cp.async in flight than the emulator holds");
	Cp *c = &cpq[ncp];
	memset(c->data, 0, sizeof c->data);
	if (src_size) {
		/* cp-size 16: the source is 16-byte aligned too */
		const void *q = precc_emu_check((void *)src, src_size, 16, 0);
		memcpy(c->data, q, src_size);
	}
	for (uint64_t i = off; i < off + 16; i++)
		if (INFL(s, id)[i]) {
			emu_fail("racecheck: cp.async to shared array %u byte %llu while thread %u's "
			         "cp.async to it is in flight", id, (unsigned long long)i, INFL(s, id)[i] - 1u);
			return;
		}
	/* and no other thread may be reading or writing it in this epoch */
	race(s, id, off, 16, 1);
	for (uint64_t i = off; i < off + 16; i++)
		INFL(s, id)[i] = (uint16_t)(my_tid + 1);
	c->s = s, c->id = id, c->off = off, c->group = cp_groups;
	ncp++;
}

void
precc_emu_cp_commit(void)
{
	cp_groups++;
}

/* complete the copies of every committed group but the n most recent */
void
precc_emu_cp_wait(uint32_t n)
{
	int kept = 0;

	if (emu_break == 3)
		return;        /* self-test: the wait_group is missing */
	for (int i = 0; i < ncp; i++) {
		Cp *c = &cpq[i];
		if (c->group + n >= cp_groups) {
			cpq[kept++] = *c;
			continue;
		}
		for (uint64_t b = c->off; b < c->off + 16; b++)
			INFL(c->s, c->id)[b] = 0;
		memcpy(&SM(c->s, c->id)[c->off], c->data, 16);
		race(c->s, c->id, c->off, 16, 1);
	}
	ncp = kept;
}

/* a thread leaves with copies in flight: they are dropped */
static void
cp_drop(void)
{
	for (int i = 0; i < ncp; i++)
		for (uint64_t b = cpq[i].off; b < cpq[i].off + 16; b++)
			INFL(cpq[i].s, cpq[i].id)[b] = 0;
	ncp = 0;
	cp_groups = 0;
}

/* ---- ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16 ----------------- */
static const uint8_t *ldsm_row[NSLOT][32][32];
static uintptr_t ldsm_addr[NSLOT][32][32];

long
emu_ldsm_conflicts(void)
{
	return __atomic_load_n(&ldsm_conflicts, __ATOMIC_RELAXED);
}

/* Lanes 8i..8i+7 address the 8 rows (16 bytes each) of matrix i. Without
 * .trans lane l gets in register i bytes 4(l%4)..+3 of row l/4; with
 * .trans the b16 elements l/4 of rows 2(l%4) (low half) and 2(l%4)+1. */
void
precc_emu_ldmatrix(uint32_t trans, void *row, uint32_t *out)
{
	unsigned w = my_tid / 32, lane = my_tid % 32, s, id;
	uint64_t off;
	uintptr_t u = (uintptr_t)row;
	const uint8_t *q = sink;

	if (emu_break == 4 && lane == 5)
		u += 4;        /* self-test: one lane's row misaligned */
	if (!shared_loc(u, &s, &id, &off) || s != my_slot)
		emu_fail("memcheck: ldmatrix row address %p not in this CTA's shared memory", (void *)u);
	else if (u % 16)
		emu_fail("memcheck: misaligned ldmatrix row address at byte %llu of shared array %u "
		         "(lane %u; 16-byte alignment required)", (unsigned long long)off, id, lane);
	else
		q = precc_emu_check((void *)u, 16, 16, 0);
	ldsm_row[my_slot][w][lane] = q;
	ldsm_addr[my_slot][w][lane] = u;
	Bar *wb = &warp_bar[my_slot][w];
	bar_wait(wb, -1);
	const uint8_t *const *r = ldsm_row[my_slot][w];
	for (int i = 0; i < 4; i++) {
		uint32_t v = 0;
		if (!trans)
			memcpy(&v, r[8 * i + lane / 4] + 4 * (lane % 4), 4);
		else
			for (int h = 0; h < 2; h++) {
				uint16_t x;
				memcpy(&x, r[8 * i + 2 * (lane % 4) + h] + 2 * (lane / 4), 2);
				v |= (uint32_t)x << (16 * h);
			}
		out[i] = v;
	}
	if (lane == 0)
		for (int i = 0; i < 4; i++) {
			/* one phase per matrix: 8 rows of 16 bytes, conflict-free when
			 * they cover the 32 banks (8 groups of 4) once */
			unsigned seen = 0;
			for (int j = 0; j < 8; j++)
				seen |= 1u << (ldsm_addr[my_slot][w][8 * i + j] / 16 % 8);
			if (seen != 0xff)
				__atomic_add_fetch(&ldsm_conflicts, 1, __ATOMIC_RELAXED);
		}
	bar_wait(wb, -1);
}

/* stmatrix.sync.aligned.m8n8.x4{.trans}.shared.b16 [row], {r0, r1, r2, r3}
 * (PTX ISA 8.x, "Warp-level matrix store instruction: stmatrix"): four
 * 8 x 8 matrices of b16, lane 8i + j naming the 16-byte row j of matrix
 * i; register i of lane l holds matrix i's elements (l/4, 2(l%4)) and
 * (l/4, 2(l%4) + 1), low half first (the ldmatrix fragment); .trans stores
 * element (r, c) at row c, column r. Each lane writes its row (memcheck,
 * racecheck: a store of 16 bytes), gathered from the warp's registers. */
static uint32_t stsm_val[NSLOT][32][32][4];

void
precc_emu_stmatrix(uint32_t trans, void *row, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3)
{
	unsigned w = my_tid / 32, lane = my_tid % 32, s, id;
	uint64_t off;
	uintptr_t u = (uintptr_t)row;
	uint8_t *q = sink;

	if (!shared_loc(u, &s, &id, &off) || s != my_slot)
		emu_fail("memcheck: stmatrix row address %p not in this CTA's shared memory", (void *)u);
	else if (u % 16)
		emu_fail("memcheck: misaligned stmatrix row address at byte %llu of shared array %u "
		         "(lane %u; 16-byte alignment required)", (unsigned long long)off, id, lane);
	else
		q = precc_emu_check((void *)u, 16, 16, CK_STORE | SITE_STSM << CK_SITE_SHIFT);
	uint32_t *v = stsm_val[my_slot][w][lane];
	v[0] = r0, v[1] = r1, v[2] = r2, v[3] = r3;
	Bar *wb = &warp_bar[my_slot][w];
	bar_wait(wb, -1);
	unsigned i = lane / 8, j = lane % 8;
	uint8_t out[16];
	for (unsigned c = 0; c < 8; c++) {
		/* element (j, c) of the stored matrix: fragment element (j, c),
		 * or (c, j) transposed */
		unsigned fr = trans ? c : j, fc = trans ? j : c;
		uint32_t x = stsm_val[my_slot][w][4 * fr + fc / 2][i] >> (16 * (fc % 2));
		out[2 * c] = (uint8_t)x, out[2 * c + 1] = (uint8_t)(x >> 8);
	}
	memcpy(q, out, 16);
	bar_wait(wb, -1);
}

/* Whether address p is the function's own stack (an alloca, through GEPs). */
static int
on_stack(LLVMValueRef p)
{
	for (int d = 0; d < 64 && p; d++) {
		if (LLVMIsAAllocaInst(p))
			return 1;
		if (!LLVMIsAGetElementPtrInst(p) && !LLVMIsABitCastInst(p))
			return 0;
		p = LLVMGetOperand(p, 0);
	}
	return 0;
}

static uint64_t
type_bytes(LLVMTypeRef t)
{
	switch (LLVMGetTypeKind(t)) {
	case LLVMIntegerTypeKind: return (LLVMGetIntTypeWidth(t) + 7) / 8;
	case LLVMHalfTypeKind: case LLVMBFloatTypeKind: return 2;
	case LLVMFloatTypeKind: return 4;
	case LLVMDoubleTypeKind: case LLVMPointerTypeKind: return 8;
	case LLVMVectorTypeKind: return LLVMGetVectorSize(t) * type_bytes(LLVMGetElementType(t));
	case LLVMArrayTypeKind: return LLVMGetArrayLength2(t) * type_bytes(LLVMGetElementType(t));
	default: emu_abort("an access of a type the checker cannot size"); return 0;
	}
}

void
emu_instrument(LLVMModuleRef mod, LLVMValueRef fn)
{
	LLVMContextRef cx = LLVMGetModuleContext(mod);
	LLVMTypeRef pt = LLVMPointerTypeInContext(cx, 0), i64 = LLVMInt64TypeInContext(cx);
	LLVMTypeRef i32 = LLVMInt32TypeInContext(cx);
	LLVMTypeRef ft = LLVMFunctionType(pt, (LLVMTypeRef[]){pt, i64, i32, i32}, 4, 0);
	LLVMValueRef ck = LLVMGetNamedFunction(mod, "precc_emu_check");
	LLVMBuilderRef b = LLVMCreateBuilderInContext(cx);
	unsigned site = 0;

	if (!ck)
		ck = LLVMAddFunction(mod, "precc_emu_check", ft);
	for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb))
		for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in)) {
			LLVMOpcode op = LLVMGetInstructionOpcode(in);
			unsigned pi;
			LLVMTypeRef vt;
			unsigned flags = 0, align = 0;
			if (op == LLVMLoad)
				pi = 0, vt = LLVMTypeOf(in), align = LLVMGetAlignment(in);
			else if (op == LLVMStore)
				pi = 1, vt = LLVMTypeOf(LLVMGetOperand(in, 0)), flags = CK_STORE,
				align = LLVMGetAlignment(in);
			else if (op == LLVMAtomicRMW)
				pi = 0, vt = LLVMTypeOf(LLVMGetOperand(in, 1)), flags = CK_ATOMIC;
			else if (op == LLVMAtomicCmpXchg)
				pi = 0, vt = LLVMTypeOf(LLVMGetOperand(in, 1)), flags = CK_ATOMIC;
			else
				continue;
			LLVMValueRef p = LLVMGetOperand(in, pi);
			if (on_stack(p))
				continue;
			uint64_t size = type_bytes(vt);
			if (flags & CK_ATOMIC)
				align = (unsigned)size;     /* atomics are naturally aligned */
			LLVMPositionBuilderBefore(b, in);
			flags |= site++ << CK_SITE_SHIFT;    /* which instruction, for bank conflicts */
			LLVMValueRef a[4] = {p, LLVMConstInt(i64, size, 0), LLVMConstInt(i32, align, 0),
			                     LLVMConstInt(i32, flags, 0)};
			LLVMSetOperand(in, pi, LLVMBuildCall2(b, ft, ck, a, 4, ""));
		}
	LLVMDisposeBuilder(b);
}

/* The GPU's NaN: fp32 arithmetic (add, sub, mul, div, fma, sqrt, and the
 * f64 -> f32 cvt) returns the canonical NaN 0x7fffffff whatever NaN went
 * in, where x86 keeps the input's payload (or makes 0xffc00000): seen on
 * an H200 (tests/gpu/lease.sh, 2026-12-04), where a scale_inv of a NaN
 * amax came back 0x7fffffff against the host's 0x7fc00000. Every such f32
 * result of fn gets select(isnan(r), 0x7fffffff, r). */
void
emu_gpu_nan(LLVMModuleRef mod, LLVMValueRef fn)
{
	LLVMContextRef cx = LLVMGetModuleContext(mod);
	LLVMTypeRef f32 = LLVMFloatTypeInContext(cx), i32 = LLVMInt32TypeInContext(cx);
	LLVMBuilderRef b = LLVMCreateBuilderInContext(cx);
	LLVMValueRef canon = LLVMConstBitCast(LLVMConstInt(i32, 0x7fffffff, 0), f32);

	for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb))
		for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in)) {
			LLVMOpcode op = LLVMGetInstructionOpcode(in);
			int arith = op == LLVMFAdd || op == LLVMFSub || op == LLVMFMul || op == LLVMFDiv ||
			            op == LLVMFRem || op == LLVMFPTrunc;
			if (op == LLVMCall) {
				LLVMValueRef callee = LLVMGetCalledValue(in);
				size_t n;
				const char *nm = callee ? LLVMGetValueName2(callee, &n) : "";
				arith = !strncmp(nm, "llvm.fma.", 9) || !strncmp(nm, "llvm.fmuladd.", 13) ||
				        !strncmp(nm, "llvm.sqrt.", 10);
			}
			if (!arith || LLVMTypeOf(in) != f32)
				continue;
			LLVMValueRef next = LLVMGetNextInstruction(in);
			LLVMPositionBuilderBefore(b, next);
			LLVMValueRef isn = LLVMBuildFCmp(b, LLVMRealUNO, in, in, "");
			LLVMValueRef sel = LLVMBuildSelect(b, isn, canon, in, "");
			LLVMReplaceAllUsesWith(in, sel);
			LLVMSetOperand(isn, 0, in);
			LLVMSetOperand(isn, 1, in);
			LLVMSetOperand(sel, 2, in);
			in = sel;
		}
	LLVMDisposeBuilder(b);
}

/* ---- launches -------------------------------------------------------------- */
static void (*entry)(void **);
static void **entry_args;
static int nthreads, quit;
static unsigned cur_cx, cur_cy;
static pthread_barrier_t start_bar, end_bar;

static void
leave(void)
{
	cp_drop();
	emu_wgmma_leave();
	emu_tma_leave();
	bar_exit(&warp_bar[my_slot][my_tid / 32]);
	bar_exit(&wsync_bar[my_slot][my_tid / 32]);
	if (my_tid / 128 < (unsigned)(nthreads_of[my_slot] / 128))
		bar_exit(&wg_bar[my_slot][my_tid / 128]);
	bar_exit(&cta_bar[my_slot]);
	cluster_cta_exit();
	cbar_exit();
	free(my_vc);
	my_vc = NULL;
}

static void *
worker(void *arg)
{
	my_tid = (unsigned)(uintptr_t)arg;
	my_slot = SEQ;
	for (;;) {
		pthread_barrier_wait(&start_bar);
		if (quit) {
			free(tlog);
			tlog = NULL;
			tlog_cap = 0;
			return NULL;
		}
		my_cx = cur_cx, my_cy = cur_cy, my_epoch = 0;
		entry(entry_args);
		leave();
		smem_log_flush();
		pthread_barrier_wait(&end_bar);
	}
}

typedef struct CoopArg {
	unsigned tid, cta, cx, cy, threads;
} CoopArg;

static void *
coop_worker(void *arg)
{
	const CoopArg *a = arg;
	my_tid = a->tid;
	my_slot = a->cta;
	my_cx = a->cx;
	my_cy = a->cy;
	my_epoch = 0;
	my_gid = (unsigned)clu_rank[my_slot] * a->threads + my_tid;
	if (emu_vc_n) {
		if (!(my_vc = calloc(emu_vc_n, sizeof *my_vc)))
			abort();
		my_vc[my_gid] = 1;
	}
	entry(entry_args);
	leave();
	smem_log_flush();
	free(tlog);
	tlog = NULL;
	tlog_cap = 0;
	return NULL;
}

int
emu_launch(void (*fn)(void **), void **args, int threads, unsigned gx, unsigned gy, int coop)
{
	pthread_attr_t at;

	if (threads < 32 || threads > MAXTHREADS || threads % 32)
		return -1;
	entry = fn;
	entry_args = args;
	launch_gx = gx;
	/* the cluster: its checks, the ranks of the CTAs (emu_set_cluster) */
	emu_vc_n = emu_vc_threads = 0;
	if (!clu_on)
		clu_x = clu_y = 1;
	clu_n = clu_x * clu_y;
	if (clu_on) {
		unsigned most = clu_np ? 16 : 8;
		if (clu_x < 1 || clu_y < 1 || clu_n > most) {
			emu_fail("launch: a cluster of %u x %u CTAs: over the %u a cluster may have%s", clu_x,
			         clu_y, most, clu_np ? "" : " (16 with the non-portable cluster size opt-in)");
			return -1;
		}
		if (gx % clu_x || gy % clu_y) {
			emu_fail("launch: grid %u x %u is not a multiple of the cluster %u x %u", gx, gy, clu_x,
			         clu_y);
			return -1;
		}
		if (gx * gy > MAXCOOP)
			return -1;
		coop = 1;   /* a cluster's CTAs are co-scheduled: run them all at once */
		emu_vc_threads = clu_n * (unsigned)threads;
		emu_vc_n = emu_vc_threads + clu_n * EMU_MAXBAR;
	}
	clu_rank[SEQ] = 0;
	clu_slot[SEQ][0] = SEQ;
	if (coop && gx * gy <= MAXCOOP)
		for (unsigned c = 0; c < gx * gy; c++) {
			unsigned cx = c % gx, cy = c / gx, bx = cx - cx % clu_x, by = cy - cy % clu_y;
			clu_rank[c] = (int)(cx % clu_x + cy % clu_y * clu_x);
			for (unsigned r = 0; r < clu_n; r++)
				clu_slot[c][r] = (int)(bx + r % clu_x + (by + r / clu_x) * gx);
		}
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, 256 * 1024);
	if (coop) {
		/* every CTA resident at once, as cuLaunchCooperativeKernel guarantees */
		unsigned n = gx * gy, total = n * (unsigned)threads;
		if (n > MAXCOOP)
			return -1;
		pthread_t *th = calloc(total, sizeof *th);
		CoopArg *ca = calloc(total, sizeof *ca);
		if (!th || !ca)
			abort();
		for (unsigned c = 0; c < n; c++)
			slot_reset(c, threads);
		for (unsigned i = 0; i < total; i++) {
			unsigned c = i / (unsigned)threads;
			ca[i] = (CoopArg){i % (unsigned)threads, c, c % gx, c / gx, (unsigned)threads};
			pthread_create(&th[i], &at, coop_worker, &ca[i]);
		}
		for (unsigned i = 0; i < total; i++)
			pthread_join(th[i], NULL);
		for (unsigned c = 0; c < n; c++)
			slot_destroy(c, threads);
		free(th);
		free(ca);
	} else {
		pthread_t th[MAXTHREADS];
		nthreads = threads;
		quit = 0;
		pthread_barrier_init(&start_bar, NULL, (unsigned)threads + 1);
		pthread_barrier_init(&end_bar, NULL, (unsigned)threads + 1);
		for (int i = 0; i < threads; i++)
			pthread_create(&th[i], &at, worker, (void *)(uintptr_t)i);
		for (cur_cy = 0; cur_cy < gy; cur_cy++)
			for (cur_cx = 0; cur_cx < gx; cur_cx++) {
				slot_reset(SEQ, threads);
				pthread_barrier_wait(&start_bar);
				pthread_barrier_wait(&end_bar);
				slot_destroy(SEQ, threads);
			}
		quit = 1;
		pthread_barrier_wait(&start_bar);
		for (int i = 0; i < threads; i++)
			pthread_join(th[i], NULL);
		pthread_barrier_destroy(&start_bar);
		pthread_barrier_destroy(&end_bar);
	}
	pthread_attr_destroy(&at);
	return 0;
}

const char *const emu_fns[] = {
	"precc_emu_sreg", "precc_emu_shfl_bfly", "precc_emu_barrier", "precc_emu_asm2_16",
	"precc_emu_asm2_32", "precc_emu_asm1_32", "precc_emu_yield", "precc_emu_shared",
	"precc_emu_mma", "precc_emu_check", "precc_emu_cp_async", "precc_emu_cp_commit",
	"precc_emu_cp_wait", "precc_emu_ldmatrix", "precc_emu_wgmma_fence", "precc_emu_wgmma_commit",
	"precc_emu_wgmma_wait", "precc_emu_wgmma", "precc_emu_setmaxnreg",
	"precc_emu_mbar_init", "precc_emu_fence_mbar_init", "precc_emu_fence_proxy_async",
	"precc_emu_mbar_arrive", "precc_emu_mbar_arrive_expect_tx", "precc_emu_mbar_try_wait",
	"precc_emu_tma_load_2d", "precc_emu_tma_store_2d", "precc_emu_bulk_commit",
	"precc_emu_bulk_wait_read", "precc_emu_stmatrix", "precc_emu_bar_named",
	"precc_emu_cluster_arrive", "precc_emu_cluster_wait", "precc_emu_mapa",
	"precc_emu_mbar_arrive_cluster", "precc_emu_tma_load_2d_mc", "precc_emu_warp_sync",
};
void *const emu_addr[] = {
	(void *)precc_emu_sreg, (void *)precc_emu_shfl_bfly, (void *)precc_emu_barrier,
	(void *)precc_emu_asm2_16, (void *)precc_emu_asm2_32, (void *)precc_emu_asm1_32,
	(void *)precc_emu_yield, (void *)precc_emu_shared, (void *)precc_emu_mma,
	(void *)precc_emu_check, (void *)precc_emu_cp_async, (void *)precc_emu_cp_commit,
	(void *)precc_emu_cp_wait, (void *)precc_emu_ldmatrix, (void *)precc_emu_wgmma_fence,
	(void *)precc_emu_wgmma_commit, (void *)precc_emu_wgmma_wait, (void *)precc_emu_wgmma,
	(void *)precc_emu_setmaxnreg,
	(void *)precc_emu_mbar_init, (void *)precc_emu_fence_mbar_init,
	(void *)precc_emu_fence_proxy_async, (void *)precc_emu_mbar_arrive,
	(void *)precc_emu_mbar_arrive_expect_tx, (void *)precc_emu_mbar_try_wait,
	(void *)precc_emu_tma_load_2d, (void *)precc_emu_tma_store_2d,
	(void *)precc_emu_bulk_commit, (void *)precc_emu_bulk_wait_read, (void *)precc_emu_stmatrix,
	(void *)precc_emu_bar_named,
	(void *)precc_emu_cluster_arrive, (void *)precc_emu_cluster_wait, (void *)precc_emu_mapa,
	(void *)precc_emu_mbar_arrive_cluster, (void *)precc_emu_tma_load_2d_mc,
	(void *)precc_emu_warp_sync,
};
const int emu_nfns = sizeof emu_fns / sizeof *emu_fns;
