// ptx_sm80.cuh: the Ampere (sm_80) instructions the course's tensor-core kernels write as inline PTX, one
// wrapper each, so that a kernel reads as the instructions it issues: cp_async16, ldmatrix_x4, MmaF16::fma
// (attention.cu's version 4 and mma_gemm.cu's GEMM ladder use them).
// Semantics and fragment layouts are the PTX ISA's (sections "Data Movement and Conversion Instructions:
// cp.async", "Warp-level matrix load instruction: ldmatrix" and "Matrix Fragments for mma.m16n8k16 with
// floating point type"); the emulator runs the same statements with the same layouts.
//
// Fragments of mma.m16n8k16 (D = A B + C, A 16 x 16, B 16 x 8, C and D 16 x 8), for lane l of the warp,
// groupID g = l / 4 and thread-in-group t = l % 4:
//   A (row-major, 4 registers of two 16-bit halves, the lower column in the lower half):
//       reg 0: row g,     cols 2t, 2t+1          reg 2: row g,     cols 8+2t, 8+2t+1
//       reg 1: row g + 8, cols 2t, 2t+1          reg 3: row g + 8, cols 8+2t, 8+2t+1
//   B ("col": 2 registers of two halves): reg 0 rows (k) 2t, 2t+1 of col (n) g; reg 1 rows 8+2t, 8+2t+1
//   C, D (f32, 4 floats): c0, c1 row g, cols 2t, 2t+1; c2, c3 row g + 8, cols 2t, 2t+1
// ldmatrix.x4 loads four 8 x 8 matrices of halves: lanes 8j .. 8j+7 give the addresses of matrix j's 8 rows
// (16 bytes each), and register j of lane l receives row l / 4 of matrix j, halves 2(l % 4) and 2(l % 4)+1:
// a row of matrix j as A's or B's registers want it. With .trans, the same lane receives column l / 4 instead
// (rows 2(l % 4) and 2(l % 4)+1 of that column): a matrix stored row by row arrives as B of its transpose.
//
// These instructions exist from sm_80 on (cp.async and mma m16n8k16; ldmatrix from sm_75). Compiled for an
// older GPU each wrapper traps: the file still builds there, for the kernels that do not use them, and the
// launchers refuse a tensor-core version on such a GPU before launching it (ops.attention, version 4).
#pragma once

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define PTX_SM80 0
#else
#define PTX_SM80 1
#endif

// The 32-bit shared-memory address PTX's .shared instructions take, of a pointer into shared memory.
__device__ inline unsigned shared_address(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// cp.async.cg: copy 16 bytes from global to shared memory without passing through registers; the copy is
// only issued here. src_bytes < 16 reads that many and zero-fills the rest (0: reads nothing, writes 16
// zeros). Both addresses must be 16-byte aligned. (Each cp.async statement clobbers "memory": the compiler
// keeps the kernel's own shared-memory accesses on their side of the issue and of the wait.)
__device__ inline void cp_async16(unsigned shared, const void* global, int src_bytes) {
#if PTX_SM80
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(shared), "l"(global), "r"(src_bytes) : "memory");
#else
    __trap();
#endif
}
__device__ inline void cp_async16(void* shared, const void* global, int src_bytes) {
    cp_async16(shared_address(shared), global, src_bytes);
}

// Close the batch of this thread's cp.async copies issued since the last commit: one "group".
__device__ inline void cp_async_commit() {
#if PTX_SM80
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#else
    __trap();
#endif
}

// Wait until at most PENDING of this thread's committed groups are still in flight (0: all have landed).
// It covers this thread's copies only: other threads' copies are visible after a barrier that follows
// their own waits.
template <int PENDING>
__device__ inline void cp_async_wait() {
#if PTX_SM80
    asm volatile("cp.async.wait_group %0;\n" :: "n"(PENDING) : "memory");
#else
    __trap();
#endif
}

// ldmatrix .x4: four 8 x 8 matrices of 16-bit elements from shared memory into r[0..3] (layout above);
// every lane passes the address of one row (lanes 8j .. 8j+7: matrix j), as a pointer or a shared address.
__device__ inline void ldmatrix_x4(unsigned (&r)[4], unsigned row) {
#if PTX_SM80
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(row));
#else
    __trap();
#endif
}
__device__ inline void ldmatrix_x4(unsigned (&r)[4], const void* row) { ldmatrix_x4(r, shared_address(row)); }

// The same, each matrix transposed on the way: rows stored in shared memory arrive as columns.
__device__ inline void ldmatrix_x4_trans(unsigned (&r)[4], unsigned row) {
#if PTX_SM80
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(row));
#else
    __trap();
#endif
}
__device__ inline void ldmatrix_x4_trans(unsigned (&r)[4], const void* row) {
    ldmatrix_x4_trans(r, shared_address(row));
}

// mma.sync m16n8k16 on FP16 inputs with FP32 sums: d += A b, one warp together (fragments above).
// pack(lo, hi): two floats rounded to FP16 (to nearest) in one register, lo in the lower half, as the
// fragments want the lower column; cvt puts its first source in the upper half.
struct MmaF16 {
    static __device__ inline void fma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
#if PTX_SM80
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                     "{%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
        __trap();
#endif
    }
    static __device__ inline unsigned pack(float lo, float hi) {
        unsigned r;
#if PTX_SM80
        asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
#else
        r = 0;
        __trap();
#endif
        return r;
    }
};

// The same on BF16 inputs (8 exponent bits, 7 fraction bits), FP32 sums.
struct MmaBF16 {
    static __device__ inline void fma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
#if PTX_SM80
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                     "{%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
        __trap();
#endif
    }
    static __device__ inline unsigned pack(float lo, float hi) {
        unsigned r;
#if PTX_SM80
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
#else
        r = 0;
        __trap();
#endif
        return r;
    }
};
