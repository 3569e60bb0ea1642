"""Tests for compare.py's run(): a command that fails is run once more, and a second failure stops the
comparison naming the command and its exit status (python3 bench/pytorch/compare_run_test.py;
ctest -R bench_compare_run)."""
import io
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import run  # noqa: E402


def fails_until(marker, times):
    """A shell command that fails (exit 3) the first `times` runs, counted in the file marker."""
    return ["sh", "-c", f'n=$(cat {marker} 2>/dev/null || echo 0); echo $((n + 1)) >{marker}; '
                        f'echo "attempt $((n + 1))"; [ "$n" -ge {times} ] || exit 3']


class RunTest(unittest.TestCase):
    def test_a_command_that_succeeds_runs_once(self):
        with tempfile.TemporaryDirectory() as tmp, redirect_stdout(io.StringIO()):
            out, rss = run(fails_until(os.path.join(tmp, "n"), 0))
        self.assertEqual(out.strip(), "attempt 1")
        self.assertGreater(rss, 0)

    def test_a_command_that_fails_once_is_run_again_and_its_second_output_returned(self):
        log = io.StringIO()
        with tempfile.TemporaryDirectory() as tmp, redirect_stdout(log):
            out, _ = run(fails_until(os.path.join(tmp, "n"), 1))
        self.assertEqual(out.strip(), "attempt 2")
        self.assertIn("failed (3), running it once more", log.getvalue())
        self.assertIn("attempt 1", log.getvalue())  # the failure's output is shown

    def test_a_second_failure_stops_naming_the_command_and_its_status(self):
        with tempfile.TemporaryDirectory() as tmp, redirect_stdout(io.StringIO()):
            marker = os.path.join(tmp, "n")
            with self.assertRaises(SystemExit) as stop:
                run(fails_until(marker, 2))
            with open(marker) as f:
                self.assertEqual(f.read().strip(), "2")
        self.assertRegex(str(stop.exception), r"^failed \(3\) 2 times: sh -c ")


if __name__ == "__main__":
    unittest.main()
