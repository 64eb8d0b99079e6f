/*
 * manifest.h — floor 1 of the runtime (base.h lists the floors): what an
 * artifact directory's manifest.json says, read and validated whole
 * (docs/artifacts.md). It knows nothing of backends, plans cut into
 * phases, or layers run: the floors above read these structures.
 */
#ifndef PRECC_RT_MANIFEST_H
#define PRECC_RT_MANIFEST_H

#include <stdint.h>
#include "base.h"
#include "ir.h"

/* json.c — strict JSON (why not cJSON: see the file). */
typedef enum json_kind { JSON_NULL, JSON_BOOL, JSON_NUM, JSON_STR, JSON_ARR,
                         JSON_OBJ } json_kind;
typedef struct json json;
struct json {
	json_kind kind;
	int line, col;            /* where the value starts */
	int b;                    /* JSON_BOOL */
	double num;               /* JSON_NUM */
	char *str; size_t len;    /* JSON_STR: UTF-8, NUL-terminated */
	json **item;              /* JSON_ARR, JSON_OBJ: n values */
	char **key;               /* JSON_OBJ: n keys, in file order */
	size_t n, cap;
};
/* NULL with "name:line:col: error: message" in err on failure. */
json *json_parse(const char *text, size_t len, const char *name, char *err,
                 size_t errsz);
void json_free(json *);
const json *json_get(const json *obj, const char *key);  /* NULL: absent */
const char *json_kind_name(json_kind);                   /* "a string" */

/* artifact.c — the manifest read into these (docs/artifacts.md). */
typedef struct rt_type {
	precc_format fmt;
	int rank;
	long dim[2];              /* ir.h's dims: < 0 is ceil(M / -d) */
	int index;                /* "i32": gemm_grouped's offsets (fmt f32, the
	                             storage width) */
} rt_type;
/* Parses "bf16[M,4096]", "f32[1,1]{*x*}", "e8m0[4096,M/32]{1x32}". */
int rt_type_parse(const char *s, rt_type *t);
/* Bytes at M (0 on overflow); rows and cols (rank 1: 1 x n) may be NULL. */
size_t rt_type_bytes(const rt_type *t, long m, long *rows, long *cols);

typedef struct rt_param {
	char *name, *type_str;
	rt_type type;
	int out;                  /* dir "out" */
} rt_param;

/* Launch geometry of a kernel, or of one phase of a fused kernel. */
typedef struct rt_geom {
	int tiled, data;          /* data: index into param */
	long elems_per_cta, tile_rows, tile_cols;
} rt_geom;


/* A TMA tensor map the kernel takes (manifest "tmaps", codegen.h's
 * CodegenTmap): encoded at each launch over the buffer of param `param`. */
typedef struct rt_tmap {
	int param, elem_bytes;
	long rows, cols;          /* -1: the launch's M */
	int box_rows, box_cols, swizzle;
} rt_tmap;
enum { RT_MAXTMAP = 4 };

typedef struct rt_kdesc {
	char *name, *shape, *entry, *ir;
	char *bulk_entry;         /* optional: a delayed update's many-layer
	                             entry (ptr table, i64 rows), or NULL */
	int threads;
	int tiled, data;          /* data: index into param */
	long elems_per_cta, tile_rows, tile_cols, m_multiple;
	rt_geom phase[RT_MAXPHASE]; int nphase;  /* fused: grid = sum of phases */
	int cooperative;          /* "launch": "cooperative" */
	int persistent;           /* "launch": "persistent" */
	long sync_words;          /* u32 sync scratch, zeroed per launch */
	unsigned smem;            /* optional "smem": dynamic shared bytes */
	int cluster;              /* optional "cluster": CTAs per cluster along
	                             x (1 or 2; the persistent GEMM's tile
	                             rows), default 1 */
	rt_tmap tmap[RT_MAXTMAP]; int ntmap;  /* optional "tmaps", params after the scalars */
	rt_param *param; int nparam;
	int has_m, has_seed;
	long cols, cols_align;    /* optional "cols", "cols_align": the data's
	                             columns, passed after m (its code is that of
	                             every column count: codegen's has_cols), and
	                             what they must be a multiple of; 0: none */
	int *zero; int nzero;     /* zero_outputs as param indices */
	int var;                  /* "m_variant": the kernel launched instead
	                             at M >= var_m_min (the same GEMM on a
	                             larger tile), or -1 */
	long var_m_min;
	char *var_name;           /* as read, until resolved */
	char *target;             /* "target" (sm_90a), or NULL */
	int used;                 /* a step of the chosen layers runs it */
	Module *mod;              /* the parsed ir */
	const Func *fn;
	int *abi_value;           /* per param: its IR value */
	/* run statistics */
	long launches;
	double elems, seconds;
	char loaded[160];         /* cuda: the file loaded; cpu: "ir" */
	int num_regs, spill_bytes;  /* the backend's, after its load (cpu: 0) */
	void *bk;                 /* the backend's: backend_cuda.c's module,
	                             functions and sync scratch; NULL on cpu */
} rt_kdesc;

