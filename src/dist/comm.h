// The process group of a data-parallel run (docs/distributed.md): every MPI call of saobp lives
// behind this header. src/dist/mpi/comm.cpp implements it with MPI (a build with OpenMPI found);
// src/dist/no_mpi/comm.cpp is the twin of a build without MPI, a world of one process in which
// the collectives are copies and the point-to-point calls throw.
//
// MPI starts only when the process was launched by mpirun or srun (their environment variables
// name a rank); a plain `saobp ...` never initializes MPI and is a world of one, exactly as a
// build without MPI.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace saobp::dist {

// Initializes MPI when launched by mpirun/srun, finalizes it on destruction. One per process,
// in main().
class Session {
 public:
  Session(int& argc, char**& argv);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
};

bool built();  // compiled with MPI
int rank();    // 0 when MPI is not running
int size();    // 1 when MPI is not running
// This process's rank among the ranks on its host (MPI_COMM_TYPE_SHARED), 0 when MPI is not
// running: train.device = "cuda" takes GPU local_rank mod device_count.
int local_rank();
inline bool root() { return rank() == 0; }
std::string host();  // this process's host name

// Ends every rank of the job with `code` (MPI_Abort); a world of one just exits.
[[noreturn]] void abort(int code);
void barrier();
// A barrier for long waits (a study's rank waiting minutes for the others' runs): MPI_Ibarrier,
// tested every 20 ms with sleeps between, so the waiting rank leaves its core to the processes
// that are still working (MPI_Barrier polls without pause).
void idle_barrier();

// Point-to-point, blocking, float buffers of any length (split into MPI-sized pieces).
void send(const float* data, size_t n, int to);
void recv(float* data, size_t n, int from);
// data on rank `from` is copied into data on every rank.
void broadcast(float* data, size_t n, int from);
// Sums over ranks in place that run in the background (MPI_Iallreduce) while this process
// computes: start() begins one, progress() lets MPI move the started ones along (MPI only moves
// them inside its own calls), wait() completes them all. Every rank must start the same sums
// (the same lengths) in the same order, as MPI requires of collectives; a buffer must stay alive
// and untouched from start() until wait() returns. The summation order is MPI's, not fixed. In
// a world of one the sums are the data as they are. One object per sequence of sums; it must not
// be destroyed with sums in flight (MPI cannot cancel a collective; an error ends the job first).
class AsyncSums {
 public:
  AsyncSums();
  ~AsyncSums();
  AsyncSums(const AsyncSums&) = delete;
  AsyncSums& operator=(const AsyncSums&) = delete;
  void start(float* data, size_t n);  // the sum over ranks of data[0, n), into data
  bool progress();                    // MPI_Testall: true when every started sum is complete
  void wait();                        // MPI_Waitall; then nothing is in flight

 private:
  struct Requests;
  std::unique_ptr<Requests> requests_;
};
// Every rank's n doubles, concatenated in rank order (size() · n values), on every rank.
std::vector<double> allgather(const std::vector<double>& mine);
// Every rank's string in rank order, on every rank.
std::vector<std::string> allgather(const std::string& mine);

}  // namespace saobp::dist
