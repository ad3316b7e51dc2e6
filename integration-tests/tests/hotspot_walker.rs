//! The HotSpot walker (`cstack=vm`, `vmx`) on every JDK installed here:
//! with `verifywalk`, each sample is also walked with AsyncGetCallTrace and
//! the agent counts how often both found Java frames and whether they
//! agree (same methods and bytecode indexes, hence lines, in order).

use integration_tests::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn record(java: &Path, test: &str, options: &str, jvm_args: &[&str], main: &str, args: &[&str]) -> Recording {
    record_with_output(java, test, options, jvm_args, main, args).0
}

/// [`record`], with the fixture's output.
fn record_with_output(
    java: &Path,
    test: &str,
    options: &str,
    jvm_args: &[&str],
    main: &str,
    args: &[&str],
) -> (Recording, std::process::Output) {
    let file = scratch_file(test, "walk.jfr");
    // overhead=0: walks are counted against the interval asked for, which
    // the governor could stretch (verifywalk runs both walkers a sample).
    let options = format!("start,{options},overhead=0,file={}", file.display());
    let mut command = java_command_on(java, Some(&options), jvm_args, &[], main, args);
    let output = ChildGuard::spawn(&mut command).wait(Duration::from_secs(120));
    assert_success(&output);
    (read_recording(&file), output)
}

/// Also pins that the walker does not fall back to AsyncGetCallTrace on
/// any JDK tested (11 and newer).
#[test]
fn vm_stacks_agree_with_async_get_call_trace_on_a_400_deep_recursion() {
    for java in installed_javas() {
        let label = format!("deep recursion on {}", java.display());
        let (recording, output) =
            record_with_output(&java, "vm_deep", "cpu=1ms,cstack=vm,verifywalk", &[], "DeepStack", &["400", "3"]);
        let log = stderr(&output);
        assert!(!log.contains("walking Java frames with AsyncGetCallTrace"), "{label}: the walker fell back: {log}");
        assert_walks_agree(&label, &recording);
        let deep: Vec<&Event> = recording.samples().filter(|e| e.thread == "deep").collect();
        let whole = deep.iter().filter(|e| e.frames.iter().filter(|f| f.method == "descend").count() >= 400).count();
        println!("{label}: {whole} of {} samples whole", deep.len());
        assert!(whole * 10 >= deep.len() * 9, "{label}: {whole} of {} samples show 400 descend frames", deep.len());
    }
}

#[test]
fn vm_stacks_agree_with_async_get_call_trace_on_a_cpu_workload() {
    for java in installed_javas() {
        let label = format!("CPU workload on {}", java.display());
        let recording = record(&java, "vm_cpu", "cpu=1ms,cstack=vmx,verifywalk", &[], "CpuShares", &["3"]);
        assert_walks_agree(&label, &recording);
        assert_eq!(recording.settings["cstack"], "vmx", "{label}: the setting is the option's own spelling");
    }
}

/// Wall-clock samples of sleeping, parked and waiting threads start in
/// native code (a system call under libjvm): the native part is unwound,
/// then the thread's last-Java-frame anchor leads to its Java frames.
/// Every tick is signalled (`wallbatch=false`): the walks are the point.
#[test]
fn wall_clock_samples_of_blocked_threads_agree() {
    let java = jdk_tool("java");
    let options = "wall=5ms,wallbatch=false,cstack=vm,verifywalk";
    let recording = record(&java, "vm_wall", options, &[], "WallThreads", &["4", "40", "3"]);
    assert_walks_agree("wall clock, 40 threads", &recording);
    let sleeping = recording.wall_samples().filter(|e| e.thread.starts_with("sleep-"));
    let (all, in_sleep) = sleeping.fold((0, 0), |(all, hit), e| {
        (
            all + 1,
            hit + usize::from(e.frames.iter().any(|f| f.method.starts_with("sleep") && f.class == "java.lang.Thread")),
        )
    });
    assert!(all > 100 && in_sleep * 10 >= all * 9, "{in_sleep} of {all} sleeping samples show Thread.sleep");
}

