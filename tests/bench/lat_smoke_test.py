"""A short `gdr_bench --only lat` run against the real gdrstored: the JSON has the 4 KiB unary
line against Ping and the line that splits it, the daemon's own time per op (OpResult's
service_ns, admitted -> answered) against the op's whole time. Every op's daemon time lies
inside its whole time, so their medians keep that order: 0 < daemon's p50 <= the op's p50.
Also a short `--only rate` run with `--stream-batch 8`: the Stream split into messages of at
most 8 ops is an info line beside the rate line, against the same unary calls; 0 or a value
above a message's 1024 ops is refused naming the flag.

usage: lat_smoke_test.py GDR_BENCH
"""
import json
import subprocess
import sys
import tempfile
import unittest

GDR_BENCH = sys.argv.pop(1) if len(sys.argv) > 1 else "gdr_bench"


class LatencySplit(unittest.TestCase):
    def test_the_daemons_time_splits_the_unary_line(self):
        args = ["--only", "lat", "--lat-ops", "50", "--repeats", "1", "--warmup", "0", "--json"]
        with tempfile.TemporaryDirectory(prefix="gdr-lat.") as tmp:
            p = subprocess.run([GDR_BENCH] + args, cwd=tmp, capture_output=True, text=True,
                               timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        rows = {r["name"]: r for r in json.loads(p.stdout)["rows"]}
        self.assertIn("4KiB Write unary qd1 p50", rows)
        self.assertIn("4KiB Write unary qd1, daemon's time p50", rows)
        op = rows["4KiB Write unary qd1 p50"]
        daemon = rows["4KiB Write unary qd1, daemon's time p50"]
        self.assertEqual(daemon["baseline"], op["product"])
        self.assertGreater(daemon["product"], 0)
        self.assertLessEqual(daemon["product"], op["product"])


class StreamBatchLine(unittest.TestCase):
    def run_bench(self, *args):
        with tempfile.TemporaryDirectory(prefix="gdr-rate.") as tmp:
            return subprocess.run([GDR_BENCH, "--only", "rate", "--rate-ops", "200",
                                   "--repeats", "1", "--warmup", "0", *args], cwd=tmp,
                                  capture_output=True, text=True, timeout=120)

    def test_split_stream_is_an_info_line_beside_the_rate_line(self):
        p = self.run_bench("--stream-batch", "8", "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        rows = {r["name"]: r for r in json.loads(p.stdout)["rows"]}
        self.assertIn("4KiB Write stream qd32", rows)
        split = rows.get("4KiB Write stream qd32 batch8")
        self.assertIsNotNone(split, sorted(rows))
        self.assertEqual(split["aim"], "info")
        self.assertEqual(split["baseline"], rows["4KiB Write stream qd32"]["baseline"])
        self.assertGreater(split["product"], 0)

    def test_bad_batches_are_refused_naming_the_flag(self):
        for bad in ("0", "1025", "eight"):
            p = self.run_bench("--stream-batch", bad)
            self.assertNotEqual(p.returncode, 0, bad)
            self.assertIn("--stream-batch", p.stderr, bad)
            if bad != "eight":  # the range, not only an unknown flag
                self.assertIn("1024", p.stderr, bad)


if __name__ == "__main__":
    unittest.main()
