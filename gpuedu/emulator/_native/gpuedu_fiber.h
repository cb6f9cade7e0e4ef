// The fibers' context switch, part of the emulator's runtime (included by
// gpuedu_runtime.h once the runtime state R exists): a hand-written switch for
// x86-64 and aarch64 on Linux, ucontext elsewhere (or with GPUEDU_UCONTEXT).
#pragma once
#ifndef GPUEDU_SCAN
#pragma GCC system_header
#endif
#ifndef GPUEDU_SCAN
namespace __gpuedu {

// ---- context switch -----------------------------------------------------------
#ifndef GPUEDU_UCONTEXT
extern "C" GPUEDU_HIDDEN void __gpuedu_switch(void** save_sp, void* load_sp);
#if defined(__x86_64__)
// Save the callee-saved registers on the old stack, swap stacks, restore them
// and jump (not ret) to the resume address: ret would mispredict every time.
asm(R"(
  .text
  .p2align 4
  .globl __gpuedu_switch
  .hidden __gpuedu_switch
  .type __gpuedu_switch,@function
__gpuedu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  popq %rcx
  jmpq *%rcx
  .size __gpuedu_switch, .-__gpuedu_switch
)");
#elif defined(__aarch64__)
asm(R"(
  .text
  .p2align 4
  .globl __gpuedu_switch
  .hidden __gpuedu_switch
  .type __gpuedu_switch,%function
__gpuedu_switch:
  sub sp, sp, #160
  stp x19, x20, [sp, #0]
  stp x21, x22, [sp, #16]
  stp x23, x24, [sp, #32]
  stp x25, x26, [sp, #48]
  stp x27, x28, [sp, #64]
  stp x29, x30, [sp, #80]
  stp d8, d9, [sp, #96]
  stp d10, d11, [sp, #112]
  stp d12, d13, [sp, #128]
  stp d14, d15, [sp, #144]
  mov x9, sp
  str x9, [x0]
  mov sp, x1
  ldp x19, x20, [sp, #0]
  ldp x21, x22, [sp, #16]
  ldp x23, x24, [sp, #32]
  ldp x25, x26, [sp, #48]
  ldp x27, x28, [sp, #64]
  ldp x29, x30, [sp, #80]
  ldp d8, d9, [sp, #96]
  ldp d10, d11, [sp, #112]
  ldp d12, d13, [sp, #128]
  ldp d14, d15, [sp, #144]
  add sp, sp, #160
  br x30
  .size __gpuedu_switch, .-__gpuedu_switch
)");
#endif
#endif

void fiber_entry();

#ifndef GPUEDU_UCONTEXT
// A stack top from which the first switch to the returned stack pointer starts entry().
inline void* prepare_stack(char* stack_top, void (*entry)()) {
  uintptr_t top = (uintptr_t)stack_top & ~(uintptr_t)15;
#if defined(__x86_64__)
  // [top-8]: fake return address (keeps the ABI's rsp%16==8 at entry),
  // [top-16]: where the switch jumps, then six callee-saved registers.
  uintptr_t* s = (uintptr_t*)top;
  s[-1] = 0;
  s[-2] = (uintptr_t)entry;
  for (int i = 3; i <= 8; ++i) s[-i] = 0;
  return (void*)(s - 8);
#else
  uintptr_t* s = (uintptr_t*)(top - 160);
  memset(s, 0, 160);
  s[11] = (uintptr_t)entry;  // x30: where the switch branches
  return (void*)s;
#endif
}
#endif

// Prepare a fresh fiber so that the first switch to it starts fiber_entry.
inline void fiber_init(Fiber& f, char* stack_top) {
#if defined(GPUEDU_UCONTEXT)
  getcontext(&f.uc);
  // stack_top may lie up to STACK_COLOURS cache lines below the mapping's top
  f.uc.uc_stack.ss_size = STACK_BYTES - STACK_COLOURS * STACK_COLOUR_BYTES;
  f.uc.uc_stack.ss_sp = stack_top - f.uc.uc_stack.ss_size;
  f.uc.uc_link = nullptr;
  makecontext(&f.uc, (void (*)())fiber_entry, 0);
#else
  f.sp = prepare_stack(stack_top, &fiber_entry);
#endif
}

inline void switch_to(Fiber* from, void** from_sp, Fiber* to) {
#ifdef GPUEDU_UCONTEXT
  (void)from_sp;
  swapcontext(from ? &from->uc : &R.main_uc, &to->uc);
#else
  (void)from;
  __gpuedu_switch(from_sp, to->sp);
#endif
}

inline void switch_to_main(Fiber* from) {
#ifdef GPUEDU_UCONTEXT
  swapcontext(&from->uc, &R.main_uc);
#else
  __gpuedu_switch(&from->sp, R.main_sp);
#endif
}

}  // namespace __gpuedu
#endif  // GPUEDU_SCAN