/// Virtual threads (JDK 21+): a mounted virtual thread's frames end at the
/// continuation return barrier once they have been frozen and thawed; the
/// walk continues at the continuation entry, into the carrier's frames.
#[test]
fn virtual_threads_are_walked_into_their_carrier() {
    let mut walked = 0;
    for java in installed_javas() {
        let label = format!("virtual threads on {}", java.display());
        let (recording, output) =
            record_with_output(&java, "vm_virtual", "cpu=1ms,cstack=vm,verifywalk", &[], "VirtualThreads", &["3"]);
        if stdout(&output).contains("NO_VIRTUAL_THREADS") {
            continue;
        }
        assert_walks_agree(&label, &recording);
        let in_burn: Vec<&Event> =
            recording.samples().filter(|e| e.top().is_some_and(|f| f.method == "burn")).collect();
        let carried = in_burn
            .iter()
            .filter(|e| {
                e.frames.iter().any(|f| f.method == "enterSpecial")
                    && e.frames.iter().any(|f| f.method == "runContinuation")
            })
            .count();
        assert!(in_burn.len() >= 500, "{label}: {} samples in burn", in_burn.len());
        assert!(carried * 10 >= in_burn.len() * 9, "{label}: {carried} of {} reach the carrier", in_burn.len());
        walked += 1;
    }
    if walked == 0 {
        skip("no JDK 21+ installed: no virtual threads to walk", InCi::Optional);
    }
}

/// The frame type of the `descend` frames of the "deep" thread's samples.
fn descend_types(recording: &Recording) -> Vec<String> {
    recording
        .samples()
        .filter(|e| e.thread == "deep")
        .flat_map(|e| e.frames.iter().filter(|f| f.method == "descend").map(|f| f.frame_type.clone()))
        .collect()
}

fn share(types: &[String], wanted: &str) -> f64 {
    types.iter().filter(|t| t.as_str() == wanted).count() as f64 / types.len().max(1) as f64
}

#[test]
fn interpreted_c1_and_c2_frames_are_walked_and_typed() {
    let java = jdk_tool("java");
    let options = "cpu=1ms,cstack=vm,verifywalk";
    let interpreted = record(&java, "vm_xint", options, &["-Xint"], "DeepStack", &["50", "2"]);
    assert_walks_agree("-Xint", &interpreted);
    let types = descend_types(&interpreted);
    assert!(share(&types, "Interpreted") > 0.99, "-Xint: {:?}", &types[..types.len().min(20)]);

    let c1 = record(&java, "vm_c1", options, &["-XX:TieredStopAtLevel=1"], "DeepStack", &["50", "3"]);
    assert_walks_agree("C1", &c1);
    let types = descend_types(&c1);
    assert!(share(&types, "C1 compiled") + share(&types, "Inlined") > 0.9, "C1: {:?}", &types[..types.len().min(20)]);
    assert!(share(&types, "C1 compiled") > 0.1, "C1");

    let c2 = record(
        &java,
        "vm_c2",
        options,
        &["-XX:-TieredCompilation", "-XX:CompileThreshold=1000"],
        "DeepStack",
        &["50", "3"],
    );
    assert_walks_agree("C2", &c2);
    let types = descend_types(&c2);
    assert!(share(&types, "JIT compiled") > 0.05, "C2: {:?}", &types[..types.len().min(20)]);
    assert!(share(&types, "Inlined") > 0.05, "C2 inlines the recursion: {:?}", &types[..types.len().min(20)]);
}

const JAVA: &[&str] = &["Interpreted", "JIT compiled", "C1 compiled", "Inlined"];

/// Whether `frames` contain frames with these methods and one of these
/// frame types, in this order (other frames may come between).
fn in_order(frames: &[Frame], wanted: &[(&str, &[&str])]) -> bool {
    let mut rest = frames.iter();
    wanted.iter().all(|(method, types)| rest.any(|f| f.method == *method && types.contains(&f.frame_type.as_str())))
}

