// sim/mpi/sim_mpi_module.c -- libkvfleet-mpi.so: the sim_mpi_api table (sim_mpi.h) over Open
// MPI. The only file that includes mpi.h; built as a module so kvfleet itself links no MPI.
#include <mpi.h>

#include "sim_mpi.h"

static void init(int *rank, int *size) {
    MPI_Init(NULL, NULL);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
}
static void send_ints(const int *v, int n, int dest, int tag) {
    MPI_Send(v, n, MPI_INT, dest, tag, MPI_COMM_WORLD);
}
static void recv_ints(int *v, int n, int src, int tag) {
    MPI_Recv(v, n, MPI_INT, src, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}
static void send_chars(const char *v, int n, int dest, int tag) {
    MPI_Send(v, n, MPI_CHAR, dest, tag, MPI_COMM_WORLD);
}
static void recv_chars(char *v, int n, int src, int tag) {
    MPI_Recv(v, n, MPI_CHAR, src, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}
static void sum_to_root(const int *in, int *out, int n) {
    MPI_Reduce(in, out, n, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
}
static void finalize(void) {
    MPI_Finalize();
}

const sim_mpi_api *sim_mpi_module_api(void) {
    static const sim_mpi_api api = {SIM_MPI_ABI, init,       send_ints,   recv_ints,
                                    send_chars,  recv_chars, sum_to_root, finalize};
    return &api;
}
