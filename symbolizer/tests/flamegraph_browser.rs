//! The flame graph as a browser shows it: headless Chromium's screenshot
//! (1400×900, what a laptop shows) of a 400-frame-deep graph must show
//! its frames, the root row whole, in both orientations — a deep graph
//! drawn on a tall canvas that opened at its top showed a blank page with
//! the root 6,000 px further down.

use flate2::read::ZlibDecoder;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use symbolizer::events::EventKind;
use symbolizer::flamegraph;
use symbolizer::profile::{Profile, ProfileSample, StackFrame};
use test_skip::{skip, InCi};

const WIDTH: usize = 1400;
const HEIGHT: usize = 900;

/// Fill colours of the template's frames (`COLORS`): Java (JIT) frames
/// and the root.
const JAVA: [u8; 3] = [0x50, 0xc8, 0x50];
const ROOT: [u8; 3] = [0xaa, 0xaa, 0xaa];

fn frame(name: String) -> StackFrame {
    StackFrame {
        name,
        kind: Some(frames::FrameType::JitCompiled),
        file: None,
        line: None,
        remote: None,
        inlined: false,
    }
}

/// Forty stacks 30 frames deep hold almost all the weight; one stack 400
/// frames deep holds 0.25% of it (a sliver three pixels wide).
fn deep_profile() -> Profile {
    let mut profile = Profile::new(EventKind::Cpu);
    let stack = |profile: &mut Profile, names: Vec<String>, weight| {
        let stack: Vec<u32> = names.into_iter().rev().map(|n| profile.intern(frame(n))).collect();
        profile.samples.push(ProfileSample { thread: "main".to_owned(), weight, events: weight, stack });
    };
    for branch in 0..40 {
        let names = (0..30).map(|level| format!("app.Service.level{level}_{}", branch * level / 29)).collect();
        stack(&mut profile, names, 100);
    }
    stack(&mut profile, (0..400).map(|level| format!("app.Deep.recurse{level}")).collect(), 10);
    profile
}

/// Headless Chromium, if installed (CI installs it).
fn chromium() -> Option<PathBuf> {
    let found = ["chromium", "chromium-browser", "google-chrome"].iter().find_map(|name| {
        std::env::split_paths(&std::env::var_os("PATH")?).map(|dir| dir.join(name)).find(|path| path.exists())
    });
    if found.is_none() {
        skip("no headless Chromium on the PATH (Debian's chromium package)", InCi::Required);
    }
    found
}

/// A screenshot of `page` (a file URL, with its fragment) at 1400×900, as
/// RGB rows.
fn screenshot(browser: &Path, page: &str, png: &Path) -> Vec<[u8; 3]> {
    // coreutils' timeout: a browser that hangs fails the test, never CI.
    let output = Command::new("timeout")
        .arg("60")
        .arg(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1400,900"])
        .arg(format!("--screenshot={}", png.display()))
        .arg(page)
        .output()
        .expect("run chromium");
    assert!(output.status.success(), "chromium: {}", String::from_utf8_lossy(&output.stderr));
    decode_rgb(&std::fs::read(png).expect("the screenshot"))
}

/// Decodes an 8-bit RGB, non-interlaced PNG (what Chromium writes).
fn decode_rgb(png: &[u8]) -> Vec<[u8; 3]> {
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    let (mut at, mut size, mut idat) = (8, (0, 0), Vec::new());
    while at + 8 <= png.len() {
        let length = u32::from_be_bytes(png[at..at + 4].try_into().unwrap()) as usize;
        let (kind, data) = (&png[at + 4..at + 8], &png[at + 8..at + 8 + length]);
        match kind {
            b"IHDR" => {
                let word = |i: usize| u32::from_be_bytes(data[i..i + 4].try_into().unwrap()) as usize;
                assert_eq!((data[8], data[9], data[12]), (8, 2, 0), "8-bit RGB, not interlaced");
                size = (word(0), word(4));
            }
            b"IDAT" => idat.extend_from_slice(data),
            _ => {}
        }
        at += 12 + length;
    }
    let (width, height) = size;
    let mut raw = Vec::new();
    ZlibDecoder::new(&idat[..]).read_to_end(&mut raw).expect("the image data");
    let stride = width * 3;
    assert_eq!(raw.len(), height * (stride + 1), "rows");
    let mut pixels = vec![0u8; height * stride];
    for row in 0..height {
        let filter = raw[row * (stride + 1)];
        let line = &raw[row * (stride + 1) + 1..(row + 1) * (stride + 1)];
        for i in 0..stride {
            let left = if i >= 3 { pixels[row * stride + i - 3] } else { 0 };
            let up = if row > 0 { pixels[(row - 1) * stride + i] } else { 0 };
            let up_left = if row > 0 && i >= 3 { pixels[(row - 1) * stride + i - 3] } else { 0 };
            let predicted = match filter {
                0 => 0,
                1 => left,
                2 => up,
                3 => ((left as u16 + up as u16) / 2) as u8,
                4 => {
                    let p = left as i16 + up as i16 - up_left as i16;
                    let (pa, pb, pc) = ((p - left as i16).abs(), (p - up as i16).abs(), (p - up_left as i16).abs());
                    if pa <= pb && pa <= pc {
                        left
                    } else if pb <= pc {
                        up
                    } else {
                        up_left
                    }
                }
                other => panic!("PNG filter {other}"),
            };
            pixels[row * stride + i] = line[i].wrapping_add(predicted);
        }
    }
    assert_eq!((width, height), (WIDTH, HEIGHT), "the window's size");
    pixels.chunks_exact(3).map(|p| [p[0], p[1], p[2]]).collect()
}

/// The share of the screenshot in a colour, and the rows where it spans
/// at least 90% of the width.
fn coverage(pixels: &[[u8; 3]], colour: [u8; 3]) -> (f64, Vec<usize>) {
    let share = pixels.iter().filter(|&&p| p == colour).count() as f64 / pixels.len() as f64;
    let full_rows = (0..HEIGHT)
        .filter(|&row| {
            pixels[row * WIDTH..(row + 1) * WIDTH].iter().filter(|&&p| p == colour).count() * 10 >= WIDTH * 9
        })
        .collect();
    (share, full_rows)
}

#[test]
fn a_deep_flame_graph_opens_on_its_frames_and_root_in_both_orientations() {
    let Some(browser) = chromium() else { return };
    let dir = std::env::temp_dir().join(format!("symbolizer-flamegraph-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("deep.html");
    std::fs::write(&page, flamegraph::render(&deep_profile(), "deep", false)).unwrap();
    for (fragment, root_in) in [("", "bottom"), ("#icicle", "top")] {
        let pixels = screenshot(&browser, &format!("file://{}{fragment}", page.display()), &dir.join("shot.png"));
        let (java, _) = coverage(&pixels, JAVA);
        let (_, root_rows) = coverage(&pixels, ROOT);
        println!("{root_in}: Java frames cover {:.0}% of the window; root rows {root_rows:?}", java * 100.0);
        assert!(java > 0.3, "root at the {root_in}: frames cover {:.1}% of the window", java * 100.0);
        let root = *root_rows.first().unwrap_or_else(|| panic!("root at the {root_in}: no root row in the window"));
        let (upper, lower) = (root < HEIGHT / 2, root >= HEIGHT / 2);
        assert!(if root_in == "top" { upper } else { lower }, "root at the {root_in}: its row at y={root}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
