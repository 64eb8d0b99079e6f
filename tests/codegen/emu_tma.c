/*
 * emu_tma.c — the emulated GPU's mbarrier and TMA (host ABI: docs/codegen.md,
 * "The sm_90a host ABI"), beside emu.c.
 *
 * mbarrier (PTX ISA, "Parallel Synchronization and Communication
 * Instructions: mbarrier"): an object of 8 bytes of shared memory with a
 * phase, a pending arrival count and a transaction count. init sets the
 * expected count; arrive decrements the pending count; expect_tx adds to
 * the transaction count and complete_tx (a TMA copy finishing) takes from
 * it; the phase completes when both are zero, and the next one starts
 * with the expected count. try_wait.parity P is true once the phase of
 * parity P has completed, that is while the current phase's parity is not
 * P (so a fresh barrier is "complete" for parity 1: CUTLASS's
 * PipelineTmaAsync starts its producer that way). The state lives in a
 * table beside shared memory, keyed by address; the 8 bytes themselves
 * are the GPU's business.
 *
 * A wait that is not yet true blocks the thread (a GPU spins); when every
 * thread of the CTA still running is blocked in a wait, nothing can ever
 * arrive: a deadlock, reported with the barrier and its phase, after
 * which the waits return true so that the run ends and reports.
 *
 * TMA (cp.async.bulk.tensor.2d, tile mode): the box at (c0, c1) of a
 * tensor map (emu_tmap_encode's host format) is read from global memory
 * (memcheck on every row), out-of-bounds elements as zero, and written to
 * shared memory at once in the map's swizzle, CuTe's Swizzle<B,4,3> on the
 * byte offset (B = 3, 2, 1 for 128, 64, 32 bytes: NVIDIA/cutlass
 * include/cute/atom/mma_traits_sm90_gmma.hpp, Layout_K_SW128_Atom and
 * kin; the 16-byte chunk c of the row r of an 8-row atom goes to chunk
 * c ^ (r % 8) for 128B). Its bytes then complete as transactions on the
 * barrier. A store writes the box back, the elements inside the tensor
 * only. Checks: destination in this CTA's shared memory, 128-byte aligned
 * (the ISA) and aligned to the swizzle atom (8 rows of the span: CUTLASS's
 * make_gmma_desc asserts it), the box within the declared array; the map's
 * global address and row stride 16-byte multiples, the box's inner bytes
 * a 16-byte multiple within the swizzle span (cuTensorMapEncodeTiled's
 * rules).
 *
 * Race checking: a TMA write is the async proxy's, not a thread's, so the
 * bytes it writes start clean in racecheck's shadow (emu_shared_async).
 * A phase's completion is an epoch of racecheck's (emu.c's
 * emu_epoch_take): a thread's st.shared before its arrive is ordered
 * before the loads of a thread that waited for that phase (the sm_90a
 * GEMM's producer warp writes each stage's scales so, and the e2m1
 * producer warpgroup its stage's codes and scales). The arriver takes the
 * phase's epoch at its arrival (allocated when the previous phase
 * completed), so its accesses after its arrival and before its next
 * barrier or wait race with the waiters' (a store moved past the
 * arrival is caught whichever thread runs first).
 * A thread that reads a stage before its wait is not caught by racecheck;
 * the data it reads is then the 0xa5 of fresh shared memory or an older
 * stage, which the comparison with the interpreter catches.
 */
#include <stdatomic.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "codegen.h"
#include "emu.h"
#include "emu_int.h"

/* ---- the tensor map's host format ------------------------------------------ */
typedef struct Tmap {
	char magic[8];            /* "precctma" */
	const uint8_t *base;
	uint64_t dim[2];          /* elements: inner (columns), outer (rows) */
	uint64_t stride;          /* bytes from one row to the next */
	uint32_t box[2];          /* elements: inner, outer */
	uint32_t ebytes, swizzle; /* bytes per element; 0, 32, 64, 128 */
} Tmap;
_Static_assert(sizeof(Tmap) <= 128, "a tensor map is 128 bytes");