#[test]
fn vmx_shows_java_jni_c_upcall_java_in_order() {
    let library = native_fixture("libchain_nofp.so");
    let library = library.to_str().unwrap();
    let java = jdk_tool("java");
    let args = [library, "3", "0", "upcall"];
    let vmx = record(&java, "vmx_upcall", "cpu=1ms,cstack=vmx,verifywalk", &[], "NativeChain", &args);
    assert_walks_agree("vmx upcall", &vmx);
    // Innermost first: the Java callee, the JNI upcall in libjvm, the C
    // code, the Java native method (JIT compiled in the JDK dialect, as
    // async-profiler types it), its Java caller.
    let chain: [(&str, &[&str]); 6] = [
        ("upcallTarget", JAVA),
        ("jni_CallStaticLongMethod", &["C++"]),
        ("upcall_middle", &["Native"]),
        ("Java_NativeChain_upcall", &["Native"]),
        ("upcall", &["JIT compiled"]),
        ("callNative", JAVA),
    ];
    let in_target: Vec<&Event> =
        vmx.samples().filter(|e| e.top().is_some_and(|f| f.method == "upcallTarget")).collect();
    let whole = in_target.iter().filter(|e| in_order(&e.frames, &chain)).count();
    assert!(in_target.len() >= 500, "only {} samples in upcallTarget", in_target.len());
    assert!(whole * 10 >= in_target.len() * 9, "{whole} of {} samples show the chain", in_target.len());

    // vm: the same Java frames, without the native ones between them.
    let vm = record(&java, "vm_upcall", "cpu=1ms,cstack=vm", &[], "NativeChain", &args);
    let java_only = vm
        .samples()
        .filter(|e| e.top().is_some_and(|f| f.method == "upcallTarget"))
        .filter(|e| {
            let names: Vec<&str> = e.frames.iter().take(3).map(|f| f.method.as_str()).collect();
            names == ["upcallTarget", "upcall", "callNative"]
        })
        .count();
    assert!(java_only >= 500, "vm: only {java_only} samples go straight from upcallTarget to upcall");
}

/// `vmx`, samples inside the VM's upcall path (JavaCalls::call_helper and
/// what it calls, entering or leaving a short JNI upcall): the native
/// frames between it and the Java code that called native code are kept,
/// as in samples of the Java code the upcall runs (before, the walk went
/// from call_helper straight to the thread's last Java frame).
#[test]
fn vmx_keeps_the_native_frames_of_samples_in_the_vms_upcall_path() {
    let library = native_fixture("libchain_nofp.so");
    let java = jdk_tool("java");
    let args = [library.to_str().unwrap(), "3", "0", "upcalls"];
    let vmx = record(&java, "vmx_upcalls", "cpu=1ms,cstack=vmx,verifywalk", &[], "NativeChain", &args);
    assert_walks_agree("vmx upcalls", &vmx);
    let chain: [(&str, &[&str]); 5] = [
        ("JavaCalls::call_helper", &["C++"]),
        ("upcalls_middle", &["Native"]),
        ("Java_NativeChain_upcalls", &["Native"]),
        ("upcalls", &["JIT compiled"]),
        ("callNative", JAVA),
    ];
    let in_vm: Vec<&Event> = vmx
        .samples()
        .filter(|e| e.thread == "native-caller" && e.top().is_some_and(|f| !JAVA.contains(&f.frame_type.as_str())))
        .filter(|e| {
            let call_helper = e.frames.iter().position(|f| f.method == "JavaCalls::call_helper");
            let caller = e.frames.iter().position(|f| f.method == "callNative");
            matches!((call_helper, caller), (Some(c), Some(j)) if c < j)
        })
        .collect();
    let whole = in_vm.iter().filter(|e| in_order(&e.frames, &chain)).count();
    println!("vmx upcalls: {whole} of {} samples in the upcall path keep the native frames", in_vm.len());
    assert!(in_vm.len() >= 100, "only {} samples in the upcall path", in_vm.len());
    assert!(whole * 10 >= in_vm.len() * 9, "{whole} of {} samples show the chain", in_vm.len());
}

/// Calls to a tiny method kept out of line: many samples land in its
/// prologue or epilogue, where its frame is half built, and every one must
/// name `tiny`'s only caller. (AsyncGetCallTrace gives up on about 40% of
/// these samples; before the walker decoded prologues and epilogues it
/// gave 5% (JDK 17) to 19% (JDK 25) of them a wrong caller.)
#[test]
fn frames_interrupted_in_prologues_and_epilogues_have_the_right_caller() {
    let jvm = [
        "-XX:CompileCommand=quiet",
        "-XX:CompileCommand=dontinline,TinyCalls::tiny",
        "-XX:CompileCommand=dontinline,TinyCalls::caller",
    ];
    for java in installed_javas() {
        let label = format!("tiny calls on {}", java.display());
        let recording = record(&java, "vm_tiny", "cpu=1ms,cstack=vm", &jvm, "TinyCalls", &["3"]);
        let in_tiny: Vec<&Event> =
            recording.samples().filter(|e| e.thread == "tiny" && e.top().is_some_and(|f| f.method == "tiny")).collect();
        let wrong: Vec<&Event> =
            in_tiny.iter().copied().filter(|e| e.user_frames().get(1).is_none_or(|f| f.method != "caller")).collect();
        println!("{label}: {} of {} samples in tiny with a wrong caller", wrong.len(), in_tiny.len());
        assert!(in_tiny.len() >= 300, "{label}: only {} samples in tiny", in_tiny.len());
        assert!(
            wrong.len() * 1000 <= in_tiny.len(),
            "{label}: {} of {} wrong, e.g. {:?}",
            wrong.len(),
            in_tiny.len(),
            wrong[0]
        );
    }
}

