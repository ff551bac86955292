/* Rosetta's measured ceilings: multiply-add throughput and memory bandwidth on every usable core.
 *
 * Compiled at run time by the system C compiler (rosetta/runner/ceiling.py records the compiler,
 * its version, the flags and this file's SHA-256) with -march=native, so the compiler, not a
 * table of CPU flags, decides which kernels exist on this machine.
 *
 *   ceiling list                             the kernels this build has, one per line
 *   ceiling KERNEL THREADS SECONDS REPS      a compute kernel (fma512, fma256, fmavec, dpbf16)
 *   ceiling triad THREADS MIB REPS           STREAM triad a = b + s*c, doubles, MIB per array
 *
 * One thread per usable core, thread i pinned to the i-th CPU of this process's affinity mask.
 * Every repetition starts all threads at a barrier; the program prints one JSON line with each
 * repetition's wall time (first start to last end) and each thread's own time, plus, for compute
 * kernels, each thread's clock measured right after by a chain of dependent register adds (one
 * add per cycle). The caller turns these into rates (FLOP or bytes per second); here only counts
 * and seconds.
 *
 * Each compute kernel keeps ACC independent accumulators, more than an FMA pipe's latency times
 * its count (4 cycles x 2 pipes on current x86 cores), so the pipes never wait on a result; the
 * values converge (acc = acc * 0.999999 + 1e-7 tends to 0.1) or grow slowly, never denormal. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#define MAX_THREADS 1024
#define MAX_REPS 64

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static volatile double sink;  /* results land here: no kernel is optimised away */

#define R4(X) X(0) X(1) X(2) X(3)
#define R8(X) R4(X) X(4) X(5) X(6) X(7)
#define R12(X) R8(X) X(8) X(9) X(10) X(11)
#define R16(X) R12(X) X(12) X(13) X(14) X(15)

/* -- compute kernels: each runs `iters` iterations and returns FLOP per iteration ------------ */
#if defined(__AVX512F__)
static double fma512(uint64_t iters) {
    const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
#define DECL(i) __m512 acc##i = _mm512_set1_ps(1.0f + (i) * 1e-3f);
#define STEP(i) acc##i = _mm512_fmadd_ps(acc##i, a, b);
#define SUM(i) s += _mm512_reduce_add_ps(acc##i);
    R16(DECL)
    for (uint64_t n = 0; n < iters; n++) { R16(STEP) }
    float s = 0.0f;
    R16(SUM)
    sink += s;
#undef DECL
#undef STEP
#undef SUM
    return 16.0 * 16 * 2; /* 16 accumulators x 16 fp32 lanes x (multiply + add) */
}
#endif

#if defined(__AVX2__) && defined(__FMA__)
static double fma256(uint64_t iters) {
    const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
#define DECL(i) __m256 acc##i = _mm256_set1_ps(1.0f + (i) * 1e-3f);
#define STEP(i) acc##i = _mm256_fmadd_ps(acc##i, a, b);
#define SUM(i) { float v[8]; _mm256_storeu_ps(v, acc##i); for (int k = 0; k < 8; k++) s += v[k]; }
    R12(DECL)
    for (uint64_t n = 0; n < iters; n++) { R12(STEP) }
    float s = 0.0f;
    R12(SUM)
    sink += s;
#undef DECL
#undef STEP
#undef SUM
    return 12.0 * 8 * 2; /* 12 accumulators x 8 fp32 lanes x 2 */
}
#endif

#if defined(__AVX512BF16__)
static double dpbf16(uint64_t iters) {
    /* VDPBF16PS: per fp32 lane, acc += a0*b0 + a1*b1 over bf16 pairs: 2 products + 2 adds */
    const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
    const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
#define DECL(i) __m512 acc##i = _mm512_set1_ps((i) * 1e-3f);
#define STEP(i) acc##i = _mm512_dpbf16_ps(acc##i, a, b);
#define SUM(i) s += _mm512_reduce_add_ps(acc##i);
    R16(DECL)
    for (uint64_t n = 0; n < iters; n++) { R16(STEP) }
    float s = 0.0f;
    R16(SUM)
    sink += s;
#undef DECL
#undef STEP
#undef SUM
    return 16.0 * 16 * 4; /* 16 accumulators x 16 fp32 lanes x (2 products + 2 adds) */
}
#endif

