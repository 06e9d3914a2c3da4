/* SPDX-License-Identifier: (GPL-2.0 OR BSD-3-Clause) */
/* What capi_c11.c (compiled as C11) reports to the C++ unit test. */
#ifndef MRC_SELFTESTS_CAPI_C11_H
#define MRC_SELFTESTS_CAPI_C11_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A type's size and alignment, or a field's offset and size. */
struct capi_layout {
	const char *name;
	size_t a; /* size / offset */
	size_t b; /* alignment / size */
};

const struct capi_layout *capi_c_layouts(size_t *n);
const struct capi_layout *capi_c_fields(size_t *n);
/* Calls every function with NULL objects; returns the number of calls that
 * did not fail with the expected errno (the first is described in msg). */
int capi_c_null_arguments(char *msg, size_t len);
uint32_t capi_c_api_version(void);

#ifdef __cplusplus
}
#endif

#endif
