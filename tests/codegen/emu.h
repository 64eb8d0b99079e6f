/*
 * emu.h — the emulated GPU test_emu runs codegen's host-mode kernels on
 * (emu.c): one pthread per GPU thread, the precc_emu_* host models of the
 * NVVM intrinsics and inline PTX, and what compute-sanitizer checks on a
 * GPU: memcheck (bounds and alignment of every global and shared access,
 * stores into inputs), racecheck (shared-memory accesses of different
 * threads with no barrier between them), synccheck (barriers and warp
 * collectives reached by part of a CTA or warp), and the static shared
 * memory a CTA may have.
 */
#ifndef PRECC_EMU_H
#define PRECC_EMU_H

#include <stddef.h>
#include <stdint.h>
#include <llvm-c/Core.h>

/* self-tests of the comparison: 1 corrupts one fp8 cvt, 2 drops one mma
 * product, 3 ignores every cp.async.wait_group, 4 misaligns lane 5's
 * ldmatrix row address, 5 drops the wgmma swizzle, 6 swaps the columns of
 * each wgmma D register pair (emu_wgmma.c) */
extern int emu_break;

/* The functions host-mode kernels call, for LLVMAddGlobalMapping. */
extern const char *const emu_fns[];
extern void *const emu_addr[];
extern const int emu_nfns;

/* Once, before anything else: reads the cvt rows of asm_table. */
void emu_init(void);
/* Memcheck and racecheck: a call to precc_emu_check(ptr, size, align,
 * flags) before every load, store and atomic of fn that does not address
 * its own stack; the access then goes to the pointer it returns (a sink
 * when the access is bad, so that the run goes on and reports). */
void emu_instrument(LLVMModuleRef, LLVMValueRef fn);
/* fn's f32 arithmetic returns the GPU's canonical NaN 0x7fffffff */
void emu_gpu_nan(LLVMModuleRef, LLVMValueRef fn);
/* The global buffers of the next launch (forget all with emu_reset). */
void emu_reset(void);
void emu_region(const void *p, size_t bytes, int writable, const char *name);
/* Run entry(args) on a grid of gx x gy CTAs of `threads`; cooperative: all
 * CTAs at once. -1 if the emulator cannot hold the grid, or (a failure
 * recorded) the launch breaks the cluster rules below. */
int emu_launch(void (*entry)(void **), void **args, int threads, unsigned gx, unsigned gy,
               int coop);
/* The thread-block cluster of the next launches (emu_reset: none): x by y
 * CTAs, as cuLaunchKernelEx's CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION or a
 * kernel's .reqnctapercluster give it; nonportable: the kernel opted in to
 * CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED (16 CTAs, not 8). A
 * cluster launch runs every CTA at once (the CTAs of a cluster are
 * co-scheduled on one GPC) and fails when the grid is not a multiple of
 * the cluster or the cluster is too big (CUDA C Programming Guide,
 * "Thread Block Clusters"). What the cluster adds (emu.c, "clusters"):
 * %cluster_* special registers, barrier.cluster, mapa and shared::cluster
 * accesses of a peer's shared memory, remote mbarrier arrivals and TMA
 * multicast (emu_tma.c), each with its checks. */
void emu_set_cluster(unsigned x, unsigned y, int nonportable);
/* The TMA loads since emu_tma_log_reset, in the order each CTA issued them
 * (a persistent GEMM's tile order): the CTA, the tensor map, the box's
 * coordinates (c0 along K, c1 along rows). */
typedef struct EmuTmaLoad {
	unsigned cta;
	const void *tmap;
	int32_t c0, c1;
} EmuTmaLoad;
void emu_tma_log_reset(void);
int emu_tma_loads(const EmuTmaLoad **loads);

/* Check failures since emu_reset: their number and the first's message. */
int emu_errors(char *msg, size_t n);
/* ldmatrix phases (8 rows of one matrix) since emu_reset whose rows do not
 * fall in 8 different 16-byte bank groups. */
long emu_ldsm_conflicts(void);
/* Shared loads and stores (not ldmatrix, cp.async, TMA) since emu_reset:
 * warp instructions, their wavefronts, the wavefronts over one per phase
 * (bank conflicts), and the instructions with any. */
void emu_smem_stats(long *instrs, long *waves, long *extra, long *conflicted);

/* sm_89 and sm_90 give a CTA at most 48 KiB of static shared memory
 * (.shared globals; more needs dynamic shared memory and an opt-in). */
enum { EMU_SMEM_STATIC = 48 * 1024,
       /* array 0 may be dynamic shared memory up to this: Hopper's opt-in
        * limit, 227 KiB a CTA for dynamic and static shared memory together
        * (CUDA C Programming Guide, "Compute Capabilities", table of technical
        * specifications: 227 KB shared memory per block for 9.0); the launch
        * fails over it */
       EMU_SMEM_ARRAY0 = 227 * 1024 };
/* The dynamic shared memory (CodegenKernel.smem) the next launches may
 * give array 0; emu_reset makes it 0. */
void emu_set_dynamic_smem(uint64_t bytes);
/* A TMA tensor map (CodegenKernel.tmap[i]) over the buffer at base, in the
 * emulator's host format, into out (128 bytes, 64-aligned); rows or cols < 0 take
 * m. -1 and a message in err when the map breaks cuTensorMapEncodeTiled's
 * rules (emu_tma.c). */
struct CodegenTmap;
int emu_tmap_encode(void *out, const struct CodegenTmap *t, const void *base, long m, char *err,
                    size_t n);

#endif