int
emu_tmap_encode(void *out, const CodegenTmap *t, const void *base, long m, char *err, size_t n)
{
	Tmap x;
	long rows = t->rows < 0 ? m : t->rows, cols = t->cols < 0 ? m : t->cols;

	memset(out, 0, 128);
	if ((uintptr_t)out % 64)
		return snprintf(err, n, "tensor map not 64-byte aligned"), -1;
	if (rows < 1 || cols < 1)
		return snprintf(err, n, "a %ldx%ld tensor map (M = %ld)", rows, cols, m), -1;
	if ((uintptr_t)base % 16 || (cols * t->elem_bytes) % 16)
		return snprintf(err, n, "global address or row stride (%ld bytes) not a multiple of 16",
		                cols * t->elem_bytes), -1;
	if (t->box_cols <= 0 || t->box_rows <= 0 || t->box_rows > 256 || t->box_cols > 256 ||
	    (t->box_cols * t->elem_bytes) % 16)
		return snprintf(err, n, "box %dx%d: each side 1..256, inner bytes a multiple of 16",
		                t->box_rows, t->box_cols), -1;
	if (t->swizzle && t->box_cols * t->elem_bytes > t->swizzle)
		return snprintf(err, n, "box inner bytes %d over the %d-byte swizzle span",
		                t->box_cols * t->elem_bytes, t->swizzle), -1;
	if (t->swizzle != 0 && t->swizzle != 32 && t->swizzle != 64 && t->swizzle != 128)
		return snprintf(err, n, "swizzle %d", t->swizzle), -1;
	memset(&x, 0, sizeof x);
	memcpy(x.magic, "precctma", 8);
	x.base = base;
	x.dim[0] = (uint64_t)cols;
	x.dim[1] = (uint64_t)rows;
	x.stride = (uint64_t)(cols * t->elem_bytes);
	x.box[0] = (uint32_t)t->box_cols;
	x.box[1] = (uint32_t)t->box_rows;
	x.ebytes = (uint32_t)t->elem_bytes;
	x.swizzle = (uint32_t)t->swizzle;
	memcpy(out, &x, sizeof x);
	return 0;
}

static const Tmap *
tmap_of(const void *p)
{
	const Tmap *t = p;
	if (!p || (uintptr_t)p % 64 || memcmp(t->magic, "precctma", 8)) {
		emu_fail("tma: the tensor map param %p is not one emu_tmap_encode wrote (64-byte aligned)", p);
		return NULL;
	}
	return t;
}

/* byte offset o of a box row-major in shared memory -> where the swizzle
 * puts it: bits 4.. (the 16-byte chunk) xor bits 7.. (the row of the atom) */
static uint64_t
swz(uint64_t o, uint32_t swizzle)
{
	uint64_t mask = swizzle == 128 ? 7 : swizzle == 64 ? 3 : swizzle == 32 ? 1 : 0;
	return o ^ ((o >> 7 & mask) << 4);
}

/* ---- mbarrier ---------------------------------------------------------------- */
enum { MAXBAR = EMU_MAXBAR, TXMAX = (1 << 20) - 1 };
typedef struct Mbar {
	uintptr_t addr;
	uint32_t expected, pending, phase;
	int64_t tx;
	uint64_t arrived[1024 / 64];   /* threads that arrived in this phase */
	unsigned epoch;                /* racecheck: the last completion's epoch */
	/* clusters: the CTA slot holding it, its initializer, whether that
	 * thread's fence.mbarrier_init followed the init, the cluster-barrier
	 * completions a peer must have waited for to use it (emu_cluster_q at
	 * the init), and the vector clocks of the phase's arrivals and of its
	 * last completion (cluster launches) */
	unsigned slot, init_tid, fenced, cinit;
	uint32_t *vc_pend, *vc_done;
	unsigned next;                 /* the epoch this phase's completion takes, which
	                                  each of its arrivers takes at its arrival */
} Mbar;
static Mbar mbar[EMU_NSLOT][MAXBAR];
static int nmbar[EMU_NSLOT], nexit[EMU_NSLOT], broken[EMU_NSLOT];
/* per thread, the wait it is in (NULL: none) */
static struct { Mbar *b; uint32_t parity; } waiting[EMU_NSLOT][1024];