/// Samples in HotSpot's method-handle intrinsics (the compiled wrappers of
/// `MethodHandle.invokeBasic` and `linkTo*`, made for each call shape, with
/// no jmethodID of their own) name the intrinsic that runs, by the method
/// `MethodHandle` declares for it: `invokeBasic` under the lambda forms
/// that call it, `linkToStatic` and `linkToVirtual` under the direct
/// method handles' forms (forms not customized per handle keep those calls
/// out of line). Before, every intrinsic was named by `MethodHandle`'s
/// first id, which names `invokeBasic` unless an intrinsic reported in a
/// CompiledMethodLoad event before `MethodHandle`'s ids were made took it:
/// then as that one call shape of `linkToStatic`. That happened to method
/// handles linked before the session started (here: the agent loaded,
/// the session started through the Java API a second later), and under
/// JRuby at start (its module path: the module system's start-up links
/// method handles before VMInit).
#[test]
fn samples_in_method_handle_intrinsics_name_the_intrinsic_that_runs() {
    for java in installed_javas() {
        let label = format!("method handles on {}", java.display());
        let file = scratch_file("vm_mh", "mh.jfr");
        let session = format!("start,cpu=1ms,cstack=vm,overhead=0,file={}", file.display());
        let jvm = ["-Djava.lang.invoke.MethodHandle.CUSTOMIZE_THRESHOLD=-1"];
        let mut command =
            java_command_on(&java, Some("loglevel=WARN"), &jvm, &[], "MethodHandleCalls", &["3", &session]);
        assert_success(&ChildGuard::spawn(&mut command).wait(Duration::from_secs(120)));
        let recording = read_recording(&file);
        let handles: Vec<&Event> = recording.samples().filter(|e| e.thread == "handles").collect();
        // (the intrinsic's name, whether a direct method handle's form calls it)
        let in_intrinsics: Vec<(&Event, &str, bool)> = handles
            .iter()
            .filter_map(|e| {
                let leaf = e.top().filter(|f| f.class == "java.lang.invoke.MethodHandle")?;
                let name = Some(leaf.method.as_str()).filter(|m| *m == "invokeBasic" || m.starts_with("linkTo"))?;
                let caller = e.user_frames().get(1).map_or("", |f| f.class.as_str());
                Some((*e, name, caller.contains("DirectMethodHandle") || caller.contains("LambdaForm$DMH")))
            })
            .collect();
        let misnamed: Vec<&Event> = in_intrinsics
            .iter()
            .filter(|(e, name, direct)| {
                e.user_frames()[0].descriptor != "([Ljava/lang/Object;)Ljava/lang/Object;"
                    || (*name == "invokeBasic") == *direct
            })
            .map(|(e, _, _)| *e)
            .collect();
        let basic = in_intrinsics.iter().filter(|(_, name, _)| *name == "invokeBasic").count();
        let linked = in_intrinsics.len() - basic;
        println!(
            "{label}: of {} samples, {basic} in invokeBasic, {linked} in linkTo*, {} misnamed",
            handles.len(),
            misnamed.len()
        );
        assert!(handles.len() >= 500, "{label}: only {} samples", handles.len());
        assert!(basic * 20 >= handles.len(), "{label}: only {basic} samples in invokeBasic");
        assert!(linked * 100 >= handles.len(), "{label}: only {linked} samples in linkTo*");
        assert!(misnamed.is_empty(), "{label}: {} misnamed, e.g. {:?}", misnamed.len(), misnamed[0]);
    }
}

