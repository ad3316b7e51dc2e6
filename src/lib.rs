pub use profiler_agent;
