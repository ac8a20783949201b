// sim/sim_mpi.c -- loads libkvfleet-mpi.so (see sim_mpi.h). The module is opened with global
// symbols because Open MPI opens its own plugins afterwards and they resolve against libmpi.
#include <string.h>

#include "sim_mpi.h"

const sim_mpi_api *sim_mpi_load(kvf_err *err) {
#ifndef KVF_HAVE_MPI
    kvf_fail(err, KVF_ENODEV, "built without MPI (configure with -DKVFLEET_MPI=ON)");
    return NULL;
#else
    void *h = kvf_module_open(SIM_MPI_MODULE, true, err);
    if (!h) return NULL;
    void *p = kvf_module_sym(h, SIM_MPI_MODULE, "sim_mpi_module_api", err);
    if (!p) return NULL;
    const sim_mpi_api *(*get)(void);
    memcpy(&get, &p, sizeof p);   // POSIX: dlsym's pointer converts to a function pointer
    const sim_mpi_api *api = get();
    if (!api || api->abi != SIM_MPI_ABI) {
        kvf_fail(err, KVF_ENODEV, "%s has interface %d, this kvfleet wants %d: rebuild it",
                 SIM_MPI_MODULE, api ? api->abi : -1, SIM_MPI_ABI);
        return NULL;
    }
    return api;
#endif
}