/// String intrinsics C2 compiles inline that move rsp themselves: at
/// those pcs the frame size read from the sp misses the return address
/// (the walker reads how far below its frame the sp is from the
/// instructions). `string_compare` (`String.compareTo`) keeps a word
/// pushed for its whole loop: every sample in `compareAll` must name its
/// only caller. `string_indexof` (`String.indexOf(String)`) pushes its
/// operands and the saved rsp, then leaves by `pop rsp`: in the four
/// pushes themselves the saved rsp is not on the stack yet, and where the
/// sp is below the frame the slot the frame size reads can hold a stale
/// code address taken for the caller, so up to 1% of the samples in
/// `findAll` here still end the walk or name another caller (3% allowed).
/// (Before, 79% (JDK 17) and 81% (JDK 25) of the samples in `compareAll`
/// and 95% (JDK 17) in `findAll` ended the walk there, counted as
/// `vm_walk_bad_compiled_frame`; AsyncGetCallTrace gives up on them too.)
#[test]
fn frames_interrupted_while_their_code_has_words_pushed_have_their_caller() {
    let jvm = [
        "-XX:CompileCommand=quiet",
        "-XX:CompileCommand=dontinline,StringCompares::compareAll",
        "-XX:CompileCommand=dontinline,StringCompares::caller",
        "-XX:CompileCommand=dontinline,StringCompares::findAll",
        "-XX:CompileCommand=dontinline,StringCompares::finder",
    ];
    for java in installed_javas() {
        let recording = record(&java, "vm_compares", "cpu=1ms,cstack=vm", &jvm, "StringCompares", &["3"]);
        let failed = recording.counter("vm_walk_bad_compiled_frame");
        for (thread, method, caller, per_mille) in
            [("compares", "compareAll", "caller", 1), ("finds", "findAll", "finder", 30)]
        {
            let label = format!("{method} on {}", java.display());
            let inside: Vec<&Event> = recording
                .samples()
                .filter(|e| e.thread == thread && e.frames.iter().any(|f| f.method == method))
                .collect();
            let caller_of = |e: &Event| {
                let at = e.frames.iter().position(|f| f.method == method)?;
                e.frames.get(at + 1).map(|f| f.method.clone())
            };
            let wrong: Vec<&Event> =
                inside.iter().copied().filter(|e| caller_of(e).as_deref() != Some(caller)).collect();
            println!("{label}: {} of {} samples without their caller", wrong.len(), inside.len());
            assert!(inside.len() >= 300, "{label}: only {} samples", inside.len());
            assert!(
                wrong.len() * 1000 <= inside.len() * per_mille,
                "{label}: {} of {} wrong ({failed} walks failed), e.g. {:?}",
                wrong.len(),
                inside.len(),
                wrong[0]
            );
        }
    }
}

/// A jar holding only a manifest that names `main` (found on the class
/// path) as its Premain-Class, for a fixture that needs Instrumentation.
fn java_agent_jar(main: &str) -> PathBuf {
    let dir = scratch_dir(&format!("agent_jar_{main}"));
    let manifest = dir.join("manifest.txt");
    std::fs::write(&manifest, format!("Premain-Class: {main}\nCan-Redefine-Classes: true\n")).unwrap();
    let jar = dir.join(format!("{main}.jar"));
    let status = std::process::Command::new(build_jdk_tool("jar"))
        .args(["--create", "--file"])
        .arg(&jar)
        .arg("--manifest")
        .arg(&manifest)
        .status()
        .expect("run jar");
    assert!(status.success());
    jar
}

