//! Throwaway certificates for the TLS tests, made at run time with the `openssl` command (Debian's
//! package `openssl`): a CA of the test's own, and a server certificate it signs for the names
//! the test asks for (DNS names and IP addresses). Nothing is trusted by the system.
//!
//! Without `openssl` a test skips, with a note naming the package; under `CI=true` it fails
//! (`scripts/test` installs the package).

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

/// A CA: its certificate and key in a temporary directory.
#[derive(Debug)]
pub struct TestCa {
    dir: tempfile::TempDir,
}

/// A server certificate and its key, signed by a [`TestCa`].
#[derive(Debug)]
pub struct ServerCertificate {
    cert: PathBuf,
    key: PathBuf,
    ca: PathBuf,
}

impl TestCa {
    /// A new CA named `name`; `None` (with a note) without `openssl`, a panic under `CI=true`.
    pub fn new(name: &str) -> Option<Self> {
        if !has_openssl() {
            let note = "no openssl on PATH: install the Debian package `openssl` (apt-get install openssl) \
                        to run the Valkey TLS tests";
            assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true and {note}");
            eprintln!("skipped: {note}");
            return None;
        }
        let dir = tempfile::tempdir().expect("a temporary directory");
        request(
            dir.path(),
            &["-x509", "-days", "2"],
            "ca",
            "ca.crt",
            &format!("/CN={name}"),
        );
        Some(Self { dir })
    }

    /// The CA's certificate (PEM): what a client is told to trust.
    pub fn cert(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    /// A server certificate for `names` (`valkey.test`, `127.0.0.1`: an IP address becomes an
    /// IP subject alternative name), signed by this CA.
    pub fn issue(&self, names: &[&str]) -> ServerCertificate {
        let dir = self.dir.path().join(format!("server-{}", names.join("-")));
        std::fs::create_dir_all(&dir).expect("a directory for the server certificate");
        let alt_names: Vec<String> = names
            .iter()
            .map(|n| match n.parse::<std::net::IpAddr>() {
                Ok(_) => format!("IP:{n}"),
                Err(_) => format!("DNS:{n}"),
            })
            .collect();
        let extensions = format!(
            "subjectAltName={}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
            alt_names.join(",")
        );
        std::fs::write(dir.join("ext.cnf"), extensions).expect("writes the extensions");
        request(&dir, &["-new"], "server", "server.csr", &format!("/CN={}", names[0]));
        let ca = self.cert();
        let ca_key = self.dir.path().join("ca.key");
        openssl(
            &dir,
            &[
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                path(&ca),
                "-CAkey",
                path(&ca_key),
                "-CAcreateserial",
                "-out",
                "server.crt",
                "-days",
                "2",
                "-extfile",
                "ext.cnf",
            ],
        );
        ServerCertificate {
            cert: dir.join("server.crt"),
            key: dir.join("server.key"),
            ca,
        }
    }
}

impl ServerCertificate {
    /// The arguments that make redis-server present this certificate (and ask no client for
    /// one).
    pub fn args(&self) -> Vec<String> {
        vec![
            "--tls-cert-file".into(),
            path(&self.cert).into(),
            "--tls-key-file".into(),
            path(&self.key).into(),
            "--tls-ca-cert-file".into(),
            path(&self.ca).into(),
            "--tls-auth-clients".into(),
            "no".into(),
        ]
    }
}

fn path(p: &Path) -> &str {
    p.to_str().expect("temporary paths are UTF-8")
}

fn has_openssl() -> bool {
    Command::new("openssl")
        .arg("version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `openssl req` with `first` arguments: a new P-256 key in `<key>.key`, and `out` (a
/// certificate request, or with `-x509` a self-signed certificate) for `subject`.
fn request(dir: &Path, first: &[&str], key: &str, out: &str, subject: &str) {
    let key = format!("{key}.key");
    let mut args = vec!["req"];
    args.extend_from_slice(first);
    args.extend_from_slice(&["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]);
    args.extend_from_slice(&["-keyout", &key, "-out", out, "-subj", subject]);
    openssl(dir, &args);
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "openssl {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}
