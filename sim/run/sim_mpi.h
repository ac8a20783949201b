// sim/sim_mpi.h -- the few MPI operations a sweep needs, as a plain C table implemented by the
// module libkvfleet-mpi.so (sim/mpi/sim_mpi_module.c, linked with Open MPI). `kvfleet sweep`
// loads it only when it runs under mpirun, so no other command maps MPI. All calls are on
// MPI_COMM_WORLD and block; they abort the job on an MPI error (MPI's default handler).
#ifndef SIM_MPI_H
#define SIM_MPI_H

#include "kvf.h"

#define SIM_MPI_ABI 1   // bump when the table changes
#define SIM_MPI_MODULE "libkvfleet-mpi.so"

typedef struct sim_mpi_api {
    int abi;                                                     // SIM_MPI_ABI of the module
    void (*init)(int *rank, int *size);                          // MPI_Init, then rank and size
    void (*send_ints)(const int *v, int n, int dest, int tag);   // n ints to rank dest
    void (*recv_ints)(int *v, int n, int src, int tag);          // n ints from rank src
    void (*send_chars)(const char *v, int n, int dest, int tag);
    void (*recv_chars)(char *v, int n, int src, int tag);
    void (*sum_to_root)(const int *in, int *out, int n);   // element-wise sum onto rank 0
    void (*finalize)(void);                                // MPI_Finalize
} sim_mpi_api;

// Implemented by the module: its table (static storage).
const sim_mpi_api *sim_mpi_module_api(void);

// Loads the module (once per call site; the handle is kept) and returns its table, or NULL with
// KVF_ENODEV and the reason in *err (built without MPI, module missing, stale module).
const sim_mpi_api *sim_mpi_load(kvf_err *err);

#endif
