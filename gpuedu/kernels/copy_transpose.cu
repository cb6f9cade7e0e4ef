// copy_transpose.cu: out = in^T for a row-major rows x cols matrix (out is cols x rows).
//
// A transpose reads and writes every element once, so its speed is set by how well the accesses
// coalesce. Reading rows is coalesced; writing them as columns is not, unless a tile is staged
// through shared memory.
//
// version 0: a plain copy with the same launch shape, the roof the transposes are measured against
// version 1: naive: read coalesced, write with a stride of `rows` floats (uncoalesced)
// version 2: stage a TILE x TILE tile in shared memory, so both the global read and the global
//            write are coalesced; the column read from shared memory hits one bank 32 times
// version 3: as 2, with the tile padded to TILE x (TILE + 1): a column of the tile now falls in
//            32 different banks, so the shared-memory read has no bank conflicts
//
// Launch with block = (TILE, BLOCK_ROWS) and grid = (ceil_div(cols, TILE), ceil_div(rows, TILE)):
// each block covers one TILE x TILE tile, each thread TILE / BLOCK_ROWS of its elements.
#include "common.cuh"

#ifndef TILE
#define TILE 32
#endif
#ifndef BLOCK_ROWS
#define BLOCK_ROWS 8
#endif

extern "C" __global__ void copy_kernel0(float* out, const float* in, int rows, int cols) {
    int col = blockIdx.x * TILE + threadIdx.x;
    for (int j = 0; j < TILE; j += BLOCK_ROWS) {
        int row = blockIdx.y * TILE + threadIdx.y + j;
        if (row < rows && col < cols)  // partial tiles at the right and bottom edges
            out[row * cols + col] = in[row * cols + col];
    }
}

extern "C" __global__ void transpose_kernel1(float* out, const float* in, int rows, int cols) {
    int col = blockIdx.x * TILE + threadIdx.x;
    for (int j = 0; j < TILE; j += BLOCK_ROWS) {
        int row = blockIdx.y * TILE + threadIdx.y + j;
        if (row < rows && col < cols)
            out[col * rows + row] = in[row * cols + col];  // neighbouring threads write `rows` apart
    }
}

extern "C" __global__ void transpose_kernel2(float* out, const float* in, int rows, int cols) {
    __shared__ float tile[TILE][TILE];
    int col = blockIdx.x * TILE + threadIdx.x;
    for (int j = 0; j < TILE; j += BLOCK_ROWS) {
        int row = blockIdx.y * TILE + threadIdx.y + j;
        if (row < rows && col < cols)
            tile[threadIdx.y + j][threadIdx.x] = in[row * cols + col];
    }
    // Every thread is about to read elements another thread wrote: wait for the whole tile.
    __syncthreads();
    // The block now writes the transposed tile: its block coordinates swap, and threadIdx.x runs
    // along the output row (an input column), so the global write is coalesced too.
    int out_col = blockIdx.y * TILE + threadIdx.x;   // an input row
    for (int j = 0; j < TILE; j += BLOCK_ROWS) {
        int out_row = blockIdx.x * TILE + threadIdx.y + j;  // an input column
        if (out_row < cols && out_col < rows)
            out[out_row * rows + out_col] = tile[threadIdx.x][threadIdx.y + j];
    }
}

extern "C" __global__ void transpose_kernel3(float* out, const float* in, int rows, int cols) {
    // One extra column: element [r][c] sits at word r * (TILE + 1) + c, so walking down a column
    // moves 33 words each step and the 32 threads of a warp hit 32 different banks.
    __shared__ float tile[TILE][TILE + 1];
    int col = blockIdx.x * TILE + threadIdx.x;
    for (int j = 0; j < TILE; j += BLOCK_ROWS) {
        int row = blockIdx.y * TILE + threadIdx.y + j;
        if (row < rows && col < cols)
            tile[threadIdx.y + j][threadIdx.x] = in[row * cols + col];
    }
    __syncthreads();  // the tile is complete before anyone reads a column of it
    int out_col = blockIdx.y * TILE + threadIdx.x;
    for (int j = 0; j < TILE; j += BLOCK_ROWS) {
        int out_row = blockIdx.x * TILE + threadIdx.y + j;
        if (out_row < cols && out_col < rows)
            out[out_row * rows + out_col] = tile[threadIdx.x][threadIdx.y + j];
    }
}
