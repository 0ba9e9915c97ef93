"""The Python package's TLS keyword arguments against a real mTLS gdrstored, with a CA and
certificates that `openssl` makes for the test: verified transfers with the right certificate,
refusals without one, and a bad key file named before anything is sent."""

import os
import subprocess

import numpy as np
import pytest

import gdrstore
from conftest import Daemon

MiB = 1 << 20


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def issue(d, ca, name, ext):
    openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=d)
    with open(os.path.join(d, f"{name}.ext"), "w") as f:
        f.write(ext)
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-out", f"{name}.pem", "-days", "30", "-extfile", f"{name}.ext",
            cwd=d)
    return os.path.join(d, f"{name}.pem"), os.path.join(d, f"{name}.key")


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("pki"))
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "30", "-subj", "/CN=py CA",
            "-addext", "basicConstraints=critical,CA:TRUE", cwd=d)
    server = issue(d, "ca", "server",
                   "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    client = issue(d, "ca", "client",
                   "subjectAltName=URI:spiffe://gdrstore.test/py\nextendedKeyUsage=clientAuth\n")
    return {"dir": d, "ca": os.path.join(d, "ca.pem"), "server": server, "client": client}


@pytest.fixture(scope="module")
def mtls_daemon(pki):
    d = Daemon("--volume", "v=8MiB", "--tls-cert", pki["server"][0], "--tls-key",
               pki["server"][1], "--tls-client-ca", pki["ca"])
    yield d
    d.stop()


def test_mtls_keywords_give_verified_transfers(pki, mtls_daemon):
    cert, key = pki["client"]
    with gdrstore.Client(mtls_daemon.address, tls_ca=pki["ca"], tls_cert=cert,
                         tls_key=key) as c:
        a = np.zeros(MiB, dtype=np.uint8)
        assert c.get("v", 4097, into=a) == MiB
        gdrstore.verify(a, "v", 4097)
        tls = c.info()["tls"]
        assert tls["enabled"] and tls["client_certificate_required"]
        assert "CN=server" in tls["certificate_subject"]


def test_without_a_client_certificate_the_daemon_is_unavailable(pki, mtls_daemon):
    with gdrstore.Client(mtls_daemon.address, tls_ca=pki["ca"], timeout=10) as c:
        with pytest.raises(gdrstore.Unavailable):
            c.get("v", 0, into=np.zeros(4096, dtype=np.uint8))
    with gdrstore.Client(mtls_daemon.address, timeout=10) as plain:
        with pytest.raises(gdrstore.Unavailable, match="probably requires TLS"):
            plain.info()


def test_a_key_that_is_not_the_certificates_is_named(pki, mtls_daemon):
    cert, _ = pki["client"]
    with pytest.raises(gdrstore.InvalidArgument, match="is not the key of the certificate"):
        gdrstore.Client(mtls_daemon.address, tls_ca=pki["ca"], tls_cert=cert,
                        tls_key=pki["server"][1])
