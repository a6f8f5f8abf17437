#include <stdio.h>
#include <sys/utsname.h>

#include "report_arch.h"

int report_and_exit_status(const char *name, int checks, int failures) {
    struct utsname host;
    const char *machine = uname(&host) == 0 ? host.machine : "unknown";
    if (failures != 0) {
        printf("%s: %d of %d checks FAILED on %s\n", name, failures, checks, machine);
        return 1;
    }
    printf("%s: %d checks passed on %s\n", name, checks, machine);
    return 0;
}
