/*
 * cudadev_mpi.c: the MPI calls of cd.mpi, in a shared object of their own (NOTE [mpi shim] in src/mpi_api.h).
 * Built only where CMake finds MPI; src/mpi.c opens it with dlopen on first use. Every call reports errors as
 * text: MPI_COMM_WORLD's error handler is MPI_ERRORS_RETURN, so a failing call returns instead of aborting.
 * Counts above INT_MAX go in pieces of at most 1 GiB (MPI counts are int).
 */
#include <limits.h>
#include <stdio.h>
#include <mpi.h>

#include "cdv.h"
#include "mpi_api.h"

#define PIECE ((size_t)1 << 30)

static int fail(int rc, const char *api, char *msg, size_t len) {
  char text[MPI_MAX_ERROR_STRING];
  int n = 0;
  if (MPI_Error_string(rc, text, &n) != MPI_SUCCESS) snprintf(text, sizeof text, "error %d", rc);
  snprintf(msg, len, "%s: %s", api, text);
  return -1;
}

#define CALL(api, args)                                       \
  do {                                                        \
    int rc_ = api args;                                       \
    if (rc_ != MPI_SUCCESS) return fail(rc_, #api, msg, len); \
  } while (0)

static int shim_init(int *ours, int *rank, int *size, int *local_rank, char *msg, size_t len) {
  int inited = 0, finalized = 0, provided;
  CALL(MPI_Initialized, (&inited));
  CALL(MPI_Finalized, (&finalized));
  if (finalized) {
    snprintf(msg, len, "MPI_Init_thread: MPI was finalised already in this process");
    return -1;
  }
  *ours = !inited;
  if (!inited) CALL(MPI_Init_thread, (NULL, NULL, MPI_THREAD_MULTIPLE, &provided));
  CALL(MPI_Comm_set_errhandler, (MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  CALL(MPI_Comm_rank, (MPI_COMM_WORLD, rank));
  CALL(MPI_Comm_size, (MPI_COMM_WORLD, size));
  MPI_Comm node;
  CALL(MPI_Comm_split_type, (MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, *rank, MPI_INFO_NULL, &node));
  int rc = MPI_Comm_rank(node, local_rank);
  MPI_Comm_free(&node);
  return rc == MPI_SUCCESS ? 0 : fail(rc, "MPI_Comm_rank", msg, len);
}

static int shim_barrier(char *msg, size_t len) {
  CALL(MPI_Barrier, (MPI_COMM_WORLD));
  return 0;
}

static int shim_bcast(void *buf, size_t n, int root, char *msg, size_t len) {
  for (size_t at = 0; at < n; at += PIECE) {
    size_t k = n - at < PIECE ? n - at : PIECE;
    CALL(MPI_Bcast, ((char *)buf + at, (int)k, MPI_BYTE, root, MPI_COMM_WORLD));
  }
  return 0;
}

static MPI_Datatype datatype(int dtype) {
  switch (dtype) {
    case CDV_F32: return MPI_FLOAT;
    case CDV_F64: return MPI_DOUBLE;
    case CDV_I8: return MPI_INT8_T;
    case CDV_I16: return MPI_INT16_T;
    case CDV_I32: return MPI_INT32_T;
    case CDV_I64: return MPI_INT64_T;
    case CDV_U16: return MPI_UINT16_T;
    case CDV_U32: return MPI_UINT32_T;
    case CDV_U64: return MPI_UINT64_T;
    default: return MPI_UINT8_T; /* uint8, and bool (0 or 1: see below) */
  }
}

static int shim_allreduce(void *buf, size_t count, int dtype, int op, char *msg, size_t len) {
  static const MPI_Op ops[CDV_MPI_NOPS] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN};
  /* NOTE [bool reductions]: MPI defines only logical operations on booleans; a bool array holds 0 or 1 bytes,
   * so its sum (any true) is their maximum and its product (all true) their minimum, as PyTorch's are */
  MPI_Op o = ops[op];
  if (dtype == CDV_BOOL) o = op == CDV_MPI_SUM || op == CDV_MPI_MAX ? MPI_MAX : MPI_MIN;
  int size = 1;
  CALL(MPI_Type_size, (datatype(dtype), &size));
  size_t es = (size_t)size, piece = PIECE / es;
  for (size_t at = 0; at < count; at += piece) {
    size_t k = count - at < piece ? count - at : piece;
    CALL(MPI_Allreduce, (MPI_IN_PLACE, (char *)buf + at * es, (int)k, datatype(dtype), o, MPI_COMM_WORLD));
  }
  return 0;
}

static int shim_min_int(long long *v, char *msg, size_t len) {
  CALL(MPI_Allreduce, (MPI_IN_PLACE, v, 1, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD));
  return 0;
}

static int shim_send(const void *buf, size_t n, int dest, int tag, char *msg, size_t len) {
  size_t at = 0;
  do { /* an empty message is still one message: the receiver waits for it */
    size_t k = n - at < PIECE ? n - at : PIECE;
    CALL(MPI_Send, ((const char *)buf + at, (int)k, MPI_BYTE, dest, tag, MPI_COMM_WORLD));
    at += k;
  } while (at < n);
  return 0;
}

static int shim_recv(void *buf, size_t n, int source, int tag, char *msg, size_t len) {
  size_t at = 0;
  do {
    size_t k = n - at < PIECE ? n - at : PIECE;
    MPI_Status status;
    CALL(MPI_Recv, ((char *)buf + at, (int)k, MPI_BYTE, source, tag, MPI_COMM_WORLD, &status));
    at += k;
  } while (at < n);
  return 0;
}

static void shim_finalize(void) {
  int finalized = 1;
  if (MPI_Finalized(&finalized) == MPI_SUCCESS && !finalized) MPI_Finalize();
}

static void shim_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

__attribute__((visibility("default"))) const cdv_mpi_api *cudadev_mpi_api(void);
const cdv_mpi_api *cudadev_mpi_api(void) {
  static const cdv_mpi_api api = {
      CDV_MPI_API_VERSION, shim_init, shim_barrier, shim_bcast,    shim_allreduce,
      shim_min_int,        shim_send, shim_recv,    shim_finalize, shim_abort,
  };
  return &api;
}
