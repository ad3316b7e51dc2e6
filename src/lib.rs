pub use profiler_agent;

/// The agent's heap, counted (`agent_heap_bytes`).
#[global_allocator]
static ALLOCATOR: profiler_agent::heap::Counting = profiler_agent::heap::Counting;
