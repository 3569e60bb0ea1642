#!/usr/bin/env bash
# First call on a lent GPU machine: what is there, so nobody probes twice.
# Prints the GPU, driver, CUDA toolkit, NCCL and cuBLAS headers and libraries,
# glibc, CMake, Python and PyTorch; record the answers in docs/device.md.
set -u
echo "== gpu";     nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv 2>&1 | head -3
echo "== nvcc";    (command -v nvcc && nvcc --version | tail -2) 2>&1
echo "== cuda";    ls -d /usr/local/cuda* 2>&1 | head
echo "== nccl.h";  find / -name nccl.h -not -path '*/proc/*' 2>/dev/null | head -3
echo "== libnccl"; ldconfig -p | grep -E "libnccl|libcublas" | head; find / -name 'libnccl.so*' -not -path '*/proc/*' 2>/dev/null | head -3
echo "== glibc";   ldd --version | head -1
echo "== cmake";   cmake --version 2>&1 | head -1; command -v ninja || echo "ninja: none"
echo "== compilers"; g++ --version | head -1
echo "== libs";    for h in eigen3/Eigen/Core fmt/format.h CLI/CLI.hpp nlohmann/json.hpp gtest/gtest.h boost/asio.hpp yaml-cpp/yaml.h; do
                     [ -e /usr/include/$h ] && echo "have $h" || echo "MISSING $h"; done
echo "== python";  python3 -c 'import torch,sys; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())' 2>&1
echo "== cpu";     nproc; free -g | head -2
