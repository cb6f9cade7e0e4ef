// assert.h for kernel code: a failed assert() stops the launch with a LaunchError
// ("device-side assert triggered"), as on a GPU, instead of aborting Python.
// The C library's header comes first, for everything else it declares; like it,
// this header may be included again (with or without NDEBUG).
#include_next <assert.h>
#ifndef GPUEDU_SCAN
#undef assert
#ifdef NDEBUG
#define assert(e) ((void)0)
#else
extern "C++" {
namespace __gpuedu { [[noreturn]] void assert_failed(const char* expression, int line); }
}
#define assert(e) ((e) ? (void)0 : __gpuedu::assert_failed(#e, __LINE__))
#endif
#endif
