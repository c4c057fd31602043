/*
 * What the C fuzzers share (tests/unit/test_fuzz.c, tests/capture/test_wire_fuzz.c): a seeded
 * generator, so a failure is reproduced by running again with the same seed, and the command
 * line: -n ITERATIONS and -s SEED, or CS_FUZZ_ITERATIONS and CS_FUZZ_SEED (ctest's iteration
 * count stays the default unless the environment asks for a longer campaign).
 */
#ifndef COMMSCOPE_TESTS_FUZZ_H
#define COMMSCOPE_TESTS_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static uint64_t rng;

/* splitmix64 */
static inline uint64_t rnd(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform-enough in [0, n); 0 when n is 0. */
static inline uint64_t below(uint64_t n)
{
    return n ? rnd() % n : 0;
}

/* Parse the options into *iters (default as passed) and *seed (default 1); usage names the
 * program's operands for the message.  Returns optind (the first operand), or -1 after printing
 * the usage on a bad option or a count below 1. */
static inline int fuzz_args(int argc, char **argv, long *iters, uint64_t *seed, const char *usage)
{
    *seed = 1;
    const char *env = getenv("CS_FUZZ_SEED");
    if (env && *env)
        *seed = strtoull(env, NULL, 0);
    env = getenv("CS_FUZZ_ITERATIONS");
    if (env && *env)
        *iters = strtol(env, NULL, 10);
    int opt;
    while ((opt = getopt(argc, argv, "n:s:")) != -1) {
        if (opt == 'n' && !(env && *env)) {
            *iters = strtol(optarg, NULL, 10);
        } else if (opt == 's') {
            *seed = strtoull(optarg, NULL, 0);
        } else if (opt != 'n') {
            fprintf(stderr, "usage: %s\n", usage);
            return -1;
        }
    }
    if (*iters < 1) {
        fprintf(stderr, "usage: %s\n", usage);
        return -1;
    }
    return optind;
}

#endif
