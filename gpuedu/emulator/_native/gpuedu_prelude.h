// Everything a CUDA C source expects to find, for compiling it as C++ on the CPU.
#pragma once
#ifndef GPUEDU_SCAN  // in the scan, macro expansions must stay attributed to the user's file
#pragma GCC system_header
#endif
#include "gpuedu_device.h"
#include "gpuedu_runtime.h"
#include "gpuedu_ptx.h"
#include "gpuedu_wgmma.h"
