// binding.cu — a bench-only torch extension: vLLM's Hopper cutlass_scaled_mm (CUTLASS 3.x, sm90a) as
// torch.ops.vllm_cutlass.cutlass_scaled_mm(out, a, b, a_scales, b_scales, bias=None), so that a
// benchmark can time it next to libw8a8 in one process. scripts/steps/vllm.sh builds it together with
// vLLM's own sources (carried, never committed; that script's header says which and how).
//
// Same contract as vLLM's op: a (M,K) row-major fp8 e4m3 or int8, b (K,N) column-major of the same
// type, out (M,N) bf16 or fp16, a_scales fp32 of 1 or M elements, b_scales fp32 of 1 or N, bias
// (N) of out's type or None. The checks below are the ones vLLM's cutlass_scaled_mm makes before it
// picks the sm90 entry (scaled_mm_entry.cu); the work is that entry, unchanged.
#include <optional>

#include <c10/cuda/CUDAGuard.h>
#include <torch/all.h>
#include <torch/library.h>

// vLLM's sm90 entry (csrc/quantization/w8a8/cutlass/scaled_mm_c3x_sm90.cu), declared as
// scaled_mm_entry.cu declares it.
void cutlass_scaled_mm_sm90(torch::Tensor& c, torch::Tensor const& a, torch::Tensor const& b,
                            torch::Tensor const& a_scales, torch::Tensor const& b_scales,
                            std::optional<torch::Tensor> const& bias);

// That file also names vLLM's block-scaled and zero-point kernels, whose sources are not built here:
// these stand in for them and refuse.
namespace vllm {
void cutlass_scaled_mm_blockwise_sm90_fp8(torch::Tensor&, torch::Tensor const&, torch::Tensor const&,
                                          torch::Tensor const&, torch::Tensor const&) {
  TORCH_CHECK(false, "vllm_cutlass: block-scaled kernels are not built into this extension");
}
void cutlass_scaled_mm_azp_sm90_int8(torch::Tensor&, torch::Tensor const&, torch::Tensor const&,
                                     torch::Tensor const&, torch::Tensor const&, torch::Tensor const&,
                                     std::optional<torch::Tensor> const&,
                                     std::optional<torch::Tensor> const&) {
  TORCH_CHECK(false, "vllm_cutlass: azp kernels are not built into this extension");
}
}  // namespace vllm

static void cutlass_scaled_mm(torch::Tensor& out, torch::Tensor const& a, torch::Tensor const& b,
                              torch::Tensor const& a_scales, torch::Tensor const& b_scales,
                              std::optional<torch::Tensor> const& bias) {
  int64_t const m = a.size(0), k = a.size(1), n = b.size(1);
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && out.dim() == 2 && b.size(0) == k && out.size(0) == m &&
                  out.size(1) == n,
              "vllm_cutlass: shapes must be a (M,K), b (K,N), out (M,N)");
  TORCH_CHECK(a.stride(1) == 1 && out.stride(1) == 1 && b.stride(0) == 1,
              "vllm_cutlass: a and out must be row-major, b column-major");
  TORCH_CHECK(out.stride(0) % 16 == 0 && b.stride(1) % 16 == 0,
              "vllm_cutlass: leading dimensions must be 16-aligned");
  TORCH_CHECK(!bias || (bias->dim() == 1 && bias->numel() == n && bias->is_contiguous()),
              "vllm_cutlass: bias must be a contiguous (N) vector");
  at::cuda::OptionalCUDAGuard const guard(device_of(a));
  cutlass_scaled_mm_sm90(out, a, b, a_scales, b_scales, bias);
}

TORCH_LIBRARY(vllm_cutlass, m) {
  m.def("cutlass_scaled_mm(Tensor! out, Tensor a, Tensor b, Tensor a_scales, Tensor b_scales, Tensor? bias)"
        " -> ()");
  m.impl("cutlass_scaled_mm", torch::kCUDA, &cutlass_scaled_mm);
}
