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
inline bool root() { return rank() == 0; }
std::string host();  // this process's host name

// Ends every rank of the job with `code` (MPI_Abort); a world of one just exits.
[[noreturn]] void abort(int code);
void barrier();

// Point-to-point, blocking, float buffers of any length (split into MPI-sized pieces).
void send(const float* data, size_t n, int to);
void recv(float* data, size_t n, int from);
// data on rank `from` is copied into data on every rank.
void broadcast(float* data, size_t n, int from);
// Sum over ranks in place, in buckets of `bucket` floats, all in flight at once
// (MPI_Iallreduce); the summation order is MPI's, not fixed.
void allreduce_sum(float* data, size_t n, size_t bucket);
// Every rank's n doubles, concatenated in rank order (size() · n values), on every rank.
std::vector<double> allgather(const std::vector<double>& mine);
// Every rank's string in rank order, on every rank.
std::vector<std::string> allgather(const std::string& mine);

}  // namespace saobp::dist
