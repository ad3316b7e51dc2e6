//! Fetching debug files, and binaries, from a real debuginfod server
//! (Debian's `debuginfod`, started here on loopback over a directory
//! holding the fixture's debug file, or a binary without one), with
//! per-build-id reporting of 404s and unreachable servers.

use integration_tests::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use symbolizer::debuginfo::{file_build_id, Locator};
use symbolizer::debuginfod::{Artifact, Debuginfod, Fetched};
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

/// `debuginfod` on a free loopback port over `served`, once it answers
/// `ready` (a path) with 200: the server, and its port.
fn serve(dir: &Path, served: &Path, ready: &str) -> (ChildGuard, u16) {
    let port = free_port();
    let server = ChildGuard::spawn(
        Command::new("debuginfod")
            .args(["-F", "-p", &port.to_string(), "-t", "1", "-d"])
            .arg(dir.join("index.sqlite"))
            .arg(served)
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while status(port, ready) != Some(200) {
        assert!(Instant::now() < deadline, "debuginfod never served {ready}");
    }
    (server, port)
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

    let (_server, port) = serve(&dir, &served, &format!("/buildid/{build_id}/debuginfo"));
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
        Resolution::Frames(frames) => assert_eq!(&*frames[0].function, "hot_leaf"),
        other => panic!("fetched debug file did not resolve: {other:?}"),
    }
    assert_eq!(resolver.resolve(&unknown, 0x1000), &Resolution::Unresolved(Unresolved::UnknownBuildId));

    // An unreachable server: reported for the build-id, not fatal.
    let mut offline =
        Resolver::new(Locator::new(&[], &[], Some(Debuginfod::new(vec![unreachable], dir.join("cache3")))).0);
    offline.prefetch(std::slice::from_ref(&build_id));
    assert_eq!(offline.resolve(&build_id, entry), &Resolution::Unresolved(Unresolved::DebugFileMissing));
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

/// A library whose build-id has no debug file anywhere, but whose binary
/// (with a `.symtab`) a server has: `symbolize` fetches the binary into the
/// cache (`<cache>/<id>/executable`) and names functions by symbol.
#[test]
fn symbols_come_from_a_binary_a_debuginfod_server_has() {
    if Command::new("debuginfod").arg("--version").output().is_err() {
        return skip("debuginfod is not installed (apt-get install debuginfod)", InCi::Required);
    }
    let unstripped = native_fixture("unstripped/libremote.so");
    let build_id = file_build_id(&unstripped).unwrap();
    let dir = scratch_dir("debuginfod_executable");
    let served = dir.join("served");
    std::fs::create_dir_all(&served).unwrap();
    let binary = served.join("libremote.so");
    let strip = Command::new("strip").arg("--strip-debug").arg("-o").arg(&binary).arg(&unstripped).output().unwrap();
    assert!(strip.status.success());
    let (_server, port) = serve(&dir, &served, &format!("/buildid/{build_id}/executable"));
    assert_eq!(status(port, &format!("/buildid/{build_id}/debuginfo")), Some(404), "no debug file is served");

    let cache = dir.join("cache");
    let debuginfod = Debuginfod::new(vec![format!("http://127.0.0.1:{port}")], cache.clone());
    let mut resolver = Resolver::new(Locator::new(&[], &[], Some(debuginfod)).0);
    resolver.prefetch(std::slice::from_ref(&build_id));
    let cached = symbolizer::debuginfod::cache_path_of(&cache, &build_id, Artifact::Executable);
    assert_eq!(file_build_id(&cached).as_deref(), Some(build_id.as_str()), "the binary is in the cache");
    let entry = symbol_offset(&binary, "hot_leaf");
    assert_eq!(resolver.resolve(&build_id, entry + 1), &Resolution::NameOnly("hot_leaf".to_owned()));
    let source = resolver.describe(&build_id).unwrap();
    assert!(source.starts_with(".symtab of ") && source.contains(&cache.display().to_string()), "{source}");
}

/// A `--binary` without DWARF whose `.gnu_debuglink` names a file that is
/// nowhere (the debug package not installed) does not end the search: the
/// debug file comes from debuginfod, as docs/symbolize.md's order has it (local
/// trees, the client cache, the binaries' debug links, then servers), and
/// frames resolve with file and line, not by the binary's symbols alone.
#[test]
fn debuginfod_is_asked_past_a_debug_link_that_leads_nowhere() {
    if Command::new("debuginfod").arg("--version").output().is_err() {
        return skip("debuginfod is not installed (apt-get install debuginfod)", InCi::Required);
    }
    let unstripped = native_fixture("unstripped/libremote.so");
    let build_id = file_build_id(&unstripped).unwrap();
    let dir = scratch_dir("debuginfod_debuglink");
    let (served, local) = (dir.join("served"), dir.join("local"));
    std::fs::create_dir_all(&served).unwrap();
    std::fs::create_dir_all(&local).unwrap();
    let debug = served.join("libremote.so.debug");
    let run = |command: &mut Command| assert!(command.status().unwrap().success(), "{command:?}");
    run(Command::new("objcopy").arg("--only-keep-debug").arg(&unstripped).arg(&debug));
    // The binary: no DWARF, a debug link to `libremote.so.debug`, which is
    // not beside it, nor in its `.debug/`, nor under /usr/lib/debug.
    let binary = local.join("libremote.so");
    run(Command::new("strip").arg("--strip-debug").arg("-o").arg(&binary).arg(&unstripped));
    run(Command::new("objcopy").arg(format!("--add-gnu-debuglink={}", debug.display())).arg(&binary));
    let sections = Command::new("readelf").arg("-S").arg(&binary).output().unwrap();
    let sections = String::from_utf8_lossy(&sections.stdout);
    assert!(sections.contains(".gnu_debuglink") && !sections.contains(".debug_info"), "{sections}");

    let entry = symbol_offset(&debug, "hot_leaf");
    // Offline: the dead link is the reason, and the binary's symbols name the function.
    let mut offline = Resolver::new(Locator::new(&[], std::slice::from_ref(&binary), None).0);
    assert_eq!(offline.resolve(&build_id, entry), &Resolution::NameOnly("hot_leaf".to_owned()));
    let source = offline.describe(&build_id).unwrap();
    assert!(source.starts_with(".symtab of ") && source.contains(&binary.display().to_string()), "{source}");

    let (_server, port) = serve(&dir, &served, &format!("/buildid/{build_id}/debuginfo"));
    let cache = dir.join("cache");
    let debuginfod = Debuginfod::new(vec![format!("http://127.0.0.1:{port}")], cache.clone());
    let mut resolver = Resolver::new(Locator::new(&[], std::slice::from_ref(&binary), Some(debuginfod)).0);
    resolver.prefetch(std::slice::from_ref(&build_id));
    match resolver.resolve(&build_id, entry) {
        Resolution::Frames(frames) => {
            assert_eq!(&*frames[0].function, "hot_leaf");
            assert!(frames[0].line.is_some(), "{frames:?}");
        }
        other => panic!("the debug file debuginfod has was not used: {other:?}"),
    }
    let source = resolver.describe(&build_id).unwrap();
    assert!(source.contains(&cache.display().to_string()), "{source}");
}
