// kernel_names.h: the kernels an op runs are named while a scope is open on
// its thread, once each: oneDNN primitives by their implementation, the
// sgemm, frugal's vector kernels by their ISA; nothing is named outside a
// scope or from another thread; scopes nest.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "ops/cpu/blas.h"
#include "ops/cpu/dnnl.h"
#include "ops/cpu/kernel_names.h"
#include "ops/cpu/vec.h"

namespace frugal {
namespace {

TEST(KernelNames, EachKernelOnceWhileAScopeIsOpen) {
  std::vector<float> a(64 * 64, 0.5f), b(64 * 64, 0.25f), c(64 * 64);
  std::vector<float> x(1000, -1.f), y(1000), ws(static_cast<size_t>(cpu::EltwiseWorkspaceBytes() / sizeof(float)));
  cpu::Gemm(false, false, 64, 64, 64, 1.f, a.data(), b.data(), 0.f, c.data());  // no scope: not named
  std::string names;
  {
    const cpu::KernelNames scope(&names);
    cpu::Gemm(false, false, 64, 64, 64, 1.f, a.data(), b.data(), 0.f, c.data());
    cpu::Gemm(false, true, 64, 64, 64, 1.f, a.data(), b.data(), 0.f, c.data());
    cpu::Eltwise(dnnl::algorithm::eltwise_relu, 0.f, 0.f, x.data(), y.data(), 1000, OpReq::kWrite, ws.data());
    cpu::Vec();
    std::thread([&] { cpu::NoteKernel("another_thread"); }).join();
  }
  cpu::NoteKernel("after");
  const std::string eltwise = names.substr(names.find(' ') + 1, names.rfind(' ') - names.find(' ') - 1);
  EXPECT_EQ(names.rfind("dnnl_sgemm ", 0), 0u) << names;
  EXPECT_NE(eltwise.find(':'), std::string::npos) << "oneDNN's implementation name, like jit:avx2: " << names;
  EXPECT_EQ(names.substr(names.rfind(' ') + 1), std::string("vec:") + cpu::Vec().isa) << names;
  EXPECT_EQ(y[0], 0.f);

  std::string inner;
  {
    const cpu::KernelNames outer(&names);
    {
      const cpu::KernelNames scope(&inner);
      cpu::NoteKernel("ref:any");
    }
    cpu::NoteKernel("dnnl_sgemm");  // the outer scope again, which has it
  }
  EXPECT_EQ(inner, "ref:any");
  EXPECT_EQ(names.find("ref:any"), std::string::npos) << names;
  EXPECT_TRUE(cpu::IsReference("ref:any"));
  EXPECT_FALSE(cpu::IsReference("jit:avx2"));
  EXPECT_FALSE(cpu::IsReference("dnnl_sgemm"));
}

}  // namespace
}  // namespace frugal
