//! The upstream native unit suites, ported case for case: module = suite,
//! test = case (`<suite>::<case>`). See gtest-compat/README.md for the table.

mod ddprof_ut;
mod dictionary_ut;
mod dwarf_ut;
mod elfparser_ut;
mod frame_ut;
mod hotspot_method_id_ut;
mod isolation;
mod libraries_ut;
mod ref_count_guard_ut;
mod remoteargs_ut;
mod remotesymbolication_ut;
mod safefetch_ut;
mod sframe_ut;
mod signal_safety_ut;
mod stack_walk_validation_ut;
mod stack_walker_ut;
mod stress_call_trace_storage;
mod stress_string_dictionary_ut;
mod stress_thread_lifecycle;
mod string_dictionary_ut;
mod support;
mod test_call_trace_storage;
mod thread_teardown_safety_ut;
mod unwind_helper_contract_ut;
mod walk_vm_attribution_ut;
