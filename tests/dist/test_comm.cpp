// The process group in a plain process (no mpirun): a world of one, in which the collectives
// leave the data as it is (docs/distributed.md). The ranks themselves are tested by run_mpi.sh.
#include <catch2/catch.hpp>
#include <vector>

#include "dist/comm.h"

using namespace saobp;

TEST_CASE("dist: a plain process is a world of one whose sums are the data itself", "[dist]") {
  CHECK(dist::rank() == 0);
  CHECK(dist::size() == 1);
  CHECK(dist::root());
  std::vector<float> a = {1.5f, -2.0f, 3.25f}, b = {7.0f};
  const std::vector<float> a0 = a, b0 = b;
  dist::AsyncSums sums;
  CHECK(sums.progress());  // nothing started: all done
  sums.start(a.data(), a.size());
  sums.start(b.data(), b.size());
  CHECK(sums.progress());
  sums.wait();
  CHECK(a == a0);
  CHECK(b == b0);
  dist::idle_barrier();
  dist::barrier();
  CHECK(dist::allgather(std::vector<double>{0.5, 2.0}) == std::vector<double>{0.5, 2.0});
}
