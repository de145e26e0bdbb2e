/* Forced first include (-include) of the portable-build leg of scripts/test-pythons: makes the
 * glibc-only functions that macOS's C library lacks unavailable, so a use of one is a compile error.
 *
 * The C library's headers are included first with the feature macros pyconfig.h defines (the same
 * values, so its later definitions are no redefinitions): poisoning an identifier also rejects its
 * declaration, so the declarations must come before the pragma. */
#ifndef RLHEALTH_POISON_GLIBC_H
#define RLHEALTH_POISON_GLIBC_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#pragma GCC poison memrchr rawmemchr mempcpy pipe2
#endif
