"""Hugging Face's group_by_length for the PyTorch twin (train_classifier.py), without torch, so
that CI checks it against transformers' output (length_grouping_test.py, ctest -R
bench_length_grouping). Tandem's C++ version is data/length_grouping.h."""


def group_by_length(order, lengths, batch):
    """transformers' get_length_grouped_indices on a given permutation: megabatches of
    min(50, n // (4 batch)) batches (at least 1), each sorted by descending length, the longest
    example of all swapped to the front (what `group_by_length: true` does in Tandem too)."""
    n = len(order)
    size = max(1, min(50, n // (batch * 4))) * batch
    mega = [sorted(order[i: i + size], key=lambda k: lengths[k], reverse=True) for i in range(0, n, size)]
    best = max(range(len(mega)), key=lambda j: (lengths[mega[j][0]], -j))
    mega[0][0], mega[best][0] = mega[best][0], mega[0][0]
    return [k for m in mega for k in m]
