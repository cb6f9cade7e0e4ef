// The emulator's one thread-local variable, in a library of its own that Python loads once (RTLD_GLOBAL)
// before any kernel module: each module reaches it with the initial-exec model, a fixed offset from the
// thread pointer, as cheap as a global variable. It points at the running worker's state (threadIdx,
// blockIdx, the runtime's scheduler, ...: __gpuedu::Worker in gpuedu_runtime.h); a thread that has not run
// a launch's blocks yet points at `idle`, where a module loading registers its file-scope __shared__ variables.
#include "gpuedu_host.h"

namespace {
alignas(128) unsigned char idle[__gpuedu::host::WORKER_BYTES];
}

extern "C" __attribute__((visibility("default"))) __thread void* __gpuedu_worker
    __attribute__((tls_model("initial-exec"))) = idle;
