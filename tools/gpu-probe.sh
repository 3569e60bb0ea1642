#!/usr/bin/env bash
# First call on a lent GPU machine: what is there, so nobody probes twice.
# Prints the GPU, driver, CUDA toolkit, NCCL and cuDNN (toolkit and pip's
# wheels), glibc, compilers, CMake, the tools the GPU check uses and which
# build dependencies are missing (those come from the offline bundle);
# record the answers in docs/device.md.
set -u
echo "== gpu";       nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv 2>&1 | head -3
echo "== nvcc";      (command -v nvcc && nvcc --version | tail -2) 2>&1; ls -d /usr/local/cuda* 2>&1 | head -3
echo "== nccl";      find / \( -name nccl.h -o -name 'libnccl.so*' \) -not -path '/proc/*' 2>/dev/null | head -6
echo "== cudnn";     find / \( -name cudnn_version.h -o -name 'libcudnn.so*' \) -not -path '/proc/*' 2>/dev/null | head -6
echo "== wheels";    python3 -c 'import sys, os; [print(os.path.join(p, "nvidia", d)) for p in sys.path if os.path.isdir(os.path.join(p, "nvidia")) for d in sorted(os.listdir(os.path.join(p, "nvidia")))]' 2>&1 | head -30
echo "== glibc";     ldd --version | head -1
echo "== os";        (. /etc/os-release && echo "$PRETTY_NAME"); k=$(uname -r); echo "kernel $k$([ "$k" = 4.4.0 ] && echo ' (gVisor)')"
echo "== compilers"; g++ --version | head -1; command -v clang++ || true
echo "== build";     cmake --version 2>&1 | head -1; command -v ninja || echo "ninja: none"; command -v ccache || echo "ccache: none"
echo "== unpack";    for t in dpkg-deb ar tar xz zstd; do command -v $t >/dev/null && echo "have $t" || echo "MISSING $t"; done
echo "== gpu tools"; for t in compute-sanitizer ncu nsys cuobjdump; do command -v $t >/dev/null && echo "have $t" || echo "MISSING $t"; done
echo "== libs";      for h in eigen3/Eigen/Core fmt/format.h CLI/CLI.hpp nlohmann/json.hpp gtest/gtest.h boost/asio.hpp yaml-cpp/yaml.h libxml2/libxml/parser.h; do
                       [ -e /usr/include/$h ] && echo "have $h" || echo "MISSING $h"; done
echo "== data";      ls -d /usr/share/games/fortunes 2>/dev/null || echo "MISSING fortunes (the offline bundle has them)"
echo "== python";    python3 -c 'import torch,sys; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())' 2>&1
echo "== cpu";       nproc; free -g | head -2; df -h . | tail -1
