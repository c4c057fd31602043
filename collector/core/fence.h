/*
 * A memory fence that ThreadSanitizer can follow.  TSan models no stand-alone fence (GCC refuses
 * one under -fsanitize=thread), so a sanitized build orders through a read-modify-write of a
 * private word instead, which orders this thread's accesses the same way; every other build
 * gets the plain fence, which costs nothing for acquire and release on x86.
 */
#ifndef COMMSCOPE_CORE_FENCE_H
#define COMMSCOPE_CORE_FENCE_H

#if defined(__SANITIZE_THREAD__)
#define CS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CS_TSAN 1
#endif
#endif

#ifdef CS_TSAN
#define CS_FENCE(order)                                                                            \
    do {                                                                                           \
        static int cs__fence_word;                                                                 \
        (void)__atomic_fetch_add(&cs__fence_word, 0, (order));                                     \
    } while (0)
#else
#define CS_FENCE(order) __atomic_thread_fence(order)
#endif

#endif
