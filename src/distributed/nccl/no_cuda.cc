// The NCCL communicator of a build without CUDA (FRUGAL_CUDA=OFF, or AUTO
// without a toolkit): it says so.
#include <cstdlib>

#include "backend/device.h"
#include "frugal/dist.h"

namespace frugal {

std::unique_ptr<Communicator> MakeNcclCommunicator(std::unique_ptr<Communicator> host, int) {
  host->Abort(
      "NCCL: frugal was built without CUDA (configure with -DFRUGAL_CUDA=ON where the CUDA toolkit, cuDNN "
      "and NCCL are installed)");
  std::abort();  // not reached: Abort ends the process
}
std::vector<std::unique_ptr<Communicator>> MakeNcclGroup(std::vector<std::unique_ptr<Communicator>>,
                                                         const std::vector<int>&) {
  backend::RequireCudaDevice(0, "NCCL");
  return {};
}

}  // namespace frugal
