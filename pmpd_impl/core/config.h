/*
 * Every compile-time option of pmpd, with its default.  Set an option with
 * -DNAME=VALUE on the compiler command line (or before including the
 * amalgamated header).  Impossible combinations stop the build here.
 *
 * Kernel selection follows the compiler's target macros; each optimized
 * path can be forced off with PMPD_USE_<X>=0.  The scalar reference kernels
 * are always compiled: they are the oracle the tests compare against.
 *
 *   PMPD_USE_NEON     Arm Advanced SIMD kernels.      default: __ARM_NEON
 *   PMPD_USE_DOTPROD  Arm SDOT kernels.               default: __ARM_FEATURE_DOTPROD
 *   PMPD_USE_I8MM     Arm SMMLA (int8 matmul) GEMM.   default: __ARM_FEATURE_MATMUL_INT8
 *   PMPD_USE_AVX2     x86 AVX2+FMA kernels.           default: __AVX2__ && __FMA__
 *   PMPD_USE_AVX512   x86 AVX-512 GEMV (decode) of    default: AVX-512 F, BW, VNNI, VBMI
 *                     q8/q4/q2cb and nested weights.  and GFNI targeted, with PMPD_USE_AVX2
 *   PMPD_USE_AVXVNNI  x86 AVX-VNNI W8A8 products on    default: __AVXVNNI__, with
 *                     AVX2 cores without AVX-512       PMPD_USE_AVX2
 *                     (Alder Lake, N100-class boards)
 *   PMPD_USE_AMX      x86 AMX-INT8 W8A8 products.     default: AMX-TILE and AMX-INT8
 *                     targeted, with PMPD_USE_AVX512 (Linux 5.16 or later
 *                     grants the tile state; the loader says if it does not)
 *   PMPD_USE_ARM_CRC32  Armv8 CRC32 instructions for the default: __ARM_FEATURE_CRC32
 *                     model checksums (format/crc32.c)
 *   PMPD_USE_X86_CLMUL  carry-less-multiply CRC-32     default: PCLMULQDQ and SSE4.1
 *                     folding (VPCLMULQDQ zmm with     targeted
 *                     PMPD_USE_AVX512)
 *   PMPD_PLATFORM_POSIX  files via mmap, pthreads.     default: 1 on Unix-like systems
 *   PMPD_PLATFORM_NONE   no filesystem, no threads.    default: 1 elsewhere
 *   PMPD_USE_MMAP     map model files (POSIX port); 0 makes
 *                     pmpd_model_open_file read them into the arena.
 *                                                      default: PMPD_PLATFORM_POSIX
 *   PMPD_MAX_THREADS  upper bound on threads per session.   default: 64
 *   PMPD_POOL_MIN_PARALLEL_WORK  jobs of fewer multiply-adds run on the
 *                     calling thread alone.            default: 262144
 *   PMPD_OFFLINE      compile the offline tools (importers, quantizers,
 *                     calibration); they use the heap.  default: 0
 */
#ifndef PMPD_CORE_CONFIG_H
#define PMPD_CORE_CONFIG_H

#if defined(__ARM_NEON) || defined(__ARM_NEON__)
#define PMPD_HAVE_NEON_TARGET 1
#else
#define PMPD_HAVE_NEON_TARGET 0
#endif
#if defined(__ARM_FEATURE_DOTPROD)
#define PMPD_HAVE_DOTPROD_TARGET 1
#else
#define PMPD_HAVE_DOTPROD_TARGET 0
#endif
#if defined(__ARM_FEATURE_MATMUL_INT8)
#define PMPD_HAVE_I8MM_TARGET 1
#else
#define PMPD_HAVE_I8MM_TARGET 0
#endif
#if defined(__AVX2__) && defined(__FMA__)
#define PMPD_HAVE_AVX2_TARGET 1
#else
#define PMPD_HAVE_AVX2_TARGET 0
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__) && defined(__AVX512VBMI__) && \
    defined(__GFNI__)
#define PMPD_HAVE_AVX512_TARGET 1
#else
#define PMPD_HAVE_AVX512_TARGET 0
#endif

#if defined(__AVXVNNI__)
#define PMPD_HAVE_AVXVNNI_TARGET 1
#else
#define PMPD_HAVE_AVXVNNI_TARGET 0
#endif
#if defined(__AMX_TILE__) && defined(__AMX_INT8__)
#define PMPD_HAVE_AMX_TARGET 1
#else
#define PMPD_HAVE_AMX_TARGET 0
#endif

#ifndef PMPD_USE_NEON
#define PMPD_USE_NEON PMPD_HAVE_NEON_TARGET
#endif
#ifndef PMPD_USE_DOTPROD
#define PMPD_USE_DOTPROD (PMPD_HAVE_DOTPROD_TARGET && PMPD_USE_NEON)
#endif
#ifndef PMPD_USE_I8MM
#define PMPD_USE_I8MM (PMPD_HAVE_I8MM_TARGET && PMPD_USE_NEON)
#endif
#ifndef PMPD_USE_AVX2
#define PMPD_USE_AVX2 PMPD_HAVE_AVX2_TARGET
#endif
#ifndef PMPD_USE_AVX512
#define PMPD_USE_AVX512 (PMPD_HAVE_AVX512_TARGET && PMPD_USE_AVX2)
#endif
#ifndef PMPD_USE_AVXVNNI
#define PMPD_USE_AVXVNNI (PMPD_HAVE_AVXVNNI_TARGET && PMPD_USE_AVX2)
#endif
#ifndef PMPD_USE_AMX
#define PMPD_USE_AMX (PMPD_HAVE_AMX_TARGET && PMPD_USE_AVX512)
#endif

