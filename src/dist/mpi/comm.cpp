// comm.h with MPI (OpenMPI or any MPI-3 library). Counts are ints in MPI, so long buffers go
// in pieces of at most 2^30 elements.
#include "dist/comm.h"

#include <mpi.h>

#include <algorithm>
#include <cstdlib>

#include "core/error.h"

namespace saobp::dist {

namespace {

constexpr size_t kPiece = size_t{1} << 30;

bool running() {
  int init = 0, done = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&done);
  return init && !done;
}

// Launched by a process manager that names a rank: OpenMPI's mpirun, or a PMI / PMIx launcher
// (MPICH's hydra, Slurm's srun).
bool launched_as_rank() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"})
    if (std::getenv(v)) return true;
  return false;
}

void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) fail("dist", "{} failed (MPI error {})", what, rc);
}

}  // namespace

Session::Session(int& argc, char**& argv) {
  if (!launched_as_rank()) return;
  int provided = 0;
  // OpenMP threads compute; only the main thread calls MPI.
  check(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  // Errors return codes (turned into saobp::Error) instead of MPI's default abort.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

Session::~Session() {
  if (running()) MPI_Finalize();
}

bool built() { return true; }

int rank() {
  if (!running()) return 0;
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int size() {
  if (!running()) return 1;
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

void abort(int code) {
  if (running() && size() > 1) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

void barrier() {
  if (size() > 1) check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
}

void send(const float* data, size_t n, int to) {
  for (size_t i = 0; i < n; i += kPiece)
    check(MPI_Send(data + i, static_cast<int>(std::min(kPiece, n - i)), MPI_FLOAT, to, 0, MPI_COMM_WORLD),
          "MPI_Send");
}

void recv(float* data, size_t n, int from) {
  for (size_t i = 0; i < n; i += kPiece)
    check(MPI_Recv(data + i, static_cast<int>(std::min(kPiece, n - i)), MPI_FLOAT, from, 0, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE),
          "MPI_Recv");
}

void broadcast(float* data, size_t n, int from) {
  if (size() == 1) return;
  for (size_t i = 0; i < n; i += kPiece)
    check(MPI_Bcast(data + i, static_cast<int>(std::min(kPiece, n - i)), MPI_FLOAT, from, MPI_COMM_WORLD),
          "MPI_Bcast");
}

void allreduce_sum(float* data, size_t n, size_t bucket) {
  if (size() == 1) return;
  bucket = std::clamp<size_t>(bucket, 1, kPiece);
  std::vector<MPI_Request> pending;
  for (size_t i = 0; i < n; i += bucket) {
    pending.emplace_back();
    check(MPI_Iallreduce(MPI_IN_PLACE, data + i, static_cast<int>(std::min(bucket, n - i)), MPI_FLOAT,
                         MPI_SUM, MPI_COMM_WORLD, &pending.back()),
          "MPI_Iallreduce");
  }
  check(MPI_Waitall(static_cast<int>(pending.size()), pending.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
}

std::vector<double> allgather(const std::vector<double>& mine) {
  std::vector<double> all(mine.size() * static_cast<size_t>(size()));
  if (size() == 1) return mine;
  check(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all.data(),
                      static_cast<int>(mine.size()), MPI_DOUBLE, MPI_COMM_WORLD),
        "MPI_Allgather");
  return all;
}

std::vector<std::string> allgather(const std::string& mine) {
  if (size() == 1) return {mine};
  const int n = size(), len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<size_t>(n)), offsets(static_cast<size_t>(n));
  check(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD), "MPI_Allgather");
  int total = 0;
  for (int r = 0; r < n; ++r) offsets[static_cast<size_t>(r)] = total, total += lens[static_cast<size_t>(r)];
  std::string all(static_cast<size_t>(total), '\0');
  check(MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(), MPI_CHAR,
                       MPI_COMM_WORLD),
        "MPI_Allgatherv");
  std::vector<std::string> out;
  for (int r = 0; r < n; ++r)
    out.push_back(all.substr(static_cast<size_t>(offsets[static_cast<size_t>(r)]),
                             static_cast<size_t>(lens[static_cast<size_t>(r)])));
  return out;
}

}  // namespace saobp::dist
