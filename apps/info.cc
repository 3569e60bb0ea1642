// `tandem info`: what this build can do on this machine.
#include <fmt/format.h>

#include "apps/commands.h"
#include "comm/init.h"
#include "core/allocator.h"
#include "core/cpu_isa.h"
#include "core/stream.h"
#include "core/thread_pool.h"
#include "kernels/attention_dropout_rng.h"
#include "kernels/bias_gradient.h"
#include "kernels/linear_gradients.h"
#include "kernels/parameter_casts.h"

#if TANDEM_WITH_CUDA
#include "kernels/cuda/attention_switches.h"
#include "kernels/cuda/row_kernel_switches.h"
#include "kernels/cuda/gemm_epilogue.h"
#endif
#if TANDEM_WITH_CUDNN
#include <cudnn.h>
#endif

namespace tandem::apps {

void add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Print the build configuration and the CUDA devices found");
  cmd->callback([] {
    fmt::print("tandem {}\n", TANDEM_VERSION);
    fmt::print("cuda backend: {}\n", cuda::built_with_cuda() ? "built" : "not built");
    const std::string nccl = comm::nccl_version();
    fmt::print("nccl backend: {}\n", nccl.empty() ? "not built (ring only)" : "built, NCCL " + nccl);
#if TANDEM_WITH_CUDNN
    const size_t v = cudnnGetVersion();  // major * 10000 + minor * 100 + patch since cuDNN 9
    fmt::print("cudnn: {}.{}.{}\n", v / 10000, (v / 100) % 100, v % 100);
#else
    fmt::print("cudnn: not found at build time\n");
#endif
    fmt::print("cuda devices: {}\n", cuda::device_count());
    if (cuda::built_with_cuda()) fmt::print("cuda: {}\n", cuda::cuda_versions());
    for (int d = 0; d < cuda::device_count(); ++d) fmt::print("  cuda:{}: {}\n", d, cuda::device_description(d));
#if TANDEM_WITH_CUDA
    // The CUDA kernel switches (docs/kernels.md), as the environment sets them or by default: what a
    // run's numbers were measured with. A bad value is an error naming the variable.
    fmt::print("cuda kernels: TANDEM_ATTENTION_FORWARD={} TANDEM_ATTENTION_BACKWARD={} TANDEM_ATTENTION_KEY_TILES={} "
               "TANDEM_ATTENTION_DROPOUT_KEEP={} TANDEM_ATTENTION_OCCUPANCY={} TANDEM_ATTENTION_BLOCK_ORDER={} "
               "TANDEM_ATTENTION_FUSED_CHUNKS={} "
               "TANDEM_CUBLASLT_EPILOGUES={} TANDEM_LAYER_NORM={} TANDEM_MASKED_MEAN={} "
               "TANDEM_DROPOUT_BACKWARD={} "
               "TANDEM_COLUMN_SUM={} TANDEM_GELU_DROPOUT={} TANDEM_ADD_LAYER_NORM={} TANDEM_EMBEDDING_BACKWARD={} "
               "TANDEM_DROPOUT_KEEP={}\n",
               kernels::attention_forward_kernel_name(kernels::attention_forward_kernel()),
               kernels::attention_backward_path_name(kernels::attention_backward_path()),
               kernels::attention_key_tiles_name(kernels::attention_key_tiles()),
               kernels::attention_dropout_keep_name(kernels::attention_dropout_keep()),
               kernels::attention_occupancy_name(kernels::attention_occupancy()),
               kernels::attention_block_order_name(kernels::attention_block_order()),
               kernels::attention_fused_chunks_name(kernels::attention_fused_chunks()),
               kernels::cublaslt_epilogues_name(kernels::cublaslt_epilogues()),
               kernels::layer_norm_kernel_name(kernels::layer_norm_kernel()),
               kernels::masked_mean_kernel_name(kernels::masked_mean_kernel()),
               kernels::dropout_backward_kernel_name(kernels::dropout_backward_kernel()),
               kernels::column_sum_kernel_name(kernels::column_sum_kernel()),
               kernels::gelu_dropout_kernel_name(kernels::gelu_dropout_kernel()),
               kernels::add_layer_norm_kernel_name(kernels::add_layer_norm_kernel()),
               kernels::embedding_backward_kernel_name(kernels::embedding_backward_kernel()),
               kernels::dropout_keep_name(kernels::dropout_keep()));
#endif
    // Where the encoder layer forms the gradients of the biases its row ops add (kernels/bias_gradient.h):
    // on every device, so outside the CUDA switches.
    fmt::print("bias gradients: TANDEM_BIAS_GRADIENT={}\n", kernels::bias_gradient_name(kernels::bias_gradient()));
    // How a forward casts the parameters to the compute dtype (kernels/parameter_casts.h): every build.
    fmt::print("parameter casts: TANDEM_PARAMETER_CASTS={}\n",
               kernels::parameter_casts_name(kernels::parameter_casts()));
    // Where a 16-bit forward's linear parameter gradients become f32 (kernels/linear_gradients.h): every build.
    fmt::print("linear gradients: TANDEM_LINEAR_GRADIENTS={}\n",
               kernels::linear_gradients_name(kernels::linear_gradients()));
    // Which random numbers decide attention dropout (kernels/attention_dropout_rng.h): every build.
    fmt::print("attention dropout: TANDEM_ATTENTION_DROPOUT_RNG={}\n",
               kernels::attention_dropout_rng_name(kernels::attention_dropout_rng()));
    // The CPU kernels' instruction set and intra-op threads, and why (TANDEM_CPU_ISA, TANDEM_NUM_THREADS).
    const CpuIsa isa = selected_cpu_isa();
    fmt::print("cpu isa: {} ({})\n", cpu_isa_name(isa),
               isa == best_cpu_isa() ? "best this CPU supports" : fmt::format("TANDEM_CPU_ISA; best: {}",
                                                                               cpu_isa_name(best_cpu_isa())));
    const ThreadCountChoice& threads = intra_op_thread_choice();
    fmt::print("cpu threads: {} ({})\n", threads.threads, threads.reason);
    // Host tensors of 2 MiB and more on transparent huge pages, and the block cache (core/allocator.h).
    fmt::print("host memory: blocks of 2 MiB and more on {}; freed blocks of 128 KiB and more {}\n",
               host_memory::large_blocks_on_huge_pages() ? "huge pages"
               : !host_memory::huge_pages_requested()    ? "4 KiB pages (TANDEM_HOST_HUGE_PAGES=0)"
                                                         : "4 KiB pages (this kernel has no transparent huge pages)",
               host_memory::caches_freed_blocks() ? "kept for reuse" : "given back at once (AddressSanitizer build)");
  });
}

}  // namespace tandem::apps
