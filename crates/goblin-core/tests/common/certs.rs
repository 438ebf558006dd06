//! Test certificates made with the `openssl` CLI (required: the tests fail without it): in a
//! fresh folder, `ca.crt`/`ca.key` (a CA), `other-ca.crt` (an unrelated CA), `server.crt`/
//! `server.key` for the given subjectAltName, and `client.crt`/`client.key`, all signed by `ca`.

use super::temp_path;
use std::path::PathBuf;
use std::process::Command;

pub fn make(san: &str) -> PathBuf {
    let dir = temp_path("certs");
    std::fs::create_dir_all(&dir).unwrap();
    let run = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(&dir)
            .output()
            .expect("the openssl CLI is required for the TLS tests (apt-get install openssl)");
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    for (ca, cn) in [("ca", "Goblin Test CA"), ("other-ca", "Unrelated CA")] {
        let (key, crt, subj) = (format!("{ca}.key"), format!("{ca}.crt"), format!("/CN={cn}"));
        let mut a = vec!["req", "-x509"];
        a.extend(ec);
        a.extend(["-keyout", &key, "-out", &crt, "-days", "2", "-subj", &subj]);
        a.extend([
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ]);
        run(&a);
    }
    std::fs::write(
        dir.join("server.ext"),
        format!("subjectAltName={san}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"),
    )
    .unwrap();
    std::fs::write(dir.join("client.ext"), "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n")
        .unwrap();
    for who in ["server", "client"] {
        let (key, csr, crt, ext) =
            (format!("{who}.key"), format!("{who}.csr"), format!("{who}.crt"), format!("{who}.ext"));
        let subj = format!("/CN=goblin-test-{who}");
        let mut a = vec!["req"];
        a.extend(ec);
        a.extend(["-keyout", &key, "-out", &csr, "-subj", &subj]);
        run(&a);
        run(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            &crt,
            "-days",
            "2",
            "-extfile",
            &ext,
        ]);
    }
    dir
}
