// Binds the library's references to the oldest glibc versions of the few functions that
// glibc 2.32-2.34 moved into libc.so.6 under new version names (dlopen, pthread_create, …).
// The library runs against the image's own glibc; linked plainly on a new glibc it would
// refuse to load on anything older than 2.34. Every glibc since 2.34 still exports these old
// versions, and an older one finds them in libdl.so.2 and libpthread.so.0, which the library
// names as dependencies for that reason. Force-included into every source of the library.
#pragma once

#if defined(__x86_64__)
#define FASTSNAP_GLIBC_BASE "GLIBC_2.2.5"
#define FASTSNAP_GLIBC_2_3_3 "GLIBC_2.3.3"
#elif defined(__aarch64__)
#define FASTSNAP_GLIBC_BASE "GLIBC_2.17"
#define FASTSNAP_GLIBC_2_3_3 "GLIBC_2.17"
#endif

#ifdef FASTSNAP_GLIBC_BASE
__asm__(".symver dlopen,dlopen@" FASTSNAP_GLIBC_BASE);
__asm__(".symver dlclose,dlclose@" FASTSNAP_GLIBC_BASE);
__asm__(".symver dlerror,dlerror@" FASTSNAP_GLIBC_BASE);
__asm__(".symver dlvsym,dlvsym@" FASTSNAP_GLIBC_BASE);
__asm__(".symver dladdr1,dladdr1@" FASTSNAP_GLIBC_2_3_3);
__asm__(".symver pthread_create,pthread_create@" FASTSNAP_GLIBC_BASE);
__asm__(".symver pthread_detach,pthread_detach@" FASTSNAP_GLIBC_BASE);
__asm__(".symver pthread_once,pthread_once@" FASTSNAP_GLIBC_BASE);
__asm__(".symver pthread_sigmask,pthread_sigmask@" FASTSNAP_GLIBC_BASE);
__asm__(".symver pthread_condattr_setclock,pthread_condattr_setclock@" FASTSNAP_GLIBC_2_3_3);
#endif
