/* Ends a unit test binary: prints "<name>: N checks passed on <machine>" with uname -m as
 * seen from inside (under qemu-user, the emulated architecture) and returns the exit status. */
#ifndef GPULAB_REPORT_ARCH_H
#define GPULAB_REPORT_ARCH_H

#ifdef __cplusplus
extern "C" {
#endif
int report_and_exit_status(const char *name, int checks, int failures);
#ifdef __cplusplus
}
#endif

#endif /* GPULAB_REPORT_ARCH_H */
