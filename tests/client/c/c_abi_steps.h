/* What the C ABI test program's files share: one line per step ("ok: ..." or "FAIL: ..."). */
#ifndef GDRSTORE_TESTS_C_ABI_STEPS_H_
#define GDRSTORE_TESTS_C_ABI_STEPS_H_

#include <gdrstore/gdrstore.h>

/* Prints the step's outcome; a failure is counted and makes the program exit non-zero. */
void check(int ok, const char* step, const char* why);

/* c_abi_hostile.c: the ABI used carelessly or hostilely (NULL pointers, wrapping ranges,
 * released and made-up handles, SIZE_MAX allocations, threads failing on one client). */
void hostile_steps(gdrstore_client* client, const char* volume);
void hostile_cluster_steps(gdrstore_cluster* cluster, const char* volume);

#endif /* GDRSTORE_TESTS_C_ABI_STEPS_H_ */
