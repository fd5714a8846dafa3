// comm.h with MPI (OpenMPI or any MPI-3 library). Counts are ints in MPI, so long buffers go
// in pieces of at most 2^30 elements.
#include "dist/comm.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "core/error.h"

namespace saobp::dist {

namespace {

constexpr size_t kPiece = size_t{1} << 30;
int local_rank_ = 0;  // set once by Session, a collective every rank makes at its start

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
  // The rank among those sharing this host's memory (the GPU a rank takes, task.cpp's run_device).
  MPI_Comm host = MPI_COMM_NULL;
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, &host),
        "MPI_Comm_split_type");
  MPI_Comm_rank(host, &local_rank_);
  MPI_Comm_free(&host);
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

int local_rank() { return running() ? local_rank_ : 0; }

void abort(int code) {
  if (running() && size() > 1) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

void barrier() {
  if (size() > 1) check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
}

void idle_barrier() {
  if (size() == 1) return;
  MPI_Request request;
  check(MPI_Ibarrier(MPI_COMM_WORLD, &request), "MPI_Ibarrier");
  for (int done = 0;;) {
    check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
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

struct AsyncSums::Requests {
  std::vector<MPI_Request> pending;
};

AsyncSums::AsyncSums() : requests_(std::make_unique<Requests>()) {}
AsyncSums::~AsyncSums() = default;

void AsyncSums::start(float* data, size_t n) {
  if (size() == 1) return;
  for (size_t i = 0; i < n; i += kPiece) {
    requests_->pending.emplace_back();
    check(MPI_Iallreduce(MPI_IN_PLACE, data + i, static_cast<int>(std::min(kPiece, n - i)), MPI_FLOAT,
                         MPI_SUM, MPI_COMM_WORLD, &requests_->pending.back()),
          "MPI_Iallreduce");
  }
}

bool AsyncSums::progress() {
  std::vector<MPI_Request>& p = requests_->pending;
  if (p.empty()) return true;
  int done = 0;
  check(MPI_Testall(static_cast<int>(p.size()), p.data(), &done, MPI_STATUSES_IGNORE), "MPI_Testall");
  if (done) p.clear();
  return done != 0;
}

void AsyncSums::wait() {
  std::vector<MPI_Request>& p = requests_->pending;
  if (!p.empty())
    check(MPI_Waitall(static_cast<int>(p.size()), p.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
  p.clear();
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
