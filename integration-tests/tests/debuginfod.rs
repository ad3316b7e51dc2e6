//! Fetching debug files from a real debuginfod server (Debian's
//! `debuginfod`, started here on loopback over a directory holding the
//! fixture's debug file), with per-build-id reporting of 404s and
//! unreachable servers.

use integration_tests::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use symbolizer::debuginfo::{file_build_id, Locator};
use symbolizer::debuginfod::{Debuginfod, Fetched};
use symbolizer::resolve::{Resolution, Resolver, Unresolved};

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The HTTP status of `GET path` on the local server, if it answers.
fn status(port: u16, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
    let mut head = [0u8; 16];
    stream.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

#[test]
fn debug_files_come_from_a_debuginfod_server() {
    if Command::new("debuginfod").arg("--version").output().is_err() {
        return skip("debuginfod is not installed (apt-get install debuginfod)", InCi::Required);
    }
    let library = native_fixture("libremote.so");
    let build_id = file_build_id(&library).unwrap();
    let dir = scratch_dir("debuginfod");
    let served = dir.join("served");
    std::fs::create_dir_all(&served).unwrap();
    std::fs::copy(library.with_file_name("libremote.so.debug"), served.join("libremote.so.debug")).unwrap();

    let port = free_port();
    let _server = ChildGuard::spawn(
        Command::new("debuginfod")
            .args(["-F", "-p", &port.to_string(), "-t", "1", "-d"])
            .arg(dir.join("index.sqlite"))
            .arg(&served)
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    let path = format!("/buildid/{build_id}/debuginfo");
    let deadline = Instant::now() + Duration::from_secs(60);
    while status(port, &path) != Some(200) {
        assert!(Instant::now() < deadline, "debuginfod never served {path}");
    }
    let url = format!("http://127.0.0.1:{port}");
    let unreachable = format!("http://127.0.0.1:{}", free_port());
    let unknown = "00112233445566778899aabbccddeeff00112233".to_owned();

    // One good server: the fixture resolves, an unknown build-id is a 404.
    let cache = dir.join("cache");
    let client = Debuginfod::new(vec![url.clone()], cache.clone());
    let fetched = client.fetch_all(&[build_id.clone(), unknown.clone()]);
    assert_eq!(fetched[&build_id], Fetched::File(cache.join(&build_id).join("debuginfo")));
    assert_eq!(fetched[&unknown], Fetched::NotFound);
    assert_eq!(file_build_id(&cache.join(&build_id).join("debuginfo")).as_deref(), Some(build_id.as_str()));

    let mut resolver = Resolver::new(Locator::new(&[], &[], Some(Debuginfod::new(vec![url], dir.join("cache2")))).0);
    resolver.prefetch(&[build_id.clone(), unknown.clone()]);
    let entry = symbol_offset(&library.with_file_name("libremote.so.debug"), "hot_leaf");
    match resolver.resolve(&build_id, entry) {
        Resolution::Frames(frames) => assert_eq!(frames[0].function, "hot_leaf"),
        other => panic!("fetched debug file did not resolve: {other:?}"),
    }
    assert_eq!(resolver.resolve(&unknown, 0x1000), Resolution::Unresolved(Unresolved::UnknownBuildId));

    // An unreachable server: reported for the build-id, not fatal.
    let mut offline =
        Resolver::new(Locator::new(&[], &[], Some(Debuginfod::new(vec![unreachable], dir.join("cache3")))).0);
    offline.prefetch(std::slice::from_ref(&build_id));
    assert_eq!(offline.resolve(&build_id, entry), Resolution::Unresolved(Unresolved::DebugFileMissing));
    assert!(
        offline.problems().iter().any(|p| p.starts_with(&build_id) && p.contains("debuginfod")),
        "{:?}",
        offline.problems()
    );
}

/// The link-time address of a function, from `nm`.
fn symbol_offset(file: &Path, name: &str) -> u64 {
    let out = Command::new("nm").arg(file).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.ends_with(&format!(" {name}"))).expect("symbol in the debug file");
    u64::from_str_radix(line.split_whitespace().next().unwrap(), 16).unwrap()
}
