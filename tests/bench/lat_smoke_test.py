"""A short `gdr_bench --only lat` run against the real gdrstored: the JSON has the 4 KiB unary
line against Ping and the line that splits it, the daemon's own time per op (OpResult's
service_ns, admitted -> answered) against the op's whole time. Every op's daemon time lies
inside its whole time, so their medians keep that order: 0 < daemon's p50 <= the op's p50.

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


if __name__ == "__main__":
    unittest.main()
