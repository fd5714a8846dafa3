// `saobp info`: what this build is and what it sees.
#include <fmt/core.h>
#include <omp.h>

#include <Eigen/Core>

#include "cli/commands.h"
#include "dist/comm.h"
#include "tensor/device_info.h"

namespace saobp::cli {

void register_info(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("info", "Print the build configuration and the devices found");
  const auto run = [] {
    fmt::print("saobp 0.1.0\n");
    fmt::print("  OpenMP threads : {}\n", omp_get_max_threads());
    fmt::print("  Eigen          : {}.{}.{} ({})\n", EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION,
               EIGEN_MINOR_VERSION, Eigen::SimdInstructionSetsInUse());
    fmt::print("  CUDA backend   : {}\n", cuda::built() ? "built" : "not built");
    if (cuda::available())
      fmt::print("  GPU            : {}\n", cuda::device_name(0));
    else if (cuda::built())
      fmt::print("  GPU            : none found\n");
    fmt::print("  MPI            : {}\n", dist::built() ? "built" : "not built");
    // Under mpirun: every rank's place (gathered, printed by rank 0).
    const std::vector<std::string> layout =
        dist::allgather(fmt::format("{} threads on {}", omp_get_max_threads(), dist::host()));
    if (dist::size() > 1)
      for (size_t r = 0; r < layout.size(); ++r)
        fmt::print("  {:<15}: {}\n", fmt::format("rank {} of {}", r, layout.size()), layout[r]);
    return 0;
  };
  add_command(sub, run, Ranks::every);
}

}  // namespace saobp::cli