/* portable: the compiler's own vectors (128-bit), contracted to FMA where the target has it */
typedef float v4f __attribute__((vector_size(16)));
static double fmavec(uint64_t iters) {
    const v4f a = {0.999999f, 0.999999f, 0.999999f, 0.999999f};
    const v4f b = {1e-7f, 1e-7f, 1e-7f, 1e-7f};
#define DECL(i) v4f acc##i = {1.0f, 1.0f, 1.0f, 1.0f + (i) * 1e-3f};
#define STEP(i) acc##i = acc##i * a + b;
#define SUM(i) s += acc##i[0] + acc##i[1] + acc##i[2] + acc##i[3];
    R8(DECL)
    for (uint64_t n = 0; n < iters; n++) { R8(STEP) }
    float s = 0.0f;
    R8(SUM)
    sink += s;
#undef DECL
#undef STEP
#undef SUM
    return 8.0 * 4 * 2; /* 8 accumulators x 4 lanes x 2 */
}

typedef double (*kernel_fn)(uint64_t);
static const struct { const char *name; kernel_fn fn; } KERNELS[] = {
#if defined(__AVX512F__)
    {"fma512", fma512},
#endif
#if defined(__AVX2__) && defined(__FMA__)
    {"fma256", fma256},
#endif
#if defined(__AVX512BF16__)
    {"dpbf16", dpbf16},
#endif
    {"fmavec", fmavec},
};
#define N_KERNELS (sizeof(KERNELS) / sizeof(KERNELS[0]))

/* -- the clock: a chain of dependent register adds runs at one add per cycle ----------------- */
#define CHAIN_ADDS 100
static int have_chain(void) {
#if defined(__x86_64__) || defined(__aarch64__)
    return 1;
#else
    return 0;
#endif
}
static void chain(uint64_t iters) {
    uint64_t x = 0, one = 1;
    for (uint64_t n = 0; n < iters; n++) {
#if defined(__x86_64__)
#define ADD1 "add %1, %0\n\t"
#define ADD10 ADD1 ADD1 ADD1 ADD1 ADD1 ADD1 ADD1 ADD1 ADD1 ADD1
        __asm__ volatile(ADD10 ADD10 ADD10 ADD10 ADD10 ADD10 ADD10 ADD10 ADD10 ADD10
                         : "+r"(x) : "r"(one));
#elif defined(__aarch64__)
#define ADD1 "add %0, %0, %1\n\t"
#define ADD10 ADD1 ADD1 ADD1 ADD1 ADD1 ADD1 ADD1 ADD1 ADD1 ADD1
        __asm__ volatile(ADD10 ADD10 ADD10 ADD10 ADD10 ADD10 ADD10 ADD10 ADD10 ADD10
                         : "+r"(x) : "r"(one));
#else
        x += one;
#endif
    }
    sink += (double)x;
}

/* -- threads ------------------------------------------------------------------------------ */
static int n_threads, n_reps, cpus[MAX_THREADS], n_cpus;
static pthread_barrier_t barrier;
static kernel_fn kernel;
static uint64_t iters, chain_iters;
static double start[MAX_REPS][MAX_THREADS], stop[MAX_REPS][MAX_THREADS];
static double clock_ghz[MAX_THREADS];
static double *A, *B, *C;
static size_t n_elems;

static void pin(int tid) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpus[tid % n_cpus], &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void *compute_thread(void *arg) {
    int tid = (int)(intptr_t)arg;
    pin(tid);
    kernel(iters / 16 + 1); /* warm: the core leaves its idle state, the pages are mapped */
    for (int r = 0; r < n_reps; r++) {
        pthread_barrier_wait(&barrier);
        start[r][tid] = now();
        kernel(iters);
        stop[r][tid] = now();
    }
    pthread_barrier_wait(&barrier);
    clock_ghz[tid] = 0.0;
    if (have_chain()) {
        double t0 = now();
        chain(chain_iters);
        double dt = now() - t0;
        clock_ghz[tid] = (double)chain_iters * CHAIN_ADDS / dt / 1e9;
    }
    return NULL;
}

static void *triad_thread(void *arg) {
    int tid = (int)(intptr_t)arg;
    pin(tid);
    size_t lo = n_elems * (size_t)tid / (size_t)n_threads;
    size_t hi = n_elems * (size_t)(tid + 1) / (size_t)n_threads;
    for (size_t i = lo; i < hi; i++) { A[i] = 0.0; B[i] = 1.0; C[i] = 2.0; } /* first touch */
    const double s = 3.0;
    for (size_t i = lo; i < hi; i++) A[i] = B[i] + s * C[i]; /* warm */
    for (int r = 0; r < n_reps; r++) {
        pthread_barrier_wait(&barrier);
        start[r][tid] = now();
        for (size_t i = lo; i < hi; i++) A[i] = B[i] + s * C[i];
        stop[r][tid] = now();
    }
    return NULL;
}

