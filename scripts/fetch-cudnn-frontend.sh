#!/usr/bin/env bash
# Puts the cuDNN frontend's headers (header-only C++; PyPI's nvidia-cudnn-frontend
# wheel carries them under include/) into DIR/include, for the cuDNN attention
# cross-check back-end (kernels/cuda/attention_cudnn.h).
#
#     scripts/fetch-cudnn-frontend.sh .deps/cudnn-frontend
set -euo pipefail
dir=${1:?usage: scripts/fetch-cudnn-frontend.sh DIR}
exec "$(dirname "$0")/fetch-wheel.sh" "$dir" nvidia-cudnn-frontend 1.32.0 '^include/' '' include/cudnn_frontend.h
