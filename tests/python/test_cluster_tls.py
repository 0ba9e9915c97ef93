"""gdrstore.Cluster's etcd TLS keywords against a real etcd (/usr/bin/etcd, skipped with the
reason when absent) whose client port takes TLS with client certificates only, as
deploy/kubernetes/examples/etcd.yaml runs it; certificates made by `openssl` for the test
(test_tls's pki), and a gdrstored registered through that etcd with --cluster-tls-*."""

import os
import pathlib
import re
import time
import uuid

import numpy as np
import pytest

import gdrstore
from conftest import Daemon
from test_cluster import ETCD, Etcd
# The module fixture: a CA, a server certificate (127.0.0.1) and a client certificate.
from test_tls import pki

MiB = 1 << 20


@pytest.fixture(scope="module")
def tls_etcd(pki):
    if not os.access(ETCD, os.X_OK):
        pytest.skip(f"no etcd at {ETCD} (install the Debian package etcd-server)")
    (server_cert, server_key), (client_cert, client_key) = pki["server"], pki["client"]
    e = Etcd(tls={"ca": pki["ca"], "server_cert": server_cert, "server_key": server_key,
                  "client_cert": client_cert, "client_key": client_key})
    try:
        yield e
    finally:
        e.stop()


@pytest.fixture(scope="module")
def member(pki, tls_etcd):
    """m0, registered through the TLS etcd with the client certificate, serving vol0."""
    url = tls_etcd.url(f"py-tls-{uuid.uuid4().hex[:8]}")
    cert, key = pki["client"]
    d = Daemon("--cluster", url, "--cluster-id", "m0", "--cluster-ttl", "3",
               "--cluster-tls-ca", pki["ca"], "--cluster-tls-cert", cert,
               "--cluster-tls-key", key, "--volume", "vol0=8MiB")
    try:
        yield url
    finally:
        d.stop()


def tls_keywords(pki):
    cert, key = pki["client"]
    return {"etcd_tls_ca": pki["ca"], "etcd_tls_cert": cert, "etcd_tls_key": key}


def test_a_cluster_over_etcd_tls_sees_the_member_and_moves_verified_bytes(pki, member):
    # Paths as os.PathLike too, as members_file takes them.
    kw = {k: pathlib.Path(v) for k, v in tls_keywords(pki).items()}
    with gdrstore.Cluster(etcd=member, member_retry=0.2, **kw) as c:
        deadline = time.monotonic() + 15
        while not any(m["present"] for m in c.status()["members"]):
            assert time.monotonic() < deadline, f"m0 did not register: {c.status()}"
            time.sleep(0.1)
        c.create_volume("vol0", stripe_unit=64 * 1024, replicas=1)
        src = np.random.default_rng(44).integers(0, 256, MiB - 3, dtype=np.uint8)
        assert c.put(src, "vol0", 4097) == MiB - 3
        back = np.zeros(MiB - 3, dtype=np.uint8)
        assert c.get("vol0", 4097, into=back) == MiB - 3
        assert np.array_equal(back, src)


def test_without_a_client_certificate_etcd_is_unavailable_naming_it(pki, member):
    endpoint = member.split("/")[2]
    with pytest.raises(gdrstore.Unavailable, match=re.escape(endpoint)):
        gdrstore.Cluster(etcd=member, etcd_tls_ca=pki["ca"], etcd_timeout=0.5)


def test_bad_tls_files_are_refused_naming_them(pki, tmp_path):
    # Nothing listens there: each refusal comes before any connection.
    url = "etcd://127.0.0.1:1/p"
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("no certificate here\n")
    missing = str(tmp_path / "missing.pem")
    cert, key = pki["client"]
    for kw, named in [({"etcd_tls_ca": missing}, missing),
                      ({"etcd_tls_ca": not_pem}, str(not_pem)),
                      ({"etcd_tls_cert": not_pem, "etcd_tls_key": key}, str(not_pem)),
                      ({"etcd_tls_cert": cert}, "etcd_tls_key"),
                      ({"etcd_tls_key": key}, "etcd_tls_cert"),
                      ({"etcd_tls_cert": cert, "etcd_tls_key": pki["server"][1]},
                       "is not the key of the certificate")]:
        with pytest.raises(gdrstore.InvalidArgument, match=re.escape(named)):
            gdrstore.Cluster(etcd=url, **kw)
    with pytest.raises(gdrstore.InvalidArgument, match="members file"):
        gdrstore.Cluster(members_file=str(tmp_path / "m.json"), etcd_tls_ca=pki["ca"])
    with pytest.raises(ValueError, match="etcd_tls_ca"):
        gdrstore.Cluster(etcd=url, etcd_tls_ca="ca\0.pem")
