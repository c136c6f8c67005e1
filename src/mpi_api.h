/*
 * mpi_api.h: what cudadev_mpi.so (src/mpi/cudadev_mpi.c, linked against libmpi) gives the module (src/mpi.c).
 * NOTE [mpi shim]: cudadev itself is never linked against libmpi, so that it loads and works where OpenMPI is
 * not installed; the calls into MPI live in a small shared object that mpi.c opens with dlopen on first use
 * (next to the module or the luacuda executable, else where `make install` put it), and reaches through the one
 * table below. The shim knows nothing of Lua: it moves bytes and elements, and says what went wrong as text.
 */
#ifndef CDV_MPI_API_H
#define CDV_MPI_API_H

#include <stddef.h>

#define CDV_MPI_API_VERSION 1
#define CDV_MPI_SHIM_SYMBOL "cudadev_mpi_api"

enum { CDV_MPI_SUM, CDV_MPI_PROD, CDV_MPI_MAX, CDV_MPI_MIN, CDV_MPI_NOPS };

/* Every call returns 0, or -1 with a message (lowercase, "MPI_Bcast: ...") in msg[0..len). */
typedef struct cdv_mpi_api {
  int version; /* CDV_MPI_API_VERSION */
  /* MPI_Init_thread (MPI_THREAD_MULTIPLE asked) unless MPI is initialised already: *ours says which;
   * then the rank, size and rank within the node (MPI_Comm_split_type shared) of MPI_COMM_WORLD */
  int (*init)(int *ours, int *rank, int *size, int *local_rank, char *msg, size_t len);
  int (*barrier)(char *msg, size_t len);
  int (*bcast)(void *buf, size_t n, int root, char *msg, size_t len); /* n bytes, any size */
  /* count elements of a cudadev dtype (cdv_dtype, not float16: mpi.c reduces those as float32), in place */
  int (*allreduce)(void *buf, size_t count, int dtype, int op, char *msg, size_t len);
  int (*min_int)(long long *v, char *msg, size_t len); /* in place, MPI_MIN */
  int (*send)(const void *buf, size_t n, int dest, int tag, char *msg, size_t len);
  int (*recv)(void *buf, size_t n, int source, int tag, char *msg, size_t len);
  void (*finalize)(void); /* MPI_Finalize unless finalised already */
  void (*abort)(int code); /* MPI_Abort on MPI_COMM_WORLD */
} cdv_mpi_api;

/* loader.c: the shim's table, opened once (NOTE [mpi shim]); NULL, and *why says why not (every path tried) */
const cdv_mpi_api *cdv_mpi_load(const char **why);

#endif
