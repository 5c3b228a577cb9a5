/* Minimal assertions for the C unit tests: failures are counted and reported, main returns
 * nonzero when any failed. */
#ifndef NETCL_TEST_CHECK_H
#define NETCL_TEST_CHECK_H

#include <math.h>
#include <stdio.h>
#include <string.h>

static int check_failures, check_count;

#define CHECK(cond)                                                                \
  do {                                                                             \
    check_count++;                                                                 \
    if (!(cond)) {                                                                 \
      check_failures++;                                                            \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);     \
    }                                                                              \
  } while (0)

#define CHECK_OK(expr)                                                             \
  do {                                                                             \
    nc_status s_ = (expr);                                                         \
    check_count++;                                                                 \
    if (s_ != NC_OK) {                                                             \
      check_failures++;                                                            \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #expr, nc_last_error()); \
    }                                                                              \
  } while (0)

#define CHECK_ERR(expr, code, needle)                                              \
  do {                                                                             \
    nc_status s_ = (expr);                                                         \
    check_count++;                                                                 \
    if (s_ != (code) || !strstr(nc_last_error(), needle)) {                        \
      check_failures++;                                                            \
      fprintf(stderr, "%s:%d: %s: expected %s containing '%s', got %s '%s'\n", __FILE__, __LINE__, #expr, \
              #code, needle, nc_status_name(s_), nc_last_error());                 \
    }                                                                              \
  } while (0)

#define CHECK_DONE()                                                               \
  do {                                                                             \
    printf("%d checks, %d failed\n", check_count, check_failures);                 \
    return check_failures ? 1 : 0;                                                 \
  } while (0)

#endif
