"""`lamina serve --metrics` read by Prometheus' own Python client parser
(`prometheus_client.parser`): every family parses with its type and HELP,
histograms have ascending `le` buckets ending at `+Inf` = `_count`, and the
values agree with what this test sent and with `/proc` of the server."""

import os
import socket
import subprocess
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def _start(lamina_bin, tmp_path):
    proc = subprocess.Popen(
        [lamina_bin, "serve", "--dir", str(tmp_path / "db"), "--port", "0",
         "--host", "127.0.0.1", "--metrics", "127.0.0.1:0"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    dsl = metrics = None
    while dsl is None or metrics is None:
        line = proc.stdout.readline()
        assert line, "the server did not start"
        if line.startswith("lamina: metrics on http://"):
            metrics = line.strip().split("http://", 1)[1]
        elif line.startswith("lamina: listening on "):
            dsl = int(line.strip().rsplit(":", 1)[1])
    return proc, dsl, metrics


def _families(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_metrics_parse_with_prometheus_client(lamina_bin, tmp_path):
    proc, port, metrics = _start(lamina_bin, tmp_path)
    try:
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall("".join(f"p {i} {i}\n" for i in range(50)).encode()
                      + "".join(f"g {i}\n" for i in range(5)).encode() + b"g 999\n@end\n")
            while not s.recv(65536).endswith(b"@bye\n"):
                pass
        fams = _families(f"http://{metrics}")
        # Counters lose `_total` in the parser's family names.
        assert fams["lamina_writes"].type == "counter"
        assert fams["lamina_writes"].samples[0].value == 50
        assert fams["lamina_gets"].samples[0].value == 6
        assert fams["lamina_get_hits"].samples[0].value == 5
        assert fams["lamina_get_misses"].samples[0].value == 1
        assert "per batch" in fams["lamina_put_latency_seconds"].documentation
        for name in ["lamina_put_latency_seconds", "lamina_get_latency_seconds",
                     "lamina_scan_latency_seconds", "lamina_compaction_duration_seconds"]:
            fam = fams[name]
            assert fam.type == "histogram", name
            buckets = [s for s in fam.samples if s.name == name + "_bucket"]
            les = [float(s.labels["le"]) for s in buckets]
            assert les == sorted(les) and les[-1] == float("inf"), name
            counts = [s.value for s in buckets]
            assert counts == sorted(counts), name
            count = next(s.value for s in fam.samples if s.name == name + "_count")
            assert counts[-1] == count, name
        gets = fams["lamina_get_latency_seconds"]
        assert next(s.value for s in gets.samples if s.name.endswith("_count")) == 6
        assert fams["lamina_latency_seconds"].type == "summary"
        assert fams["lamina_build_info"].samples[0].value == 1
        assert fams["lamina_block_cache_hits"].type == "counter"
        assert fams["lamina_bloom_probes"].type == "counter"
        # process_* as every client library names them, against /proc.
        assert fams["process_cpu_seconds"].type == "counter"
        fds = fams["process_open_fds"].samples[0].value
        assert abs(fds - len(os.listdir(f"/proc/{proc.pid}/fd"))) <= 8
        start = fams["process_start_time_seconds"].samples[0].value
        assert time.time() - 600 < start <= time.time() + 1
        assert fams["process_resident_memory_bytes"].samples[0].value > 1 << 20
        assert fams["process_max_fds"].samples[0].value >= fds
    finally:
        proc.stdin.close()
        proc.terminate()
        proc.wait(timeout=30)