typedef struct rt_buffer {
	char *name, *type_str, *role;
	rt_type type;
	int written;              /* some step writes it */
} rt_buffer;

typedef struct rt_step {
	int kernel;
	char *gemm;
	int *arg;                 /* per kernel param: buffer index */
} rt_step;

struct rt_split;

/* A buffer's extent at one M: rt_type_bytes' bytes, rows and cols. */
typedef struct rt_extent {
	size_t bytes;             /* 0: overflows */
	long rows, cols;
} rt_extent;
typedef struct rt_extents {
	long m;                   /* the M of buf[] (0: none yet) */
	rt_extent buf[];          /* per buffer */
} rt_extents;

typedef struct rt_layer {
	char *fqn;
	char *shares_input;       /* the manifest's, or NULL */
	rt_buffer *buf; int nbuf;
	rt_step *step; int nstep;
	int (*update)[2]; int nupdate;  /* (state, next) buffers, after the steps */
	long m_multiple;          /* lcm over its steps' kernels */
	rt_extents *ext;          /* rt_buffer_extent's cache: a training step
	                             calls forward, backward and commit at one M */
	struct rt_split *split;   /* plan floor (split.c): the plan as
	                             forward/backward/commit; never read here */
	int root;                 /* the layer whose input it reads (the
	                             manifest's shares_input), -1 none */
	struct rt_share *share;   /* plan floor (share.c): what a shared forward
	                             skips; never read here */
} rt_layer;

/* An expert group (manifest "groups", docs/artifacts.md): the experts of
 * one MoE block as one plan. Its step is a layer, a->layer[a->nlayer + g]
 * (after the manifest's layers: every loop over the layers leaves it
 * out), whose `offs` buffer (role "offsets", i32[experts]) holds the
 * experts' end offsets into the token rows. */
typedef struct rt_group {
	char *name;               /* the fused parameter's key */
	int experts;
	int gemm[3];              /* fprop, dgrad, wgrad grouped */
	long n, k;                /* each expert's W [n, k] */
	int *expert;              /* per expert: its own layer (index into layer) */
	int offs;                 /* the offs buffer of its layer */
} rt_group;

typedef struct rt_artifact {
	char *dir;
	char *precc_version, *llvm_version;
	char *recipe_name, *model_name;
	uint64_t recipe_hash, model_hash;
	char **target; int ntarget;
	const char *layers_of;    /* the target whose layers were read */
	int own_target;           /* layers_of is the device's own: its cubins load */
	rt_kdesc *kern; int nkern;
	rt_layer *layer; int nlayer;   /* layer[nlayer + g]: group g's step */
	rt_group *group; int ngroup;
	precc_training_policy training;   /* "training", or the defaults */
} rt_artifact;

/* Kernel file `what` ("ptx" or "cubin") of one target's object tf in a
 * kernel's manifest "files": DIR/NAME read whole (rt_read_file) and, where
 * precc build recorded <what>_bytes and <what>_fnv1a64, checked against
 * them. 1: *image read and checked; 0: read, the manifest records neither
 * (an older one); -1: absent or unreadable; -2: a bad name, a bad record
 * or not the bytes precc build wrote. Below 0, why names the file. */
int rt_kernel_file(const char *dir, const json *tf, const char *what,
                   char **image, size_t *len, char *why, size_t whysz);

/* Buffer b of l at M (rt_type_bytes), from l's cache of the last M: the
 * per-call checks and launches ask it of every buffer. */
const rt_extent *rt_buffer_extent(const rt_layer *l, int b, long m);

/* Reads DIR/manifest.json (file receives its name, for errors) and
 * validates all of it into an artifact: versions, every key, each
 * kernel's IR against its params. The layers are the target's that a
 * device of compute capability device_sm (e.g. 90; 0: no device, the cpu
 * backend) runs: its own (sm_XYa, then sm_XY; own_target set), else the
 * newest older one's PTX; with no device the first target's. want (or
 * NULL) names the target instead; with a device it must be the device's.
 * *json receives the parsed manifest for the backend's load (the caller
 * json_frees it). NULL with the error set. */
rt_artifact *rt_manifest_read(const char *dir, int device_sm, const char *want,
                              json **json_out, char *file, size_t filesz);
/* The error "FILE:LINE:COL: error: MSG" at value at (NULL: "FILE: error:
 * MSG"): for the backend's load, which reads kernel files the manifest
 * names. Returns -1. */
int rt_manifest_error(const char *file, const json *at, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Frees what rt_manifest_read allocated; the backend's bk and the plan's
 * split and share must have been freed (and set NULL) by their floors. */
void rt_artifact_free(rt_artifact *a);

#endif
