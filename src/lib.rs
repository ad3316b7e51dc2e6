pub use profiler_agent;

/// The agent's heap, counted (`agent_heap_bytes`).
#[global_allocator]
static ALLOCATOR: sampler::heap::Counting = sampler::heap::Counting;
