#include "worker/torch/model/fused_kernels.h"

#include <torch/csrc/autograd/custom_function.h>

#include "absl/strings/str_cat.h"
#include "core/dtype.h"
#include "kernels/dispatch.h"
#include "kernels/rms_norm.h"
#include "kernels/rope.h"
#include "worker/torch/model/element_type.h"

#ifdef ZEROFIT_TORCH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace zerofit::worker {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// t's element type, one the kernels take (fp32, bf16, fp16).
core::DType ElementType(const torch::Tensor& t) {
  const std::optional<core::DType> type = CoreElementType(t.scalar_type());
  TORCH_CHECK(type.has_value(), "fused kernels: no kernel for ", t.scalar_type(), " tensors");
  return *type;
}

// Runs launch(place) where t lives: the host reference for a CPU tensor; for a CUDA tensor the kernel on t's
// GPU and its current stream (so CUDA graphs capture it). A failure throws, naming `what`.
template <typename Launch>
void RunWhere(const torch::Tensor& t, const char* what, Launch&& launch) {
  absl::Status s;
  if (!t.is_cuda()) {
    s = launch(kernels::Place::Host());
  } else {
#ifdef ZEROFIT_TORCH_CUDA
    const c10::cuda::CUDAGuard guard(t.device());
    s = launch(kernels::Place::Cuda(c10::cuda::getCurrentCUDAStream(t.device().index()).stream()));
#else
    s = absl::FailedPreconditionError("a CUDA tensor, and this LibTorch has no CUDA");
#endif
  }
  TORCH_CHECK(s.ok(), what, ": ", s.ToString());
}

kernels::RmsNormShape RowsOf(const torch::Tensor& x) {
  const int64_t cols = x.size(-1);
  return {static_cast<size_t>(cols == 0 ? 0 : x.numel() / cols), static_cast<size_t>(cols)};
}

// y = RMSNorm(x) and the rows' reciprocal RMS; x contiguous.
std::pair<torch::Tensor, torch::Tensor> RmsNormForward(const torch::Tensor& x, const torch::Tensor& w,
                                                       double eps) {
  const kernels::RmsNormShape shape = RowsOf(x);
  torch::Tensor y = torch::empty_like(x);
  torch::Tensor rstd = torch::empty({static_cast<int64_t>(shape.rows)}, x.options().dtype(torch::kFloat32));
  const core::DType type = ElementType(x);
  const float e = static_cast<float>(eps);
  RunWhere(x, "FusedRmsNorm", [&](kernels::Place place) {
    return kernels::RmsNormForward(place, x.data_ptr(), w.data_ptr(), type, shape, e, y.data_ptr(),
                                   rstd.data_ptr<float>());
  });
  return {y, rstd};
}

class FusedRmsNormFunction : public torch::autograd::Function<FusedRmsNormFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w,
                               double eps) {
    auto [y, rstd] = RmsNormForward(x, w, eps);
    ctx->save_for_backward({x, w, rstd});
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor& x = saved[0];
    const torch::Tensor& w = saved[1];
    const torch::Tensor& rstd = saved[2];
    const torch::Tensor dy = grad_outputs[0].contiguous();
    const kernels::RmsNormShape shape = RowsOf(x);
    const core::DType type = ElementType(x);
    torch::Tensor dx = torch::empty_like(x);
    torch::Tensor dw = ctx->needs_input_grad(1) ? torch::empty_like(w) : torch::Tensor();
    void* dw_ptr = dw.defined() ? dw.data_ptr() : nullptr;
    // On a GPU the weight gradient's per-block partials: [blocks, cols] fp32, freed when the kernels are
    // queued (the caching allocator reuses the block only for work ordered after them on this stream).
    torch::Tensor scratch;
    if (x.is_cuda() && dw.defined())
      scratch = torch::empty({static_cast<int64_t>(kernels::RmsNormBackwardScratchFloats(shape))},
                             x.options().dtype(torch::kFloat32));
    float* scratch_ptr = scratch.defined() ? scratch.data_ptr<float>() : nullptr;
    RunWhere(x, "FusedRmsNorm backward", [&](kernels::Place place) {
      return kernels::RmsNormBackward(place, dy.data_ptr(), x.data_ptr(), w.data_ptr(),
                                      rstd.data_ptr<float>(), type, shape, dx.data_ptr(), dw_ptr,
                                      scratch_ptr);
    });
    return {dx, dw, torch::Tensor()};
  }
};

// The angles as [angle_batch, seq, head_dim], contiguous, from FusedRope's two accepted layouts.
torch::Tensor AnglesByRow(const torch::Tensor& angles, const torch::Tensor& x) {
  const int64_t b = x.size(0), t = x.size(1), d = x.size(3);
  torch::Tensor a = angles.dim() == 2 ? angles.unsqueeze(0) : angles;
  if (a.dim() == 4) {
    TORCH_CHECK(a.size(1) == 1, "FusedRope: angles ", angles.sizes(), " vary over heads");
    a = a.squeeze(1);
  }
  TORCH_CHECK(a.dim() == 3 && (a.size(0) == 1 || a.size(0) == b) && a.size(1) == t && a.size(2) == d,
              "FusedRope: angles ", angles.sizes(), " for x ", x.sizes());
  return a.contiguous();
}

