// comm.h in a build without MPI: a world of one process. The collectives are copies; the
// point-to-point calls have no partner and throw.
#include "dist/comm.h"

#include <cstdlib>

#include "core/error.h"

namespace saobp::dist {

Session::Session(int& argc, char**& argv) { (void)argc, (void)argv; }
Session::~Session() = default;

bool built() { return false; }
int rank() { return 0; }
int size() { return 1; }
void abort(int code) { std::exit(code); }
void barrier() {}

void send(const float* data, size_t n, int to) {
  (void)data, (void)n;
  fail("dist", "send to rank {}: saobp was built without MPI (a world of one process)", to);
}

void recv(float* data, size_t n, int from) {
  (void)data, (void)n;
  fail("dist", "receive from rank {}: saobp was built without MPI (a world of one process)", from);
}

void broadcast(float* data, size_t n, int from) { (void)data, (void)n, (void)from; }
void allreduce_sum(float* data, size_t n, size_t bucket) { (void)data, (void)n, (void)bucket; }
std::vector<double> allgather(const std::vector<double>& mine) { return mine; }
std::vector<std::string> allgather(const std::string& mine) { return {mine}; }

}  // namespace saobp::dist