#if PMPD_USE_NEON && !PMPD_HAVE_NEON_TARGET
#error "PMPD_USE_NEON=1 but the compiler is not targeting Arm NEON (add e.g. -march=armv8-a)"
#endif
#if PMPD_USE_DOTPROD && !PMPD_HAVE_DOTPROD_TARGET
#error "PMPD_USE_DOTPROD=1 but the target lacks the dot-product extension (add +dotprod to -march)"
#endif
#if PMPD_USE_I8MM && !PMPD_HAVE_I8MM_TARGET
#error "PMPD_USE_I8MM=1 but the target lacks the int8 matrix-multiply extension (add +i8mm to -march)"
#endif
#if (PMPD_USE_DOTPROD || PMPD_USE_I8MM) && !PMPD_USE_NEON
#error "PMPD_USE_DOTPROD and PMPD_USE_I8MM need PMPD_USE_NEON"
#endif
#if PMPD_USE_AVX2 && !PMPD_HAVE_AVX2_TARGET
#error "PMPD_USE_AVX2=1 but the compiler is not targeting AVX2 and FMA (add -mavx2 -mfma or -march=native)"
#endif
#if PMPD_USE_AVX512 && !PMPD_HAVE_AVX512_TARGET
#error "PMPD_USE_AVX512=1 but the target lacks AVX-512 F/BW/VNNI/VBMI or GFNI (e.g. -march=icelake-server or native)"
#endif
#if PMPD_USE_AVXVNNI && !PMPD_HAVE_AVXVNNI_TARGET
#error "PMPD_USE_AVXVNNI=1 but the target lacks AVX-VNNI (e.g. -march=alderlake or native)"
#endif
#if PMPD_USE_AVXVNNI && !PMPD_USE_AVX2
#error "PMPD_USE_AVXVNNI needs PMPD_USE_AVX2"
#endif
#if PMPD_USE_AMX && !PMPD_HAVE_AMX_TARGET
#error "PMPD_USE_AMX=1 but the target lacks AMX-TILE and AMX-INT8 (e.g. -march=sapphirerapids or native)"
#endif
#if PMPD_USE_AMX && !PMPD_USE_AVX512
#error "PMPD_USE_AMX needs PMPD_USE_AVX512 (the other kernels of an AMX machine)"
#endif
#if PMPD_USE_AVX512 && !PMPD_USE_AVX2
#error "PMPD_USE_AVX512 needs PMPD_USE_AVX2 (the GEMM kernels)"
#endif
#if PMPD_USE_AVX2 && PMPD_USE_NEON
#error "PMPD_USE_AVX2 and PMPD_USE_NEON cannot both be on"
#endif

#if !defined(PMPD_PLATFORM_POSIX) && !defined(PMPD_PLATFORM_NONE)
#if defined(__unix__) || defined(__unix) || (defined(__APPLE__) && defined(__MACH__))
#define PMPD_PLATFORM_POSIX 1
#define PMPD_PLATFORM_NONE 0
#else
#define PMPD_PLATFORM_POSIX 0
#define PMPD_PLATFORM_NONE 1
#endif
#endif
#ifndef PMPD_PLATFORM_POSIX
#define PMPD_PLATFORM_POSIX 0
#endif
#ifndef PMPD_PLATFORM_NONE
#define PMPD_PLATFORM_NONE 0
#endif
#if PMPD_PLATFORM_POSIX + PMPD_PLATFORM_NONE != 1
#error "choose exactly one of PMPD_PLATFORM_POSIX and PMPD_PLATFORM_NONE"
#endif

#ifndef PMPD_USE_MMAP
#define PMPD_USE_MMAP PMPD_PLATFORM_POSIX
#endif
#if PMPD_USE_MMAP && !PMPD_PLATFORM_POSIX
#error "PMPD_USE_MMAP=1 needs PMPD_PLATFORM_POSIX"
#endif

#ifndef PMPD_MAX_THREADS
/* A ceiling, not a cost: a session starts only the threads it is asked for,
 * and nothing is sized by this number.  64 covers hosts as well as boards. */
#define PMPD_MAX_THREADS 64
#endif
#ifndef PMPD_POOL_MIN_PARALLEL_WORK
/* Waking a worker and waiting for it costs 10-50 us, the time one core
 * needs for a few hundred thousand multiply-adds. */
#define PMPD_POOL_MIN_PARALLEL_WORK 262144u
#endif
#if PMPD_MAX_THREADS < 1 || PMPD_MAX_THREADS > 256
#error "PMPD_MAX_THREADS must be between 1 and 256"
#endif
#if PMPD_PLATFORM_NONE && PMPD_MAX_THREADS != 1
#undef PMPD_MAX_THREADS
#define PMPD_MAX_THREADS 1
#endif

#ifndef PMPD_OFFLINE
#define PMPD_OFFLINE 0
#endif

/* Functions shared between implementation files but not part of the API.
 * In the amalgamation they become static so only the API is exported. */
#if defined(PMPD_AMALGAMATION)
#define PMPD_INTERNAL static
#else
#define PMPD_INTERNAL
#endif

#endif