/* whether every thread of the cluster (a peer's remote arrival or
 * multicast may end a wait) that has not left is in a wait that cannot
 * return (mu held), or in a cluster barrier: a thread woken but not yet
 * running is not */
static int
all_blocked(int threads)
{
	int n = 0, total = 0;
	for (unsigned r = 0; r < emu_cluster_size(); r++) {
		int s = emu_cluster_slot(r);
		n += nexit[s] + emu_cluster_waiting((unsigned)s);
		total += threads;
		for (int t = 0; t < threads; t++) {
			Mbar *b = waiting[s][t].b;
			n += b && (b->phase & 1) == (waiting[s][t].parity & 1);
		}
	}
	return n >= total;
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

void
emu_tma_reset(unsigned slot)
{
	pthread_mutex_lock(&mu);
	nmbar[slot] = nexit[slot] = broken[slot] = 0;
	memset(waiting[slot], 0, sizeof waiting[slot]);
	for (int i = 0; i < MAXBAR; i++) {
		free(mbar[slot][i].vc_pend);
		free(mbar[slot][i].vc_done);
		mbar[slot][i].vc_pend = mbar[slot][i].vc_done = NULL;
	}
	pthread_mutex_unlock(&mu);
}

/* a thread leaves the kernel: it will arrive nowhere */
static void stores_at_exit(void);

void
emu_tma_leave(void)
{
	stores_at_exit();
	pthread_mutex_lock(&mu);
	nexit[my_slot]++;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
}

static int
in_my_smem(const void *p, const char *what)
{
	unsigned s, id;
	uint64_t off;
	if (!shared_loc((uintptr_t)p, &s, &id, &off) || s != my_slot) {
		emu_fail("%s %p: not in this CTA's shared memory", what, p);
		return 0;
	}
	return 1;
}

/* the barrier at bar in CTA slot s (mu held); NULL and a failure if none */
static Mbar *
find_at(unsigned s, void *bar, const char *op)
{
	for (int i = 0; i < nmbar[s]; i++)
		if (mbar[s][i].addr == (uintptr_t)bar)
			return &mbar[s][i];
	emu_fail("mbarrier: %s on %p, which no mbarrier.init made a barrier", op, bar);
	return NULL;
}

static Mbar *
find(void *bar, const char *op)
{
	return find_at(my_slot, bar, op);
}

/* a peer's use of barrier b: its init must be published to the cluster
 * (the initializer's fence.mbarrier_init, then a cluster barrier that
 * this thread waited for: PTX ISA, "fence.mbarrier_init"; DeepGEMM's
 * cluster_sync after the barriers' init) */
static int
published(const Mbar *b, const char *op)
{
	if (b->slot == my_slot)
		return 1;
	if (!b->fenced || emu_cluster_waited() < b->cinit) {
		emu_fail("mbarrier: %s on cluster CTA rank %d's barrier %p before its init was published "
		         "to the cluster (%s)", op, emu_cluster_rank(b->slot), (void *)b->addr,
		         !b->fenced ? "no fence.mbarrier_init.release.cluster after it"
		                    : "no cluster barrier between the init and this use");
		return 0;
	}
	return 1;
}

static void
complete(Mbar *b)
{
	if (b->pending == 0 && b->tx == 0) {
		b->phase++;
		b->epoch = b->next;
		b->next = emu_epoch_next_at(b->slot);
		b->pending = b->expected;
		memset(b->arrived, 0, sizeof b->arrived);
		if (b->vc_pend) {
			/* what its arrivals released, and this phase's end (a TMA
			 * write's landing: emu_async_write) */
			memcpy(b->vc_done, b->vc_pend, emu_vc_n * sizeof *b->vc_done);
			memset(b->vc_pend, 0, emu_vc_n * sizeof *b->vc_pend);
			b->vc_done[emu_vc_threads + (unsigned)emu_cluster_rank(b->slot) * MAXBAR +
			           (unsigned)(b - mbar[b->slot])] = b->phase;
		}
		pthread_cond_broadcast(&cv);
	}
}

void
precc_emu_mbar_init(void *bar, uint32_t count)
{
	if (!in_my_smem(bar, "mbarrier.init: barrier"))
		return;
	if ((uintptr_t)bar % 8) {
		emu_fail("mbarrier.init: barrier %p not 8-byte aligned", bar);
		return;
	}
	if (count < 1 || count > TXMAX) {
		emu_fail("mbarrier.init: count %u out of 1..%d", count, TXMAX);
		return;
	}
	pthread_mutex_lock(&mu);
	Mbar *b = NULL;
	for (int i = 0; i < nmbar[my_slot]; i++)
		if (mbar[my_slot][i].addr == (uintptr_t)bar)
			b = &mbar[my_slot][i];
	if (b && (b->pending != b->expected || b->tx))
		emu_fail("mbarrier.init: barrier %p re-initialized in the middle of phase %u "
		         "(%u of %u arrivals pending)", bar, b->phase, b->pending, b->expected);
	if (!b && nmbar[my_slot] == MAXBAR)
		emu_fail("mbarrier.init: more than %d barriers in a CTA (the emulator's limit)", MAXBAR);
	else {
		if (!b)
			b = &mbar[my_slot][nmbar[my_slot]++];
		uint32_t *vp = b->vc_pend, *vd = b->vc_done;
		*b = (Mbar){(uintptr_t)bar, count, count, 0, 0, {0}, 0, my_slot, my_tid, 0,
		            emu_cluster_q(), vp, vd, emu_epoch_next_at(my_slot)};
		if (emu_vc_n && !b->vc_pend) {
			b->vc_pend = calloc(emu_vc_n, sizeof *b->vc_pend);
			b->vc_done = calloc(emu_vc_n, sizeof *b->vc_done);
			if (!b->vc_pend || !b->vc_done)
				abort();
		} else if (b->vc_pend) {
			memset(b->vc_pend, 0, emu_vc_n * sizeof *b->vc_pend);
			memset(b->vc_done, 0, emu_vc_n * sizeof *b->vc_done);
		}
	}
	pthread_mutex_unlock(&mu);
}

/* fence.mbarrier_init.release.cluster: this thread's inits so far may be
 * published to the cluster (by a cluster barrier after it) */
void
precc_emu_fence_mbar_init(void)
{
	pthread_mutex_lock(&mu);
	for (int i = 0; i < nmbar[my_slot]; i++)
		if (mbar[my_slot][i].init_tid == my_tid)
			mbar[my_slot][i].fenced = 1;
	pthread_mutex_unlock(&mu);
}

void
precc_emu_fence_proxy_async(void)
{
	emu_shared_fence_async();
}

static void
arrive_at(unsigned s, void *bar, uint32_t tx, const char *op)
{
	pthread_mutex_lock(&mu);
	Mbar *b = find_at(s, bar, op);
	if (b && s != my_slot) {
		/* a peer's arrival: it releases what its thread did before */
		if (published(b, op)) {
			if (b->vc_pend && my_vc)
				emu_vc_release(b->vc_pend);
			b->pending--;
			complete(b);
		}
	} else if (b) {
		if (b->vc_pend && my_vc)
			emu_vc_release(b->vc_pend);
		b->tx += tx;
		if (b->tx > TXMAX)
			emu_fail("mbarrier: %s: transaction count %lld over %d in phase %u", op,
			         (long long)b->tx, TXMAX, b->phase);
		/* one arrival per thread per phase (no .count operand is emitted): a
		 * second one would be counted into the phase, or the next */
		if (b->arrived[my_tid / 64] >> (my_tid % 64) & 1)
			emu_fail("mbarrier: %s: thread %u arrives twice in phase %u of barrier %p "
			         "(%u arrivals expected)", op, my_tid, b->phase, bar, b->expected);
		b->arrived[my_tid / 64] |= 1ull << (my_tid % 64);
		b->pending--;
		/* the arriver joins the phase's epoch: its st.shared after its
		 * arrival shares an epoch with the waiters' loads (a race), as
		 * its stores before it do not */
		emu_epoch_take(b->next);
		complete(b);
	}
	pthread_mutex_unlock(&mu);
}

static void
arrive(void *bar, uint32_t tx, const char *op)
{
	arrive_at(my_slot, bar, tx, op);
}

/* mbarrier.arrive.release.cluster.shared::cluster.b64 _, [bar]: bar in
 * this CTA or (from mapa) a peer's (DeepGEMM's empty_barrier_arrive to
 * each CTA of the cluster); a peer must not have exited */
void
precc_emu_mbar_arrive_cluster(void *bar)
{
	unsigned s, id;
	uint64_t off;
	if (!shared_loc((uintptr_t)bar, &s, &id, &off) || emu_cluster_rank(s) < 0) {
		emu_fail("mbarrier.arrive.shared::cluster: barrier %p not in this cluster's shared memory",
		         bar);
		return;
	}
	if (s != my_slot && !emu_remote_touch(s, "mbarrier.arrive.shared::cluster"))
		return;
	arrive_at(s, bar, 0, "mbarrier.arrive.shared::cluster");
}

void
precc_emu_mbar_arrive(void *bar)
{
	arrive(bar, 0, "mbarrier.arrive");
}

void
precc_emu_mbar_arrive_expect_tx(void *bar, uint32_t bytes)
{
	arrive(bar, bytes, "mbarrier.arrive.expect_tx");
}

static void
complete_tx_at(unsigned s, void *bar, uint32_t bytes)
{
	pthread_mutex_lock(&mu);
	Mbar *b = find_at(s, bar, "complete_tx of a TMA copy");
	if (b) {
		b->tx -= bytes;
		if (b->tx < -TXMAX)
			emu_fail("mbarrier: transaction count %lld under -%d in phase %u", (long long)b->tx,
			         TXMAX, b->phase);
		complete(b);
	}
	pthread_mutex_unlock(&mu);
}

uint32_t
precc_emu_mbar_try_wait(void *bar, uint32_t parity)
{
	pthread_mutex_lock(&mu);
	Mbar *b = find(bar, "mbarrier.try_wait.parity");
	if (b && (b->phase & 1) == (parity & 1) && !broken[my_slot]) {
		int threads = emu_cta_threads();
		time_t t0 = time(NULL);
		waiting[my_slot][my_tid].b = b;
		waiting[my_slot][my_tid].parity = parity;
		while ((b->phase & 1) == (parity & 1) && !broken[my_slot]) {
			if (all_blocked(threads) || time(NULL) - t0 > 60) {
				emu_fail("mbarrier: deadlock: every running thread of the %s waits (thread %u "
				         "on barrier %p for the end of phase %u, %u of %u arrivals and %lld "
				         "transaction bytes pending)", emu_cluster_size() > 1 ? "cluster" : "CTA",
				         my_tid, bar, b->phase, b->pending, b->expected, (long long)b->tx);
				for (unsigned r = 0; r < emu_cluster_size(); r++)
					broken[emu_cluster_slot(r)] = 1;
				pthread_cond_broadcast(&cv);
				break;
			}
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 50 * 1000 * 1000;
			if (ts.tv_nsec >= 1000000000L)
				ts.tv_sec++, ts.tv_nsec -= 1000000000L;
			pthread_cond_timedwait(&cv, &mu, &ts);
		}
		waiting[my_slot][my_tid].b = NULL;
	}
	/* the phase of this parity completed (not a fresh barrier's "previous"
	 * one): the waiter is ordered after its arrivals (emu_epoch_take) */
	if (b && b->phase > 0 && (b->phase & 1) != (parity & 1)) {
		emu_epoch_take(b->epoch);
		if (b->vc_done && my_vc)
			emu_vc_acquire(b->vc_done);
	}
	pthread_mutex_unlock(&mu);
	return 1;
}

/* ---- TMA ------------------------------------------------------------------------ */

/* the checks shared by load and store, the box at smem in CTA slot `slot`:
 * the box's bytes, or 0 after a failure */
static uint64_t
box_check_at(unsigned slot, const Tmap *t, const void *smem, const char *op)
{
	unsigned s, id;
	uint64_t off, bytes = (uint64_t)t->box[0] * t->box[1] * t->ebytes;
	uint32_t atom = t->swizzle ? 8 * t->swizzle : 128;

	if (!shared_loc((uintptr_t)smem, &s, &id, &off) || s != slot) {
		emu_fail("tma: %s shared address %p not in this CTA's shared memory", op, smem);
		return 0;
	}
	if (off % atom) {
		emu_fail("tma: %s shared address at byte %llu of shared array %u: not %u-byte aligned "
		         "(%s)", op, (unsigned long long)off, id, atom,
		         t->swizzle ? "the swizzle atom: 8 rows of its span" : "the ISA's 128 bytes");
		return 0;
	}
	if (off + bytes > emu_smem_declared_at(s, id)) {
		emu_fail("tma: %s box of %llu bytes at byte %llu of shared array %u of %llu bytes", op,
		         (unsigned long long)bytes, (unsigned long long)off, id,
		         (unsigned long long)emu_smem_declared_at(s, id));
		return 0;
	}
	if ((uintptr_t)t->base % 16 || t->stride % 16) {
		emu_fail("tma: %s: global address %p or row stride %llu not a multiple of 16", op,
		         (const void *)t->base, (unsigned long long)t->stride);
		return 0;
	}
	return bytes;
}

static uint64_t
box_check(const Tmap *t, const void *smem, const char *op)
{
	return box_check_at(my_slot, t, smem, op);
}

/* row r of the box at (c0, c1): box columns [*lo, *hi) lie in the tensor;
 * their global bytes, memcheck'ed (NULL: none, or reported) */
static uint8_t *
box_row(const Tmap *t, int32_t c0, int32_t c1, uint32_t r, int64_t *lo, int64_t *hi, int store)
{
	int64_t gr = (int64_t)c1 + r;

	*lo = c0 < 0 ? -(int64_t)c0 : 0;
	*hi = (int64_t)t->dim[0] - c0;
	if (*hi > (int64_t)t->box[0])
		*hi = t->box[0];
	if (gr < 0 || gr >= (int64_t)t->dim[1] || *hi <= *lo)
		return NULL;
	uint8_t *g = (uint8_t *)t->base + (uint64_t)gr * t->stride + (uint64_t)(c0 + *lo) * t->ebytes;
	return precc_emu_check(g, (uint64_t)(*hi - *lo) * t->ebytes, 1, (uint32_t)store) == g ? g : NULL;
}

enum { TMA_LOG = 1 << 16 };
static EmuTmaLoad tma_log[TMA_LOG];
static atomic_int ntma_log;

void
emu_tma_log_reset(void)
{
	atomic_store(&ntma_log, 0);
}

int
emu_tma_loads(const EmuTmaLoad **loads)
{
	int n = atomic_load(&ntma_log);
	*loads = tma_log;
	return n < TMA_LOG ? n : TMA_LOG;
}

/* the box at (c0, c1) as shared memory holds it (swizzled), into d */
static void
box_read(const Tmap *t, int32_t c0, int32_t c1, uint8_t *d)
{
	uint64_t rowb = (uint64_t)t->box[0] * t->ebytes;

	for (uint32_t r = 0; r < t->box[1]; r++) {
		int64_t lo, hi;
		const uint8_t *src = box_row(t, c0, c1, r, &lo, &hi, 0);   /* NULL: zeros */
		for (uint64_t b = 0; b < rowb; b++) {
			int64_t col = (int64_t)(b / t->ebytes);
			uint8_t v = src && col >= lo && col < hi ? src[(uint64_t)(col - lo) * t->ebytes +
			                                              b % t->ebytes] : 0;
			d[swz(r * rowb + b, t->swizzle)] = v;
		}
	}
}

/* The box's bytes land at dst in CTA slot s and complete as transactions
 * on bar there (bytes 0: the checks failed, only the transactions). In a
 * cluster launch the write is racecheck'ed against the stage's readers
 * (emu_async_write) and a peer's barrier must be published. */
static void
land(unsigned s, void *dst, const uint8_t *box, uint64_t bytes, uint32_t tx, void *bar)
{
	pthread_mutex_lock(&mu);
	Mbar *b = find_at(s, bar, "complete_tx of a TMA copy");
	int ok = b && published(b, "complete_tx of a TMA multicast");
	int idx = b ? (int)(b - mbar[s]) : -1;
	uint32_t phase = b ? b->phase : 0;
	pthread_mutex_unlock(&mu);
	if (!ok)
		return;
	if (bytes) {
		emu_async_write(dst, bytes, idx, phase);
		memcpy(dst, box, bytes);
		emu_shared_async(dst, bytes);
	}
	complete_tx_at(s, bar, tx);
}

/* A TMA load's start, plain or multicast: logged (check_tile_order), its
 * tensor map looked up (NULL: reported), and a buffer of its box's tx
 * bytes for the caller to fill and free */
static const Tmap *
load_begin(const void *tmap, int32_t c0, int32_t c1, uint8_t **box, uint32_t *tx)
{
	int li = atomic_fetch_add(&ntma_log, 1);
	if (li < TMA_LOG)
		tma_log[li] = (EmuTmaLoad){emu_ctaid_x(), tmap, c0, c1};
	const Tmap *t = tmap_of(tmap);
	if (!t)
		return NULL;
	*tx = (uint32_t)((uint64_t)t->box[0] * t->box[1] * t->ebytes);
	if (!(*box = malloc(*tx)))
		abort();
	return t;
}

void
precc_emu_tma_load_2d(void *dst, const void *tmap, int32_t c0, int32_t c1, void *bar)
{
	uint8_t *box;
	uint32_t tx;
	const Tmap *t = load_begin(tmap, c0, c1, &box, &tx);
	if (!t)
		return;
	uint64_t bytes = box_check(t, dst, "load");
	if (bytes)
		box_read(t, c0, c1, box);
	land(my_slot, dst, box, bytes, tx, bar);
	free(box);
}

/* cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes
 * .multicast::cluster [dst], [tmap, {c0, c1}], [bar], mask (PTX ISA,
 * "cp.async.bulk.tensor"): the box lands at dst's offset in the shared
 * memory of each CTA of the cluster whose rank is set in the 16-bit
 * ctaMask, and completes as transactions on the mbarrier at bar's offset
 * in that CTA. The mask may name only ranks of the cluster; a peer must
 * not have exited, its barrier must be published, and its stage released
 * by its readers (land). */
void
precc_emu_tma_load_2d_mc(void *dst, const void *tmap, int32_t c0, int32_t c1, void *bar,
                         uint32_t mask)
{
	unsigned n = emu_cluster_size();
	if (mask == 0 || mask >> n) {
		emu_fail("tma: multicast ctaMask 0x%x names CTA ranks outside the cluster of %u", mask, n);
		return;
	}
	uint8_t *box;
	uint32_t tx;
	const Tmap *t = load_begin(tmap, c0, c1, &box, &tx);
	if (!t)
		return;
	box_read(t, c0, c1, box);
	for (unsigned r = 0; r < n; r++) {
		if (!(mask >> r & 1))
			continue;
		unsigned s = (unsigned)emu_cluster_slot(r);
		if (s != my_slot && !emu_remote_touch(s, "TMA multicast"))
			continue;
		void *d = precc_emu_mapa(dst, r), *b = precc_emu_mapa(bar, r);
		land(s, d, box, box_check_at(s, t, d, "multicast load"), tx, b);
	}
	free(box);
}

/* TMA stores (cp.async.bulk.tensor.2d.global.shared::cta.bulk_group) are
 * asynchronous: the store reads its box from shared memory at some time
 * before the issuing thread's cp.async.bulk.wait_group.read N lets its
 * bulk group go (the groups but the newest N committed). The model reads
 * it then, and until then a store to those bytes is a race (emu.c,
 * BULK_READ); the box's bytes must have been made visible to the async
 * proxy (a fence.proxy.async by each thread that wrote them, after its
 * writes), and a thread may not exit with a store still reading. Per
 * thread: the stores issued, each with the bulk group it is committed in
 * (the count of commits before it). */
enum { MAXSTORE = 64 };
static __thread struct Store { const Tmap *t; int32_t c0, c1; const uint8_t *src; uint64_t bytes; unsigned grp; }
	pend[MAXSTORE];
static __thread int npend;
static __thread unsigned ncommit;

static void
store_now(const struct Store *p)
{
	const Tmap *t = p->t;
	uint64_t rowb = (uint64_t)t->box[0] * t->ebytes;

	emu_shared_bulk_read(p->src, p->bytes, 0);
	for (uint32_t r = 0; r < t->box[1]; r++) {
		int64_t lo, hi;
		uint8_t *dst = box_row(t, p->c0, p->c1, r, &lo, &hi, 1);
		for (uint64_t b = (uint64_t)lo * t->ebytes; dst && b < (uint64_t)hi * t->ebytes; b++)
			dst[b - (uint64_t)lo * t->ebytes] = p->src[swz(r * rowb + b, t->swizzle)];
	}
}

void
precc_emu_tma_store_2d(const void *tmap, int32_t c0, int32_t c1, const void *src)
{
	const Tmap *t = tmap_of(tmap);
	uint64_t bytes = t ? box_check(t, src, "store") : 0;
	unsigned who;
	uint64_t at;

	if (!bytes)
		return;
	if (emu_shared_unfenced(src, bytes, &who, &at)) {
		emu_fail("tma: store of a box whose shared byte %llu thread %u wrote with no "
		         "fence.proxy.async after it", (unsigned long long)at, who);
		return;
	}
	if (npend == MAXSTORE) {
		emu_fail("tma: more than %d TMA stores in flight in one thread", MAXSTORE);
		return;
	}
	pend[npend++] = (struct Store){t, c0, c1, src, bytes, ncommit};
	emu_shared_bulk_read(src, bytes, 1);
}

void
precc_emu_bulk_commit(void)
{
	ncommit++;
}

/* every store of the groups but the newest n committed reads its box */
void
precc_emu_bulk_wait_read(uint32_t n)
{
	if (n > 7) {
		emu_fail("tma: cp.async.bulk.wait_group.read %u: out of range 0..7", n);
		return;
	}
	int k = 0;
	for (int i = 0; i < npend; i++)
		if (pend[i].grp + n < ncommit)
			store_now(&pend[i]);
		else
			pend[k++] = pend[i];
	npend = k;
}

/* a thread's exit: its TMA stores must have read their boxes */
static void
stores_at_exit(void)
{
	if (npend) {
		emu_fail("tma: thread exits with %d TMA store%s still reading shared memory (no "
		         "cp.async.bulk.wait_group.read 0)", npend, npend == 1 ? "" : "s");
		for (int i = 0; i < npend; i++)
			store_now(&pend[i]);
	}
	npend = 0;
	ncommit = 0;
}
