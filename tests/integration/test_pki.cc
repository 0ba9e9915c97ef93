#include "tests/integration/test_pki.h"

#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "tests/integration/daemon_process.h"

namespace gdr::integ {
namespace {

bool WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  return static_cast<bool>(out);
}

}  // namespace

absl::Status TestPki::Openssl(const std::vector<std::string>& args, const std::string& tag) {
  std::vector<std::string> argv = {"/usr/bin/openssl"};
  argv.insert(argv.end(), args.begin(), args.end());
  absl::StatusOr<ProcessResult> r =
      RunProcess(argv, dir_, absl::StrCat("openssl-", tag, "-", runs_++), absl::Seconds(60));
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) {
    return absl::InternalError(
        absl::StrCat("openssl ", args.front(), " (", tag, "): ", r->Describe()));
  }
  return absl::OkStatus();
}

absl::StatusOr<CertFiles> TestPki::MakeCa(const std::string& name) {
  CertFiles ca{absl::StrCat(dir_, "/", name, ".ca.pem"), absl::StrCat(dir_, "/", name, ".ca.key")};
  absl::Status s = Openssl(
      {"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
       "-keyout", ca.key, "-out", ca.cert, "-days", "30", "-subj",
       absl::StrCat("/CN=", name, " test CA"), "-addext", "basicConstraints=critical,CA:TRUE",
       "-addext", "keyUsage=critical,keyCertSign,cRLSign"},
      name);
  if (!s.ok()) return s;
  return ca;
}

absl::StatusOr<CertFiles> TestPki::Issue(const CertFiles& ca, const std::string& name, Use use,
                                         const std::string& san, bool expired) {
  const std::string base = absl::StrCat(dir_, "/", name);
  CertFiles out{base + ".pem", base + ".key"};
  if (absl::Status s = Openssl(
          {"req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
           "-keyout", out.key, "-out", base + ".csr", "-subj", absl::StrCat("/CN=", name)},
          name);
      !s.ok()) {
    return s;
  }
  const bool serves = use != Use::kClient;
  const char* usage = use == Use::kServer   ? "serverAuth"
                      : use == Use::kClient ? "clientAuth"
                                            : "serverAuth,clientAuth";
  const std::string ext =
      absl::StrCat("basicConstraints=CA:FALSE\n",
                   serves ? "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                          : absl::StrCat("subjectAltName=", san, "\n"),
                   "extendedKeyUsage=", usage, "\n");
  if (!WriteText(base + ".ext", ext)) return absl::InternalError("cannot write " + base + ".ext");
  // `openssl ca` is the tool that takes explicit start and end dates (x509 -req only -days), so
  // every certificate goes through a minimal CA configuration of its own.
  const std::string cadir = base + ".cadir";
  std::vector<std::string> mk = {"/bin/mkdir", "-p", cadir + "/new"};
  absl::StatusOr<ProcessResult> r = RunProcess(mk, dir_, name + "-mkdir", absl::Seconds(10));
  if (!r.ok() || r->exit_code != 0) return absl::InternalError("mkdir " + cadir);
  if (!WriteText(cadir + "/index.txt", "") || !WriteText(cadir + "/serial", "01\n") ||
      !WriteText(cadir + "/ca.cnf",
                 absl::StrCat("[ca]\ndefault_ca = d\n[d]\ndatabase = ", cadir,
                              "/index.txt\nnew_certs_dir = ", cadir, "/new\nserial = ", cadir,
                              "/serial\ndefault_md = sha256\npolicy = p\nunique_subject = no\n"
                              "[p]\ncommonName = supplied\n"))) {
    return absl::InternalError("cannot write " + cadir);
  }
  std::vector<std::string> sign = {
      "ca",          "-batch", "-notext",  "-config",  cadir + "/ca.cnf",
      "-cert",       ca.cert,  "-keyfile", ca.key,     "-in",
      base + ".csr", "-out",   out.cert,   "-extfile", base + ".ext"};
  if (expired) {
    sign.insert(sign.end(), {"-startdate", "20200101000000Z", "-enddate", "20200102000000Z"});
  } else {
    sign.insert(sign.end(), {"-days", "30"});
  }
  if (absl::Status s = Openssl(sign, name); !s.ok()) return s;
  return out;
}

}  // namespace gdr::integ