// The rotation forward, or its transpose for the backward, of `in` [batch, seq, heads, head_dim].
torch::Tensor Rotate(const torch::Tensor& in, const torch::Tensor& cos, const torch::Tensor& sin,
                     bool forward) {
  kernels::RopeShape shape;
  shape.batch = static_cast<size_t>(in.size(0));
  shape.seq = static_cast<size_t>(in.size(1));
  shape.heads = static_cast<size_t>(in.size(2));
  shape.head_dim = static_cast<size_t>(in.size(3));
  shape.per_row_angles = cos.size(0) > 1;
  torch::Tensor out = torch::empty_like(in);
  const core::DType type = ElementType(in);
  RunWhere(in, "FusedRope", [&](kernels::Place place) {
    return forward ? kernels::RopeForward(place, in.data_ptr(), cos.data_ptr(), sin.data_ptr(), type, shape,
                                          out.data_ptr())
                   : kernels::RopeBackward(place, in.data_ptr(), cos.data_ptr(), sin.data_ptr(), type, shape,
                                           out.data_ptr());
  });
  return out;
}

class FusedRopeFunction : public torch::autograd::Function<FusedRopeFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& cos,
                               const torch::Tensor& sin) {
    ctx->save_for_backward({cos, sin});
    return Rotate(x, cos, sin, /*forward=*/true);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    return {Rotate(grad_outputs[0].contiguous(), saved[0], saved[1], /*forward=*/false), torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

absl::StatusOr<FusedKernels> ParseFusedKernels(const std::string& text, const std::string& field) {
  for (FusedKernels m : {FusedKernels::kCuda, FusedKernels::kOff, FusedKernels::kEverywhere}) {
    if (text == FusedKernelsName(m)) return m;
  }
  return absl::InvalidArgumentError(absl::StrCat(field, ": '", text.substr(0, 40),
                                                 "' is not a fused-kernels mode (cuda, off, everywhere)"));
}

const char* FusedKernelsName(FusedKernels mode) {
  switch (mode) {
    case FusedKernels::kCuda:
      return "cuda";
    case FusedKernels::kOff:
      return "off";
    case FusedKernels::kEverywhere:
      return "everywhere";
  }
  return "?";
}

bool FusedKernelsTake(FusedKernels mode, const torch::Tensor& a, const torch::Tensor& b) {
  if (mode == FusedKernels::kOff || a.device() != b.device() || a.scalar_type() != b.scalar_type() ||
      !CoreElementType(a.scalar_type()))
    return false;
  if (a.is_cuda()) return kernels::HaveCudaKernels();
  return a.is_cpu() && mode == FusedKernels::kEverywhere;
}

torch::Tensor FusedRmsNorm(const torch::Tensor& x, const torch::Tensor& w, double eps) {
  TORCH_CHECK(w.dim() == 1 && x.dim() >= 1 && w.size(0) == x.size(-1), "FusedRmsNorm: weight ", w.sizes(),
              " for input ", x.sizes());
  const torch::Tensor xc = x.contiguous();
  const torch::Tensor wc = w.contiguous();
  if (!torch::GradMode::is_enabled() || !(x.requires_grad() || w.requires_grad()))
    return RmsNormForward(xc, wc, eps).first;
  return FusedRmsNormFunction::apply(xc, wc, eps);
}

torch::Tensor FusedSwiGluProduct(const torch::Tensor& gate, const torch::Tensor& up) {
  TORCH_CHECK(gate.sizes() == up.sizes(), "FusedSwiGluProduct: gate ", gate.sizes(), ", up ", up.sizes());
  const torch::Tensor g = gate.contiguous();
  const torch::Tensor u = up.contiguous();
  torch::Tensor out = torch::empty_like(g);
  const core::DType type = ElementType(g);
  const size_t n = static_cast<size_t>(g.numel());
  RunWhere(g, "FusedSwiGluProduct", [&](kernels::Place place) {
    return kernels::SwiGluForward(place, g.data_ptr(), u.data_ptr(), type, n, out.data_ptr());
  });
  return out;
}

torch::Tensor FusedRope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  TORCH_CHECK(x.dim() == 4 && x.size(3) % 2 == 0 && x.is_contiguous(), "FusedRope: x ", x.sizes(),
              " is not a contiguous [batch, seq, heads, even head_dim]");
  TORCH_CHECK(!cos.requires_grad() && !sin.requires_grad(), "FusedRope: the angles take no gradient");
  const torch::Tensor c = AnglesByRow(cos, x), s = AnglesByRow(sin, x);
  TORCH_CHECK(c.sizes() == s.sizes(), "FusedRope: cos ", cos.sizes(), ", sin ", sin.sizes());
  if (!torch::GradMode::is_enabled() || !x.requires_grad()) return Rotate(x, c, s, /*forward=*/true);
  return FusedRopeFunction::apply(x, c, s);
}

std::pair<torch::Tensor, torch::Tensor> FusedSwiGluGrads(const torch::Tensor& grad, const torch::Tensor& gate,
                                                         const torch::Tensor& up, bool want_gate,
                                                         bool want_up) {
  const torch::Tensor d = grad.contiguous();
  const torch::Tensor g = gate.contiguous();
  const torch::Tensor u = up.contiguous();
  torch::Tensor d_gate = want_gate ? torch::empty_like(g) : torch::Tensor();
  torch::Tensor d_up = want_up ? torch::empty_like(g) : torch::Tensor();
  void* dg = want_gate ? d_gate.data_ptr() : nullptr;
  void* du = want_up ? d_up.data_ptr() : nullptr;
  const core::DType type = ElementType(g);
  const size_t n = static_cast<size_t>(g.numel());
  RunWhere(g, "FusedSwiGluGrads", [&](kernels::Place place) {
    return kernels::SwiGluBackward(place, d.data_ptr(), g.data_ptr(), u.data_ptr(), type, n, dg, du);
  });
  return {d_gate, d_up};
}

}  // namespace zerofit::worker
