"""Tests for compare.py's stand-in data (what export-data reads when a config trains on synthetic
sequences): python3 bench/pytorch/compare_standin_test.py TANDEM_BINARY (ctest -R bench_compare_standin).
The stand-in must be in the config's own data format, so that meta.json, which the PyTorch twin builds
its model from, has the config's classes and sequence length."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from compare import data_format, standin_data  # noqa: E402

TANDEM = None


def config(name):
    return os.path.join(ROOT, "configs", f"{name}.yaml")


def export_meta(name, sets, out):
    subprocess.run([TANDEM, "bench", "export-data", "--config", config(name), "--out", out] + sets, check=True,
                   stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "meta.json")) as f:
        return json.load(f)


class StandinDataTest(unittest.TestCase):
    def test_the_format_is_read_from_the_configs_data_block(self):
        self.assertEqual(data_format(config("imdb"), []), "imdb")
        self.assertEqual(data_format(config("ag_news_optimized"), []), "ag_news")

    def test_a_set_data_format_wins_over_the_config(self):
        self.assertEqual(data_format(config("imdb"), ["--set", "data.format=ag_news", "--set", "bf16=true"]), "ag_news")

    def test_imdb_gets_an_aclimdb_standin_with_two_classes_of_512_tokens(self):
        with tempfile.TemporaryDirectory() as tmp:
            sets = standin_data(os.path.join(tmp, "standin"), "imdb")
            meta = export_meta("imdb", sets, os.path.join(tmp, "data"))
            self.assertEqual((meta["num_classes"], meta["seq_len"]), (2, 512))

    def test_ag_news_gets_a_csv_standin_with_four_classes(self):
        with tempfile.TemporaryDirectory() as tmp:
            sets = standin_data(os.path.join(tmp, "standin"), "ag_news")
            meta = export_meta("ag_news_optimized", sets, os.path.join(tmp, "data"))
            self.assertEqual((meta["num_classes"], meta["seq_len"]), (4, 256))

    def test_a_format_without_a_standin_is_refused_by_name(self):
        with tempfile.TemporaryDirectory() as tmp, self.assertRaises(SystemExit) as e:
            standin_data(tmp, "jsonl")
        self.assertIn("data.format jsonl has none here (ag_news, imdb)", str(e.exception))


if __name__ == "__main__":
    TANDEM = sys.argv.pop(1)
    unittest.main()
