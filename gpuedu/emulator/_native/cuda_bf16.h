// bfloat16 is not implemented by the CPU emulator; use __half (cuda_fp16.h).
#pragma once
#error "cuda_bf16.h is not available in the gpuedu CPU emulator; use cuda_fp16.h (__half)"
