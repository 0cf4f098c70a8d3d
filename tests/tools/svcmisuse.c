/* Misuses the services between tools (tests/test_services.py): at the application's
 * MPI_Comm_size it asks for reqtrack's service with the wrong signature (the core
 * must stop the job with one line), or, with SVCMISUSE=missing, for a service nobody
 * registered (an error code, nothing printed, the job goes on). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "qmpi.h"

_EXTERN_C_ int S_Comm_size(MPI_Comm comm, int *size, int i, vector *v)
{
    QMPI_Service_function function = NULL;
    void *data = NULL, *value = NULL;
    const char *mode = getenv("SVCMISUSE");

    if (mode != NULL && strcmp(mode, "missing") == 0) {
        int rc = QMPI_Service_get("no.such.service", "int(void)", QMPI_ANY_PROVIDER, &function, &data);
        int grc = QMPI_Global_get("no.such.global", QMPI_ANY_PROVIDER, &value);
        printf("svcmisuse: missing service %d %d, missing global %d %d\n", rc, function == NULL, grc, value == NULL);
    } else {
        QMPI_Service_get("reqtrack.creator", "int(void)", QMPI_ANY_PROVIDER, &function, &data);
    }
    return QMPI_Next_Comm_size(comm, size, i, v);
}

_EXTERN_C_ char *get_interceptions(int i) { return i == _MPI_Comm_size ? "S_Comm_size" : NULL; }