/// A thread keeps running a method whose class is redefined every 50 ms.
/// With the same bytes, HotSpot moves the method's jmethodID to the new
/// version, and the old version's frame is named by it. With a changed
/// method the old version is obsolete, under a new idnum: named if HotSpot
/// gave it an id of its own (it does when it reports that version's
/// compiled code), else written as `[unknown_Java_method]`. Either way the
/// walk goes on to the thread's first frame, as AsyncGetCallTrace's does.
#[test]
fn frames_of_methods_redefined_while_they_run_are_walked() {
    let jar = java_agent_jar("Redefine");
    let agent = format!("-javaagent:{}", jar.display());
    for java in installed_javas() {
        for mode in ["same", "changed"] {
            let label = format!("redefined ({mode}) on {}", java.display());
            let options = "cpu=1ms,cstack=vm,verifywalk";
            let (recording, output) =
                record_with_output(&java, "vm_redefine", options, &[&agent], "Redefine", &[mode, "3"]);
            let salt = summary_value(&stdout(&output), "SALT");
            assert_eq!(salt, if mode == "same" { 0x5EED1234 } else { 0x5EED1235 }, "{label}: the class was redefined");
            assert_walks_agree(&label, &recording);
            let spinner: Vec<&Event> = recording.samples().filter(|e| e.thread == "spinner").collect();
            let spin_frame = if mode == "same" { &["spin"][..] } else { &["spin", "[unknown_Java_method]"] };
            let whole = spinner
                .iter()
                .filter(|e| {
                    let methods: Vec<&str> = e.frames.iter().map(|f| f.method.as_str()).collect();
                    methods.iter().any(|m| spin_frame.contains(m)) && methods.last() == Some(&"run")
                })
                .count();
            let unknown =
                spinner.iter().filter(|e| e.frames.iter().any(|f| f.method == "[unknown_Java_method]")).count();
            println!("{label}: {whole} of {} spinner samples whole, {unknown} with a method without id", spinner.len());
            assert!(
                whole * 10 >= spinner.len() * 9,
                "{label}: {whole} of {} spinner samples show spin and reach Thread.run",
                spinner.len()
            );
        }
    }
}

/// A Tomcat-like load on loopback (`HttpWords`: the JDK's HTTP server
/// counting a query's words in a `TreeMap` with `merge`, the shape whose
/// compiled frames cut Tomcat's stacks at `TreeMap.merge`), sampled with
/// default options: under 1% of CPU samples have frames no walker got
/// past, and no stack of the server's or the clients' threads is written
/// as if the thread had started in the code the walk stopped at: none is
/// rooted at a Java frame but `Thread.run` (or `Thread.exit`, as the
/// thread ends) or at an interpreter runtime entry (a cut stack ends in a marker saying why; the VM's own code, a
/// class initializer the VM runs or a thread's start and exit, ends at
/// the VM's call into Java or at native code). (The build before wrote 70 of 8,294 samples
/// here as stacks rooted in `TreeMap`, `String` or the handler, and 105
/// of 8,564 at interpreter runtime entries called as leaves, which set no
/// anchor: `InterpreterRuntime::monitorexit`,
/// `frequency_counter_overflow`.)
#[test]
fn a_loopback_http_load_has_few_failed_walks_and_no_false_thread_roots() {
    let java = jdk_tool("java");
    let (recording, output) = record_with_output(&java, "http_words", "cpu=1ms", &[], "HttpWords", &["6"]);
    let served = summary_value(&stdout(&output), "SERVED");
    let samples: Vec<&Event> = recording.samples().collect();
    let failed = samples.iter().filter(|e| e.frames.iter().any(|f| f.method == "[unknown_Java]")).count();
    let workers: Vec<&Event> =
        samples.iter().copied().filter(|e| e.thread.starts_with("client-") || e.thread.starts_with("pool-")).collect();
    let false_roots: Vec<&Event> = workers
        .iter()
        .copied()
        .filter(|e| {
            // A Java frame but those the VM calls a thread with (its run,
            // and its exit as it ends), or an interpreter runtime entry:
            // there the walk stopped short. (Native roots are where native
            // unwinding ended: a thread's start, or its exit.)
            e.frames.last().is_some_and(|root| {
                let java = !["Native", "C++", "Kernel"].contains(&root.frame_type.as_str());
                let thread_root = root.class == "java.lang.Thread" && ["run", "exit"].contains(&root.method.as_str());
                (java && !thread_root) || root.method.starts_with("InterpreterRuntime::")
            })
        })
        .collect();
    println!(
        "{served} requests; {failed} of {} samples with [unknown_Java]; {} of {} worker samples rooted elsewhere than run",
        samples.len(),
        false_roots.len(),
        workers.len()
    );
    assert!(workers.len() >= 1000, "only {} samples of the server's and clients' threads", workers.len());
    assert!(failed * 100 < samples.len(), "{failed} of {} samples with frames no walker got past", samples.len());
    assert!(false_roots.is_empty(), "{} stacks rooted elsewhere, e.g. {:?}", false_roots.len(), false_roots[0].frames);
}