static int run_threads(void *(*fn)(void *)) {
    pthread_t th[MAX_THREADS];
    pthread_barrier_init(&barrier, NULL, (unsigned)n_threads);
    for (int t = 0; t < n_threads; t++)
        if (pthread_create(&th[t], NULL, fn, (void *)(intptr_t)t) != 0) return 1;
    for (int t = 0; t < n_threads; t++) pthread_join(th[t], NULL);
    pthread_barrier_destroy(&barrier);
    return 0;
}

static void print_reps(void) {
    printf("\"reps\": [");
    for (int r = 0; r < n_reps; r++) {
        double lo = start[r][0], hi = stop[r][0];
        for (int t = 1; t < n_threads; t++) {
            if (start[r][t] < lo) lo = start[r][t];
            if (stop[r][t] > hi) hi = stop[r][t];
        }
        printf("%s{\"wall_s\": %.9f, \"thread_s\": [", r ? ", " : "", hi - lo);
        for (int t = 0; t < n_threads; t++)
            printf("%s%.9f", t ? ", " : "", stop[r][t] - start[r][t]);
        printf("]}");
    }
    printf("]");
}

static int usage(void) {
    fprintf(stderr, "usage: ceiling list | ceiling KERNEL THREADS SECONDS REPS | "
                    "ceiling triad THREADS MIB REPS\n");
    return 2;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "list") == 0) {
        for (size_t k = 0; k < N_KERNELS; k++) printf("%s\n", KERNELS[k].name);
        return 0;
    }
    if (argc != 5) return usage();
    n_threads = atoi(argv[2]);
    n_reps = atoi(argv[4]);
    double amount = atof(argv[3]);
    if (n_threads < 1 || n_threads > MAX_THREADS || n_reps < 1 || n_reps > MAX_REPS ||
        !(amount > 0))
        return usage();
    cpu_set_t mask;
    CPU_ZERO(&mask);
    sched_getaffinity(0, sizeof(mask), &mask);
    for (int c = 0; c < CPU_SETSIZE && n_cpus < MAX_THREADS; c++)
        if (CPU_ISSET(c, &mask)) cpus[n_cpus++] = c;
    if (n_cpus == 0) cpus[n_cpus++] = 0;

    if (strcmp(argv[1], "triad") == 0) {
        n_elems = (size_t)(amount * 1024 * 1024 / sizeof(double));
        A = malloc(n_elems * sizeof(double));
        B = malloc(n_elems * sizeof(double));
        C = malloc(n_elems * sizeof(double));
        if (!A || !B || !C || n_elems < (size_t)n_threads) {
            fprintf(stderr, "ceiling: cannot allocate 3 x %.0f MiB\n", amount);
            return 3;
        }
        if (run_threads(triad_thread)) return 4;
        printf("{\"kernel\": \"triad\", \"threads\": %d, \"elements\": %zu, "
               "\"bytes_per_element\": 24, ", n_threads, n_elems);
        print_reps();
        printf(", \"check\": %.1f}\n", A[n_elems / 2]); /* 1 + 3 * 2 = 7 */
        return 0;
    }
    for (size_t k = 0; k < N_KERNELS; k++)
        if (strcmp(argv[1], KERNELS[k].name) == 0) kernel = KERNELS[k].fn;
    if (!kernel) {
        fprintf(stderr, "ceiling: no kernel %s in this build (see: ceiling list)\n", argv[1]);
        return 2;
    }
    /* calibrate on this thread: double the iterations until a call takes 20 ms, then scale */
    uint64_t n = 1 << 14;
    double dt = 0.0, flop_per_iter = 0.0;
    for (;;) {
        double t0 = now();
        flop_per_iter = kernel(n);
        dt = now() - t0;
        if (dt > 0.02 || n > ((uint64_t)1 << 40)) break;
        n *= 2;
    }
    iters = (uint64_t)((double)n * amount / dt) + 1;
    chain_iters = (uint64_t)(1e9 * 0.1 / CHAIN_ADDS); /* 1e8 adds: ~30 ms at 3.5 GHz */
    if (run_threads(compute_thread)) return 4;
    printf("{\"kernel\": \"%s\", \"threads\": %d, \"iterations\": %llu, "
           "\"flop_per_iteration\": %.1f, ", argv[1], n_threads,
           (unsigned long long)iters, flop_per_iter);
    print_reps();
    printf(", \"clock_ghz\": [");
    for (int t = 0; t < n_threads; t++) printf("%s%.4f", t ? ", " : "", clock_ghz[t]);
    printf("], \"cpus\": [");
    for (int t = 0; t < n_threads; t++) printf("%s%d", t ? ", " : "", cpus[t % n_cpus]);
    printf("]}\n");
    return 0;
}
