/* A minimal test harness shared by the C and C++ unit tests. */
#ifndef GPULAB_CHECK_H
#define GPULAB_CHECK_H

#include <stdio.h>

#include "report_arch.h"

static int checks_run, checks_failed;

#define CHECK(cond)                                                                     \
    do {                                                                                \
        checks_run++;                                                                   \
        if (!(cond)) {                                                                  \
            checks_failed++;                                                            \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);    \
        }                                                                               \
    } while (0)

#endif /* GPULAB_CHECK_H */
