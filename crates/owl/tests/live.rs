//! The live system from the command line: `owl keygen`, `owl agent` pairs on loopback.

mod common;
use common::{fails, ok};

#[test]
fn keygen_writes_a_private_key_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("owl.key");
    let p = path.to_str().unwrap();
    ok(&["keygen", "-o", p]);
    let text = std::fs::read_to_string(&path).unwrap();
    let key = owl_live::key::Key::parse(&text, p).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    assert!(!owl_live::key::Key::readable_by_others(&path));
    fails(&["keygen", "-o", p], "never overwrites");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    // standard output: another key each time
    let other = ok(&["keygen"]);
    assert_ne!(owl_live::key::Key::parse(&other, "-").unwrap(), key);
    assert!(ok(&["keygen", "--help"]).contains("Examples:"));
}
